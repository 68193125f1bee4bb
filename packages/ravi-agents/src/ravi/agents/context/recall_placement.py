"""Where recalled units go in the window, and which of them a cache-stable window keeps from turn to turn.

Recalled units always sit in conversation order among the system messages, before the newest turns (a window
never reorders a conversation). What changes between the two preferences is what may change from one turn to
the next:

* ``prefer="relevance"``: every window recalls what is most relevant to the current request and keeps the
  newest turns that fit, so the part after the system messages changes on every turn.
* ``prefer="cache"``: the window holds its recalled units and the start of its newest turns, appending new
  turns at the end, so the prompt's prefix stays byte-identical (and billed at the provider's cached price).
  The recalled units change only when the request's topic does (none of the held units is among the few best
  for the new request), and the start moves only when the window would pass its budget: then it is cut down
  to ``low_watermark`` of the budget in one step, as a watermarked token budget does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ravi.kernel.messages import ChatMessage
from ravi.kernel.search import UnitMatch


def place(systems: Sequence[ChatMessage], chosen: Sequence[UnitMatch]) -> list[ChatMessage]:
    """``systems`` with the recalled units in conversation order: each right after the system message it
    follows in the session (by offset among those that follow the same one), and any system message of a unit
    given once."""
    by_anchor: dict[str | None, list[UnitMatch]] = {}
    for match in sorted(chosen, key=lambda m: m.offset):
        by_anchor.setdefault(match.after_system, []).append(match)
    known = {m.id for m in systems}
    out: list[ChatMessage] = []
    given: set[str] = set()

    def put(matches: list[UnitMatch]) -> None:
        for match in matches:
            for m in match.messages:
                if m.id not in given:
                    given.add(m.id)
                    out.append(m)

    put(sorted((m for a, ms in by_anchor.items() if a is None or a not in known for m in ms), key=lambda m: m.offset))
    for system in systems:
        if system.id not in given:
            given.add(system.id)
            out.append(system)
        put(by_anchor.get(system.id, []))
    return out


@dataclass
class Held:
    """What a cache-stable window of a session holds: the request its recalled units were chosen for, those
    units, and where its newest turns start (the id of their first message, and its offset)."""

    request: str = ""
    units: list[UnitMatch] = field(default_factory=list)
    start: str | None = None
    after: bool = False  # the newest turns start right after ``start`` (none fitted when it was held)
    offset: int = 0  # the start's offset: it changes when anything before the start is removed

    def keeps(self, request: str, ranked: Sequence[UnitMatch], *, top: int = 3) -> bool:
        """Whether the held units still serve ``request``: the same request, or one of them among the ``top``
        units ranked for it (the topic did not change)."""
        if request == self.request:
            return True
        held = {u.offset for u in self.units}
        return any(u.offset in held for u in ranked[:top])


__all__ = ["Held", "place"]
