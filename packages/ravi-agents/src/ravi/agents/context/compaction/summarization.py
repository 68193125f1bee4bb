"""``SummarizationCompaction``: replace the older part of the window with one summary message."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

from ravi.agents.context.compaction._keep import newest_cut
from ravi.agents.context.events import CompactionEvent, EventBus
from ravi.agents.context.session import counter_of
from ravi.agents.tokens import DEFAULT_COUNTER
from ravi.kernel.agent import SessionContext
from ravi.kernel.cancel import CancelledByToken, CancelToken
from ravi.kernel.errors import InvalidArgument
from ravi.kernel.llm import LLMClient, TokenCounter
from ravi.kernel.messages import ChatMessage, TextBlock, ThinkingBlock, ToolCallBlock, ToolResultBlock
from ravi.kernel.storage import SummaryStore

SUMMARY_KEY = "ravi.summary"
"""Metadata key that marks a summary message; its value says what the summary covers."""

SUMMARY_HEADING = "[condensed earlier context]"
"""002: the heading of every summary turn."""

SUMMARY_PREFIX = SUMMARY_HEADING + "\n"

INSTRUCTIONS = (
    "You condense conversations between a user and an AI agent. Write a summary of the transcript you are given "
    "that lets the agent carry on without it: the user's goals and requests, decisions made, facts learned "
    "(names, numbers, paths, identifiers), tool calls that matter and their outcomes, errors met, and what is "
    "still open. If a previous summary is given, fold it in: the result must replace it. Be concise and factual."
)


def is_summary(message: ChatMessage) -> bool:
    """Whether ``message`` is a summary written by :class:`SummarizationCompaction`."""
    return SUMMARY_KEY in message.metadata


def render_transcript(messages: Sequence[ChatMessage], *, max_result_chars: int = 2_000) -> str:
    """A plain-text rendering of ``messages`` for a summariser: one entry per message."""
    lines: list[str] = []
    for m in messages:
        for block in m.content:
            if isinstance(block, TextBlock) and block.text:
                lines.append(f"{m.role}: {block.text}")
            elif isinstance(block, ToolCallBlock):
                args = json.dumps(dict(block.arguments), ensure_ascii=False, separators=(",", ":"))
                lines.append(f"assistant called {block.name}({args})")
            elif isinstance(block, ToolResultBlock):
                label = "tool error" if block.is_error else "tool result"
                content = block.content
                if len(content) > max_result_chars:
                    content = content[:max_result_chars] + f" [{len(block.content) - max_result_chars} chars more]"
                lines.append(f"{label}: {content}")
            elif isinstance(block, ThinkingBlock):
                continue
    return "\n".join(lines)


def span_id(covered: Sequence[str]) -> str:
    """The id of the summary of the messages with ids ``covered``: the same span always gives the same id."""
    return "summary-" + hashlib.sha256("\x1f".join(covered).encode()).hexdigest()[:24]


def summary_prompt(
    previous: Sequence[ChatMessage], fresh: Sequence[ChatMessage], instructions: str
) -> list[ChatMessage]:
    """The messages sent to the model: instructions, then the previous summary and the transcript to fold in."""
    parts = []
    if previous:
        body = "\n".join(p.text.removeprefix(SUMMARY_PREFIX) for p in previous)
        parts.append(f"Previous summary:\n{body}")
    parts.append(f"Transcript:\n{render_transcript(fresh)}")
    return [ChatMessage.system(instructions), ChatMessage.user("\n\n".join(parts))]


async def write_summary(
    llm: LLMClient,
    previous: Sequence[ChatMessage],
    fresh: Sequence[ChatMessage],
    *,
    instructions: str = INSTRUCTIONS,
    max_tokens: int = 800,
    cancel: CancelToken | None = None,
    store: SummaryStore | None = None,
) -> ChatMessage:
    """One summary message covering the ``previous`` summaries and the ``fresh`` messages after them.

    Errors of the model call propagate; callers decide whether a failure may break the request.
    """
    covered = [m.id for m in previous] + [m.id for m in fresh]
    key = span_id(covered)
    text = await store.get_summary(key) if store is not None else None
    if text is None:
        text = await llm.complete(summary_prompt(previous, fresh, instructions), max_tokens=max_tokens, cancel=cancel)
        if store is not None:
            await store.put_summary(key, text)
    covers: dict[str, Any] = {
        "first": fresh[0].id if fresh else None,
        "last": fresh[-1].id if fresh else None,
        "count": len(fresh) + sum(int(p.metadata[SUMMARY_KEY].get("count", 0)) for p in previous),
        "replaces": [p.id for p in previous],
    }
    last = fresh[-1] if fresh else previous[-1]
    return ChatMessage(
        id=key,
        role="user",
        content=(TextBlock(text=SUMMARY_PREFIX + text.strip()),),
        metadata={SUMMARY_KEY: covers},
        created_at=last.created_at,
    )


class SummarizationCompaction:
    """Summarise everything but the newest ``recent_token_budget`` tokens into one summary message.

    Walking from the newest end, whole units are kept while they fit ``recent_token_budget``; the older part
    (system messages aside, which stay where they are) is summarised by ``llm`` when it holds at least
    ``min_old_tokens``. A summary already in the window is updated, not stacked: the new summary covers the old
    one and what came after it. The summary is a ``user`` message whose metadata ``"ravi.summary"`` says what it
    covers; its id is derived from the covered ids, so the same span always gives the same id, and a span
    already summarised is served from a cache without calling the model again.

    If the model call fails the input is returned unchanged and a ``summarization_failed`` event is emitted: a
    failed summary never breaks the request. A cancelled ``cancel_token`` raises ``CancelledByToken``.
    """

    def __init__(
        self,
        llm: LLMClient | None = None,
        recent_token_budget: int = 4_000,
        min_old_tokens: int = 1_000,
        *,
        max_summary_tokens: int = 800,
        counter: TokenCounter | None = None,
        cancel_token: CancelToken | None = None,
        instructions: str = INSTRUCTIONS,
        store: SummaryStore | None = None,
    ) -> None:
        if recent_token_budget < 0 or min_old_tokens < 0 or max_summary_tokens <= 0:
            raise InvalidArgument("recent_token_budget and min_old_tokens must be >= 0, max_summary_tokens > 0")
        if llm is None:
            from ravi.agents.llm.extractive import ExtractiveSummarizer

            llm = ExtractiveSummarizer()
        self.llm = llm
        self.recent_token_budget = recent_token_budget
        self.min_old_tokens = min_old_tokens
        self.max_summary_tokens = max_summary_tokens
        self.own_counter = counter
        self.cancel_token = cancel_token
        self.instructions = instructions
        self.events = EventBus()
        if store is None:
            from ravi.agents.storage.summaries import InMemorySummaryStore

            store = InMemorySummaryStore()
        self.store = store

    @property
    def counter(self) -> TokenCounter:
        """The counter named at construction (the default one when none was)."""
        return self.own_counter or DEFAULT_COUNTER

    async def compact(self, history: Sequence[ChatMessage], session: SessionContext | None = None) -> list[ChatMessage]:
        """The window with its older part replaced by one summary (or ``history`` itself if too little is old)."""
        counter = counter_of(self.own_counter, session, DEFAULT_COUNTER)
        cut = newest_cut(history, counter.count_message, self.recent_token_budget)
        old = history[:cut]
        previous = [m for m in old if is_summary(m)]
        fresh = [m for m in old if m.role != "system" and not is_summary(m)]
        if not fresh or counter.count_messages(fresh) < self.min_old_tokens:
            return list(history)
        token = self.cancel_token
        if token is not None:
            token.raise_if_cancelled()
        try:
            summary = await write_summary(
                self.llm,
                previous,
                fresh,
                instructions=self.instructions,
                max_tokens=self.max_summary_tokens,
                cancel=token,
                store=self.store,
            )
        except CancelledByToken:
            raise
        except Exception as error:
            if self.events:
                self.events.emit(
                    CompactionEvent(
                        "summarization_failed", list(history), strategy=repr(self), error=error, counter=counter
                    )
                )
            return list(history)
        head = [m for m in old if m.role == "system"]
        return [*head, summary, *history[cut:]]

    def __repr__(self) -> str:
        return (
            f"SummarizationCompaction(recent_token_budget={self.recent_token_budget}, "
            f"min_old_tokens={self.min_old_tokens})"
        )


__all__ = [
    "INSTRUCTIONS",
    "SUMMARY_HEADING",
    "SUMMARY_KEY",
    "SummarizationCompaction",
    "is_summary",
    "render_transcript",
    "span_id",
    "summary_prompt",
    "write_summary",
]
