"""``TruncationStrategy``: cap the number of messages and the length of each one."""

from __future__ import annotations

from collections.abc import Sequence

from ravi.agents.context.compaction._keep import keep_newest
from ravi.kernel.errors import InvalidArgument
from ravi.kernel.messages import ChatMessage, TextBlock, ToolResultBlock


class TruncationStrategy:
    """Keep at most ``max_messages`` of the newest non-system messages (whole units, like the sliding window)
    and cut any text or successful tool result longer than ``max_chars``, marking what was cut.

    System messages and error results are never shortened. Either limit may be ``None`` (no limit).
    """

    def __init__(self, max_messages: int | None = None, max_chars: int | None = None) -> None:
        for name, value in (("max_messages", max_messages), ("max_chars", max_chars)):
            if value is not None and value < 0:
                raise InvalidArgument(f"{name} must be >= 0, got {value}")
        self.max_messages = max_messages
        self.max_chars = max_chars
        self._key = f"ravi.truncation:{max_chars}"

    def _cut_text(self, text: str) -> str:
        assert self.max_chars is not None
        if len(text) <= self.max_chars:
            return text
        return f"{text[: self.max_chars]}\n[{len(text) - self.max_chars} chars truncated]"

    def shorten(self, message: ChatMessage) -> ChatMessage:
        """``message`` with long text cut to ``max_chars`` (system messages and errors untouched)."""
        if self.max_chars is None or message.role == "system":
            return message
        cached = message.memo.get(self._key)
        if cached is not None:
            return cached  # type: ignore[no-any-return]
        blocks = []
        changed = False
        for block in message.content:
            if isinstance(block, TextBlock):
                new = self._cut_text(block.text)
                if new != block.text:
                    block, changed = block.model_copy(update={"text": new}), True
            elif isinstance(block, ToolResultBlock) and not block.is_error:
                new = self._cut_text(block.content)
                if new != block.content:
                    block, changed = block.model_copy(update={"content": new}), True
            blocks.append(block)
        out = message.model_copy(update={"content": tuple(blocks)}) if changed else message
        message.memo[self._key] = out
        return out

    async def compact(self, history: Sequence[ChatMessage]) -> list[ChatMessage]:
        """The newest ``max_messages`` (by whole units) with long content cut."""
        window = list(history) if self.max_messages is None else keep_newest(history, lambda _: 1, self.max_messages)
        if self.max_chars is None:
            return window
        return [self.shorten(m) for m in window]

    def __repr__(self) -> str:
        return f"TruncationStrategy(max_messages={self.max_messages}, max_chars={self.max_chars})"


__all__ = ["TruncationStrategy"]
