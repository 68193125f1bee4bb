"""Where the budget goes when relevant recall misses evidence: for each evidence turn not in the window, why.

Runs the questions of ``conversations.py`` through ``RelevantRecallStrategy(budget)`` (defaults) and sorts every
missed evidence turn into one cause:

* ``not ranked``: no ranking returned its unit (reported with the rank it has when the ranking is not limited,
  its rank among the units of its own session, and how much of the room for older turns was left unspent);
* ``near-duplicate``: its unit was ranked and skipped as repeating one already recalled;
* ``unit too large``: its unit was ranked but cost more than the whole share for older turns;
* ``ranked, not fitted``: its unit was ranked but the share was spent on units ranked above it (the rank it
  had is reported).

A turn among the newest is always in the window, so no miss is the newest turns' share.

``python benchmarks/recall/misses.py [dev|held-out] [--budget=2000] [--kind=multi]``.
"""

from __future__ import annotations

import asyncio
import sys
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ravi.agents.context import CompactionPipeline, RelevantRecallStrategy, WindowRequest
from ravi.agents.context.compaction import relevant_recall
from ravi.agents.context.recall_fusion import NearDuplicates
from ravi.agents.tokens import DEFAULT_COUNTER
from ravi.kernel.search import UnitMatch

try:
    from recall.conversations import HELD_OUT_SEEDS, TRAIN_SEEDS, corpus
    from recall.evidence import question_turn
except ImportError:  # run as a script from this directory
    from conversations import HELD_OUT_SEEDS, TRAIN_SEEDS, corpus  # type: ignore[no-redef]
    from evidence import question_turn  # type: ignore[no-redef]


class _Seen:
    """What the last ``_choose`` call saw: the ranking, the tokens it had and left, and the messages it skipped
    as repeats."""

    ranked: ClassVar[list[UnitMatch]] = []
    left: ClassVar[int] = 0
    unspent: ClassVar[int] = 0
    repeats: ClassVar[set[str]] = set()


def _instrument() -> None:
    choose = relevant_recall.RelevantRecallStrategy._choose
    repeats = NearDuplicates.repeats

    def watched_choose(self, ranked, left, counter, request, *more):  # type: ignore[no-untyped-def]
        _Seen.ranked, _Seen.left, _Seen.repeats = list(ranked), left, set()
        chosen = choose(self, ranked, left, counter, request, *more)
        _Seen.unspent = left - sum(counter.count_message(m) for u in chosen for m in u.messages)
        return chosen

    def watched_repeats(self, messages, unit=None):  # type: ignore[no-untyped-def]
        found = repeats(self, messages, unit)
        if found:
            _Seen.repeats.update(m.id for m in messages)
        return found

    relevant_recall.RelevantRecallStrategy._choose = watched_choose  # type: ignore[method-assign]
    NearDuplicates.repeats = watched_repeats  # type: ignore[method-assign]


def _median(values: Sequence[float]) -> float:
    return sorted(values)[len(values) // 2] if values else 0.0


async def diagnose(seeds: tuple[int, ...], budget: int, kind: str | None) -> None:
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
        pipeline = CompactionPipeline([RelevantRecallStrategy(budget)])
        full = CompactionPipeline([RelevantRecallStrategy(budget, search_limit=5_000)])
        day_of = {m.id: m.created_at.date() for m in conversation.messages}
        for k, q in enumerate(conversation.questions):
            if kind is not None and q.kind != kind:
                continue
            history = [*conversation.messages, question_turn(conversation, k)]
            request = WindowRequest("bench", history[0].id, messages=history)
            ids = {m.id for m in (await pipeline.window(request)).messages}
            ranked, left, repeated = _Seen.ranked, _Seen.left, _Seen.repeats
            position = {m.id: r for r, u in enumerate(ranked) for m in u.messages}
            missed = [e for e in q.evidence if e not in ids]
            total += len(q.evidence)
            found += len(q.evidence) - len(missed)
            for e in missed:
                r = position.get(e)
                if r is None:
                    cause = "not ranked"
                    ranked_units.append(len(ranked))
                    unspent.append(_Seen.unspent / max(left, 1))
                    skipped.append(len(repeated))
                    await full.window(request)
                    deep = {m.id: r for r, u in enumerate(_Seen.ranked) for m in u.messages}
                    if e in deep:
                        unlimited[q.kind].append(deep[e])
                        above = _Seen.ranked[: deep[e]]
                        in_session[q.kind].append(sum(day_of.get(u.messages[0].id) == day_of[e] for u in above))
                elif e in repeated:
                    cause = "near-duplicate"
                elif DEFAULT_COUNTER.count_messages(list(ranked[r].messages)) > left:
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
    asyncio.run(diagnose(seeds, budget, kind))


if __name__ == "__main__":
    main(sys.argv[1:])
