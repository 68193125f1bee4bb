"""Fusing recall's rankings: the units found by words and by meaning, by reciprocal rank, and the request's
period and order among them; near-duplicate units are recalled once.

Reciprocal rank fusion (Cormack, Clarke and Büttcher, 2009) scores a unit ``1 / (k + rank)`` in each ranking
that holds it and adds the scores up: it needs no calibration between a BM25 score and a cosine, neither scale
dominates, and a unit both rankings place high comes first. Two more rankings apply only among the units found:
those dated inside the period a request names ("in March 2023"), and, for a request about how things are now (or
how they began), the found units from the newest (or the oldest).
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right, insort
from collections.abc import Sequence
from datetime import date, timedelta
from functools import lru_cache
from sys import intern
from typing import NamedTuple

from ravi.agents.context.recall_request import Request
from ravi.kernel.errors import InvalidArgument
from ravi.kernel.messages import ChatMessage
from ravi.kernel.search import UnitMatch, fold, message_text

RRF_K = 60
"""The usual constant of reciprocal rank fusion: a unit's score in a ranking is ``1 / (RRF_K + rank)``."""

PERIOD_LIMIT = 256
"""How many units a ranking returns at least for a request that names a period: the period's units share few
words with the request ("What did Maya do in March?"), so the ranking must reach far enough to hold them."""

PERIOD_GRACE = timedelta(days=7)
"""How long after a period a unit may still tell of it (people tell what they did after they did it: "last
weekend"); such a unit ranks after the ones dated inside the period."""


def fuse(rankings: Sequence[Sequence[UnitMatch]], request: Request, *, k: int = RRF_K) -> list[UnitMatch]:
    """Every unit of ``rankings`` once (by its offset), scored by reciprocal rank fusion, best first (the newer
    first among equals, the older when the request asks how things began); the request's period and order rank
    the units found once more."""
    fused: dict[int, float] = {}
    units: dict[int, UnitMatch] = {}
    for ranking in rankings:
        for match, share in zip(ranking, _shares(k, 1 << max(8, (len(ranking) - 1).bit_length())), strict=False):
            offset = match.offset
            if offset in units:
                fused[offset] += share
            else:
                fused[offset], units[offset] = share, match
    if request.period is not None:
        first, last = request.period
        days = {o: _day_of(units[o]) for o in units}
        inside = [o for o, day in days.items() if day is not None and first <= day <= last]
        after = [o for o, day in days.items() if day is not None and last < day <= last + PERIOD_GRACE]
        by_score = sorted(inside, key=lambda o: (-fused[o], -o)) + sorted(after, key=lambda o: (-fused[o], -o))
        for rank, offset in enumerate(by_score, 1):
            fused[offset] += 1.0 / (k + rank)
    oldest_first = request.order == "first"
    if request.order is not None and len(units) > 1:
        for rank, offset in enumerate(sorted(units, reverse=not oldest_first), 1):
            fused[offset] += 1.0 / (k + rank)
    # by offset first, then (a stable sort) by score: the best first, the newer (older) first among equals
    ranked = sorted(units, reverse=not oldest_first)
    ranked.sort(key=fused.__getitem__, reverse=True)
    return [UnitMatch(fused[o], (u := units[o]).messages, o, u.after_system) for o in ranked]


@lru_cache(maxsize=16)
def _shares(k: int, n: int) -> tuple[float, ...]:
    """What ranks 1 to ``n`` score in a ranking: ``1 / (k + rank)`` (kept: a few lengths serve every ranking)."""
    return tuple(1.0 / (k + rank) for rank in range(1, n + 1))


def _day_of(match: UnitMatch) -> date | None:
    """The day the unit was written (its first message's ``created_at``, UTC)."""
    for message in match.messages:
        if message.role != "system":
            return message.created_at.date()
    return None


class NearDuplicates:
    """Remembers the units a window holds, to skip a unit that says again what one of them says: the same text
    (a repeated tool output), or, for short units (4 to ``SHORT`` words), nearly the same words (a Jaccard
    similarity of their sets of folded words of at least ``threshold``: a restated fact). Each message's
    text is worked out once (kept in its ``memo``), and a unit's words once by a caller that keeps its
    :func:`unit_of`.

    The held word sets are kept by size: a Jaccard similarity is at most the ratio of the two sizes, so a unit
    is compared only with the held sets whose size is near its own, not with every one. Before two sets are
    intersected, their signatures (:func:`signature`) bound how many words they can share: each bit one sets and
    the other does not stands for at least one word of the first that the second lacks. A pair that cannot reach
    the threshold even with that many shared words is passed over; the bound never passes over a pair that
    reaches it, so the answers are those of intersecting every pair, for most pairs at the cost of two integer
    operations instead of a set intersection."""

    SHORT = 200

    def __init__(self, threshold: float = 0.8) -> None:
        """Hold no unit yet; ``threshold`` is a number in [0, 1] (``InvalidArgument`` otherwise)."""
        if isinstance(threshold, bool) or not isinstance(threshold, int | float) or not 0 <= threshold <= 1:
            raise InvalidArgument(f"threshold must be a number in [0, 1], got {threshold!r}")
        self.threshold = float(threshold)
        self._texts: set[tuple[str, ...]] = set()
        self._sizes: list[int] = []  # the distinct sizes of the held word sets, ascending
        # the held word sets, their signatures and the signatures' complements, by size
        self._terms: dict[int, list[tuple[frozenset[str], int, int]]] = {}

    def add(self, messages: Sequence[ChatMessage], unit: Unit | None = None) -> None:
        """Hold ``messages`` as one unit (``unit``: their :func:`unit_of`, when the caller keeps it)."""
        texts, words, mark = unit or unit_of(messages)
        self._texts.add(texts)
        size = len(words)
        if 4 <= size <= self.SHORT:
            held = self._terms.get(size)
            if held is None:
                held = self._terms[size] = []
                insort(self._sizes, size)
            held.append((words, mark, ~mark))

    def repeats(self, messages: Sequence[ChatMessage], unit: Unit | None = None) -> bool:
        """Whether ``messages`` (whose :func:`unit_of` is ``unit``, when the caller keeps it) say again what a
        held unit says."""
        texts, mine, mark = unit or unit_of(messages)
        if texts in self._texts:
            return any(t.strip() for t in texts)  # blank texts repeat nothing (nor do they hold words, below)
        size = len(mine)
        if size < 4 or size > self.SHORT:
            return False
        threshold = self.threshold
        sizes = self._sizes
        low, high = 0, len(sizes)
        if 0.01 <= threshold <= 1:  # only sizes within the ratio can pass (one more either way, for rounding)
            low = bisect_left(sizes, math.floor(threshold * size) - 1)
            high = bisect_right(sizes, math.ceil(size / threshold) + 1)
        inverse = ~mark
        for k in range(low, high):
            other_size = sizes[k]
            # ratios by division, correctly rounded: 55 / 100 is the float 0.55, while 0.55 * 100 rounds above 55
            if min(size, other_size) / max(size, other_size) >= threshold:
                whole = size + other_size
                # each bit only one signature sets is a word the other set lacks, so the pair shares at most
                # ``size`` less the bits only ``mark`` sets, and ``other_size`` less those only ``other_mark``
                # sets; the test below passes only when it shares ``need`` words or more (``shared / (whole -
                # shared) >= threshold``, less a margin for rounding): the bound passes over only pairs that fail
                need = threshold * whole / (1 + threshold) - 1e-6 * whole
                mine_only, other_only = size - need, other_size - need
                for other, other_mark, other_inverse in self._terms[other_size]:
                    if (mark & other_inverse).bit_count() > mine_only:
                        continue
                    if (other_mark & inverse).bit_count() > other_only:
                        continue
                    shared = len(mine & other)
                    # the union holds ``size + other_size - shared`` words: one set operation, not two
                    if shared / (whole - shared) >= threshold:
                        return True
        return False


_TEXT = "recall:text"


class Unit(NamedTuple):
    """What :class:`NearDuplicates` compares of a unit: the texts of its messages, their words and the words'
    :func:`signature`."""

    texts: tuple[str, ...]
    words: frozenset[str]
    signature: int


SIGNATURE_BITS = 256
"""The bits of a word set's :func:`signature`: enough that the words of the short sets compared rarely share one."""


def signature(words: frozenset[str]) -> int:
    """A word set's signature: the bits ``hash(word) % SIGNATURE_BITS`` of its words set. Words hash alike within
    one process, which is all a comparison needs (signatures are never stored or sent)."""
    mask = SIGNATURE_BITS - 1
    mark = 0
    for word in words:
        mark |= 1 << (hash(word) & mask)
    return mark


def unit_of(messages: Sequence[ChatMessage]) -> Unit:
    """The texts of a unit's messages (system messages aside, each message's text worked out once, kept in its
    ``memo``: it depends on the message alone), their words and the words' signature."""
    texts = tuple(_text(m) for m in messages if m.role != "system")
    words = _unit_words(texts)
    return Unit(texts, words, signature(words))


def _text(message: ChatMessage) -> str:
    """The message's searchable text, worked out once."""
    memo = message.memo
    text: str | None = memo.get(_TEXT)
    if text is None:
        text = memo[_TEXT] = message_text(message)
    return text


def _unit_words(texts: Sequence[str]) -> frozenset[str]:
    """The distinct words of the texts, folded as the search folds them (:func:`ravi.kernel.search.fold`: case
    and Latin, Greek and Cyrillic accents aside, Unicode forms made one; ASCII text is only lower-cased) and split
    at whitespace (cheap, and enough to compare two units), as interned strings (a session's units share most of
    their words); none for a unit of more than :attr:`NearDuplicates.SHORT` words, which is never compared by its
    words (so what a caller keeps of a long unit holds no set: the sizes 0 and above ``SHORT`` are treated
    alike). Worked out once per unit by the caller that keeps it, never per message: a message's words are
    needed only as its unit's."""
    words = frozenset(map(intern, " ".join(map(fold, texts)).split()))
    return words if len(words) <= NearDuplicates.SHORT else _NONE


_NONE: frozenset[str] = frozenset()


__all__ = [
    "PERIOD_GRACE",
    "PERIOD_LIMIT",
    "RRF_K",
    "SIGNATURE_BITS",
    "NearDuplicates",
    "Unit",
    "fuse",
    "signature",
    "unit_of",
]
