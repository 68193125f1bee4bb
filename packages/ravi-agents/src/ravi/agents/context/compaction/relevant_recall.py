"""``RelevantRecallStrategy``: when old turns must go, keep the ones that matter for the current request."""

from __future__ import annotations

from collections.abc import Sequence

from ravi.agents.context.compaction._keep import newest_cut, system_messages
from ravi.agents.context.compaction.token_budget import fits
from ravi.agents.context.recall_index import BM25Index, RecallIndex
from ravi.agents.context.session import accepts_session, counter_of, own_session
from ravi.agents.context.units import units
from ravi.agents.tokens import DEFAULT_COUNTER
from ravi.kernel.agent import SessionContext
from ravi.kernel.errors import InvalidArgument
from ravi.kernel.llm import TokenCounter
from ravi.kernel.messages import ChatMessage


class RelevantRecallStrategy:
    """A token budget that spends part of itself on relevance instead of recency.

    A window that fits is returned as it is. Otherwise the newest whole units fill ``1 - recall_share`` of the
    budget (after the system messages), and the rest goes to the older units most relevant to the current
    request, the latest user turn, as ranked by ``index`` (:class:`BM25Index` by default, or an
    :class:`EmbeddingIndex`). Recalled units keep their conversation order and their tool calls and results
    together, and every system message stays. The budget is always met when the system messages alone fit.

    Cost: the newest end is read as for any budget strategy; the index grows with the session, indexing only
    the messages appended since the previous window.
    """

    def __init__(
        self,
        token_budget: int,
        *,
        recall_share: float = 0.4,
        index: RecallIndex | None = None,
        counter: TokenCounter | None = None,
    ) -> None:
        if token_budget < 0:
            raise InvalidArgument(f"token_budget must be >= 0, got {token_budget}")
        if not 0 <= recall_share <= 1:
            raise InvalidArgument(f"recall_share must be in [0, 1], got {recall_share}")
        self.token_budget = token_budget
        self.recall_share = recall_share
        self.index: RecallIndex = index or BM25Index()
        self.own_counter = counter

    def recalled(self, history: Sequence[ChatMessage], session: SessionContext | None = None) -> frozenset[str]:
        """The ids this strategy recalled in its last window of the session."""
        chosen: frozenset[str] = own_session(self, session).state.get((self, "recalled"), frozenset())
        return chosen

    async def compact(self, history: Sequence[ChatMessage], session: SessionContext | None = None) -> list[ChatMessage]:
        """The window: system messages, recalled older units, and the newest units, within the budget."""
        counter = counter_of(self.own_counter, session, DEFAULT_COUNTER)
        if fits(history, self.token_budget, counter):
            return list(history)
        count = counter.count_message
        systems = system_messages(history)
        allowance = self.token_budget - sum(map(count, systems))
        if allowance < 0:
            return systems
        recent_allowance = int(allowance * (1 - self.recall_share))
        cut = newest_cut(history, count, recent_allowance)
        spent = sum(count(m) for m in history[cut:] if m.role != "system")
        query = next((m.text for m in reversed(history) if m.role == "user" and m.text), "")
        chosen: set[int] = set()
        if query and cut > 0:
            if accepts_session(self.index.scores):
                scores = await self.index.scores(history, query, session=own_session(self, session))
            else:
                scores = await self.index.scores(history, query)
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
        own_session(self, session).state[(self, "recalled")] = frozenset(history[i].id for i in chosen)
        return window

    def __repr__(self) -> str:
        return f"RelevantRecallStrategy(token_budget={self.token_budget}, recall_share={self.recall_share})"


__all__ = ["RelevantRecallStrategy"]
