"""``KeepLastTurns``: every system message and the newest ``turns`` user turns, each with all that follows it."""

from __future__ import annotations

from collections.abc import Sequence

from ravi.kernel.agent import SessionContext, Slot, Strategy, StrategyTraits
from ravi.kernel.errors import InvalidArgument
from ravi.kernel.messages import ChatMessage

LAST_CUT: Slot[list[str]] = Slot("keep_last_turns.last_cut", list)
"""The id of the first message the session's last window kept (per session, never in the strategy)."""


class KeepLastTurns(Strategy):
    """Keep every system message and the newest ``turns`` user turns, each with the replies, tool calls and
    results after it. A user message always starts a unit, so a tool call never loses its results."""

    def __init__(self, turns: int = 10) -> None:
        if isinstance(turns, bool) or not isinstance(turns, int) or turns < 0:
            raise InvalidArgument(f"turns must be an integer >= 0, got {turns!r}")
        self.turns = turns

    @property
    def traits(self) -> StrategyTraits:
        """What it keeps depends only on the newest turns, and it drops the older ones: the engine may read only
        the newest part of a session."""
        return StrategyTraits(suffix_determined=True, cuts=True)

    async def compact(self, history: Sequence[ChatMessage], session: SessionContext | None = None) -> list[ChatMessage]:
        """System messages, then everything from the ``turns``-th newest user message on."""
        session = session or SessionContext.standalone()
        cut = self._cut(history)
        if cut is None:  # fewer user turns than asked: keep everything
            if session.partial:
                session.need_older()  # more turns may lie before the part read
            return list(history)
        if session.partial:
            session.cut_made()  # whatever is older than the cut is dropped anyway
        session.state.put(self, LAST_CUT, [history[cut].id] if cut < len(history) else [])
        return [m for m in history[:cut] if m.role == "system"] + list(history[cut:])

    def first_kept(self, session: SessionContext) -> str | None:
        """The id of the first message the session's last window kept after its system messages."""
        kept = session.state.get(self, LAST_CUT)
        return kept[0] if kept else None

    def _cut(self, history: Sequence[ChatMessage]) -> int | None:
        if self.turns == 0:
            return len(history)
        seen = 0
        for i in range(len(history) - 1, -1, -1):
            if history[i].role == "user":
                seen += 1
                if seen == self.turns:
                    return i
        return None

    def __repr__(self) -> str:
        return f"KeepLastTurns(turns={self.turns})"


__all__ = ["LAST_CUT", "KeepLastTurns"]
