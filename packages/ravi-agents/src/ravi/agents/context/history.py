"""``InMemoryHistoryProvider``: the whole ``HistoryProvider`` contract in process memory."""

from __future__ import annotations

import threading
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass, field

from ravi.agents.context.meaning import MessageVectors
from ravi.agents.context.recall_postings import SessionPostings
from ravi.agents.storage.embeddings import embedded
from ravi.kernel.closing import Closeable
from ravi.kernel.errors import MessageConflict
from ravi.kernel.llm import EmbeddingClient
from ravi.kernel.messages import ChatMessage
from ravi.kernel.options import NoOptions
from ravi.kernel.scope import Scope, new_generation
from ravi.kernel.search import UnitMatch
from ravi.kernel.storage.forget import check_forget
from ravi.kernel.storage.history import (
    HistoryWindow,
    HybridMatches,
    StoredMessage,
    check_append,
    check_hybrid,
    check_replace,
    check_search,
    stored_body,
)
from ravi.kernel.storage.summaries import check_summary_scope
from ravi.kernel.tokens import stored_tokens
from ravi.kernel.values import check_count, check_page, check_scope, check_span, check_summary


@dataclass
class _Session:
    generation: str = field(default_factory=new_generation)
    messages: list[ChatMessage] = field(default_factory=list)
    runs: list[str] = field(default_factory=list)
    ids: dict[str, ChatMessage] = field(default_factory=dict)
    before: list[int] = field(default_factory=lambda: [0])  # stored tokens before each position (and the total)
    systems: list[int] = field(default_factory=list)  # positions of the system messages
    index: SessionPostings | None = None  # built on the first search, extended by later ones
    vectors: dict[str, MessageVectors] = field(default_factory=dict)  # model -> its embeddings, made on first use
    # the last units found by meaning: (model, query, stop, where the unit before ``stop`` ends), how many were
    # ranked, and those units, best first (a smaller limit takes the first ones: the order is total)
    similar: tuple[tuple[str, str, int, int], int, list[UnitMatch]] | None = None
    summaries: dict[tuple[str | None, str], str] = field(default_factory=dict)  # (generation, span) -> text
    written: bool = True  # False for a session that holds only summaries kept without a generation

    def add(self, message: ChatMessage, run_id: str) -> None:
        if message.role == "system":
            self.systems.append(len(self.messages))
        self.ids[message.id] = message
        self.messages.append(message)
        self.runs.append(run_id)
        self.before.append(self.before[-1] + stored_tokens(message))

    def fresh(self, messages: Sequence[ChatMessage]) -> list[ChatMessage]:
        """The messages of a batch the session does not hold yet; ``MessageConflict`` (nothing added) when one
        reuses a held id for a different message."""
        out: list[ChatMessage] = []
        for message in messages:
            held = self.ids.get(message.id)
            if held is None:
                if all(m.id != message.id for m in out):
                    out.append(message)
            elif held is not message and stored_body(held) != stored_body(message):
                raise MessageConflict(message.id)
        return out

    def rebuilt(self, keep: Sequence[tuple[ChatMessage, str]]) -> _Session:
        """A new life of the session holding ``keep``: a new generation, no summaries, no search index."""
        session = _Session()
        for message, run_id in keep:
            session.add(message, run_id)
        return session


class InMemoryHistoryProvider(Closeable):
    """Transcripts in a dict, keyed by ``(agent_id, session_id)``; each message tagged with its ``run_id``.

    Messages are immutable, so readers get the stored objects in a fresh list: changing the list changes
    nothing here, and the messages themselves cannot be changed. Each operation holds the provider's
    ``threading.Lock`` while it reads or changes a session and never awaits holding it (a search by meaning awaits
    its embedder between two such steps), so each is atomic with respect to every other task, whichever event loop
    or thread runs it. Not shared between processes: use the Redis or Postgres provider for that.

    The provider also keeps its sessions' generations (``SessionGeneration``) and summaries (``SummaryStore``):
    ``clear``, a ``clear_run`` that removes something, ``replace_last`` (``TailEditor``) and ``replace_session``
    (``SessionReplacer``) give the session a new generation and drop its summaries and search index with the
    messages.

    Example:
        >>> import asyncio
        >>> history = InMemoryHistoryProvider()
        >>> asyncio.run(history.append("agent", ChatMessage.user("hi"), session_id="s1"))
        >>> asyncio.run(history.count_messages("agent", session_id="s1"))
        1
    """

    Options = NoOptions
    """The store's options model, for configuration."""

    def __init__(self) -> None:
        self._sessions: dict[tuple[str, str], _Session] = {}
        self._lock = threading.Lock()

    def _session(self, agent_id: str, session_id: str) -> _Session | None:
        check_scope(agent_id=agent_id, session_id=session_id)
        return self._sessions.get((agent_id, session_id))

    async def append(self, agent_id: str, message: ChatMessage, *, session_id: str, run_id: str = "") -> None:
        """Add one message at the end of the session (the same message again is ignored)."""
        await self.append_many(agent_id, [message], session_id=session_id, run_id=run_id)

    async def append_many(
        self, agent_id: str, messages: Sequence[ChatMessage], *, session_id: str, run_id: str = ""
    ) -> int:
        """Add messages at the end of the session, all or none (``MessageConflict`` for a held id of a different
        message); returns how many it stored (a message whose id the session holds is skipped)."""
        check_append(agent_id, session_id, run_id, messages)
        if not messages:
            return 0
        with self._lock:
            session = self._sessions.get((agent_id, session_id)) or _Session()
            fresh = session.fresh(messages)
            self._sessions.setdefault((agent_id, session_id), session)
            session.written = True
            for message in fresh:
                session.add(message, run_id)
            return len(fresh)

    async def get_messages(
        self, agent_id: str, *, session_id: str, limit: int | None = None, offset: int = 0
    ) -> list[ChatMessage]:
        """The session's messages, oldest first, from ``offset``, at most ``limit``."""
        check_page(limit, offset)
        session = self._session(agent_id, session_id)
        if session is None:
            return []
        end = None if limit is None else offset + limit
        with self._lock:
            return session.messages[offset:end]

    async def get_stored(
        self, agent_id: str, *, session_id: str, limit: int | None = None, offset: int = 0
    ) -> list[StoredMessage]:
        """The session's messages with their run ids (``RunReader``), oldest first, from ``offset``, at most
        ``limit``."""
        check_page(limit, offset)
        session = self._session(agent_id, session_id)
        if session is None:
            return []
        end = None if limit is None else offset + limit
        with self._lock:
            messages, runs = session.messages[offset:end], session.runs[offset:end]
        return [StoredMessage(m, r) for m, r in zip(messages, runs, strict=True)]

    async def clear(self, agent_id: str, *, session_id: str) -> int:
        """Remove the session's messages and summaries; returns how many messages it held."""
        check_scope(agent_id=agent_id, session_id=session_id)
        key = (agent_id, session_id)
        with self._lock:
            session = self._sessions.get(key)
            if session is None:
                return 0
            if not session.written:  # only summaries kept without a generation: nothing else to keep
                del self._sessions[key]
                return 0
            self._sessions[key] = _Session()  # keeps only a new generation
            return len(session.messages)

    async def clear_run(self, agent_id: str, *, session_id: str, run_id: str) -> int:
        """Remove the messages ``run_id`` wrote to the session (and, if any, the session's summaries); returns
        how many."""
        check_scope(agent_id=agent_id, session_id=session_id, run_id=run_id)
        with self._lock:
            session = self._sessions.get((agent_id, session_id))
            if session is None:
                return 0
            removed = session.runs.count(run_id)
            if removed:
                kept = [(m, r) for m, r in zip(session.messages, session.runs, strict=True) if r != run_id]
                self._sessions[(agent_id, session_id)] = session.rebuilt(kept)
            return removed

    async def replace_last(
        self,
        agent_id: str,
        *,
        session_id: str,
        message_id: str,
        messages: Sequence[ChatMessage] = (),
        run_id: str = "",
    ) -> bool:
        """If the newest message has id ``message_id``, put ``messages`` in its place, atomically, in a new
        generation of the session (``TailEditor``); ``False`` (nothing changed) otherwise."""
        check_replace(agent_id, session_id, message_id, messages, run_id)
        with self._lock:
            session = self._sessions.get((agent_id, session_id))
            if session is None or not session.messages or session.messages[-1].id != message_id:
                return False
            kept = list(zip(session.messages[:-1], session.runs[:-1], strict=True))
            replaced = session.rebuilt(kept)
            fresh = replaced.fresh(messages)
            for message in fresh:
                replaced.add(message, run_id)
            self._sessions[(agent_id, session_id)] = replaced
            return True

    async def replace_session(
        self, agent_id: str, messages: Sequence[ChatMessage], *, session_id: str, run_id: str = ""
    ) -> int:
        """Put ``messages`` (tagged ``run_id``) in place of the session's messages and summaries, atomically, in a
        new generation (``SessionReplacer``); returns how many messages it held."""
        check_append(agent_id, session_id, run_id, messages)
        if not messages:
            return await self.clear(agent_id, session_id=session_id)
        with self._lock:
            held = self._sessions.get((agent_id, session_id))
            replaced = _Session()
            for message in replaced.fresh(messages):
                replaced.add(message, run_id)
            self._sessions[(agent_id, session_id)] = replaced
            return 0 if held is None else len(held.messages)

    async def generation(self, agent_id: str, *, session_id: str) -> str:
        """The session's generation (``SessionGeneration``); ``""`` for a session never written."""
        session = self._session(agent_id, session_id)
        return session.generation if session is not None and session.written else ""

    async def read_window(self, agent_id: str, *, session_id: str, tokens: int) -> HistoryWindow:
        """The newest messages past ``tokens`` stored tokens and the system messages before them
        (``WindowReader``): O(log n) to find the start, then O(window)."""
        check_count(tokens, "tokens")
        session = self._session(agent_id, session_id)
        if session is None or not session.written:
            return HistoryWindow([], 0, True, 0, "")
        with self._lock:
            return self._window(session, tokens)

    @staticmethod
    def _window(session: _Session, tokens: int) -> HistoryWindow:
        before, messages = session.before, session.messages
        # the latest start whose tail passes ``tokens``: before[start] < total - tokens
        start = max(0, bisect_left(before, before[-1] - tokens) - 1)
        while start > 0 and messages[start].role in ("tool", "system"):
            start -= 1
        systems = session.systems[: bisect_left(session.systems, start)]
        head = [messages[i] for i in systems]
        return HistoryWindow(
            [*head, *messages[start:]], len(head), len(head) == start, before[start], session.generation
        )

    async def search_units(
        self, agent_id: str, *, session_id: str, query: str, before: int, limit: int
    ) -> list[UnitMatch]:
        """The units before offset ``before`` that best match ``query`` by BM25 (``HistorySearcher``). The
        session's index is built on its first search and then extended with what was appended since."""
        check_search(query, before, limit)
        session = self._session(agent_id, session_id)
        if session is None or not limit:
            return []
        with self._lock:
            if session.index is None:
                session.index = SessionPostings()
            stop = bisect_left(session.before, before, hi=len(session.messages))
            return session.index.search(session.messages, query, stop=stop, limit=limit, before=session.before)

    async def search_hybrid(
        self,
        agent_id: str,
        *,
        session_id: str,
        query: str,
        before: int,
        limit: int,
        spread: float = 0.0,
        embedder: EmbeddingClient | None = None,
        model: str = "",
    ) -> HybridMatches:
        """The units before offset ``before`` that best match ``query`` by BM25, with the neighbours of each
        match scored ``spread`` times its score, and, with an ``embedder``, those closest in meaning
        (``HybridSearcher``). Each message is embedded once per model, on the first search by meaning under ``model``,
        and kept with the session until it is cleared or rewritten.

        The units found by meaning depend only on the query, the model and the messages before ``before``: the
        last ones are kept with the session, so an agent's tool loop (the same request, new messages after it)
        neither embeds the request again nor ranks again until its window's older part moves."""
        check_search(query, before, limit)
        check_hybrid(spread, embedder, model)
        session = self._session(agent_id, session_id)
        if session is None or not limit or not query:
            return HybridMatches([], [])
        with self._lock:
            if session.index is None:
                session.index = SessionPostings()
            index, messages = session.index, session.messages
            stop = bisect_left(session.before, before, hi=len(messages))
            lexical = index.search(messages, query, stop=stop, limit=limit, before=session.before, spread=spread)
            if embedder is None:
                return HybridMatches(lexical, [])
            vectors = session.vectors.get(model)
            if vectors is None:
                vectors = session.vectors[model] = MessageVectors(model)
            # the unit before ``stop`` may still grow (an open tool call's results): its end is part of the key
            key = (model, query, stop, index.end_of_unit_before(stop))
            held = session.similar
            if held is not None and held[0] == key and held[1] >= limit:
                return HybridMatches(lexical, held[2][:limit])
        await vectors.extend(messages, embedder)  # the list only grows: a rewrite makes a new session
        [vector] = embedded(await embedder.embed([query]), 1, embedder.dimension)
        ranked = 2 * limit  # room for the next windows' limits, which grow as their newest turns do
        with self._lock:
            if self._sessions.get((agent_id, session_id)) is not session:  # cleared or rewritten meanwhile
                return HybridMatches(lexical, [])
            similar = vectors.similarity(vector, stop)
            meaning = index.units(messages, similar, before=session.before, limit=ranked)
            session.similar = (key, ranked, meaning)
        return HybridMatches(lexical, meaning[:limit])

    async def get_summary(self, scope: Scope, span_id: str) -> str | None:
        """The summary of the span in ``scope`` (``SummaryStore``), or ``None``."""
        check_summary_scope(scope)
        check_span(span_id)
        session = self._sessions.get((scope.agent_id, scope.session_id))
        return None if session is None else session.summaries.get((scope.generation, span_id))

    async def put_summary(self, scope: Scope, span_id: str, text: str) -> bool:
        """Keep ``text`` as the span's summary in ``scope`` unless it has one; ``False`` (nothing kept) when
        ``scope.generation`` is not the session's. A scope without a generation is kept unchecked, until the
        session is cleared."""
        check_summary_scope(scope)
        check_span(span_id)
        check_summary(text)
        key = (scope.agent_id, scope.session_id)
        with self._lock:
            session = self._sessions.get(key)
            if scope.generation is None:
                session = self._sessions.setdefault(key, session or _Session(written=False))
            elif session is None or not session.written or session.generation != scope.generation:
                return False
            session.summaries.setdefault((scope.generation, span_id), text)
            return True

    async def clear_summaries(self, agent_id: str, *, session_id: str | None = None) -> int:
        """Remove every summary of the session (of every session of the agent when ``session_id`` is ``None``);
        returns how many."""
        check_scope(agent_id=agent_id)
        if session_id is not None:
            check_scope(session_id=session_id)
        removed = 0
        with self._lock:
            for (agent, session_key), session in self._sessions.items():
                if agent == agent_id and (session_id is None or session_key == session_id):
                    removed += len(session.summaries)
                    session.summaries.clear()
        return removed

    async def forget(self, agent_id: str, *, session_id: str | None = None) -> int:
        """Erase the session (every session of the agent when ``session_id`` is ``None``): its messages,
        summaries, search index, embeddings and generation (``Forgetter``); returns how many messages it held.
        A summary written afterwards under the old generation is refused, as after ``clear``."""
        check_forget(agent_id, session_id)
        with self._lock:
            doomed = [k for k in self._sessions if k[0] == agent_id and (session_id is None or k[1] == session_id)]
            return sum(len(self._sessions.pop(key).messages) for key in doomed)

    async def list_sessions(self, agent_id: str, *, limit: int = 100) -> list[str]:
        """Up to ``limit`` of the agent's session ids that hold messages, sorted."""
        check_scope(agent_id=agent_id)
        check_page(limit, 0)
        with self._lock:
            held = [s for (a, s), session in self._sessions.items() if a == agent_id and session.messages]
        return sorted(held)[:limit]

    async def count_messages(self, agent_id: str, *, session_id: str) -> int:
        """How many messages the session holds."""
        session = self._session(agent_id, session_id)
        return 0 if session is None else len(session.messages)


__all__ = ["InMemoryHistoryProvider", "check_page", "check_scope"]
