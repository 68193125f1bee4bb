"""``TruncationStrategy``: a hard backstop on the number of messages and on the characters of the window."""

from __future__ import annotations

from collections.abc import Sequence

from ravi.agents.context.compaction._keep import keep_newest, system_messages
from ravi.kernel.agent import SessionContext, Strategy, StrategyTraits
from ravi.kernel.errors import InvalidArgument
from ravi.kernel.messages import ChatMessage
from ravi.kernel.tokens import message_chars


class TruncationStrategy(Strategy):
    """Drop the oldest messages until the window holds at most ``max_messages`` non-system messages and at most
    ``max_chars`` characters (000: "drops oldest until under max_messages and/or max_chars").

    A guaranteed ceiling, for the end of a pipeline. Whole units go together (a tool call with its results), and
    system messages always stay (their characters count against ``max_chars``). Either limit may be ``None``.

    Example:
        >>> import asyncio
        >>> history = [ChatMessage.user("a" * 10), ChatMessage.user("b" * 10), ChatMessage.user("c" * 10)]
        >>> [m.text[0] for m in asyncio.run(TruncationStrategy(max_chars=25).compact(history))]
        ['b', 'c']
    """

    traits = StrategyTraits(suffix_determined=True, cuts=True)
    """It drops the oldest messages, judged from the newest end."""

    def __init__(self, max_messages: int | None = None, max_chars: int | None = None) -> None:
        for name, value in (("max_messages", max_messages), ("max_chars", max_chars)):
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
                raise InvalidArgument(f"{name} must be an integer >= 0, got {value!r}")
        self.max_messages = max_messages
        self.max_chars = max_chars

    async def compact(
        self, raw_history: Sequence[ChatMessage], session: SessionContext | None = None
    ) -> list[ChatMessage]:
        """The newest whole units within ``max_messages`` and ``max_chars``, with every system message."""
        SessionContext.of(session, raw_history)  # a direct call's history is checked
        window = (
            list(raw_history)
            if self.max_messages is None
            else keep_newest(raw_history, lambda _: 1, self.max_messages, session)
        )
        if self.max_chars is None:
            return window
        allowance = self.max_chars - sum(map(message_chars, system_messages(window)))
        return keep_newest(window, message_chars, max(0, allowance), session)

    def __repr__(self) -> str:
        return f"TruncationStrategy(max_messages={self.max_messages}, max_chars={self.max_chars})"


__all__ = ["TruncationStrategy"]
