"""``RelevantRecallStrategy``: when old turns must go, keep the ones that matter for the current request."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from ravi.agents.context.compaction._keep import newest_cut, system_messages
from ravi.agents.context.compaction.token_budget import fits
from ravi.agents.context.recall_index import BM25Index, RecallIndex, UnitIndex
from ravi.agents.context.session import counter_of
from ravi.agents.context.units import units
from ravi.agents.tokens import DEFAULT_COUNTER
from ravi.kernel.agent import SessionContext, Slot, Strategy, StrategyTraits
from ravi.kernel.errors import InvalidArgument
from ravi.kernel.llm import TokenCounter
from ravi.kernel.messages import ChatMessage
from ravi.kernel.search import UnitMatch
from ravi.kernel.storage import HistorySearcher

_RECALLED: Slot[list[frozenset[str]]] = Slot("relevant_recall.recalled", lambda: [frozenset()])
"""The ids recalled in the session's last window."""


class RelevantRecallStrategy(Strategy):
    """A token budget that spends part of itself on relevance instead of recency.

    A window that fits is returned as it is. Otherwise the newest whole units fill ``1 - recall_share`` of the
    budget (after the system messages), and the rest goes to the older units most relevant to the current
    request, the latest user turn. Recalled units keep their conversation order and their tool calls and
    results together, and every system message stays. The budget is always met when the system messages alone
    fit.

    Where the older units come from:

    * With no ``index`` and a session whose history provider can search (``HistorySearcher``: the in-memory
      provider, and Postgres with its full-text index), the store ranks them and returns the best
      ``search_limit`` units, as stored. The window then needs only the newest part of the session, so the
      engine reads just that (``WindowReader``), and a fresh worker's first window costs about a plain one.
    * With an ``index`` that keeps sessions in a shared store (a :class:`UnitIndex`: an :class:`EmbeddingIndex`
      on the session's vector store), the index stores what the read adds and ranks in the store; the engine
      reads only the newest part of the session, and further back only when the index ends before it.
    * Otherwise ``index`` ranks every older message of the history in the process (:class:`BM25Index` by
      default), and the engine reads the whole session. The index is kept per session and extended with the
      messages appended since the last window.
    """

    def __init__(
        self,
        token_budget: int,
        *,
        recall_share: float = 0.4,
        index: RecallIndex | None = None,
        search_limit: int = 64,
        counter: TokenCounter | None = None,
    ) -> None:
        if token_budget < 0:
            raise InvalidArgument(f"token_budget must be >= 0, got {token_budget}")
        if not 0 <= recall_share <= 1:
            raise InvalidArgument(f"recall_share must be in [0, 1], got {recall_share}")
        if isinstance(search_limit, bool) or not isinstance(search_limit, int) or search_limit < 1:
            raise InvalidArgument(f"search_limit must be an integer >= 1, got {search_limit!r}")
        self.token_budget = token_budget
        self.recall_share = recall_share
        self.own_index = index
        self.index: RecallIndex = index or BM25Index()
        self.search_limit = search_limit
        self.own_counter = counter

    @property
    def traits(self) -> StrategyTraits:  # type: ignore[override]
        """It cuts; a windowed read starts with its budget. It is suffix-determined when a store ranks the older
        units: the session's provider (``searches``: then only on a provider that can search,
        ``HistorySearcher``) or an ``index`` that is a :class:`UnitIndex` (which keeps units derived from the
        session, so it ``derives_records``)."""
        unit_index = isinstance(self.own_index, UnitIndex)
        return StrategyTraits(
            suffix_determined=self.own_index is None or unit_index,
            cuts=True,
            searches=self.own_index is None,
            read_hint=self.token_budget,
            counter=self.own_counter,
            derives_records=unit_index,
        )

    def recalled(self, session: SessionContext) -> frozenset[str]:
        """The ids this strategy recalled in its last window of the session."""
        return session.state.get(self, _RECALLED)[0]

    async def compact(self, history: Sequence[ChatMessage], session: SessionContext | None = None) -> list[ChatMessage]:
        """The window: system messages, recalled older units, and the newest units, within the budget."""
        alone = session is None
        session = session or SessionContext.standalone()
        counter = counter_of(self.own_counter, session, DEFAULT_COUNTER)
        provider = session.history
        if not alone and self.own_index is None and isinstance(provider, HistorySearcher):
            return await self._searched(
                history, session, _provider_search(provider, session, self.search_limit), counter
            )
        if not alone and isinstance(self.own_index, UnitIndex):
            index, scope, limit = self.own_index, session, self.search_limit

            async def search(query: str, before: int) -> list[UnitMatch] | None:
                return await index.search_units(scope, query=query, before=before, limit=limit)

            window = await self._searched(history, session, search, counter)
            if window is not None:
                return window
        if session.partial:
            session.need_older()  # the index ranks the whole history
            return list(history)
        budget = session.budget_for(self.token_budget)
        if fits(history, budget, counter):
            return list(history)
        count = counter.count_message
        systems = system_messages(history)
        allowance = budget - sum(map(count, systems))
        if allowance < 0:
            return systems
        recent_allowance = int(allowance * (1 - self.recall_share))
        cut = newest_cut(history, count, recent_allowance)
        spent = sum(count(m) for m in history[cut:] if m.role != "system")
        query = _query(history)
        chosen: set[int] = set()
        if query and cut > 0:
            scores = await self.index.scores(history, query, session)
            ranked = []
            for start, end in units(history, 0, cut):
                score = max((scores.get(i, 0.0) for i in range(start, end)), default=0.0)
                if score > 0:
                    ranked.append((score, start, end))
            left = allowance - spent
            for _, start, end in sorted(ranked, key=lambda r: (-r[0], -r[1])):
                cost = sum(count(history[i]) for i in range(start, end) if history[i].role != "system")
                if cost <= left:
                    chosen.update(range(start, end))
                    left -= cost
        window = [m for i, m in enumerate(history[:cut]) if m.role == "system" or i in chosen]
        window.extend(history[cut:])
        session.state.put(self, _RECALLED, [frozenset(history[i].id for i in chosen)])
        return window

    async def _searched(
        self,
        history: Sequence[ChatMessage],
        session: SessionContext,
        search: Callable[[str, int], Awaitable[list[UnitMatch] | None]],
        counter: TokenCounter,
    ) -> list[ChatMessage] | None:
        """The window with the older units a store ranks (``search(query, before)``: as stored, fetched by the
        search, never by reading the session). ``None`` when the search needs the whole history and has it."""
        partial = session.partial
        count = counter.count_message
        systems = system_messages(history)
        budget = session.budget_for(self.token_budget)
        allowance = budget - sum(map(count, systems))
        if allowance < 0:
            if partial and len(systems) < len(history):
                session.cut_made()
            return systems
        if fits(history, budget, counter):
            if partial:
                session.need_older()  # the older part may not fit
            return list(history)
        cut = newest_cut(history, count, int(allowance * (1 - self.recall_share)))
        query = _query(history)
        if partial and (not query or all(m.role == "system" for m in history[:cut])):
            session.need_older()  # the request, or the cut, lies further back
            return list(history)
        older = [m for m in history[:cut] if m.role == "system"]
        matches: list[UnitMatch] = []
        if query:
            before = next((o for m in history[cut:] if (o := session.offset(m.id)) is not None), None)
            if before is None:  # the cut is past every stored message
                before = 2**62
            found = await search(query, before)
            if found is None:
                if not partial:
                    return None
                session.need_older()  # the index ends before the part read
                return list(history)
            matches = found
        if partial:
            session.cut_made()
        session.state.put(self, _RECALLED, [frozenset[str]()])
        left = allowance - sum(count(m) for m in history[cut:] if m.role != "system")
        chosen = []
        for match in matches:
            cost = sum(count(m) for m in match.messages if m.role != "system")
            if cost <= left:
                chosen.append(match)
                left -= cost
        if not chosen:
            return [*older, *history[cut:]]
        session.state.put(self, _RECALLED, [frozenset(m.id for match in chosen for m in match.messages)])
        return [*_placed(older, chosen), *history[cut:]]

    def __repr__(self) -> str:
        return f"RelevantRecallStrategy(token_budget={self.token_budget}, recall_share={self.recall_share})"


def _provider_search(
    provider: HistorySearcher, session: SessionContext, limit: int
) -> Callable[[str, int], Awaitable[list[UnitMatch] | None]]:
    """A search of the session in its provider."""

    async def search(query: str, before: int) -> list[UnitMatch] | None:
        return await provider.search_units(
            session.agent_id, session_id=session.session_id, query=query, before=before, limit=limit
        )

    return search


def _query(history: Sequence[ChatMessage]) -> str:
    """The current request: the text of the latest user turn."""
    return next((m.text for m in reversed(history) if m.role == "user" and m.text), "")


def _placed(systems: list[ChatMessage], chosen: list[UnitMatch]) -> list[ChatMessage]:
    """``systems`` with the recalled units in conversation order: each right after the system message it
    follows in the session (by offset among those that follow the same one), and any system message of a unit
    given once."""
    by_anchor: dict[str | None, list[UnitMatch]] = {}
    for match in sorted(chosen, key=lambda m: m.offset):
        by_anchor.setdefault(match.after_system, []).append(match)
    known = {m.id for m in systems}
    out: list[ChatMessage] = []
    given: set[str] = set()

    def place(matches: list[UnitMatch]) -> None:
        for match in matches:
            for m in match.messages:
                if m.id not in given:
                    given.add(m.id)
                    out.append(m)

    place(sorted((m for a, ms in by_anchor.items() if a is None or a not in known for m in ms), key=lambda m: m.offset))
    for system in systems:
        if system.id not in given:
            given.add(system.id)
            out.append(system)
        place(by_anchor.get(system.id, []))
    return out


__all__ = ["RelevantRecallStrategy"]
