"""``RelevantRecallStrategy``: when old turns must go, keep the ones that matter for the current request."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from datetime import date
from operator import is_
from typing import Literal, cast

from ravi.agents.context.compaction._keep import TailCut, newest_cut, system_positions
from ravi.agents.context.recall_annotation import label, labelled
from ravi.agents.context.recall_fusion import PERIOD_LIMIT, NearDuplicates, Unit, fuse, unit_of
from ravi.agents.context.recall_index import BM25Index, EmbeddingIndex, RecallIndex, UnitIndex
from ravi.agents.context.recall_placement import Held, place
from ravi.agents.context.recall_ranking import (
    LocalRankings,
    meaning_limit,
    pushed_down,
    resolve_meaning,
    store_rankings,
)
from ravi.agents.context.recall_request import MIN_SHARE, Request, read_request, recall_share
from ravi.agents.context.session import counter_of
from ravi.agents.embeddings import StaticEmbeddingClient
from ravi.agents.tokens import DEFAULT_COUNTER, check_counter
from ravi.kernel.agent import SessionContext, Slot, Strategy, StrategyTraits
from ravi.kernel.errors import InvalidArgument
from ravi.kernel.llm import EmbeddingClient, TokenCounter
from ravi.kernel.messages import ChatMessage, ToolCallBlock
from ravi.kernel.protocols import conforms
from ravi.kernel.search import UnitMatch
from ravi.kernel.storage import HistorySearcher
from ravi.kernel.tokens import CachedTokenCounter, stored_tokens
from ravi.kernel.values import check_count, check_share

Rank = Callable[[Request, int, int, int], Awaitable[list[UnitMatch] | None]]
"""Ranks the older units for a request, given where the newest turns start (``cut``), where the part ranked ends
(``end``: the cut, or the request at work among the newest turns, whose units before it are then left out), and
how many units the ranking gives at most (``None``: older messages needed)."""

_RECALLED: Slot[list[UnitMatch]] = Slot("relevant_recall.recalled", list)
"""The units recalled in the session's last window."""
_HELD: Slot[Held] = Slot("relevant_recall.held", Held)
"""What the session's cache-stable window holds: its recalled units and the start of its newest turns."""
_WHOLE: Slot[TailCut] = Slot("relevant_recall.whole", TailCut)
"""Where the newest units that fit the budget start (at 0: the whole history fits), found from the messages
appended since the last window."""
_NEWEST: Slot[TailCut] = Slot("relevant_recall.newest", TailCut)
"""Where the newest turns of a relevance window start, found the same way."""


class _Facts:
    """What one older unit costs and says, worked out once: its cost by each counting rule, its texts and words
    for the near-duplicate check, and its labelled form (and that form's cost) for each day of a request."""

    __slots__ = ("costs", "labelled", "messages", "pairs", "unit")

    def __init__(self, messages: tuple[ChatMessage, ...]) -> None:
        self.messages = messages
        self.costs: dict[object, int] = {}
        self.unit: Unit | None = None
        self.labelled: dict[date | None, tuple[ChatMessage, ...] | None] = {}
        self.pairs: bool | None = None

    def paired(self) -> bool:
        """Whether the unit can be sent alone: every tool result in it has its call in it, and every call one
        result (not so for a result stored apart from its call, another message between them, nor for that
        call, nor for a call whose results were never stored, nor for one a retried tool answered twice)."""
        pairs = self.pairs
        if pairs is None:
            calls: set[str] = set()
            results: set[str] = set()
            answers = 0
            for m in self.messages:
                role = m.role
                if role == "assistant":
                    calls.update(b.id for b in m.content if isinstance(b, ToolCallBlock))
                elif role == "tool" and (result := m.tool_result) is not None:
                    results.add(result.tool_call_id)
                    answers += 1
            pairs = self.pairs = calls == results and answers == len(results)
        return pairs

    def cost(self, counter: TokenCounter, today: date | None = None, *, labelled: bool = False) -> int:
        """:func:`_cost` of the unit (``labelled``: of its form labelled for ``today``), kept when ``counter``
        declares its counting rule (a :class:`~ravi.kernel.tokens.CachedTokenCounter`'s ``key``)."""
        messages = self.label(today) if labelled else self.messages
        assert messages is not None
        if not isinstance(counter, CachedTokenCounter):
            return _cost(messages, counter.count_message)
        key = (counter.key, today) if labelled else counter.key
        cost = self.costs.get(key)
        if cost is None:
            cost = self.costs[key] = _cost(messages, counter.count_message)
        return cost

    def words(self) -> Unit:
        """The unit's texts, words and their signature (:func:`~ravi.agents.context.recall_fusion.unit_of`)."""
        unit = self.unit
        if unit is None:
            unit = self.unit = unit_of(self.messages)
        return unit

    def label(self, today: date | None) -> tuple[ChatMessage, ...] | None:
        """The unit with each message labelled for a request of ``today``, or ``None`` when none needs a label."""
        if today in self.labelled:
            return self.labelled[today]
        stored = self.messages
        prefixes = [label(m, today) for m in stored]
        messages = None
        if any(prefixes):
            messages = tuple(labelled(m, p) if p else m for m, p in zip(stored, prefixes, strict=True))
        self.labelled[today] = messages
        return messages


class _Units:
    """The :class:`_Facts` of a session's older units, by unit (its offset, length and newest message, and equal
    messages: a unit a store search returns again as new objects is found by comparing them, which costs far less
    than counting and reading them again), at most ``LIMIT`` of them (the oldest kept is dropped first). Kept in
    the session's state, so they are the session's alone and die with its generation (a ``clear``, ``clear_run``
    or ``replace_last``)."""

    LIMIT = 4_096

    __slots__ = ("_facts",)

    def __init__(self) -> None:
        self._facts: dict[tuple[int, int, str], _Facts] = {}

    def of(self, match: UnitMatch) -> _Facts:
        """The facts of ``match``'s unit."""
        messages = match.messages
        key = (match.offset, len(messages), messages[-1].id if messages else "")
        facts = self._facts.get(key)
        if facts is not None and facts.messages is messages:  # the store gave the very tuple again (in memory)
            return facts
        if (
            facts is not None
            and len(facts.messages) == len(messages)
            and (all(map(is_, facts.messages, messages)) or facts.messages == tuple(messages))
        ):
            return facts
        facts = _Facts(tuple(messages))
        self._facts.pop(key, None)
        if len(self._facts) >= self.LIMIT:
            del self._facts[next(iter(self._facts))]
        self._facts[key] = facts
        return facts


_UNITS: Slot[_Units] = Slot("relevant_recall.units", _Units)
"""The session's older units' costs, words and labelled forms."""


class _Recent:
    """What the newest turns of a session's cache-stable window cost (:func:`_cost` of the messages from its
    held start on), found from the messages appended since the last window when the ones before them are the
    very same (checked with one C-speed list comparison). Anything else is summed again: the memo changes
    speed, never results. Kept in the session's state."""

    __slots__ = ("_cost", "_count", "_kept")

    def __init__(self) -> None:
        self._kept: list[ChatMessage] = []
        self._cost = 0
        self._count: Callable[[ChatMessage], int] | None = None

    def cost(self, history: Sequence[ChatMessage], start: int, count: Callable[[ChatMessage], int]) -> int:
        """:func:`_cost` of ``history[start:]``."""
        kept, n = self._kept, len(self._kept)
        newest = list(history[start:])
        if n and count == self._count and len(newest) >= n and newest[n - 1] is kept[-1] and newest[:n] == kept:
            cost = self._cost + _cost(newest[n:], count)
        else:
            cost = _cost(newest, count)
        self._kept, self._cost, self._count = newest, cost, count
        return cost


_RECENT: Slot[_Recent] = Slot("relevant_recall.recent", _Recent)
"""What the newest turns of the session's cache-stable window cost."""


class _Rankings:
    """The rankings of a session's older units for its recent requests (as the store gave them, before fusion),
    by request and by where the part ranked ends, so that the windows of one request (an agent working through
    tool calls) rank once.

    Each ranking a store gives is the best units of one whole ranking, best first, so the best ``n`` of a deeper
    one are the ranking of ``n``: a kept ranking serves every window that asks for as many units or fewer, fused
    as a ranking made for it would be. A ranking of the units before a stored offset depends only on the messages
    before it, which never change within a generation (messages are only appended; a removal makes a new
    generation, whose state starts empty), and on the store's statistics of the whole session (BM25's document
    frequencies and lengths), which change with every append. So a ranking is kept only in a session whose store
    keeps generations, only while the newest unit before its end cannot grow (a message that is neither a system
    message nor a tool result follows it), and only while the tokens appended since it was made are under
    ``1 / GROWTH`` of the part it ranks: the statistics it was ranked under are that close to the current ones.
    Kept in the session's state, at most ``LIMIT`` of them (the oldest dropped first)."""

    LIMIT = 4
    GROWTH = 16

    __slots__ = ("_kept",)

    def __init__(self) -> None:
        self._kept: dict[tuple[object, ...], _Ranked] = {}

    def had(self, request: tuple[object, ...]) -> bool:
        """Whether a ranking for ``request`` (its text, period and order) was kept, of any part."""
        return any(key[:3] == request for key in self._kept)

    def get(self, key: tuple[object, ...], depth: int, generation: str, before: int, end: int) -> _Ranked | None:
        """The rankings kept for ``key`` in ``generation``, when at least ``depth`` deep and the session, now ending
        at stored offset ``end``, has grown by less than ``1 / GROWTH`` of ``before`` since they were made."""
        ranked = self._kept.get(key)
        if ranked is None or ranked.depth < depth:
            return None
        if ranked.generation != generation or (end - ranked.made_at) * self.GROWTH >= before or end < ranked.made_at:
            return None
        return ranked

    def put(self, key: tuple[object, ...], ranked: _Ranked) -> None:
        """Keep ``ranked`` for ``key``."""
        self._kept.pop(key, None)
        if len(self._kept) >= self.LIMIT:
            del self._kept[next(iter(self._kept))]
        self._kept[key] = ranked


class _Ranked:
    """Rankings as a store gave them: the generation and stored end they were made at, their depth (the units asked
    of them), and their last fused form (and for which window)."""

    __slots__ = ("depth", "fused", "generation", "made_at", "rankings")

    def __init__(self, generation: str, made_at: int, depth: int, rankings: list[list[UnitMatch]]) -> None:
        self.generation, self.made_at, self.depth, self.rankings = generation, made_at, depth, rankings
        self.fused: tuple[tuple[int, int | None], list[UnitMatch]] | None = None

    def fuse(self, request: Request, limit: int, newest: int | None) -> list[UnitMatch]:
        """:func:`_fused` of the rankings, kept for the next window that asks the same."""
        asked = (limit, newest)
        if self.fused is None or self.fused[0] != asked:
            self.fused = (asked, _fused(self.rankings, request, limit, newest))
        return self.fused[1]


def _fused(
    rankings: Sequence[Sequence[UnitMatch]], request: Request, limit: int, newest: int | None
) -> list[UnitMatch]:
    """``rankings`` (words first, then meaning) fused as a ranking of ``limit`` units would be: the units from stored
    offset ``newest`` on (among the newest turns, when the part ranked reaches past them) left out of each, then the
    best ``limit`` of the words' and :func:`~ravi.agents.context.recall_ranking.meaning_limit` of each other's."""
    if newest is not None:
        rankings = [[u for u in r if u.offset < newest] for r in rankings]
    return fuse([r[:limit] if i == 0 else r[: meaning_limit(limit)] for i, r in enumerate(rankings)], request)


_RANKINGS: Slot[_Rankings] = Slot("relevant_recall.rankings", _Rankings)
"""The session's recent rankings."""

DEPTH_STEP = 32
"""A request ranked again for a deeper window is ranked to the next multiple of this many units."""


UNSPENT = 0.1
"""The share of the room for older units that, left unspent by a full ranking, has it ranked deeper."""
DEEPER = 4
"""How many times as many units the deeper ranking returns."""
REPEATS = 4
"""A ranking is ranked deeper only when at least one unit in this many repeated one chosen before it."""


class _Choice:
    """The units a window recalls, chosen from a ranking best first: each that fits in what is ``left`` (as it
    will be sent: labelled when ``annotate``), skipping any that repeats one already chosen, and any that holds a
    tool result without its call or a call without its results (another message was stored between them, or the
    results never were). A unit is labelled
    once it is chosen, and sent unlabelled when only that fits. What a unit costs and says is kept in ``units``
    (the session's). A choice goes on where it stopped: :meth:`take` of a ranking's next units gives what one
    call over the whole ranking would."""

    __slots__ = ("_annotate", "_counter", "_left", "_seen", "_today", "_units", "chosen")

    def __init__(self, annotate: bool, left: int, counter: TokenCounter, request: Request, units: _Units) -> None:
        self._annotate, self._left, self._counter, self._units = annotate, left, counter, units
        self._today = request.day
        self._seen = NearDuplicates()
        self.chosen: list[UnitMatch] = []

    def take(self, ranked: Iterable[UnitMatch], repeats: list[UnitMatch] | None = None) -> list[UnitMatch]:
        """The units chosen so far, after going through ``ranked`` (those that repeat a chosen one are added to
        ``repeats`` when given)."""
        counter, units, seen, chosen, today = self._counter, self._units, self._seen, self.chosen, self._today
        left = self._left
        for match in ranked:
            if left <= 0:
                break
            stored = match.messages
            facts = units.of(match)
            cost = facts.cost(counter)
            if cost > left:
                continue
            if seen.repeats(stored, facts.words()):
                if repeats is not None:
                    repeats.append(match)
                continue
            if not facts.paired():
                continue  # a result without its call, or a call without its results: a provider refuses either
            if self._annotate:
                messages = facts.label(today)
                if messages is not None:
                    labelled = facts.cost(counter, today, labelled=True)
                    if labelled <= left:
                        # the fields named: ``dataclasses.replace`` looks them up for every unit
                        match = UnitMatch(match.score, messages, match.offset, match.after_system)
                        cost = labelled
            seen.add(stored, facts.words())
            chosen.append(match)
            left -= cost
        self._left = left
        return chosen


class RelevantRecallStrategy(Strategy):
    """A token budget that spends part of itself on relevance instead of recency.

    A window that fits is returned as it is. Otherwise the newest whole units fill part of the budget (after the
    system messages; at least the latest user turn and the turns after it, when they fit), and the rest goes to
    the older units most relevant to the current request, the latest user turn. Recalled units keep their
    conversation order and their tool calls and results together, and every system message stays. The budget is
    always met when the system messages alone fit.

    How much goes to older units (``recall_share``) follows the request unless it is given: most of the budget
    for a question about the past, little for a follow-up of the last turns or while the agent works through
    tool calls (:func:`~ravi.agents.context.recall_request.recall_share`).

    Relevance is two rankings fused by reciprocal rank (:mod:`~ravi.agents.context.recall_fusion`): by words
    (BM25 over stemmed terms; a turn beside a match scores ``spread`` times the match, since in a conversation
    the answer often sits next to the turn that repeats the question's words) and by meaning (``meaning``:
    ``"auto"`` uses the offline model of ``pip install 'ravi-agents[embeddings]'`` when it is installed; an
    ``EmbeddingClient`` uses any provider's embeddings; ``None`` ranks by words only). A period the request
    names ("in March 2023") and a request about how things are now raise the matching units further. A unit
    that repeats one already recalled is skipped. With ``annotate``, a recalled turn starts with its day (when
    it is another than the request's) and its sender's name (``ChatMessage.name``).

    ``prefer="cache"`` keeps the window's prefix byte-stable for provider caches: the recalled units stay while
    the request's topic does, new turns are appended, and the newest turns' start moves only when the window
    would pass the budget, down to ``low_watermark`` of it (:mod:`~ravi.agents.context.recall_placement`).

    Where the rankings come from:

    * With no ``index`` and a session whose history provider can search, the store ranks (``HybridSearcher``:
      words and meaning in one call; the in-memory provider; else ``HistorySearcher``: words only) and returns
      the best ``search_limit`` units, as stored. The window then needs only the newest part of the session, so
      the engine reads just that (``WindowReader``), and a fresh worker's first window costs about a plain one.
    * With an ``index`` that keeps sessions in a shared store (a :class:`UnitIndex`: an :class:`EmbeddingIndex`
      on the session's vector store), the index stores what the read adds and ranks in the store; the engine
      reads only the newest part of the session, and further back only when the index ends before it.
    * Otherwise ``index`` ranks every older message of the history in the process (:class:`BM25Index` by
      default), and the engine reads the whole session. The index is kept per session and extended with the
      messages appended since the last window; so are the messages' embeddings.
    """

    def __init__(
        self,
        token_budget: int,
        *,
        recall_share: float | None = None,
        index: RecallIndex | None = None,
        meaning: EmbeddingClient | RecallIndex | UnitIndex | Literal["auto"] | None = "auto",
        prefer: Literal["relevance", "cache"] = "relevance",
        annotate: bool = True,
        spread: float = 0.5,
        low_watermark: float = 0.6,
        search_limit: int | None = None,
        counter: TokenCounter | None = None,
    ) -> None:
        check_count(token_budget, "token_budget")
        if recall_share is not None and (
            isinstance(recall_share, bool) or not isinstance(recall_share, int | float) or not 0 <= recall_share <= 1
        ):
            raise InvalidArgument(f"recall_share must be a number in [0, 1] or None, got {recall_share!r}")
        if search_limit is not None and (
            isinstance(search_limit, bool) or not isinstance(search_limit, int) or search_limit < 1
        ):
            raise InvalidArgument(f"search_limit must be an integer >= 1 or None, got {search_limit!r}")
        if prefer not in ("relevance", "cache"):
            raise InvalidArgument(f"prefer must be 'relevance' or 'cache', got {prefer!r}")
        if isinstance(spread, bool) or not isinstance(spread, int | float) or not 0 <= spread <= 1:
            raise InvalidArgument(f"spread must be in [0, 1], got {spread!r}")
        low_watermark = check_share(low_watermark, "low_watermark")
        if not isinstance(annotate, bool):
            raise InvalidArgument(f"annotate must be True or False, got {annotate!r}")
        check_counter(counter)
        self.token_budget = token_budget
        self.recall_share = recall_share
        self.own_index = index
        self.index: RecallIndex = index or BM25Index()
        self.meaning = resolve_meaning(meaning, index)
        self.prefer = prefer
        self.annotate = annotate
        self.spread = float(spread)
        self.low_watermark = low_watermark
        self.search_limit = search_limit
        self.own_counter = counter
        self._local = LocalRankings()
        # ranking again costs no provider call only with words and the offline model
        self._deepens = (
            search_limit is None
            and (index is None or isinstance(index, BM25Index))
            and (
                self.meaning is None
                or (self.meaning.index is None and isinstance(self.meaning.client, StaticEmbeddingClient))
            )
        )

    @property
    def traits(self) -> StrategyTraits:  # type: ignore[override]
        """It cuts; a windowed read starts with the most its newest turns may take of the budget (the rest of a
        window comes from the store's search). It is suffix-determined when stores rank the older
        units: the session's provider (``searches``: then only on a provider that can search,
        ``HistorySearcher``) or an ``index`` that is a :class:`UnitIndex` (which keeps units derived from the
        session, so it ``derives_records``), with a meaning ranking that needs no whole session either."""
        unit_index = conforms(self.own_index, UnitIndex)
        meaning_index = self.meaning is not None and conforms(self.meaning.index, UnitIndex)
        return StrategyTraits(
            suffix_determined=(self.own_index is None or unit_index) and pushed_down(self.meaning),
            cuts=True,
            searches=self.own_index is None,
            read_hint=int(self.token_budget * (1 - (MIN_SHARE if self.recall_share is None else self.recall_share))),
            counter=self.own_counter,
            derives_records=unit_index or meaning_index,
        )

    async def clear_records(self, agent_id: str, session_id: str) -> int:
        """Delete what its indexes keep of the session in a vector store (an :class:`EmbeddingIndex`'s
        collections, given as ``index`` or ``meaning``)."""
        indexes = [self.own_index, self.meaning.index if self.meaning is not None else None]
        removed = 0
        for index in dict.fromkeys(i for i in indexes if isinstance(i, EmbeddingIndex)):
            removed += await index.clear_records(agent_id, session_id)
        return removed

    def recalled(self, session: SessionContext) -> frozenset[str]:
        """The ids this strategy recalled in its last window of the session."""
        return frozenset(m.id for u in session.state.get(self, _RECALLED) for m in u.messages)

    async def compact(
        self, raw_history: Sequence[ChatMessage], session: SessionContext | None = None
    ) -> list[ChatMessage]:
        """The window: system messages, recalled older units, and the newest units, within the budget."""
        alone = session is None
        session = SessionContext.of(session, raw_history)
        counter = counter_of(self.own_counter, session, DEFAULT_COUNTER)
        provider = session.history
        searchable = not alone and pushed_down(self.meaning)
        if searchable and self.own_index is None and conforms(provider, HistorySearcher):
            searcher = cast(HistorySearcher, provider)
            window = await self._window(raw_history, session, counter, self._store_rank(raw_history, session, searcher))
            if window is not None:
                return window
        elif searchable and isinstance(self.own_index, UnitIndex):
            window = await self._window(
                raw_history, session, counter, self._index_rank(raw_history, session, self.own_index)
            )
            if window is not None:
                return window
        if session.partial:
            session.need_older()  # the ranking needs the whole history
            return list(raw_history)
        window = await self._window(raw_history, session, counter, self._local_rank(raw_history, session))
        assert window is not None
        return window

    def _limit(self, room: int, typical: int) -> int:
        """How many units a ranking returns: ``search_limit``, else half again as many as ``room`` tokens hold
        of units that cost ``typical`` tokens (some will not fit), between 32 and 256."""
        if self.search_limit is not None:
            return self.search_limit
        return min(256, max(32, 3 * room // max(2 * typical, 16)))

    def _store_rank(self, history: Sequence[ChatMessage], session: SessionContext, provider: HistorySearcher) -> Rank:
        async def rank(request: Request, before: int, limit: int) -> list[list[UnitMatch]] | None:
            return await store_rankings(
                provider,
                session,
                request.text,
                before,
                limit=limit,
                weight=self.spread,
                meaning=self.meaning,
            )

        return self._kept(history, session, rank)

    def _index_rank(self, history: Sequence[ChatMessage], session: SessionContext, index: UnitIndex) -> Rank:
        async def rank(request: Request, before: int, limit: int) -> list[list[UnitMatch]] | None:
            found = await index.search_units(session, query=request.text, before=before, limit=limit)
            return None if found is None else [found]

        return self._kept(history, session, rank)

    def _kept(
        self,
        history: Sequence[ChatMessage],
        session: SessionContext,
        rank: Callable[[Request, int, int], Awaitable[list[list[UnitMatch]] | None]],
    ) -> Rank:
        """The fused rankings ``rank`` gives (given the stored offset the part ranked ends at), kept in the
        session's state while they hold (:class:`_Rankings`)."""

        async def kept(request: Request, cut: int, end: int, limit: int) -> list[UnitMatch] | None:
            before = _searched_before(history, end, session)
            newest = _searched_before(history, cut, session) if end > cut else None
            depth = _depth(history, cut, end, limit)
            generation = session.generation
            stored = _stored_end(history, session) if generation and _closed(history, end) else None
            if stored is None or generation is None:
                found = await rank(request, before, depth)
                return None if found is None else _fused(found, request, limit, newest)
            rankings = session.state.get(self, _RANKINGS)
            asked = (request.text, request.period, request.order)
            key = (*asked, before)
            ranked = rankings.get(key, depth, generation, before, stored)
            if ranked is None:
                if rankings.had(asked):
                    # the request ranked again (its newest turns moved, or are now of another typical size): a
                    # little deeper, so the next windows, which ask for about as many, find it kept
                    depth = -(-depth // DEPTH_STEP) * DEPTH_STEP
                found = await rank(request, before, depth)
                if found is None:
                    return None
                ranked = _Ranked(generation, stored, depth, found)
                rankings.put(key, ranked)
            return ranked.fuse(request, limit, newest)

        return kept

    def _local_rank(self, history: Sequence[ChatMessage], session: SessionContext) -> Rank:
        async def rank(request: Request, cut: int, end: int, limit: int) -> list[UnitMatch] | None:
            rankings = await self._local.rankings(
                history,
                request.text,
                end,
                session=session,
                index=self.index,
                limit=_depth(history, cut, end, limit),
                weight=self.spread,
                meaning=self.meaning,
            )
            newest = self._local.local(history, session).before[cut] if end > cut else None
            return _fused(rankings, request, limit, newest)

        return rank

    async def _window(
        self, history: Sequence[ChatMessage], session: SessionContext, counter: TokenCounter, rank: Rank
    ) -> list[ChatMessage] | None:
        """The window with the older units ``rank`` gives; ``None`` when the ranking needs the whole history
        and the engine has it (then it is ranked in the process)."""
        partial = session.partial
        count = counter.count_message
        systems_at = system_positions(history)
        systems = [history[i] for i in systems_at]
        budget = session.budget_for(self.token_budget)
        allowance = budget - sum(map(count, systems))
        if allowance < 0:
            if partial and len(systems) < len(history):
                session.cut_made()
            return systems
        whole = session.state.get(self, _WHOLE).cut(history, count, allowance)
        if not whole:  # the whole history fits
            if partial:
                session.need_older()  # the older part may not fit
            return list(history)
        # what the window needs of the part read: from the newest message that does not fit beside the ones after
        # it (which shows the history does not fit) on; the recalled units come from a search, not the read
        needed = _newest_before(history, whole)
        request = read_request(history)
        share = self.recall_share if self.recall_share is not None else recall_share(request)
        if self.prefer == "cache":
            return await self._held(history, systems_at, session, counter, rank, request, allowance, share, needed)
        cut, recent = session.state.get(self, _NEWEST).cut_and_cost(history, count, int(allowance * (1 - share)))
        asked = _asked(history, cut, recent, count, allowance)
        if asked is not None:  # the request fits: it is sent, and older units get what is left
            cut, recent = asked
        limit = self._limit(int(allowance * share), recent // max(1, len(history) - cut) if cut < len(history) else 24)
        ranked = await self._ranked(history, session, rank, request, cut, limit, needed=needed)
        if ranked is None:
            return None if not partial else list(history)
        room = allowance - recent
        units = session.state.get(self, _UNITS)
        repeats: list[UnitMatch] = []
        choice = _Choice(self.annotate, room, counter, request, units)
        chosen = choice.take(ranked, repeats)
        if (
            self._deepens
            and len(ranked) >= limit
            and len(repeats) * REPEATS >= len(ranked)
            and _spent(chosen, counter) < room * (1 - UNSPENT)
        ):
            # the ranking ran out before the room did, on units that repeat one another: what it left would go
            # unused, so rank deeper once and choose again
            deeper = await self._ranked(history, session, rank, request, cut, limit * DEEPER, tell=False)
            if deeper:
                if deeper[: len(ranked)] == ranked:  # the same units first: the choice so far stands, it goes on
                    chosen = choice.take(deeper[len(ranked) :])
                else:
                    chosen = _Choice(self.annotate, room, counter, request, units).take(deeper)
        self._note(session, chosen)
        return [*place(_before(history, systems_at, cut), chosen), *history[cut:]]

    async def _ranked(
        self,
        history: Sequence[ChatMessage],
        session: SessionContext,
        rank: Rank,
        request: Request,
        cut: int,
        limit: int,
        *,
        tell: bool = True,
        needed: str | None = None,
    ) -> list[UnitMatch] | None:
        """The ranked older units (before ``cut``), with the engine told whether the part read sufficed
        (``tell=False``: not yet, the window may still be made otherwise; ``needed``: the oldest message of the
        part read the window needs); ``None`` when older messages are needed.

        For a request at work (tool calls and results after it), the part ranked ends at the request, not at the
        cut, and the units between the two (among the newest turns) are left out of a ranking deep enough that
        they take no older unit's place: the cut moves as the agent works, the request does not, so one ranking
        serves its windows (:class:`_Rankings`). The one difference from a ranking that ends at the cut: the
        older unit right before the cut may score as the neighbour of a match among the newest turns."""
        partial = session.partial
        if partial and (not request.text or all(m.role == "system" for m in history[:cut])):
            if tell:
                session.need_older()  # the request, or the cut, lies further back
            return None
        ranked: list[UnitMatch] = []
        if request.period is not None and self.search_limit is None:
            # a period's units share few words with the request: rank enough of them for the period to pick from
            limit = max(limit, PERIOD_LIMIT)
        if request.text and any(m.role != "system" for m in history[:cut]):
            found = await rank(request, cut, _ranked_end(history, cut, request), limit)
            if found is None:
                if partial and tell:
                    session.need_older()  # the index ends before the part read
                return None
            ranked = found
        if partial and tell:
            session.cut_made(needed)
        return ranked

    def _choose(
        self, ranked: Sequence[UnitMatch], left: int, counter: TokenCounter, request: Request, units: _Units
    ) -> list[UnitMatch]:
        """The best ranked units that fit in ``left`` tokens (:class:`_Choice`)."""
        return _Choice(self.annotate, left, counter, request, units).take(ranked)

    async def _held(
        self,
        history: Sequence[ChatMessage],
        systems_at: Sequence[int],
        session: SessionContext,
        counter: TokenCounter,
        rank: Rank,
        request: Request,
        allowance: int,
        share: float,
        needed: str | None,
    ) -> list[ChatMessage] | None:
        """The cache-stable window: the held recalled units and the held start of the newest turns, with the
        recalled units chosen again only when the topic changed, and the start moved (down to ``low_watermark``
        of the budget) only when the window would pass the budget."""
        partial = session.partial
        count = counter.count_message
        held = session.state.get(self, _HELD)
        start = _held_start(history, held, session)
        if start is None and held.start is not None and partial:
            session.need_older()  # the held start is older than the part read
            return list(history)
        recent = 0
        if start is not None:
            recent = session.state.get(self, _RECENT).cost(history, start, count)
            if _asked(history, start, recent, count, allowance) is not None:
                start = None  # the held start leaves out a request that now fits: the window is made again
        if start is not None:
            units = held.units
            if request.text != held.request:
                limit = self._limit(int(allowance * share), _typical(history, start, count))
                ranked = await self._ranked(history, session, rank, request, start, limit, tell=False)
                if ranked is None:
                    if partial:
                        session.need_older()  # the ranking needs more than the part read
                        return list(history)
                    return None
                if not held.keeps(request.text, ranked):
                    room = min(allowance - recent, int(allowance * share))
                    units = self._choose(ranked, room, counter, request, session.state.get(self, _UNITS))
            if recent + _cost([m for u in units for m in u.messages], count) <= allowance:
                if partial:
                    session.cut_made(needed)  # the held start decides the window, whatever is older
                held.request, held.units = request.text, list(units)
                self._note(session, units)
                return [*place(_before(history, systems_at, start), units), *history[start:]]
        # crossed (or first): the relevance window at the low watermark, whose start and units are then held
        low = int(allowance * self.low_watermark)
        cut = newest_cut(history, count, int(low * (1 - share)))
        asked = _asked(history, cut, _cost(history[cut:], count), count, allowance)
        if asked is not None:  # the request fits: it is sent, and older units get what is left
            cut = asked[0]
        limit = self._limit(int(low * share), _typical(history, cut, count))
        ranked = await self._ranked(history, session, rank, request, cut, limit, needed=needed)
        if ranked is None:
            return None if not partial else list(history)
        units = self._choose(
            ranked, low - _cost(history[cut:], count), counter, request, session.state.get(self, _UNITS)
        )
        first = next((k for k in range(cut, len(history)) if history[k].role != "system"), None)
        if first is not None:
            held.start, held.after, held.offset = history[first].id, False, _offset_of(history, first, session)
        elif history:  # no newest turn fits: they start with the next message to come
            last = len(history) - 1
            held.start, held.after, held.offset = history[last].id, True, _offset_of(history, last, session)
        held.request, held.units = request.text, list(units)
        self._note(session, units)
        return [*place(_before(history, systems_at, cut), units), *history[cut:]]

    def _note(self, session: SessionContext, chosen: Sequence[UnitMatch]) -> None:
        session.state.put(self, _RECALLED, list(chosen))

    def __repr__(self) -> str:
        share = "adaptive" if self.recall_share is None else self.recall_share
        if self.meaning is None:  # words only
            meaning = "None"
        elif self.meaning.client is not None:
            meaning = repr(self.meaning.model)  # the offline model's name, when meaning="auto" found it
        else:
            meaning = type(self.meaning.index).__name__
        return (
            f"RelevantRecallStrategy(token_budget={self.token_budget}, recall_share={share}, prefer={self.prefer!r}, "
            f"meaning={meaning})"
        )


def _cost(messages: Sequence[ChatMessage], count: Callable[[ChatMessage], int]) -> int:
    """What ``messages`` cost in the window, system messages aside (they are kept anyway)."""
    return sum(count(m) for m in messages if m.role != "system")


def _asked(
    history: Sequence[ChatMessage], cut: int, recent: int, count: Callable[[ChatMessage], int], allowance: int
) -> tuple[int, int] | None:
    """Where the latest user turn is and what it and the messages after it cost (system messages aside), when it
    lies before ``cut`` (the messages from ``cut`` on cost ``recent``) and they fit in ``allowance``; else
    ``None``."""
    for k in range(len(history) - 1, cut - 1, -1):
        if history[k].role == "user":
            return None
    spent = recent
    for k in range(cut - 1, -1, -1):
        message = history[k]
        if message.role == "system":
            continue
        spent += count(message)
        if spent > allowance:
            return None
        if message.role == "user":
            return k, spent
    return None


def _newest_before(history: Sequence[ChatMessage], stop: int) -> str | None:
    """The id of the newest message before ``stop`` that is not a system message, or ``None``."""
    return next((history[k].id for k in range(stop - 1, -1, -1) if history[k].role != "system"), None)


def _before(history: Sequence[ChatMessage], systems_at: Sequence[int], cut: int) -> list[ChatMessage]:
    """The system messages of ``history`` before ``cut`` (``systems_at``: the positions of its system messages)."""
    return [history[i] for i in systems_at if i < cut]


def _spent(chosen: Sequence[UnitMatch], counter: TokenCounter) -> int:
    """What the chosen units cost, as they will be sent."""
    return sum(_cost(u.messages, counter.count_message) for u in chosen)


def _typical(history: Sequence[ChatMessage], cut: int, count: Callable[[ChatMessage], int]) -> int:
    """What a message of the newest turns (from ``cut`` on, system messages aside) costs on average: the size
    the session's units have lately."""
    costs = [count(m) for m in history[cut:] if m.role != "system"]
    return sum(costs) // len(costs) if costs else 24


_UNPLACED = 2**62
"""What :func:`_offset_of` gives when the read places no message from the cut on: past every stored message."""


def _offset_of(history: Sequence[ChatMessage], cut: int, session: SessionContext) -> int:
    """The offset (stored tokens before it in the session) of the first message from ``cut`` on that the read
    places, or past every stored message when none is placed."""
    if session.agent_id or session.session_id or session.source:
        found = next((o for m in history[cut:] if (o := session.offset(m.id)) is not None), None)
        return _UNPLACED if found is None else found
    return sum(stored_tokens(m) for m in history[:cut])  # a standalone call: the history is the session


def _searched_before(history: Sequence[ChatMessage], cut: int, session: SessionContext) -> int:
    """Where a store search for the units before ``cut`` stops: :func:`_offset_of`, or, when no message from
    ``cut`` on is placed, the end of the part read (what another writer stored after the read is newer than the
    window's request, and may be one of its newest turns by the next window)."""
    offset = _offset_of(history, cut, session)
    if offset != _UNPLACED:
        return offset
    for k in range(cut - 1, -1, -1):
        message = history[k]
        if (placed := session.offset(message.id)) is not None:
            return placed + stored_tokens(message)
    before = session.source_before  # nothing placed: the read held no stored message after its head
    return offset if before is None else before


def _ranked_end(history: Sequence[ChatMessage], cut: int, request: Request) -> int:
    """Where the part a ranking covers ends: at the request (the latest user turn) when it is at work and lies from
    ``cut`` on, else at ``cut``."""
    if request.working:
        for k in range(len(history) - 1, cut - 1, -1):
            if history[k].role == "user":
                return k
    return cut


def _depth(history: Sequence[ChatMessage], cut: int, end: int, limit: int) -> int:
    """How many units a ranking of the part before ``end`` gives, so that ``limit`` of them lie before ``cut`` in
    each ranking (words, and meaning's :func:`~ravi.agents.context.recall_ranking.meaning_limit` of it): room for
    every unit between the two, at most one per message that is not a system message."""
    between = sum(1 for k in range(cut, end) if history[k].role != "system")
    return limit + 2 * between


def _closed(history: Sequence[ChatMessage], cut: int) -> bool:
    """Whether the units before ``cut`` can no longer grow: the first message from ``cut`` on that is not a system
    message is not a tool result (which joins the tool calls before it)."""
    first = next((m for m in history[cut:] if m.role != "system"), None)
    return first is not None and first.role != "tool"


def _stored_end(history: Sequence[ChatMessage], session: SessionContext) -> int | None:
    """Where the session's stored messages end (in stored tokens), as the read places its newest stored message;
    ``None`` when it places none."""
    for k in range(len(history) - 1, -1, -1):
        message = history[k]
        if (placed := session.offset(message.id)) is not None:
            return placed + stored_tokens(message)
    return None


def _held_start(history: Sequence[ChatMessage], held: Held, session: SessionContext) -> int | None:
    """Where a cache-stable window's newest turns start in ``history``, or ``None`` when that is not known (not
    in the part read, or something before it was removed, which the start's offset shows) or no longer a unit's
    start (the results of a call it followed arrived)."""
    if held.start is None:
        return None
    at = _position(history, held.start)
    if at is None or _offset_of(history, at, session) != held.offset:
        return None
    start = at + 1 if held.after else at
    first = next((k for k in range(start, len(history)) if history[k].role != "system"), None)
    if first is not None and history[first].role == "tool":
        return None
    return start


def _position(history: Sequence[ChatMessage], message_id: str) -> int | None:
    """Where the message with ``message_id`` is in ``history`` (searched from the newest end)."""
    for k in range(len(history) - 1, -1, -1):
        if history[k].id == message_id:
            return k
    return None


__all__ = ["RelevantRecallStrategy"]
