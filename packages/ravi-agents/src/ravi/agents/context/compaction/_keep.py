"""The shared core of the recency strategies: keep every system message and the newest units that fit."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ravi.agents.context.units import units_backward
from ravi.kernel.messages import ChatMessage


def keep_newest(
    messages: Sequence[ChatMessage], cost: Callable[[ChatMessage], int], allowance: int
) -> list[ChatMessage]:
    """System messages, in place, plus the newest whole units whose non-system cost fits in ``allowance``.

    ``cost`` prices one message; system messages are free here because they are always kept (the caller takes
    their cost out of ``allowance`` first). Returns a new list even when everything fits.
    """
    cut = len(messages)
    spent = 0
    for start, end in units_backward(messages):
        unit_cost = 0
        for i in range(start, end):
            m = messages[i]
            if m.role != "system":
                unit_cost += cost(m)
        if spent + unit_cost > allowance:
            break
        spent += unit_cost
        cut = start
    if cut == 0:
        return list(messages)
    head = [m for m in messages[:cut] if m.role == "system"]
    head.extend(messages[cut:])
    return head


def system_messages(messages: Sequence[ChatMessage]) -> list[ChatMessage]:
    """The system messages of ``messages``, in order."""
    return [m for m in messages if m.role == "system"]


__all__ = ["keep_newest", "system_messages"]
