"""``ToolResultCompactionStrategy``: shorten long successful tool results, keep errors whole."""

from __future__ import annotations

from collections.abc import Sequence

from ravi.agents.context.memo import PrefixMemo
from ravi.kernel.agent import SessionContext, Slot, Strategy, StrategyTraits
from ravi.kernel.messages import ChatMessage, ToolResultBlock
from ravi.kernel.values import check_count

_SHORTENED: Slot[PrefixMemo[list[ChatMessage]]] = Slot("tool_result.shortened", PrefixMemo)
"""The session's last input and its shortened copy."""


class ToolResultCompactionStrategy(Strategy):
    """Cut every non-error tool result longer than ``max_chars`` to its first ``max_chars`` characters, followed
    by a ``[N chars truncated]`` marker.

    Error results are never shortened: the model needs the whole error to recover. The shortened message keeps
    the source message's id (it is the same turn, seen smaller), and the source itself is never changed. Cost:
    one pass over new messages; a growing session reuses the previous result.
    """

    traits = StrategyTraits(suffix_determined=True)
    """What it makes of a message depends only on that message."""

    def __init__(self, max_chars: int = 500) -> None:
        check_count(max_chars, "max_chars")
        self.max_chars = max_chars
        self._key = f"ravi.tool_result:{max_chars}"

    def shorten(self, message: ChatMessage) -> ChatMessage:
        """``message`` with its tool result cut to ``max_chars``, or ``message`` itself if nothing to cut."""
        if message.role != "tool":
            return message
        memo = message.memo
        cached = memo.get(self._key)
        if cached is not None:
            return cached  # type: ignore[no-any-return]
        block = message.content[0]
        assert isinstance(block, ToolResultBlock)
        out = message
        if not block.is_error and len(block.content) > self.max_chars:
            dropped = len(block.content) - self.max_chars
            short = block.model_copy(
                update={"content": f"{block.content[: self.max_chars]}\n[{dropped} chars truncated]"}
            )
            out = message.model_copy(update={"content": (short,)})
        memo[self._key] = out
        return out

    async def compact(
        self, raw_history: Sequence[ChatMessage], session: SessionContext | None = None
    ) -> list[ChatMessage]:
        """``raw_history`` with long successful tool results shortened."""
        memo = SessionContext.of(session, raw_history).state.get(self, _SHORTENED)
        hit = memo.lookup(raw_history)
        if hit is None:
            out = [self.shorten(m) for m in raw_history]
        else:
            n, previous = hit
            out = previous + [self.shorten(m) for m in raw_history[n:]]
        memo.store(raw_history, out)
        return list(out)

    def __repr__(self) -> str:
        return f"ToolResultCompactionStrategy(max_chars={self.max_chars})"


__all__ = ["ToolResultCompactionStrategy"]
