"""A BM25 index that pauses in the middle of a window's ranking, to let another process act there (clear the
session, write it again) after the window read the session and before it keeps what it found. Used by the
package's tests and the integration tests alike (``tests-integration`` is on pytest's ``pythonpath``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from ravi.agents.context.recall_index import BM25Index
from ravi.kernel.agent import SessionContext
from ravi.kernel.messages import ChatMessage


class PausingBM25(BM25Index):
    """BM25; the first ranking after ``during`` is set runs it (once) before it scores: after the window read the
    session, before it keeps what it found."""

    during: Callable[[], Awaitable[None]] | None = None

    async def scores(
        self, history: Sequence[ChatMessage], query: str, session: SessionContext | None = None
    ) -> dict[int, float]:
        during, self.during = self.during, None
        if during is not None:
            await during()
        return await super().scores(history, query, session)
