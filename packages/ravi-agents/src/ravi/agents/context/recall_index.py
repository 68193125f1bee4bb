"""Session indexes for relevant recall: which older messages matter for the current request.

An index is kept per session and grows with it: each window indexes only the messages appended since the
previous one (a history that changed in the middle, a cleared run, is indexed again from scratch).
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from ravi.agents.context.memo import PrefixMemo
from ravi.agents.context.session import own_session
from ravi.kernel.agent import SessionContext
from ravi.kernel.llm import EmbeddingClient
from ravi.kernel.messages import ChatMessage
from ravi.kernel.search import STOPWORDS, Bm25, fold, message_text, terms
from ravi.kernel.storage import Document, VectorStore


@runtime_checkable
class RecallIndex(Protocol):
    """Scores the messages of a history against a query."""

    async def scores(
        self, history: Sequence[ChatMessage], query: str, session: SessionContext | None = None
    ) -> dict[int, float]:
        """Message position to relevance (positive; absent means irrelevant), for the whole ``history``.

        What the index keeps about a session lives in ``session``'s state (see ``SessionContext``)."""
        ...


class BM25Index:
    """Okapi BM25 over the messages of each session (``k1``, ``b`` as usual): lexical, fast, no model.

    Example:
        >>> index = BM25Index()
    """

    def __init__(self, *, k1: float = 1.2, b: float = 0.75) -> None:
        self.k1, self.b = k1, b

    def _index(self, history: Sequence[ChatMessage], session: SessionContext | None) -> Bm25:
        memo: PrefixMemo[Bm25] = own_session(self, session).state_for(self, PrefixMemo)
        hit = memo.lookup(history)
        state = hit[1] if hit is not None else Bm25(self.k1, self.b)
        state.extend(history)
        memo.store(history, state)
        return state

    async def scores(
        self, history: Sequence[ChatMessage], query: str, session: SessionContext | None = None
    ) -> dict[int, float]:
        """BM25 score of each message that shares a term with ``query``."""
        return self._index(history, session).scores(query)


@dataclass
class _Indexed:
    size: int = 0  # messages of the session already embedded and stored


class EmbeddingIndex:
    """Relevance by meaning: message embeddings from any :class:`EmbeddingClient`, kept in a
    :class:`~ravi.kernel.storage.VectorStore` (the session's store, or one in memory by default).

    Each session gets its own collection (``collection_prefix`` plus a digest of ``(agent_id, session_id)``);
    each message is embedded and stored once, as the session grows (messages without text are skipped), and a
    query asks the store for the ``limit`` closest. Pair it with a real embedding model when the request and the answer
    share meaning but not words.

    Example:
        >>> index = EmbeddingIndex(HashingEmbeddingClient(), PgVectorStore(dsn))  # doctest: +SKIP
    """

    def __init__(
        self,
        embedding_client: EmbeddingClient,
        vector_store: VectorStore | None = None,
        *,
        collection_prefix: str = "ravi-recall",
        limit: int = 50,
        min_score: float = 0.1,
        sessions: int = 32,
    ) -> None:
        # A store of its own is only a cache: it keeps the collections of the last ``sessions`` sessions.
        self._owned = vector_store is None
        self._recent: OrderedDict[str, None] = OrderedDict()
        if vector_store is None:
            from ravi.agents.storage.vector import InMemoryVectorStore

            vector_store = InMemoryVectorStore()
        self.client = embedding_client
        self.store = vector_store
        self.collection_prefix = collection_prefix
        self.limit = limit
        self.min_score = min_score
        self._sessions = sessions

    def _collection(self, session: SessionContext) -> str:
        digest = hashlib.sha256(f"{session.agent_id}\x00{session.session_id}".encode()).hexdigest()[:24]
        return f"{self.collection_prefix}-{digest}"

    async def scores(
        self, history: Sequence[ChatMessage], query: str, session: SessionContext | None = None
    ) -> dict[int, float]:
        """Cosine similarity to ``query`` of the ``limit`` closest messages (those above ``min_score``)."""
        if not history:
            return {}
        scope = own_session(self, session)
        collection = self._collection(scope)
        memo: PrefixMemo[_Indexed] = scope.state_for(self, PrefixMemo)
        hit = memo.lookup(history)
        if hit is None:  # a new session, or one that changed before its end: index it again from scratch
            await self.store.delete_collection(collection)
            state = _Indexed()
        else:
            state = hit[1]
        new = [(i, message_text(history[i])) for i in range(state.size, len(history))]
        new = [(i, text) for i, text in new if text.strip()]
        if new:
            vectors = await self.client.embed([text for _, text in new])
            await self.store.upsert(
                [
                    Document(id=history[i].id, embedding=tuple(v), metadata={"position": i})
                    for (i, _), v in zip(new, vectors, strict=True)
                ],
                collection=collection,
            )
        state.size = len(history)
        memo.store(history, state)
        self._recent[collection] = None
        self._recent.move_to_end(collection)
        while self._owned and len(self._recent) > self._sessions:
            old, _ = self._recent.popitem(last=False)
            await self.store.delete_collection(old)
        [q] = await self.client.embed([query])
        hits = await self.store.search(q, collection=collection, limit=self.limit)
        return {int(h.metadata["position"]): h.score for h in hits if h.score > self.min_score}


__all__ = ["STOPWORDS", "BM25Index", "EmbeddingIndex", "RecallIndex", "fold", "message_text", "terms"]
