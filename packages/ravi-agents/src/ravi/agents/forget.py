"""Forget an agent, or one of its sessions, in every configured store (``Stores.forget``, ``ravi forget``).

The steps run in an order that makes a crash halfway harmless: everything found through the history's list of
the agent's sessions (session state, relevant recall's collections in the vector store) goes first, the stores
keyed by the agent itself next, and the history, which identifies the sessions, last. Running it again finishes
what a crashed run left; a finished run run again removes nothing. What each store holds "under the scope" is the
convention of :mod:`ravi.kernel.storage.forget`.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from ravi.kernel.storage import Forgetter, SessionLister, SummaryStore, check_forget

ALL_SESSIONS = 1_000_000
"""How many of an agent's sessions an agent-wide forget asks the history for (``SessionLister``)."""

RECALL_PREFIX = "ravi-recall"
"""The default ``collection_prefix`` of relevant recall's collections in the vector store."""

_AGENT_STORES = ("longterm", "vector", "graph", "blob", "tasks")


@dataclass(frozen=True)
class ForgetReport:
    """What a forget removed, per store.

    Attributes:
        agent_id: The agent forgotten (or whose session was).
        session_id: The session forgotten, ``None`` for every session of the agent.
        sessions: The sessions whose per-session records were erased (state, recall collections).
        removed: How many records each store removed, by name: ``history`` (messages), ``summaries`` (a separately
            configured summary store), ``state`` (sessions that had state, now cleared), ``recall`` (relevant
            recall's collections dropped from the vector store), ``longterm``, ``vector``, ``graph``, ``blob``,
            ``tasks``.
        not_covered: The stores that cannot forget, by name, with why (a store without ``forget``, a hybrid
            history with a tier without it, a history that cannot list the agent's sessions for the state
            store): whatever they hold for the scope is still there. A store is in ``removed`` or here, never both.
    """

    agent_id: str
    session_id: str | None
    sessions: tuple[str, ...] = ()
    removed: dict[str, int] = field(default_factory=dict)
    not_covered: dict[str, str] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        """Whether every store could forget (nothing is ``not_covered``)."""
        return not self.not_covered

    def as_dict(self) -> dict[str, Any]:
        """The report as JSON-ready values."""
        return {
            "agent_id": self.agent_id,
            "session_id": self.session_id,
            "sessions": list(self.sessions),
            "removed": dict(self.removed),
            "not_covered": dict(self.not_covered),
            "complete": self.complete,
        }


def collection_name(prefix: str, agent_id: str, session_id: str) -> str:
    """The name of the session's collection of an ``EmbeddingIndex`` (its messages and units are kept in
    ``<name>-messages`` and ``<name>-units``): ``prefix`` and a digest of the injective encoding of the scope.
    Kept here, below the assembly engine, so forget finds them without importing it."""
    key = json.dumps([agent_id, session_id], ensure_ascii=False)
    digest = hashlib.sha256(key.encode()).hexdigest()[:24]
    return f"{prefix}-{digest}"


def recall_collections(agent_id: str, session_id: str, prefix: str = RECALL_PREFIX) -> list[str]:
    """The vector-store collections relevant recall (``EmbeddingIndex``) keeps for the session."""
    name = collection_name(prefix, agent_id, session_id)
    return [name, f"{name}-messages", f"{name}-units"]


def _recall_prefixes(stores: Any) -> list[str]:
    """The collection prefixes of the configured relevant-recall strategies (the default one included)."""
    prefixes = {RECALL_PREFIX}

    def walk(specs: list[Any]) -> None:
        for spec in specs:
            prefix = spec.params().get("collection_prefix")
            if isinstance(prefix, str) and prefix:
                prefixes.add(prefix)
            walk(spec.children)

    walk(stores.settings.context.pipeline or [])
    return sorted(prefixes)


async def _sessions(history: Any, agent_id: str, session_id: str | None) -> list[str] | None:
    """The sessions to erase the per-session records of; ``None`` when the history cannot list them."""
    if session_id is not None:
        return [session_id]
    if not isinstance(history, SessionLister):
        return None
    try:
        return await history.list_sessions(agent_id, limit=ALL_SESSIONS)
    except NotImplementedError:  # a hybrid history whose cold tier cannot list
        return None


async def forget(stores: Any, agent_id: str, *, session_id: str | None = None) -> ForgetReport:
    """Erase the agent (or its session ``session_id``) from every store of ``stores`` (a
    :class:`~ravi.agents.settings.Stores`); returns what each store removed, and which stores could not forget.

    Raises:
        InvalidArgument: an empty or invalid agent or session id.
        RaviError: a store failed; nothing is lost by running it again, which finishes the job.
    """
    check_forget(agent_id, session_id)
    removed: dict[str, int] = {}
    not_covered: dict[str, str] = {}
    history = stores.history
    listed = await _sessions(history, agent_id, session_id)
    if listed is None:
        for kind in ("state", "recall"):
            not_covered[kind] = "the history cannot list the agent's sessions (forget them one by one)"
    sessions = listed or []
    # per session, found through the history: before the history is gone
    state = stores.state
    cleared = 0
    for session in sessions:
        cleared += bool(await state.get_state(session))  # a session with state: one the report counts
        await state.clear(session)
    if listed is not None:  # else not covered, not a store that removed nothing
        removed["state"] = cleared
    vector = stores.vector
    dropped = 0
    for prefix in _recall_prefixes(stores):
        for session in sessions:
            for collection in recall_collections(agent_id, session, prefix):
                dropped += bool(await vector.delete_collection(collection))
    if listed is not None:
        removed["recall"] = dropped
    # keyed by the agent itself
    if stores.settings.summaries is not None:
        summaries = stores.summaries
        if isinstance(summaries, SummaryStore):
            removed["summaries"] = await summaries.clear_summaries(agent_id, session_id=session_id)
    # the history last: it names the sessions a run started again finds
    for kind in (*_AGENT_STORES, "history"):
        store = getattr(stores, kind)
        try:
            if not isinstance(store, Forgetter):
                raise NotImplementedError(f"{type(store).__name__} cannot forget")
            removed[kind] = await store.forget(agent_id, session_id=session_id)
        except NotImplementedError as error:  # a store without the ability, or a composite with a part without
            not_covered[kind] = str(error)
    return ForgetReport(agent_id, session_id, tuple(sessions), removed, not_covered)


__all__ = ["ALL_SESSIONS", "RECALL_PREFIX", "ForgetReport", "collection_name", "forget", "recall_collections"]
