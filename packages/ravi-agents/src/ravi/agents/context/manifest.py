"""Explainable windows: for every source message, what assembly did to it and which strategy did it."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from ravi.agents.context.compaction.summarization import SUMMARY_KEY, is_summary
from ravi.kernel.agent import SessionContext, Strategy
from ravi.kernel.messages import ChatMessage, TextBlock, ToolResultBlock

Status = Literal["kept", "truncated", "summarised", "recalled", "dropped"]


@dataclass(frozen=True)
class ManifestEntry:
    """What happened to one source message."""

    message_id: str
    status: Status
    strategy: str | None = None
    chars_removed: int = 0
    summary_id: str | None = None


@dataclass(frozen=True)
class Window:
    """A window and its manifest (one entry per source message, in source order)."""

    messages: list[ChatMessage]
    manifest: list[ManifestEntry] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        """How many source messages ended in each status."""
        return dict(Counter(e.status for e in self.manifest))

    def entry(self, message_id: str) -> ManifestEntry | None:
        """The entry of one source message."""
        return next((e for e in self.manifest if e.message_id == message_id), None)


def size(message: ChatMessage) -> int:
    """Characters of text and tool output, what truncating strategies shorten."""
    return sum(
        len(b.text) if isinstance(b, TextBlock) else len(b.content) if isinstance(b, ToolResultBlock) else 0
        for b in message.content
    )


def _calls_size(message: ChatMessage) -> int:
    """Characters of the tool calls' names and arguments (as compact JSON, as token counts read them)."""
    return sum(
        len(c.name) + len(json.dumps(dict(c.arguments), separators=(",", ":"), ensure_ascii=False))
        for c in message.tool_calls
    )


class ManifestBuilder:
    """Follows source messages through the stages of a pipeline."""

    def __init__(self, history: Sequence[ChatMessage]) -> None:
        self.order = [m.id for m in history]
        self.source = {m.id: m for m in history}
        self.entries: dict[str, ManifestEntry] = {i: ManifestEntry(i, "kept") for i in self.order}
        self.current: dict[str, ChatMessage] = dict(self.source)

    def stage(
        self,
        strategy: Strategy,
        before: Sequence[ChatMessage],
        after: Sequence[ChatMessage],
        session: SessionContext,
    ) -> None:
        """Record what one strategy did between its input and its output (for ``session``)."""
        name = strategy.name
        out = {m.id: m for m in after}
        position = {m.id: i for i, m in enumerate(before)}
        summaries = [m for m in after if is_summary(m) and m.id not in position]
        spans = []
        for s in summaries:
            covers = s.metadata[SUMMARY_KEY]
            first, last = position.get(covers.get("first")), position.get(covers.get("last"))
            if first is not None and last is not None:
                spans.append((first, last, s.id))
        for mid in list(self.current):
            if mid not in out:
                where = position.get(mid, -1)
                into = next((sid for a, b, sid in spans if a <= where <= b), None)
                status: Status = "summarised" if into else "dropped"
                old = self.entries[mid]
                self.entries[mid] = ManifestEntry(mid, status, name, old.chars_removed, into)
                del self.current[mid]
            elif out[mid] is not self.current[mid]:
                removed = size(self.current[mid]) - size(out[mid])
                old = self.entries[mid]
                if removed > 0:
                    self.entries[mid] = ManifestEntry(mid, "truncated", name, old.chars_removed + removed)
                self.current[mid] = out[mid]
        if before:
            for mid in strategy.recalled(session):
                if mid in self.current:
                    self.entries[mid] = ManifestEntry(mid, "recalled", name)

    def left_out(self, after: Sequence[ChatMessage], by: str) -> None:
        """Record that the engine itself (``by``: why) left out the messages of the window that ``after`` lacks,
        and took the tool calls out of those it holds a copy of (``truncated``, by the characters of the calls'
        names and arguments)."""
        out = {m.id: m for m in after}
        for mid in list(self.current):
            now = out.get(mid)
            old = self.entries[mid]
            if now is None:
                self.entries[mid] = ManifestEntry(mid, "dropped", by, old.chars_removed)
                del self.current[mid]
            elif now is not self.current[mid]:
                removed = _calls_size(self.current[mid]) - _calls_size(now)
                self.entries[mid] = ManifestEntry(mid, "truncated", by, old.chars_removed + removed)
                self.current[mid] = now

    def build(self, window: list[ChatMessage]) -> Window:
        return Window(window, [self.entries[i] for i in self.order])


__all__ = ["ManifestEntry", "Status", "Window"]
