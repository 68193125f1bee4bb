"""Where the budget goes when relevant recall misses evidence: for each evidence turn not in the window, why.

Runs the questions of ``conversations.py`` through ``RelevantRecallStrategy(budget)`` (defaults; ``--prefer=cache``
for the cache-stable window) and sorts every missed evidence turn into one cause, judged against the choice the
window's recalled units came from (a ranking ranked deeper counts as a whole):

* ``not ranked``: the ranking did not return its unit (reported with the rank it has when the ranking is not
  limited, its rank among the units of its own session, how many units the ranking held, how many messages were
  skipped as repeats, and how much of the room for older turns was left unspent);
* ``near-duplicate``: its unit was ranked and skipped as repeating one already recalled;
* ``unit too large``: its unit was ranked but cost more than the whole room for older turns;
* ``ranked, not fitted``: its unit was ranked but the room was spent on units ranked above it (the rank it
  had is reported);
* ``no choice made``: the window chose no units (with ``prefer="cache"``: it kept those it held for an earlier
  request).

A turn among the newest is always in the window, so no miss is the newest turns' share.

``python benchmarks/recall/misses.py [dev|held-out] [--budget=2000] [--kind=multi] [--prefer=cache]``.
"""

from __future__ import annotations

import asyncio
import sys
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar, Literal

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ravi.agents.context import CompactionPipeline, RelevantRecallStrategy, WindowRequest
from ravi.agents.context.compaction import relevant_recall
from ravi.agents.tokens import DEFAULT_COUNTER
from ravi.kernel.search import UnitMatch

try:
    from recall.conversations import HELD_OUT_SEEDS, TRAIN_SEEDS, corpus
    from recall.evidence import question_turn
except ImportError:  # run as a script from this directory
    from conversations import HELD_OUT_SEEDS, TRAIN_SEEDS, corpus  # type: ignore[no-redef]
    from evidence import question_turn  # type: ignore[no-redef]

Prefer = Literal["relevance", "cache"]


class _Taken:
    """What one ``_Choice`` saw: the room it had, the ranking it went through (over all its ``take`` calls: a
    choice that goes on into a deeper ranking saw the whole of it), the tokens it left unspent and the ids of the
    messages it skipped as repeats."""

    __slots__ = ("ranked", "repeats", "room", "unspent")

    def __init__(self, room: int) -> None:
        self.room = self.unspent = room
        self.ranked: list[UnitMatch] = []
        self.repeats: set[str] = set()


class _Seen:
    """The choices of the last window (reset before each): ``last`` is the one whose units the window holds (the
    last to go through a ranking; a deeper ranking that does not start as the first one is chosen from anew),
    ``None`` when the window chose none."""

    choices: ClassVar[dict[object, _Taken]] = {}
    last: ClassVar[_Taken | None] = None

    @classmethod
    def reset(cls) -> None:
        cls.choices, cls.last = {}, None


def _instrument() -> None:
    """Watch every ``_Choice`` the strategy makes (``_window``'s, the deeper ranking's, ``_choose``'s for
    ``prefer="cache"``), leaving what it does as it is."""
    choice = relevant_recall._Choice
    init, take = choice.__init__, choice.take

    def watched_init(self, annotate, left, *more):  # type: ignore[no-untyped-def]
        init(self, annotate, left, *more)
        _Seen.choices[self] = _Taken(left)

    def watched_take(self, ranked, repeats=None):  # type: ignore[no-untyped-def]
        ranked = list(ranked)
        skipped: list[UnitMatch] = [] if repeats is None else repeats
        before = len(skipped)
        chosen = take(self, ranked, skipped)
        seen = _Seen.choices[self]
        seen.ranked.extend(ranked)
        seen.repeats.update(m.id for u in skipped[before:] for m in u.messages)
        seen.unspent = self._left
        _Seen.last = seen
        return chosen

    choice.__init__ = watched_init  # type: ignore[method-assign]
    choice.take = watched_take  # type: ignore[method-assign]


async def _choice(pipeline: CompactionPipeline, request: WindowRequest) -> tuple[set[str], _Taken | None]:
    """The ids of the messages in ``pipeline``'s window for ``request``, and what its choice saw."""
    _Seen.reset()
    ids = {m.id for m in (await pipeline.window(request)).messages}
    return ids, _Seen.last


def _median(values: Sequence[float]) -> float:
    return sorted(values)[len(values) // 2] if values else 0.0


async def diagnose(seeds: tuple[int, ...], budget: int, kind: str | None, prefer: Prefer = "relevance") -> None:
    """Print, for ``budget``, how many evidence turns the window holds and why each missing one is missing."""
    _instrument()
    causes: Counter[str] = Counter()
    fitted: defaultdict[str, list[int]] = defaultdict(list)  # rank of a ranked, not fitted evidence unit
    unlimited: defaultdict[str, list[int]] = defaultdict(list)  # rank of a not ranked one, in a full ranking
    in_session: defaultdict[str, list[int]] = defaultdict(list)  # ... among the units of its own session
    ranked_units: list[int] = []  # how many units the ranking held, on a miss
    unspent: list[float] = []  # the share of the room left unspent, on a miss
    skipped: list[int] = []  # messages skipped as repeats, on a miss
    total = found = 0
    for conversation in corpus(seeds):
        pipeline = CompactionPipeline([RelevantRecallStrategy(budget, prefer=prefer)])
        full = CompactionPipeline([RelevantRecallStrategy(budget, search_limit=5_000)])
        day_of = {m.id: m.created_at.date() for m in conversation.messages}
        for k, q in enumerate(conversation.questions):
            if kind is not None and q.kind != kind:
                continue
            history = [*conversation.messages, question_turn(conversation, k)]
            request = WindowRequest("bench", history[0].id, messages=history)
            ids, seen = await _choice(pipeline, request)
            missed = [e for e in q.evidence if e not in ids]
            total += len(q.evidence)
            found += len(q.evidence) - len(missed)
            if not missed:
                continue
            ranked = seen.ranked if seen is not None else []
            position = {m.id: r for r, u in enumerate(ranked) for m in u.messages}
            deep: dict[str, int] | None = None  # the ranks in a full ranking, found on the first miss that needs them
            deep_ranked: list[UnitMatch] = []
            for e in missed:
                r = position.get(e)
                if seen is None:
                    cause = "no choice made"
                elif r is None:
                    cause = "not ranked"
                    ranked_units.append(len(ranked))
                    unspent.append(seen.unspent / max(seen.room, 1))
                    skipped.append(len(seen.repeats))
                    if deep is None:
                        _, whole = await _choice(full, request)
                        deep_ranked = whole.ranked if whole is not None else []
                        deep = {m.id: r for r, u in enumerate(deep_ranked) for m in u.messages}
                    if e in deep:
                        unlimited[q.kind].append(deep[e])
                        above = deep_ranked[: deep[e]]
                        in_session[q.kind].append(sum(day_of.get(u.messages[0].id) == day_of[e] for u in above))
                elif e in seen.repeats:
                    cause = "near-duplicate"
                elif DEFAULT_COUNTER.count_messages(list(ranked[r].messages)) > seen.room:
                    cause = "unit too large"
                else:
                    cause = "ranked, not fitted"
                    fitted[q.kind].append(r)
                causes[cause] += 1
                causes[f"  {cause} ({q.kind})"] += 1
    print(f"budget {budget:,}: {found}/{total} evidence turns in the window ({found / max(total, 1):.2f})")
    for cause, n in sorted(causes.items(), key=lambda c: (c[0].strip().split(" (")[0], c[0].startswith(" "))):
        print(f"{cause}: {n}")
    for name, rs in sorted(fitted.items()):
        print(f"ranked, not fitted ({name}): rank {sorted(rs)}")
    for name, rs in sorted(unlimited.items()):
        print(f"not ranked ({name}): full ranking {sorted(rs)}; within its day {sorted(in_session[name])}")
    if ranked_units:
        print(
            f"not ranked: units ranked (median) {_median(ranked_units):.0f}, messages skipped as repeats (median) "
            f"{_median(skipped):.0f}, share of the room left unspent: median {_median(unspent):.2f}, "
            f"a quarter above {sorted(unspent)[3 * len(unspent) // 4]:.2f}"
        )


def main(argv: Sequence[str]) -> None:
    seeds = HELD_OUT_SEEDS if "held-out" in argv else TRAIN_SEEDS
    budget = next((int(a.split("=")[1]) for a in argv if a.startswith("--budget=")), 2_000)
    kind = next((a.split("=")[1] for a in argv if a.startswith("--kind=")), None)
    prefer: Prefer = "cache" if "--prefer=cache" in argv else "relevance"
    asyncio.run(diagnose(seeds, budget, kind, prefer))


if __name__ == "__main__":
    main(sys.argv[1:])
