"""``SlidingWindowCompaction``: the system messages plus the newest ``max_messages`` others."""

from __future__ import annotations

from collections.abc import Sequence

from ravi.agents.context.compaction._keep import keep_newest
from ravi.kernel.errors import InvalidArgument
from ravi.kernel.messages import ChatMessage


def _one(_: ChatMessage) -> int:
    return 1


class SlidingWindowCompaction:
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

    def __init__(self, max_messages: int = 100) -> None:
        if max_messages < 0:
            raise InvalidArgument(f"max_messages must be >= 0, got {max_messages}")
        self.max_messages = max_messages

    async def compact(self, history: Sequence[ChatMessage]) -> list[ChatMessage]:
        """The window: system messages and the newest whole units within ``max_messages``."""
        return keep_newest(history, _one, self.max_messages)

    def __repr__(self) -> str:
        return f"SlidingWindowCompaction(max_messages={self.max_messages})"


__all__ = ["SlidingWindowCompaction"]
