"""``HybridHistoryProvider``: a fast hot tier for recent turns over a durable cold tier for everything."""

from __future__ import annotations

from collections.abc import Sequence

from ravi.agents.context.units import drop_orphan_results
from ravi.kernel.closing import Closeable
from ravi.kernel.errors import ConfigurationError
from ravi.kernel.messages import ChatMessage
from ravi.kernel.storage import HistoryProvider
from ravi.kernel.values import check_page


class HybridHistoryProvider(Closeable):
    """Writes go to both tiers; reads take the newest ``recent_n`` messages from ``hot`` and fill up to
    ``max_total`` with older ones from ``cold``, de-duplicated by message id.

    Reads are a bounded view (at most ``max_total`` messages), which is what a window needs; ``cold`` holds the
    full transcript. Results whose call fell outside the view are left out, so the view never starts with an
    orphaned tool result.
    """

    def __init__(self, hot: HistoryProvider, cold: HistoryProvider, *, recent_n: int, max_total: int) -> None:
        if recent_n < 1 or max_total < 1:
            raise ConfigurationError(f"recent_n and max_total must be >= 1, got {recent_n} and {max_total}")
        if recent_n > max_total:
            raise ConfigurationError(f"recent_n ({recent_n}) must not exceed max_total ({max_total})")
        self.hot, self.cold = hot, cold
        self.recent_n, self.max_total = recent_n, max_total

    async def append(self, agent_id: str, message: ChatMessage, *, session_id: str, run_id: str = "") -> None:
        """Write to the cold tier, then the hot one."""
        await self.append_many(agent_id, [message], session_id=session_id, run_id=run_id)

    async def append_many(
        self, agent_id: str, messages: Sequence[ChatMessage], *, session_id: str, run_id: str = ""
    ) -> None:
        """Write to the cold tier (durable first), then the hot one."""
        await self.cold.append_many(agent_id, messages, session_id=session_id, run_id=run_id)
        await self.hot.append_many(agent_id, messages, session_id=session_id, run_id=run_id)

    async def get_messages(
        self, agent_id: str, *, session_id: str, limit: int | None = None, offset: int = 0
    ) -> list[ChatMessage]:
        """The merged view, oldest first, paged by ``offset`` and ``limit``."""
        check_page(limit, offset)
        hot_count = await self.hot.count_messages(agent_id, session_id=session_id)
        recent = await self.hot.get_messages(agent_id, session_id=session_id, offset=max(0, hot_count - self.recent_n))
        need = self.max_total - len(recent)
        backfill: list[ChatMessage] = []
        if need > 0:
            cold_count = await self.cold.count_messages(agent_id, session_id=session_id)
            start = max(0, cold_count - need - len(recent))
            seen = {m.id for m in recent}
            older = await self.cold.get_messages(agent_id, session_id=session_id, offset=start)
            backfill = [m for m in older if m.id not in seen][-need:]
        view = drop_orphan_results(backfill + recent)
        end = None if limit is None else offset + limit
        return view[offset:end]

    async def clear(self, agent_id: str, *, session_id: str) -> int:
        """Clear both tiers; returns what the cold tier held."""
        await self.hot.clear(agent_id, session_id=session_id)
        return await self.cold.clear(agent_id, session_id=session_id)

    async def clear_run(self, agent_id: str, *, session_id: str, run_id: str) -> int:
        """Clear the run in both tiers; returns what the cold tier removed."""
        await self.hot.clear_run(agent_id, session_id=session_id, run_id=run_id)
        return await self.cold.clear_run(agent_id, session_id=session_id, run_id=run_id)

    async def list_sessions(self, agent_id: str, *, limit: int = 100) -> list[str]:
        """The cold tier's sessions (it holds every one), when it can list them."""
        lister = getattr(self.cold, "list_sessions", None)
        if lister is None:
            raise NotImplementedError(f"{type(self.cold).__name__} cannot list sessions")
        return list(await lister(agent_id, limit=limit))

    async def count_messages(self, agent_id: str, *, session_id: str) -> int:
        """Messages in the cold tier (the full transcript)."""
        return await self.cold.count_messages(agent_id, session_id=session_id)


__all__ = ["HybridHistoryProvider"]
