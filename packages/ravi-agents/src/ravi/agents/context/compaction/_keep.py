"""The shared core of the recency strategies: keep every system message and the newest units that fit."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ravi.agents.context.units import units_backward
from ravi.kernel.agent import SessionContext
from ravi.kernel.messages import ChatMessage


def newest_cut(messages: Sequence[ChatMessage], cost: Callable[[ChatMessage], int], allowance: int) -> int:
    """Where the newest whole units whose non-system cost fits in ``allowance`` begin."""
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
    return cut


def from_cut(
    messages: Sequence[ChatMessage],
    cut: int,
    systems_at: Sequence[int] | None = None,
    session: SessionContext | None = None,
) -> list[ChatMessage]:
    """The system messages before ``cut``, then everything from ``cut`` on (``systems_at``: the positions of the
    system messages, when the caller already has them, to save a scan). With the ``session``, a cut that drops
    a message is recorded on it (see :func:`note_cut`)."""
    if session is not None and session.partial and cut > 0:
        note_cut(messages, cut, session)
    if cut == 0:
        return list(messages)
    if systems_at is None:
        head = [m for m in messages[:cut] if m.role == "system"]
    else:
        head = [messages[i] for i in systems_at if i < cut]
    head.extend(messages[cut:])
    return head


def note_cut(messages: Sequence[ChatMessage], cut: int, session: SessionContext) -> None:
    """Tell the session the window was cut inside the part read when a non-system message before ``cut`` is
    dropped: older messages would have been dropped with it, so they cannot change the window."""
    if any(m.role != "system" for m in messages[:cut]):
        session.cut_made()


def keep_newest(
    messages: Sequence[ChatMessage],
    cost: Callable[[ChatMessage], int],
    allowance: int,
    session: SessionContext | None = None,
) -> list[ChatMessage]:
    """System messages, in place, plus the newest whole units whose non-system cost fits in ``allowance``.

    ``cost`` prices one message; system messages are free here because they are always kept (the caller takes
    their cost out of ``allowance`` first). Returns a new list even when everything fits.
    """
    return from_cut(messages, newest_cut(messages, cost, allowance), session=session)


class Anchor:
    """Where one session's window starts (the id of its first non-system message), so a watermarked strategy
    can keep serving the same prefix until the window crosses its high watermark again. Kept in the session's
    state."""

    def __init__(self) -> None:
        self._anchor: tuple[str, int] | None = None

    @property
    def is_set(self) -> bool:
        """Whether a start has been remembered."""
        return self._anchor is not None

    def cut(self, messages: Sequence[ChatMessage]) -> int | None:
        """The remembered start, if its message is still there."""
        if self._anchor is None or not messages:
            return None
        anchor_id, index = self._anchor
        if index < len(messages) and messages[index].id == anchor_id:
            return index
        for i, m in enumerate(messages):  # the history changed before the anchor: find it again
            if m.id == anchor_id:
                return i
        return None

    def remember(self, messages: Sequence[ChatMessage], cut: int) -> None:
        """Start the session's windows at ``cut`` until told otherwise.

        The cut is moved past system messages (kept anyway): a system message after a tool group starts a unit
        only until more results arrive, while the first non-system message of a unit stays its start.
        """
        while cut < len(messages) and messages[cut].role == "system":
            cut += 1
        if cut < len(messages):
            self._anchor = (messages[cut].id, cut)


def system_positions(messages: Sequence[ChatMessage]) -> list[int]:
    """The positions of the system messages of ``messages``."""
    return [i for i, m in enumerate(messages) if m.role == "system"]


def system_messages(messages: Sequence[ChatMessage]) -> list[ChatMessage]:
    """The system messages of ``messages``, in order."""
    return [m for m in messages if m.role == "system"]


__all__ = ["Anchor", "from_cut", "keep_newest", "newest_cut", "system_messages", "system_positions"]
