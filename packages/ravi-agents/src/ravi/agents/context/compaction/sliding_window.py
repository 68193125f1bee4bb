"""``SlidingWindowCompaction``: the system messages plus the newest ``max_messages`` others."""

from __future__ import annotations

from collections.abc import Sequence

from ravi.agents.context.compaction._keep import ANCHOR, from_cut, keep_newest, newest_cut
from ravi.kernel.agent import SessionContext, Strategy, StrategyTraits
from ravi.kernel.messages import ChatMessage
from ravi.kernel.values import check_count, check_share


def _one(_: ChatMessage) -> int:
    return 1


class SlidingWindowCompaction(Strategy):
    """Keep every system message and at most ``max_messages`` of the newest other messages.

    The cut moves forward to the next unit boundary rather than split a tool call from its results, so the
    window can hold a few messages fewer than ``max_messages``, never more. Cost: reads only the newest end,
    plus one pass over roles to find system messages.

    Example:
        >>> import asyncio
        >>> history = [ChatMessage.system("be brief")] + [ChatMessage.user(str(i)) for i in range(10)]
        >>> [m.text for m in asyncio.run(SlidingWindowCompaction(max_messages=2).compact(history))]
        ['be brief', '8', '9']
    """

    traits = StrategyTraits(suffix_determined=True, cuts=True)
    """It drops the oldest messages, and what it makes of a message depends only on the messages after it and
    the system messages: the engine may assemble from the newest part of a session."""

    def __init__(self, max_messages: int = 100, *, low_watermark: float | None = None) -> None:
        check_count(max_messages, "max_messages")
        if low_watermark is not None:
            check_share(low_watermark, "low_watermark")
        self.max_messages = max_messages
        self.low_watermark = low_watermark

    async def compact(
        self, raw_history: Sequence[ChatMessage], session: SessionContext | None = None
    ) -> list[ChatMessage]:
        """The window: system messages and the newest whole units within ``max_messages``.

        With ``low_watermark`` (a share of ``max_messages``), the window keeps its start until it would exceed
        ``max_messages``, then drops down to ``low_watermark * max_messages`` in one step: its prefix stays the
        same between crossings, which is what prompt caches reward.
        """
        own = SessionContext.of(session, raw_history)
        if self.low_watermark is None:
            return keep_newest(raw_history, _one, self.max_messages, session)
        anchors = own.state.get(self, ANCHOR)
        anchor = anchors.cut(raw_history)
        if anchor is None and anchors.is_set and session is not None and session.partial:
            session.need_older()  # the remembered start is older than the part read
        start = anchor or 0
        if sum(1 for m in raw_history[start:] if m.role != "system") <= self.max_messages:
            if anchor is not None and session is not None and session.partial:
                session.cut_made()  # the remembered start decides the window, whatever is older
            return from_cut(raw_history, start)
        cut = newest_cut(raw_history, _one, int(self.max_messages * self.low_watermark))
        anchors.remember(raw_history, cut)
        return from_cut(raw_history, cut, session=session)

    def __repr__(self) -> str:
        mark = f", low_watermark={self.low_watermark}" if self.low_watermark is not None else ""
        return f"SlidingWindowCompaction(max_messages={self.max_messages}{mark})"


__all__ = ["SlidingWindowCompaction"]
