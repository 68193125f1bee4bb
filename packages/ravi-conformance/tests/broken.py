"""Deliberately broken backends, one defect each. The suite must fail every one of them."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any

from ravi.agents.context.history import InMemoryHistoryProvider
from ravi.agents.storage import (
    InMemoryFileStore,
    InMemoryGraphStore,
    InMemoryLongTermMemory,
    InMemoryStateStore,
    InMemorySummaryStore,
    InMemoryVectorStore,
    TaskStore,
)
from ravi.kernel.messages import ChatMessage
from ravi.kernel.scope import Scope
from ravi.kernel.storage import Document, SearchResult, Task, TaskStatus


class DropsUnderConcurrency(InMemoryHistoryProvider):
    """Reads the session, yields to the loop, then writes back: concurrent appends overwrite each other."""

    async def append_many(
        self, agent_id: str, messages: Sequence[ChatMessage], *, session_id: str, run_id: str = ""
    ) -> None:
        snapshot = await self.get_messages(agent_id, session_id=session_id)
        await asyncio.sleep(0)
        await self.clear(agent_id, session_id=session_id)
        await super().append_many(agent_id, [*snapshot, *messages], session_id=session_id, run_id=run_id)


class ReversesOrder(InMemoryHistoryProvider):
    async def get_messages(
        self, agent_id: str, *, session_id: str, limit: int | None = None, offset: int = 0
    ) -> list[ChatMessage]:
        return list(reversed(await super().get_messages(agent_id, session_id=session_id, limit=limit, offset=offset)))


class LeaksAcrossSessions(InMemoryHistoryProvider):
    async def append_many(
        self, agent_id: str, messages: Sequence[ChatMessage], *, session_id: str, run_id: str = ""
    ) -> None:
        await super().append_many(agent_id, messages, session_id="shared", run_id=run_id)

    async def get_messages(
        self, agent_id: str, *, session_id: str, limit: int | None = None, offset: int = 0
    ) -> list[ChatMessage]:
        return await super().get_messages(agent_id, session_id="shared", limit=limit, offset=offset)

    async def count_messages(self, agent_id: str, *, session_id: str) -> int:
        return await super().count_messages(agent_id, session_id="shared")


class IgnoresRunId(InMemoryHistoryProvider):
    async def clear_run(self, agent_id: str, *, session_id: str, run_id: str) -> int:
        return await self.clear(agent_id, session_id=session_id)


class StoresDuplicates(InMemoryHistoryProvider):
    async def append_many(
        self, agent_id: str, messages: Sequence[ChatMessage], *, session_id: str, run_id: str = ""
    ) -> None:
        copies = [m.model_copy(update={"id": f"{m.id}-{n}"}) for n, m in enumerate(messages)]
        self._n = getattr(self, "_n", 0) + 1
        await super().append_many(
            agent_id,
            [m.model_copy(update={"id": f"{m.id}#{self._n}"}) for m in copies],
            session_id=session_id,
            run_id=run_id,
        )

    async def get_messages(
        self, agent_id: str, *, session_id: str, limit: int | None = None, offset: int = 0
    ) -> list[ChatMessage]:
        got = await super().get_messages(agent_id, session_id=session_id, limit=limit, offset=offset)
        return [m.model_copy(update={"id": m.id.split("-")[0]}) for m in got]


class ScoresByDistance(InMemoryVectorStore):
    """Returns cosine distance (lower is closer) as the score."""

    async def search(
        self,
        query_embedding: Sequence[float],
        *,
        collection: str,
        limit: int = 10,
        filter: Mapping[str, Any] | None = None,
    ) -> list[SearchResult]:
        hits = await super().search(query_embedding, collection=collection, limit=limit, filter=filter)
        return [h.model_copy(update={"score": 1.0 - h.score}) for h in hits]


class ReplacesOnAdd(InMemoryVectorStore):
    async def add(self, documents: Sequence[Document], collection: str) -> list[str]:
        return await self.upsert(documents, collection=collection)


class ForgetsMemoryTtl(InMemoryLongTermMemory):
    async def save(
        self,
        agent_id: str,
        content: str,
        namespace: str = "default",
        ttl: timedelta | float | None = None,
        *,
        metadata: Mapping[str, Any] | None = None,
    ) -> str:
        if ttl is not None and (ttl.total_seconds() if isinstance(ttl, timedelta) else ttl) <= 0:
            return await super().save(agent_id, content, namespace=namespace, ttl=ttl, metadata=metadata)
        return await super().save(agent_id, content, namespace=namespace, metadata=metadata)


class IgnoresNamespaces(InMemoryLongTermMemory):
    async def save(self, agent_id: str, content: str, namespace: str = "default", **kw: Any) -> str:
        return await super().save(agent_id, content, namespace="default", **kw)

    async def search(self, agent_id: str, query: str, namespace: str = "default", limit: int = 5) -> Any:
        return await super().search(agent_id, query, namespace="default", limit=limit)

    async def get(self, agent_id: str, memory_id: str, namespace: str = "default") -> Any:
        return await super().get(agent_id, memory_id, namespace="default")


class LosesConcurrentUpdates(InMemoryStateStore):
    async def update_state(self, session_id: str, patch: Mapping[str, Any]) -> dict[str, Any]:
        state = await self.get_state(session_id)
        await asyncio.sleep(0)
        state.update(patch)
        await self.set_state(session_id, state)
        return state


class ForgetsBlobTtl(InMemoryFileStore):
    async def upload(
        self,
        key: str,
        data: bytes,
        *,
        content_type: str = "application/octet-stream",
        ttl: timedelta | float | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> str:
        if ttl is not None and (ttl.total_seconds() if isinstance(ttl, timedelta) else ttl) <= 0:
            return await super().upload(key, data, content_type=content_type, ttl=ttl, metadata=metadata)
        return await super().upload(key, data, content_type=content_type, metadata=metadata)


class AcceptsAnyKey(InMemoryFileStore):
    async def upload(self, key: str, data: bytes, **kw: Any) -> str:
        self._blobs[key] = (await _blob(key, data), None)
        return key


async def _blob(key: str, data: bytes) -> Any:
    from ravi.kernel.storage import Blob

    return Blob(key=key, data=bytes(data))


class KeepsRelationshipsOfDeletedEntities(InMemoryGraphStore):
    async def delete_entity(self, entity_id: str) -> bool:
        return self._entities.pop(entity_id, None) is not None


class AllowsAnyTransition(TaskStore):
    async def update_status(
        self, conversation_id: str, agent_id: str, task_id: str, status: TaskStatus, *, result: str | None = None
    ) -> Task:
        def force(t: Task) -> Task:
            return t.model_copy(update={"status": TaskStatus(status), "result": result or t.result})

        return await self._change(conversation_id, agent_id, task_id, force)


class DropsConflictingMessages(InMemoryHistoryProvider):
    """Drops a message whose id the session holds, whatever its content (a broken promise, silently)."""

    async def append_many(
        self, agent_id: str, messages: Sequence[ChatMessage], *, session_id: str, run_id: str = ""
    ) -> None:
        held = {m.id for m in await self.get_messages(agent_id, session_id=session_id)}
        fresh = {m.id: m for m in messages if m.id not in held}
        await super().append_many(agent_id, list(fresh.values()), session_id=session_id, run_id=run_id)


class KeysSummariesBySpan(InMemorySummaryStore):
    """Keys a summary by its span id alone: tenants with equal span ids share it."""

    async def get_summary(self, scope: Scope, span_id: str) -> str | None:
        return await super().get_summary(Scope("any", "any"), span_id)

    async def put_summary(self, scope: Scope, span_id: str, text: str) -> bool:
        return await super().put_summary(Scope("any", "any"), span_id, text)


class JoinsScopeWithSeparator(InMemorySummaryStore):
    """Joins agent and session with a separator they may contain: two scopes share one key."""

    def _joined(self, scope: Scope) -> Scope:
        return Scope(f"{scope.agent_id}\x1f{scope.session_id}", "-", scope.generation)

    async def get_summary(self, scope: Scope, span_id: str) -> str | None:
        return await super().get_summary(self._joined(scope), span_id)

    async def put_summary(self, scope: Scope, span_id: str, text: str) -> bool:
        return await super().put_summary(self._joined(scope), span_id, text)


class KeepsSummariesOfClearedSessions(InMemoryHistoryProvider):
    """Keeps a session's summaries (and its generation) across clear and clear_run."""

    async def clear(self, agent_id: str, *, session_id: str) -> int:
        session = self._sessions.get((agent_id, session_id))
        removed = await super().clear(agent_id, session_id=session_id)
        if session is not None:
            self._sessions[(agent_id, session_id)] = session.rebuilt([])
            self._sessions[(agent_id, session_id)].generation = session.generation
            self._sessions[(agent_id, session_id)].summaries = session.summaries
        return removed

    async def clear_run(self, agent_id: str, *, session_id: str, run_id: str) -> int:
        session = self._sessions.get((agent_id, session_id))
        removed = await super().clear_run(agent_id, session_id=session_id, run_id=run_id)
        if session is not None and removed:
            self._sessions[(agent_id, session_id)].generation = session.generation
            self._sessions[(agent_id, session_id)].summaries = session.summaries
        return removed


class AcceptsStaleSummaries(InMemoryHistoryProvider):
    """Keeps a summary of any generation, never checking it against the session's."""

    async def put_summary(self, scope: Scope, span_id: str, text: str) -> bool:
        return await super().put_summary(Scope(scope.agent_id, scope.session_id, None), span_id, text)

    async def get_summary(self, scope: Scope, span_id: str) -> str | None:
        return await super().get_summary(Scope(scope.agent_id, scope.session_id, None), span_id)


class CountsGenerations(InMemoryHistoryProvider):
    """Numbers a session's generations from 1 again each time it is written after a clear."""

    async def generation(self, agent_id: str, *, session_id: str) -> str:
        session = self._sessions.get((agent_id, session_id))
        return "" if session is None else str(int(bool(session.messages)))


class ReplacesAnyLast(InMemoryHistoryProvider):
    """Replaces the newest message whatever its id (no compare before the replace)."""

    async def replace_last(
        self,
        agent_id: str,
        *,
        session_id: str,
        message_id: str,
        messages: Sequence[ChatMessage] = (),
        run_id: str = "",
    ) -> bool:
        held = await self.get_messages(agent_id, session_id=session_id)
        if not held:
            return False
        return await super().replace_last(
            agent_id, session_id=session_id, message_id=held[-1].id, messages=messages, run_id=run_id
        )


class AcceptsNegativeOffsets(InMemoryHistoryProvider):
    async def get_messages(
        self, agent_id: str, *, session_id: str, limit: int | None = None, offset: int = 0
    ) -> list[ChatMessage]:
        return await super().get_messages(agent_id, session_id=session_id, limit=limit, offset=max(offset, 0))


class ClearsInsteadOfForgetting(InMemoryHistoryProvider):
    """Forgets a session by clearing it: the session's record (its generation) stays."""

    async def forget(self, agent_id: str, *, session_id: str | None = None) -> int:
        sessions = [session_id] if session_id is not None else await self.list_sessions(agent_id)
        return sum([await self.clear(agent_id, session_id=s) for s in sessions])


class ForgetsAgentsByPrefix(InMemoryHistoryProvider):
    """Forgets every agent whose id starts with the one given (a key pattern without escaping)."""

    async def forget(self, agent_id: str, *, session_id: str | None = None) -> int:
        doomed = [k for k in self._sessions if k[0].startswith(agent_id) and session_id in (None, k[1])]
        return sum(len(self._sessions.pop(k).messages) for k in doomed)


class ClearGivesAGeneration(InMemoryHistoryProvider):
    """Gives a session never written a generation when it is cleared (an upsert of the session's record)."""

    async def clear(self, agent_id: str, *, session_id: str) -> int:
        self._cleared = {*getattr(self, "_cleared", set()), (agent_id, session_id)}
        return await super().clear(agent_id, session_id=session_id)

    async def generation(self, agent_id: str, *, session_id: str) -> str:
        held = await super().generation(agent_id, session_id=session_id)
        return held or ("cleared" if (agent_id, session_id) in getattr(self, "_cleared", set()) else "")
