"""``InMemoryLongTermMemory``: facts per ``(agent_id, namespace)``, found again by embedding similarity."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np

from ravi.agents.storage._clock import Clock, system_clock
from ravi.agents.storage.embeddings import embedded
from ravi.agents.storage.options import InMemoryLongTermOptions
from ravi.kernel.closing import Closeable
from ravi.kernel.embeddings import HashingEmbeddingClient, check_embedding_client, check_measurable
from ravi.kernel.llm import EmbeddingClient
from ravi.kernel.storage import Memory, check_forget
from ravi.kernel.values import check_count, check_memory, check_scope


class InMemoryLongTermMemory(Closeable):
    """Long-term memory in process memory, searched by cosine similarity of embeddings.

    The embeddings come from ``embedding_client`` (by default :class:`HashingEmbeddingClient`, offline). A memory
    saved with a ``ttl`` is never returned once it has expired. The embedding is awaited before the store's
    ``threading.Lock`` is taken, and nothing awaits holding it, so tasks of any event loop, in any thread, may share
    the store.
    """

    Options = InMemoryLongTermOptions
    """The store's options model, for configuration."""

    def __init__(self, *, embedding_client: EmbeddingClient | None = None, clock: Clock = system_clock) -> None:
        if embedding_client is not None:
            check_embedding_client(embedding_client)
        self._embedder = embedding_client or HashingEmbeddingClient()
        self._clock = clock
        self._spaces: dict[tuple[str, str], dict[str, tuple[Memory, np.ndarray]]] = {}
        self._lock = threading.Lock()

    def _now(self) -> datetime:
        return datetime.fromtimestamp(self._clock(), UTC)

    def _alive(self, memory: Memory, now: datetime) -> bool:
        return memory.expires_at is None or memory.expires_at > now

    async def save(
        self,
        agent_id: str,
        content: str,
        namespace: str = "default",
        ttl: timedelta | float | None = None,
        *,
        metadata: Mapping[str, Any] | None = None,
    ) -> str:
        """Store a memory; returns its id."""
        seconds, meta = check_memory(agent_id, content, namespace, ttl, metadata)
        [array] = embedded(await self._embedder.embed([content]), 1, self._embedder.dimension)
        check_measurable(array.tolist(), "the embedding of the memory")
        norm = float(np.linalg.norm(array))
        now = self._now()
        memory = Memory(
            id=uuid.uuid4().hex,
            agent_id=agent_id,
            namespace=namespace,
            content=content,
            metadata=meta,
            created_at=now,
            expires_at=None if seconds is None else now + timedelta(seconds=seconds),
        )
        with self._lock:
            self._spaces.setdefault((agent_id, namespace), {})[memory.id] = (memory, array / (norm or 1.0))
        return memory.id

    async def search(self, agent_id: str, query: str, namespace: str = "default", limit: int = 5) -> list[Memory]:
        """The closest live memories, best first, each with its cosine ``score``."""
        check_scope(agent_id=agent_id, namespace=namespace)
        limit = check_count(limit, "limit")  # a bool is not a count, as everywhere one is given
        now = self._now()
        with self._lock:
            live = [(m, v) for m, v in self._spaces.get((agent_id, namespace), {}).values() if self._alive(m, now)]
        if not live or limit == 0:
            return []
        [q] = embedded(await self._embedder.embed([query]), 1, self._embedder.dimension)
        check_measurable(q.tolist(), "the embedding of the query")
        q = q / (float(np.linalg.norm(q)) or 1.0)
        # one product per distinct embedding, so memories of one content score the same (a matrix product rounds
        # each row its own way: they differed in the last place, and their order was not their ids'), and a cosine
        # similarity in [-1, 1] as on every store (float32 rounding put an exact match at 1.0000001)
        distinct, row = np.unique(np.stack([v for _, v in live]), axis=0, return_inverse=True)
        scores = np.clip(distinct @ q, -1.0, 1.0)[row.reshape(-1)]
        order = sorted(range(len(live)), key=lambda i: (-float(scores[i]), live[i][0].id))[:limit]
        return [live[i][0].model_copy(update={"score": float(scores[i])}) for i in order]

    async def get(self, agent_id: str, memory_id: str, namespace: str = "default") -> Memory | None:
        """One live memory by id, or ``None``."""
        check_scope(agent_id=agent_id, namespace=namespace, memory_id=memory_id)
        with self._lock:
            entry = self._spaces.get((agent_id, namespace), {}).get(memory_id)
        if entry is None or not self._alive(entry[0], self._now()):
            return None
        return entry[0]

    async def delete(self, agent_id: str, memory_id: str, namespace: str = "default") -> bool:
        """Remove one memory; ``False`` if it was not there (or had expired)."""
        check_scope(agent_id=agent_id, namespace=namespace, memory_id=memory_id)
        with self._lock:
            entry = self._spaces.get((agent_id, namespace), {}).pop(memory_id, None)
        return entry is not None and self._alive(entry[0], self._now())

    async def clear(self, agent_id: str, namespace: str | None = None) -> int:
        """Remove the agent's live memories in ``namespace`` (every namespace when ``None``)."""
        check_scope(agent_id=agent_id)
        if namespace is not None:
            check_scope(namespace=namespace)
        now = self._now()
        with self._lock:
            keys = [k for k in self._spaces if k[0] == agent_id and (namespace is None or k[1] == namespace)]
            return sum(sum(1 for m, _ in self._spaces.pop(key).values() if self._alive(m, now)) for key in keys)

    async def forget(self, agent_id: str, *, session_id: str | None = None) -> int:
        """Erase the agent's memories in every namespace (``Forgetter``), or, for a session, those whose metadata
        has ``session_id`` equal to it; returns how many (expired ones included)."""
        check_forget(agent_id, session_id)
        removed = 0
        with self._lock:
            for key in [k for k in self._spaces if k[0] == agent_id]:
                space = self._spaces[key]
                doomed = [
                    i for i, (m, _) in space.items() if session_id is None or m.metadata.get("session_id") == session_id
                ]
                for memory_id in doomed:
                    del space[memory_id]
                removed += len(doomed)
                if not space:
                    del self._spaces[key]
        return removed


__all__ = ["InMemoryLongTermMemory", "check_memory"]
