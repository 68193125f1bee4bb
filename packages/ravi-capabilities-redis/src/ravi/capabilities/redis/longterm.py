"""``RedisLongTermMemory``: an agent's memories in Redis, expiring by key TTL, searched by similarity."""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, Unpack

import numpy as np

from ravi.capabilities.redis._client import RedisOptions, RedisStore, mapped_errors, part
from ravi.capabilities.redis.options import RedisLongTermOptions
from ravi.kernel.embeddings import HashingEmbeddingClient, check_embedding_client, check_embeddings, check_measurable
from ravi.kernel.errors import InvalidArgument
from ravi.kernel.llm import EmbeddingClient
from ravi.kernel.storage import Memory, check_forget
from ravi.kernel.values import check_count, check_memory, check_scope


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


# Empty one namespace of the memories a caller read from its index, in one step. KEYS: the index, the dimension
# key, then the memory keys; ARGV: the memory ids, in the keys' order. A memory saved since the index was read (its
# key and its index entry are written together) keeps both, and so the namespace keeps its index and dimension: a
# memory key is never left behind without its index entry, where no later clear could find it. Returns how many
# memory keys were deleted.
_CLEAR_NAMESPACE = """
local removed = 0
for i = 3, #KEYS do
  removed = removed + redis.call('DEL', KEYS[i])
  redis.call('SREM', KEYS[1], ARGV[i - 2])
end
if redis.call('SCARD', KEYS[1]) == 0 then redis.call('DEL', KEYS[1], KEYS[2]) end
return removed
"""


class RedisLongTermMemory(RedisStore):
    """The ``LongTermMemory`` contract on plain Redis.

    Each memory is one key holding its content, metadata and float32 embedding, with the key's own expiry as its
    TTL; a set per ``(agent_id, namespace)`` indexes them. A search reads the namespace's embeddings and ranks
    them by cosine similarity in the client (NumPy). That is the right tool up to some ten thousand memories per
    agent and namespace (a few megabytes moved per search); beyond, use pgvector (``PgLongTermMemory``), whose
    HNSW index does not read them all.

    A separate class from :class:`RedisSessionStore`: ``LongTermMemory.clear(agent_id, namespace=...)`` and
    ``ShortTermMemory.clear(session_id)`` share a name with different meanings, so one object cannot be both.
    """

    Options = RedisLongTermOptions

    def __init__(
        self, url: str, *, embedding_client: EmbeddingClient | None = None, **options: Unpack[RedisOptions]
    ) -> None:
        RedisLongTermOptions.check(url=url, embedding_client=embedding_client, **options)
        if embedding_client is not None:
            check_embedding_client(embedding_client)
        super().__init__(url, **options)
        self._embedder = embedding_client or HashingEmbeddingClient()

    def _index(self, agent_id: str, namespace: str) -> str:
        return self.redis.key("mem", agent_id, namespace, tail="index")

    def _memory_key(self, agent_id: str, namespace: str, memory_id: str) -> str:
        # "m/" keeps memory keys apart from the namespace's own keys ("index", "dim"), whatever the id
        return self.redis.key("mem", agent_id, namespace, tail="m/" + part(memory_id))

    def _dimension_key(self, agent_id: str, namespace: str) -> str:
        return self.redis.key("mem", agent_id, namespace, tail="dim")

    def _namespaces(self, agent_id: str) -> str:
        return self.redis.key("memns", agent_id)

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
        [vector] = check_embeddings(await self._embedder.embed([content]), 1, self._embedder.dimension)
        check_measurable(vector, "the embedding of the memory")
        # One dimension per namespace, fixed by its first memory: vectors of two sizes cannot be ranked together.
        with mapped_errors():
            async with self.redis.client.pipeline(transaction=True) as pipe:
                pipe.set(self._dimension_key(agent_id, namespace), len(vector), nx=True)
                pipe.get(self._dimension_key(agent_id, namespace))
                _, held = await pipe.execute()
        if int(held) != len(vector):
            raise InvalidArgument(
                f"namespace {namespace!r} holds embeddings of dimension {int(held)}, this one has {len(vector)}",
                hint="use one embedding model per namespace, or clear the namespace first",
            )
        now = datetime.now(UTC)
        memory_id = uuid.uuid4().hex
        # The namespace is listed before and after its memory is written: a clear of every namespace that runs
        # meanwhile unlists it before emptying it, so the listing after the write is the one that stays; the one
        # before keeps the namespace listed if the call ends (cancelled) between the write and the second.
        with mapped_errors():
            await self.redis.client.sadd(self._namespaces(agent_id), namespace)
        record = {
            "content": content,
            "metadata": meta,
            "created_at": now.isoformat(),
            "expires_at": None if seconds is None else (now + timedelta(seconds=seconds)).isoformat(),
            "embedding": np.asarray(vector, dtype=np.float32).tobytes().hex(),
        }
        with mapped_errors():
            async with self.redis.client.pipeline(transaction=True) as pipe:
                pipe.set(
                    self._memory_key(agent_id, namespace, memory_id),
                    json.dumps(record),
                    px=None if seconds is None else max(1, int(seconds * 1000)),
                )
                pipe.sadd(self._index(agent_id, namespace), memory_id)
                await pipe.execute()
            await self.redis.client.sadd(self._namespaces(agent_id), namespace)
        return memory_id

    def _memory(
        self, agent_id: str, namespace: str, memory_id: str, record: dict[str, Any], score: float | None = None
    ) -> Memory:
        expires = record["expires_at"]
        return Memory(
            id=memory_id,
            agent_id=agent_id,
            namespace=namespace,
            content=record["content"],
            metadata=record["metadata"],
            created_at=datetime.fromisoformat(record["created_at"]),
            expires_at=None if expires is None else datetime.fromisoformat(expires),
            score=score,
        )

    async def _live(self, agent_id: str, namespace: str) -> list[tuple[str, dict[str, Any]]]:
        index = self._index(agent_id, namespace)
        with mapped_errors():
            ids = sorted(_text(m) for m in await self.redis.client.smembers(index))
            if not ids:
                return []
            raw = await self.redis.client.mget([self._memory_key(agent_id, namespace, i) for i in ids])
            gone = [i for i, r in zip(ids, raw, strict=True) if r is None]
            if gone:  # expired keys leave their index entry behind: tidy up
                await self.redis.client.srem(index, *gone)
        return [(i, json.loads(r)) for i, r in zip(ids, raw, strict=True) if r is not None]

    async def search(self, agent_id: str, query: str, namespace: str = "default", limit: int = 5) -> list[Memory]:
        """The closest live memories, best first, each with its cosine ``score``."""
        check_scope(agent_id=agent_id, namespace=namespace)
        limit = check_count(limit, "limit")  # a bool is not a count, as everywhere one is given
        if limit == 0:
            return []
        live = await self._live(agent_id, namespace)
        if not live:
            return []
        [vector] = check_embeddings(await self._embedder.embed([query]), 1, self._embedder.dimension)
        check_measurable(vector, "the embedding of the query")
        q = np.asarray(vector, dtype=np.float32)
        sizes = {len(r["embedding"]) // 8 for _, r in live}  # hex of float32: 8 characters a number
        if sizes != {q.size}:
            raise InvalidArgument(
                f"namespace {namespace!r} holds embeddings of dimension {sorted(sizes)}, the query has {q.size}",
                hint="search with the embedding model the namespace was written with",
            )
        q /= float(np.linalg.norm(q)) or 1.0
        # one product per distinct embedding, so memories of one content score the same (a matrix product rounds
        # each row its own way: they differed in the last place, and their order was not their ids')
        distinct, row = np.unique([r["embedding"] for _, r in live], return_inverse=True)
        matrix = np.stack([np.frombuffer(bytes.fromhex(str(e)), dtype=np.float32) for e in distinct])
        norms = np.linalg.norm(matrix, axis=1)
        norms[norms == 0] = 1.0
        # a cosine similarity, in [-1, 1] as on every store: float32 rounding put an exact match at 1.0000001
        scores = np.clip((matrix @ q) / norms, -1.0, 1.0)[row.reshape(-1)]
        order = sorted(range(len(live)), key=lambda i: (-float(scores[i]), live[i][0]))[:limit]
        return [self._memory(agent_id, namespace, live[i][0], live[i][1], float(scores[i])) for i in order]

    async def get(self, agent_id: str, memory_id: str, namespace: str = "default") -> Memory | None:
        """One live memory by id, or ``None``."""
        check_scope(agent_id=agent_id, namespace=namespace, memory_id=memory_id)
        with mapped_errors():
            raw = await self.redis.client.get(self._memory_key(agent_id, namespace, memory_id))
        return None if raw is None else self._memory(agent_id, namespace, memory_id, json.loads(raw))

    async def delete(self, agent_id: str, memory_id: str, namespace: str = "default") -> bool:
        """Remove one memory; ``False`` if it was not there (or had expired)."""
        check_scope(agent_id=agent_id, namespace=namespace, memory_id=memory_id)
        with mapped_errors():
            async with self.redis.client.pipeline(transaction=True) as pipe:
                pipe.delete(self._memory_key(agent_id, namespace, memory_id))
                pipe.srem(self._index(agent_id, namespace), memory_id)
                deleted, _ = await pipe.execute()
        return bool(deleted)

    async def clear(self, agent_id: str, namespace: str | None = None) -> int:
        """Remove the agent's memories in ``namespace`` (every namespace when ``None``); returns the live ones."""
        check_scope(agent_id=agent_id)
        if namespace is not None:
            check_scope(namespace=namespace)
        with mapped_errors():
            if namespace is None:
                namespaces = sorted(_text(n) for n in await self.redis.client.smembers(self._namespaces(agent_id)))
            else:
                namespaces = [namespace]
            removed = 0
            for ns in namespaces:
                index = self._index(agent_id, ns)
                # unlisted first: a memory saved into the namespace from here on lists it again after its write
                await self.redis.client.srem(self._namespaces(agent_id), ns)
                ids = [_text(m) for m in await self.redis.client.smembers(index)]
                keys = [index, self._dimension_key(agent_id, ns), *(self._memory_key(agent_id, ns, i) for i in ids)]
                removed += int(await self.redis.run_script(_CLEAR_NAMESPACE, keys, ids))
        return removed

    async def forget(self, agent_id: str, *, session_id: str | None = None) -> int:
        """Erase the agent's memories in every namespace (``Forgetter``), or, for a session, those whose metadata
        has ``session_id`` equal to it; returns how many."""
        check_forget(agent_id, session_id)
        if session_id is None:
            return await self.clear(agent_id)
        with mapped_errors():
            namespaces = sorted(_text(n) for n in await self.redis.client.smembers(self._namespaces(agent_id)))
        removed = 0
        for ns in namespaces:
            for memory_id, record in await self._live(agent_id, ns):
                if record["metadata"].get("session_id") == session_id:
                    removed += await self.delete(agent_id, memory_id, namespace=ns)
        return removed


__all__ = ["RedisLongTermMemory"]
