"""A session's search index as arrays: BM25 postings, the units each message belongs to, and the ranking of
units by the best score of their messages, with NumPy instead of a loop per message.

It gives exactly what :class:`~ravi.kernel.search.Bm25`, :func:`~ravi.kernel.search.spread` and
:func:`~ravi.kernel.search.match_units` give (the same terms, the same floating-point operations in the same
order, the same ties), which stay the kernel's reference: the kernel needs only pydantic, and every store ranks
as they do. A warm window asks a new request of the whole session, so what it costs is the postings of the
request's rarest terms and the units of the best messages, a few array operations each.

The index grows with the session: each search first indexes the messages appended since the last one. Only the
newest unit can still change (a tool call's results arrive after it), and it is worked out again as it grows.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Sequence

import numpy as np

from ravi.kernel.messages import ChatMessage
from ravi.kernel.search import RANKED, UnitMatch, indexed_terms, opens_group, query_terms


class _Growing:
    """A one-dimensional NumPy array that grows at its end, doubling its room."""

    def __init__(self, dtype: type, room: int = 256) -> None:
        self.data: np.ndarray = np.zeros(room, dtype=dtype)
        self.size = 0

    def append(self, value: float) -> None:
        if self.size == len(self.data):
            grown = np.zeros(2 * len(self.data), dtype=self.data.dtype)
            grown[: self.size] = self.data
            self.data = grown
        self.data[self.size] = value
        self.size += 1

    @property
    def view(self) -> np.ndarray:
        return self.data[: self.size]


_SMALL = 64
"""Postings up to this many entries are Python lists: most terms are rare, and a message of thousands of new
terms (a pasted document) would otherwise allocate two arrays for each."""


class _Posting:
    """One term's postings: the positions of the messages that hold it, and how often each does."""

    __slots__ = ("counts", "positions")

    def __init__(self) -> None:
        self.positions: list[int] | _Growing = []
        self.counts: list[float] | _Growing = []

    @property
    def size(self) -> int:
        positions = self.positions
        return len(positions) if isinstance(positions, list) else positions.size

    def append(self, position: int, count: float) -> None:
        positions, counts = self.positions, self.counts
        if isinstance(positions, list) and isinstance(counts, list) and len(positions) == _SMALL:
            grown, grown_counts = _Growing(np.int64, 2 * _SMALL), _Growing(np.float64, 2 * _SMALL)
            grown.data[:_SMALL], grown_counts.data[:_SMALL] = positions, counts
            grown.size = grown_counts.size = _SMALL
            self.positions, self.counts = positions, counts = grown, grown_counts
        positions.append(position)
        counts.append(count)

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """The positions (ascending) and counts, as arrays."""
        positions, counts = self.positions, self.counts
        if isinstance(positions, list) or isinstance(counts, list):
            return np.array(positions, dtype=np.int64), np.array(counts, dtype=np.float64)
        return positions.view, counts.view


class SessionPostings:
    """BM25 (``k1``, ``b``) over a growing list of messages, and its units, kept as arrays.

    Example:
        >>> index = SessionPostings()
        >>> messages = [ChatMessage.user("the cache is cold"), ChatMessage.user("lunch?")]
        >>> index.extend(messages)
        >>> [m.messages[0].text for m in index.search(messages, "cold cache", stop=2, limit=5, before=[0, 9, 15])]
        ['the cache is cold']
    """

    def __init__(self, *, k1: float = 1.2, b: float = 0.75) -> None:
        self.k1, self.b = k1, b
        self.size = 0
        self.total = 0
        self._lengths = _Growing(np.float64)
        self._postings: dict[str, _Posting] = {}
        self._system = _Growing(np.bool_)
        self._start = _Growing(np.int64)  # the first message of each message's unit
        self._end = _Growing(np.int64)  # where the unit that starts at each position ends (others: unused)
        self._previous = _Growing(np.int64)  # the nearest message before that is not a system message (-1: none)
        self._next = _Growing(np.int64)  # the nearest one after (the session's size while none is known)
        self._waiting: list[int] = []  # positions whose next non-system message is still to come
        self._last_other = -1  # the newest message that is not a system message
        self._opener = -1  # the assistant message whose tool results may still follow, or -1
        self._systems: list[int] = []
        # the units ranked so far, by start: where each ends, its messages and its anchor (a unit's messages
        # and the system message before it never change; only the newest unit can still grow)
        self._made: dict[int, tuple[int, tuple[ChatMessage, ...], str | None]] = {}

    def extend(self, messages: Sequence[ChatMessage]) -> None:
        """Index ``messages[self.size:]``: those appended since the last call."""
        for i in range(self.size, len(messages)):
            message = messages[i]
            words = indexed_terms(message)
            length = sum(words.values())
            self._lengths.append(length)
            self.total += length
            for word, tf in words.items():
                posting = self._postings.get(word)
                if posting is None:
                    posting = self._postings[word] = _Posting()
                posting.append(i, tf)
            self._place(message, i)
        self.size = max(self.size, len(messages))

    def _place(self, message: ChatMessage, i: int) -> None:
        """Note message ``i``'s role, neighbours and unit (the rule of :func:`~ravi.kernel.search.unit_at`)."""
        role = message.role
        system = role == "system"
        self._system.append(system)
        self._end.append(i + 1)
        self._previous.append(self._last_other)
        self._next.append(-1)
        if system:
            self._systems.append(i)
            self._start.append(i)
            self._waiting.append(i)
            return
        nexts = self._next.data
        for k in self._waiting:
            nexts[k] = i
        self._waiting = [i]
        self._last_other = i
        if role == "tool" and self._opener >= 0:
            self._start.append(self._opener)
            self._end.data[self._opener] = i + 1  # the group ends after its newest result
            return
        self._opener = i if opens_group(message) else -1
        self._start.append(i)

    def scores(self, query: str, stop: int, *, ranked: int = RANKED) -> np.ndarray:
        """The BM25 score of each of the first ``stop`` messages for ``query`` (zero: no shared term), the terms
        taken from the rarest as :meth:`~ravi.kernel.search.Bm25.scores` takes them."""
        n = self.size
        out = np.zeros(min(stop, n), dtype=np.float64)
        if not n or not len(out):
            return out
        average = (self.total / n) or 1.0
        k1, b = self.k1, self.b
        held = sorted((p.size, w) for w in query_terms(query) if (p := self._postings.get(w)))
        lengths = self._lengths.data
        total = 0
        for df, word in held:
            if total and total + df > ranked:
                break
            total += df
            posting = self._postings[word]
            positions, tf = posting.arrays()
            inside = int(np.searchsorted(positions, len(out)))
            positions, tf = positions[:inside], tf[:inside]
            idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
            out[positions] += idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * lengths[positions] / average))
        return out

    def spread(self, scores: np.ndarray, weight: float) -> np.ndarray:
        """``scores`` with each scored message's nearest neighbours that are not system messages scored
        ``weight`` times its score, unless they score more (:func:`~ravi.kernel.search.spread`); system messages
        score nothing."""
        stop = len(scores)
        out = np.where(self._system.data[:stop], 0.0, scores)
        if weight <= 0:
            return out
        scored = np.flatnonzero(out > 0)
        if not len(scored):
            return out
        near = out[scored] * weight
        for neighbours in (self._previous.data[scored], self._next.data[scored]):
            inside = (neighbours >= 0) & (neighbours < stop)
            np.maximum.at(out, neighbours[inside], near[inside])
        return out

    def units(
        self, messages: Sequence[ChatMessage], scores: np.ndarray, *, before: Sequence[int], limit: int
    ) -> list[UnitMatch]:
        """The units of the first ``len(scores)`` messages that hold a scored message that is not a system
        message, each scored by its best one, best first (the newer first among equals), at most ``limit``: what
        :func:`~ravi.kernel.search.match_units` gives for the positive ``scores``."""
        stop = len(scores)
        if limit <= 0 or not stop:
            return []
        scored = np.flatnonzero((scores > 0) & ~self._system.data[:stop])
        if not len(scored):
            return []
        starts = self._start.data[scored]
        keep = self._end.data[starts] <= stop
        starts, values = starts[keep], scores[scored][keep]
        if not len(starts):
            return []
        best = np.zeros(stop, dtype=values.dtype)  # each unit's best score, at its start
        np.maximum.at(best, starts, values)
        starts = np.flatnonzero(best)
        values = best[starts]
        if len(starts) > limit:  # only the best ``limit`` (with every tie at the last) need sorting
            floor = np.partition(values, len(values) - limit)[len(values) - limit]
            best_ones = values >= floor
            starts, values = starts[best_ones], values[best_ones]
        ranked = np.lexsort((-starts, -values))[:limit]
        starts, values = starts[ranked], values[ranked]
        made = self._made
        out = []
        # Python numbers (``tolist``) for the loop: indexing an array gives NumPy scalars, slower to make and use
        for start, end, value in zip(starts.tolist(), self._end.data[starts].tolist(), values.tolist(), strict=True):
            unit = made.get(start)
            if unit is None or unit[0] != end or unit[1][0] is not messages[start]:
                unit = made[start] = (end, tuple(messages[start:end]), self._anchor(messages, start))
            out.append(UnitMatch(value, unit[1], before[start], unit[2]))
        return out

    def end_of_unit_before(self, stop: int) -> int:
        """Where the unit holding the newest message before ``stop`` that is not a system message ends now (0 when
        there is none): the only unit of the first ``stop`` messages that can still grow, so the units wholly
        before ``stop`` are those of an earlier call that gave the same answer. System messages are passed over:
        a tool call's results may follow them, and the call's unit then grows past them."""
        last = stop - 1
        if last >= 0 and self._system.data[last]:
            last = int(self._previous.data[last])
        return int(self._end.data[self._start.data[last]]) if last >= 0 else 0

    def _anchor(self, messages: Sequence[ChatMessage], start: int) -> str | None:
        """The id of the newest system message before ``start``, or ``None``."""
        k = bisect_left(self._systems, start)
        return messages[self._systems[k - 1]].id if k else None

    def search(
        self,
        messages: Sequence[ChatMessage],
        query: str,
        *,
        stop: int,
        limit: int,
        before: Sequence[int],
        spread: float = 0.0,
    ) -> list[UnitMatch]:
        """The best units of ``messages[:stop]`` for ``query`` by BM25, each match's neighbours scored ``spread``
        times its score, after indexing what was appended since the last call."""
        self.extend(messages)
        scores = self.scores(query, stop)
        return self.units(messages, self.spread(scores, spread), before=before, limit=limit)


__all__ = ["SessionPostings"]
