"""The shared core of the recency strategies: keep every system message and the newest units that fit."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from operator import attrgetter

from ravi.agents.context.units import unit_end, units_backward
from ravi.kernel.agent import SessionContext, Slot
from ravi.kernel.messages import ChatMessage

_ROLE = attrgetter("role")


def newest_cut(messages: Sequence[ChatMessage], cost: Callable[[ChatMessage], int], allowance: int) -> int:
    """Where the newest whole units whose non-system cost fits in ``allowance`` begin."""
    return _cut_and_cost(messages, cost, allowance)[0]


def _cut_and_cost(
    messages: Sequence[ChatMessage], cost: Callable[[ChatMessage], int], allowance: int
) -> tuple[int, int]:
    """:func:`newest_cut`, and the non-system cost of the messages from the cut on."""
    cut = len(messages)
    spent = 0
    for start, end in units_backward(messages):
        unit_cost = _unit_cost(messages, start, end, cost)
        if spent + unit_cost > allowance:
            break
        spent += unit_cost
        cut = start
    return cut, spent


def _unit_cost(messages: Sequence[ChatMessage], start: int, end: int, cost: Callable[[ChatMessage], int]) -> int:
    total = 0
    for i in range(start, end):
        m = messages[i]
        if m.role != "system":
            total += cost(m)
    return total


class TailCut:
    """One session's last :func:`newest_cut`, so the cut of the same session grown by a few messages is found
    from those messages alone.

    The kept part of the last input must reappear, the very same message objects, right before the new
    messages (checked with one C-speed list comparison); the cut then only moves forward, dropping the oldest
    units while the kept cost passes the allowance. Anything else (another allowance or counter, an edited or
    re-read history, more than ``max_new`` new messages) is cut from scratch: the memo changes speed, never
    results. Kept in the session's state.
    """

    max_new = 256

    def __init__(self) -> None:
        self._kept: list[ChatMessage] = []
        self._spent = 0
        self._allowance = -1
        self._cost: Callable[[ChatMessage], int] | None = None

    def cut(self, messages: Sequence[ChatMessage], cost: Callable[[ChatMessage], int], allowance: int) -> int:
        """:func:`newest_cut` of ``messages``."""
        found = self._grown(messages, cost, allowance)
        if found is None:
            found = _cut_and_cost(messages, cost, allowance)
        cut, self._spent = found
        self._kept = list(messages[cut:])
        self._allowance, self._cost = allowance, cost
        return cut

    def cut_and_cost(
        self, messages: Sequence[ChatMessage], cost: Callable[[ChatMessage], int], allowance: int
    ) -> tuple[int, int]:
        """:meth:`cut`, and the non-system cost of the messages from the cut on."""
        cut = self.cut(messages, cost, allowance)
        return cut, self._spent

    def _grown(
        self, messages: Sequence[ChatMessage], cost: Callable[[ChatMessage], int], allowance: int
    ) -> tuple[int, int] | None:
        kept = self._kept
        if not kept or allowance != self._allowance or cost != self._cost:
            return None
        last, n = kept[-1], len(messages)
        p, stop = n - 1, max(-1, n - 1 - self.max_new)
        while p > stop and messages[p] is not last:
            p -= 1
        cut = p + 1 - len(kept)
        if p == stop or cut < 0 or messages[cut] is not kept[0]:
            return None
        if cut > 0 and messages[cut].role not in ("user", "assistant"):
            return None  # a user or assistant message starts a unit whatever surrounds it
        if list(messages[cut : p + 1]) != kept:
            return None
        spent = self._spent + _unit_cost(messages, p + 1, n, cost)
        if spent <= allowance:
            if cut == 0:
                return cut, spent
            # nothing to drop: the cut stays where it was if the unit before it still does not fit
            start, end = next(units_backward(messages, cut))
            if spent + _unit_cost(messages, start, end, cost) <= allowance:
                return None
            return cut, spent
        while spent > allowance and cut < n:  # drop the oldest units until the rest fits
            end = unit_end(messages, cut)
            spent -= _unit_cost(messages, cut, end, cost)
            cut = end
        return cut, spent


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


ANCHOR: Slot[Anchor] = Slot("anchor", Anchor)
"""Where a watermarked strategy's windows of the session start."""
TAIL_CUT: Slot[TailCut] = Slot("tail_cut", TailCut)
"""The session's last cut of its newest units."""


def system_positions(messages: Sequence[ChatMessage]) -> list[int]:
    """The positions of the system messages of ``messages`` (found by C-speed scans: a window has few)."""
    roles = list(map(_ROLE, messages))
    out: list[int] = []
    i = -1
    while True:
        try:
            i = roles.index("system", i + 1)
        except ValueError:
            return out
        out.append(i)


def system_messages(messages: Sequence[ChatMessage]) -> list[ChatMessage]:
    """The system messages of ``messages``, in order."""
    return [m for m in messages if m.role == "system"]


__all__ = [
    "ANCHOR",
    "TAIL_CUT",
    "Anchor",
    "TailCut",
    "from_cut",
    "keep_newest",
    "newest_cut",
    "system_messages",
    "system_positions",
]
