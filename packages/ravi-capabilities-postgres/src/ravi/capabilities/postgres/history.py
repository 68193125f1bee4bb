"""``PostgresHistoryProvider``: durable conversation history on PostgreSQL."""

from __future__ import annotations

import asyncio
import math
from bisect import bisect_left
from collections.abc import Sequence
from typing import Any, Unpack

from ravi.capabilities.postgres._cache import Cached, Lru, Parsed, Window
from ravi.capabilities.postgres._db import _ATTEMPTS, _RETRIED, PoolOptions, PostgresStore
from ravi.capabilities.postgres._history_migrations import MIGRATIONS
from ravi.capabilities.postgres._history_sql import HistoryStatements
from ravi.capabilities.postgres._terms import message_terms, searchable_terms, session_digest
from ravi.capabilities.postgres._terms import quoted as _quoted
from ravi.capabilities.postgres.hybrid import HybridSearch, _units_of_rows
from ravi.capabilities.postgres.options import PostgresHistoryOptions
from ravi.capabilities.postgres.summaries import _delete_summaries
from ravi.kernel.errors import BackendUnavailable, MessageConflict, RaviError
from ravi.kernel.messages import ChatMessage, messages_from_json
from ravi.kernel.scope import Scope
from ravi.kernel.search import UnitMatch, query_terms
from ravi.kernel.storage.forget import check_forget
from ravi.kernel.storage.history import (
    HistoryWindow,
    StoredMessage,
    check_append,
    check_replace,
    check_search,
    stored_body,
    window_of,
)
from ravi.kernel.storage.summaries import check_summary_scope
from ravi.kernel.tokens import stored_tokens
from ravi.kernel.values import check_count, check_page, check_scope, check_span, check_summary

_RANKED = 2_000
"""How many messages a search ranks at most beyond those holding its rarest term."""
_INDEX_CHUNK = 2_000
"""How many rows the terms index takes in one statement."""
_SEARCHED = 2**30 - 1
"""The largest limit the search statement is given: it takes twice as many matches, in a 32-bit integer (a
larger limit asks for the same, every match)."""


def _rows(messages: Sequence[ChatMessage]) -> tuple[list[str], list[str], list[str], list[int]]:
    """The ids, stored bodies, roles and stored token counts of ``messages``, as the statements take them."""
    return (
        [m.id for m in messages],
        [stored_body(m) for m in messages],
        [m.role for m in messages],
        [stored_tokens(m) for m in messages],
    )


def _pending(state: Any, held: Window | None) -> list[ChatMessage] | None:
    """The messages of the rows ``state`` says the terms index lacks: parsed from the bodies it carries, or taken
    from ``held`` (the window this provider read last) for the rows it did not send. ``None`` when ``held`` lacks
    one of those."""
    bodies = state["bodies"]
    parsed = iter(messages_from_json([b for b in bodies if b is not None]))
    out = []
    for seq, body in zip(state["pending"], bodies, strict=True):
        if body is not None:
            out.append(next(parsed))
            continue
        i = bisect_left(held.seqs, seq) if held is not None else 0
        if held is None or i == len(held.seqs) or held.seqs[i] != seq:
            return None
        out.append(held.messages[i])
    return out


def _conflicts(error: BaseException) -> RaviError | None:
    """``MessageConflict`` for the append statement's refusal of a held id (SQLSTATE RV409)."""
    if getattr(error, "sqlstate", None) == "RV409":
        return MessageConflict(str(getattr(error, "detail", "") or ""))
    return None


class PostgresHistoryProvider(HybridSearch, PostgresStore):
    """The ``HistoryProvider`` contract on PostgreSQL (asyncpg, a connection pool).

    * Each session's messages are numbered in a strict order with no gaps or duplicates, even with many
      concurrent writers (appends to one session are serialised by a row lock on the session).
    * ``append_many`` is one round trip; a retried append of a message the session holds is ignored, and a
      different message under a held id refuses the batch (``MessageConflict``).
    * ``get_messages`` is one query served by the primary key. Messages are immutable, so the provider keeps
      the sessions it read last (``cache_sessions`` of them) and fetches only what was appended since; a
      removal from any process gives the session a new generation and invalidates the copy.
    * ``clear``, ``clear_run``, ``replace_last`` (``TailEditor``) and ``replace_session`` (``SessionReplacer``)
      are each one statement that locks the session first, as appends do, so they serialise with appends and
      each other instead of deadlocking; each gives the session a new generation (``SessionGeneration``) and
      removes its summaries.
    * The provider keeps its sessions' summaries too (``SummaryStore``), refusing one of a generation that is no
      longer the session's in the statement that writes it.
    * ``clear_run`` and ``count_messages`` use indexes, not scans.
    * ``search_units`` ranks a session's messages by BM25 over a terms index, and ``search_hybrid`` adds the
      neighbours of each match (in the same statement) and the messages closest in meaning, by pgvector
      (:mod:`.hybrid`). The messages
      the searches of a session returned are kept parsed (the most recent few thousand), and not sent again
      while the session keeps its generation.

    Args:
        dsn: ``postgresql://user:password@host:port/database``.
        schema: Schema of the tables (created and migrated on first use).
        table_prefix: Prefix of the table names.
        min_size, max_size: Connection pool size.
        cache_sessions: How many sessions to keep parsed in memory (0 turns the cache off).

    Example:
        >>> history = PostgresHistoryProvider("postgresql://localhost/app")  # doctest: +SKIP
        >>> await history.append("agent", ChatMessage.user("hi"), session_id="s1")  # doctest: +SKIP
    """

    component = "history"
    migrations = MIGRATIONS

    Options = PostgresHistoryOptions

    def __init__(self, dsn: str, *, cache_sessions: int = 64, **options: Unpack[PoolOptions]) -> None:
        cache_sessions = PostgresHistoryOptions.check(dsn=dsn, cache_sessions=cache_sessions, **options).cache_sessions
        super().__init__(dsn, **options)
        self._messages = self.db.table("messages")
        self._sessions = self.db.table("sessions")
        self._append = f'"{self.db.schema}"."{self.db.prefix}append_messages"'
        self._clear = f'"{self.db.schema}"."{self.db.prefix}clear_session"'
        self._clear_run = f'"{self.db.schema}"."{self.db.prefix}clear_run"'
        self._replace_last = f'"{self.db.schema}"."{self.db.prefix}replace_last"'
        self._replace_session = f'"{self.db.schema}"."{self.db.prefix}replace_session"'
        self._summaries = self.db.table("session_summaries")
        self.db.translate = _conflicts
        self._cache: Lru[Cached] = Lru(cache_sessions)
        self._windows: Lru[Window] = Lru(cache_sessions)
        self._parsed: Lru[Parsed] = Lru(cache_sessions)
        self._cache_size = cache_sessions
        statements = HistoryStatements(self._messages, self._sessions)
        self._window_query = statements.window
        self._refresh_query = statements.refresh
        self._df_query = statements.df
        self._index_query = statements.index
        self._unindexed_query = statements.unindexed
        self._search_query = statements.search

    async def append(self, agent_id: str, message: ChatMessage, *, session_id: str, run_id: str = "") -> None:
        """Add one message at the end of the session."""
        await self.append_many(agent_id, [message], session_id=session_id, run_id=run_id)

    async def append_many(
        self, agent_id: str, messages: Sequence[ChatMessage], *, session_id: str, run_id: str = ""
    ) -> int:
        """Add messages at the end of the session in one round trip, all or none; returns how many it stored
        (counted by the statement that inserts them: a message whose id the session holds is skipped)."""
        check_append(agent_id, session_id, run_id, messages)
        if not messages:
            return 0
        added = await self.db.fetchval(
            f"SELECT {self._append}($1, $2, $3, $4, $5, $6, $7)", agent_id, session_id, run_id, *_rows(messages)
        )
        return int(added)

    async def get_messages(
        self, agent_id: str, *, session_id: str, limit: int | None = None, offset: int = 0
    ) -> list[ChatMessage]:
        """The session's messages, oldest first, from ``offset``, at most ``limit``; one query."""
        check_scope(agent_id=agent_id, session_id=session_id)
        limit, offset = check_page(limit, offset)
        if self._cache_size == 0:
            rows = await self.db.fetch(
                f"SELECT body FROM {self._messages} WHERE agent_id = $1 AND session_id = $2 ORDER BY seq "
                "LIMIT $3 OFFSET $4",
                agent_id,
                session_id,
                limit,
                offset,
            )
            return messages_from_json([r["body"] for r in rows])
        messages = await self._refresh(agent_id, session_id)
        end = None if limit is None else offset + limit
        return messages[offset:end]

    async def get_stored(
        self, agent_id: str, *, session_id: str, limit: int | None = None, offset: int = 0
    ) -> list[StoredMessage]:
        """The session's messages with their run ids (``RunReader``), oldest first, from ``offset``, at most
        ``limit``; one query."""
        check_scope(agent_id=agent_id, session_id=session_id)
        limit, offset = check_page(limit, offset)
        rows = await self.db.fetch(
            f"SELECT body, run_id FROM {self._messages} WHERE agent_id = $1 AND session_id = $2 ORDER BY seq "
            "LIMIT $3 OFFSET $4",
            agent_id,
            session_id,
            limit,
            offset,
        )
        messages = messages_from_json([r["body"] for r in rows])
        return [StoredMessage(m, r["run_id"]) for m, r in zip(messages, rows, strict=True)]

    async def _refresh(self, agent_id: str, session_id: str) -> list[ChatMessage]:
        key = (agent_id, session_id)
        # A snapshot: the copy is never changed in place, so concurrent readers that start from the same copy
        # each build their own newer one from it, and none can add the same rows twice.
        base = self._cache.get(key)
        rows = await self.db.fetch(
            self._refresh_query,
            agent_id,
            session_id,
            base.generation if base else "",
            base.next_seq if base else 0,
        )
        if not rows:
            self._cache.pop(key)
            return []
        generation, next_seq = rows[0]["generation"], rows[0]["next_seq"]
        fresh = messages_from_json([r["body"] for r in rows if r["body"] is not None])
        if base is not None and base.generation == generation:
            copy = Cached(generation, next_seq, base.messages + fresh if fresh else base.messages)
        else:
            copy = Cached(generation, next_seq, fresh)
        current = self._cache.get(key)
        # Keep the newer copy: a slower reader must not put back an older one of the same generation. (Of two
        # generations, the one just read is kept; every read checks the generation on the server anyway.)
        if (
            current is None
            or current is base
            or current.generation != copy.generation
            or current.next_seq <= copy.next_seq
        ):
            self._cache.keep(key, copy)
        return copy.messages  # never changed in place: callers get slices of it

    async def clear(self, agent_id: str, *, session_id: str) -> int:
        """Remove the session's messages and summaries, in a new generation; returns how many messages it held.
        One statement, under the session's lock."""
        check_scope(agent_id=agent_id, session_id=session_id)
        removed = await self.db.fetchval(f"SELECT {self._clear}($1, $2)", agent_id, session_id)
        self._cache.pop((agent_id, session_id))
        self._windows.pop((agent_id, session_id))
        self._parsed.pop((agent_id, session_id))
        return int(removed)

    async def clear_run(self, agent_id: str, *, session_id: str, run_id: str) -> int:
        """Remove exactly the messages ``run_id`` wrote to the session (and, when it removed any, the session's
        summaries, in a new generation); returns how many. One statement, under the session's lock, which also
        recomputes the running totals after the first removed message."""
        check_scope(agent_id=agent_id, session_id=session_id, run_id=run_id)
        removed = int(await self.db.fetchval(f"SELECT {self._clear_run}($1, $2, $3)", agent_id, session_id, run_id))
        if removed:
            self._cache.pop((agent_id, session_id))
            self._windows.pop((agent_id, session_id))
            self._parsed.pop((agent_id, session_id))
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
        """If the newest message has id ``message_id``, put ``messages`` (tagged ``run_id``) in its place in a new
        generation of the session (``TailEditor``): one statement under the session's lock, so concurrent
        editors and writers never lose or reorder each other's messages. ``False`` (nothing changed)
        otherwise."""
        check_replace(agent_id, session_id, message_id, messages, run_id)
        done = await self.db.fetchval(
            f"SELECT {self._replace_last}($1, $2, $3, $4, $5, $6, $7, $8)",
            agent_id,
            session_id,
            message_id,
            run_id,
            *_rows(messages),
        )
        if done:
            self._cache.pop((agent_id, session_id))
            self._windows.pop((agent_id, session_id))
            self._parsed.pop((agent_id, session_id))
        return bool(done)

    async def replace_session(
        self, agent_id: str, messages: Sequence[ChatMessage], *, session_id: str, run_id: str = ""
    ) -> int:
        """Put ``messages`` (tagged ``run_id``) in place of the session's messages and summaries, in a new
        generation (``SessionReplacer``): one statement under the session's lock, so a reader sees the old
        transcript or the new one and a failure leaves the old one; returns how many messages it held."""
        check_append(agent_id, session_id, run_id, messages)
        removed = await self.db.fetchval(
            f"SELECT {self._replace_session}($1, $2, $3, $4, $5, $6, $7)",
            agent_id,
            session_id,
            run_id,
            *_rows(messages),
        )
        self._cache.pop((agent_id, session_id))
        self._windows.pop((agent_id, session_id))
        self._parsed.pop((agent_id, session_id))
        return int(removed)

    async def generation(self, agent_id: str, *, session_id: str) -> str:
        """The session's generation (``SessionGeneration``); ``""`` for a session never written."""
        check_scope(agent_id=agent_id, session_id=session_id)
        value = await self.db.fetchval(
            f"SELECT generation FROM {self._sessions} WHERE agent_id = $1 AND session_id = $2", agent_id, session_id
        )
        return "" if value is None else str(value)

    async def get_summary(self, scope: Scope, span_id: str) -> str | None:
        """The summary of the span in ``scope`` (``SummaryStore``), or ``None``."""
        check_summary_scope(scope)
        check_span(span_id)
        value = await self.db.fetchval(
            f"SELECT text FROM {self._summaries} WHERE agent_id = $1 AND session_id = $2 AND generation = $3 "
            "AND span_id = $4",
            scope.agent_id,
            scope.session_id,
            scope.generation or "",
            span_id,
        )
        return None if value is None else str(value)

    async def put_summary(self, scope: Scope, span_id: str, text: str) -> bool:
        """Keep ``text`` as the span's summary in ``scope`` unless it has one; ``False`` (nothing kept) when
        ``scope.generation`` is not the session's, checked in the statement that writes it (under a share lock
        on the session, so a ``clear`` under way is waited for). A scope without a generation is kept unchecked,
        until the session is cleared."""
        check_summary_scope(scope)
        check_span(span_id)
        check_summary(text)
        args = (scope.agent_id, scope.session_id, scope.generation or "", span_id, text)
        if scope.generation is None:
            await self.db.execute(
                f"INSERT INTO {self._summaries} (agent_id, session_id, generation, span_id, text) "
                "VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING",
                *args,
            )
            return True
        if not scope.generation:
            return False
        kept = await self.db.fetchval(
            f"WITH current AS (SELECT 1 FROM {self._sessions} WHERE agent_id = $1 AND session_id = $2 "
            "AND generation = $3 FOR SHARE), "
            f"kept AS (INSERT INTO {self._summaries} (agent_id, session_id, generation, span_id, text) "
            "SELECT $1, $2, $3, $4, $5 FROM current ON CONFLICT DO NOTHING RETURNING 1) "
            "SELECT EXISTS (SELECT 1 FROM current)",
            *args,
        )
        return bool(kept)

    async def clear_summaries(self, agent_id: str, *, session_id: str | None = None) -> int:
        """Remove every summary of the session (of every session of the agent when ``session_id`` is ``None``),
        whatever its generation; returns how many."""
        return await _delete_summaries(self.db, self._summaries, agent_id, session_id)

    async def _recount_running_totals(self, connection: Any, agent_id: str, session_id: str) -> None:
        """Recompute the session's running totals and total from its stored counts (the total is NULL while any
        count is unknown). The caller holds a transaction."""
        await connection.execute(
            f"UPDATE {self._messages} m SET cum_tokens = x.cum FROM ("
            f"SELECT seq, sum(tokens) OVER (ORDER BY seq) AS cum FROM {self._messages} "
            "WHERE agent_id = $1 AND session_id = $2) x "
            "WHERE m.agent_id = $1 AND m.session_id = $2 AND m.seq = x.seq AND m.cum_tokens IS DISTINCT FROM x.cum",
            agent_id,
            session_id,
        )
        await connection.execute(
            f"UPDATE {self._sessions} SET total_tokens = (SELECT CASE WHEN count(*) = count(tokens) "
            f"THEN coalesce(sum(tokens), 0) END FROM {self._messages} WHERE agent_id = $1 AND session_id = $2) "
            "WHERE agent_id = $1 AND session_id = $2",
            agent_id,
            session_id,
        )

    async def _recount(self, agent_id: str, session_id: str) -> None:
        """Store the counts of a session written before counts were kept (once; appends wait meanwhile)."""
        async with self.db.connection() as connection, connection.transaction():
            await connection.execute(
                f"SELECT 1 FROM {self._sessions} WHERE agent_id = $1 AND session_id = $2 FOR UPDATE",
                agent_id,
                session_id,
            )
            rows = await connection.fetch(
                f"SELECT seq, body FROM {self._messages} WHERE agent_id = $1 AND session_id = $2 AND tokens IS NULL",
                agent_id,
                session_id,
            )
            if rows:
                counted = [stored_tokens(m) for m in messages_from_json([r["body"] for r in rows])]
                await connection.execute(
                    f"UPDATE {self._messages} m SET tokens = u.tokens FROM unnest($3::bigint[], $4::integer[]) "
                    "AS u(seq, tokens) WHERE m.agent_id = $1 AND m.session_id = $2 AND m.seq = u.seq",
                    agent_id,
                    session_id,
                    [r["seq"] for r in rows],
                    counted,
                )
            await self._recount_running_totals(connection, agent_id, session_id)

    async def read_window(self, agent_id: str, *, session_id: str, tokens: int) -> HistoryWindow:
        """The newest messages past ``tokens`` stored tokens, and the system messages before them
        (``WindowReader``): one query, served by indexes, reading only the window's rows. The messages of the
        session's last window read here are kept parsed and are not sent again: a warm read transfers and
        parses only what is new to this process."""
        check_scope(agent_id=agent_id, session_id=session_id)
        tokens = check_count(tokens, "tokens")
        key = (agent_id, session_id)
        cached = self._windows.get(key)
        rows = await self.db.fetch(
            self._window_query,
            agent_id,
            session_id,
            tokens,
            cached.generation if cached else "",
            cached.low if cached else 0,
            cached.high if cached else -1,
        )
        if not rows:  # no such session
            self._windows.pop(key)
            return HistoryWindow([], 0, True, None, "")
        first = rows[0]
        start = first["start"]
        found = [r for r in rows if r["seq"] is not None]
        fresh_seqs: list[int] = [r["seq"] for r in found]
        fresh = messages_from_json([r["body"] for r in found], [r["tokens"] for r in found])
        seqs, messages = fresh_seqs, fresh
        generation = first["generation"]
        if cached is not None and cached.generation == generation:  # what this view shares with the last one
            cut = bisect_left(cached.seqs, start)
            kept_seqs = [q for q, m in zip(cached.seqs[:cut], cached.messages[:cut], strict=True) if m.role == "system"]
            kept = [m for m in cached.messages[:cut] if m.role == "system"]
            kept_seqs += cached.seqs[cut:]
            kept += cached.messages[cut:]
            if not fresh_seqs or (kept_seqs and fresh_seqs[0] > kept_seqs[-1]):
                seqs, messages = kept_seqs + fresh_seqs, kept + fresh
            else:
                merged = sorted(zip(kept_seqs + fresh_seqs, kept + fresh, strict=True), key=lambda pair: pair[0])
                seqs, messages = [q for q, _ in merged], [m for _, m in merged]
        if not messages:
            self._windows.pop(key)
            return HistoryWindow([], 0, True, 0, generation)
        if first["total"] is None:  # written before counts were kept: this read was of the whole session
            await self._recount(agent_id, session_id)
            view = window_of(messages, tokens, generation)
            start = -1
        else:
            head = bisect_left(seqs, start)
            view = HistoryWindow(messages, head, bool(first["complete"]), int(first["before"]), generation)
        if self._cache_size:
            low = seqs[bisect_left(seqs, start)] if bisect_left(seqs, start) < len(seqs) else seqs[-1] + 1
            self._windows.keep(key, Window(generation, low, seqs[-1], seqs, messages))
        return view

    async def search_units(
        self, agent_id: str, *, session_id: str, query: str, before: int, limit: int
    ) -> list[UnitMatch]:
        """The units before offset ``before`` that best match ``query`` (``HistorySearcher``): one query, BM25
        over the session's terms index, so recall never reads the session. Rows appended since the session's last
        search are indexed first (by this search, once for every process)."""
        check_scope(agent_id=agent_id, session_id=session_id)
        before, limit = check_search(query, before, limit)
        return await self._search_words(agent_id, session_id, query, before, limit, 0.0)

    async def _search_words(
        self, agent_id: str, session_id: str, query: str, before: int, limit: int, spread: float
    ) -> list[UnitMatch]:
        """The ranking by words of ``search_units`` (checked arguments), with the units bordering each match scored
        ``spread`` times it when ``spread`` is above 0 (``search_hybrid``): the terms' counts (and the indexing of
        rows appended since the last search), then one statement that ranks, finds the borders and returns the
        units' rows."""
        words = sorted(query_terms(query))
        if not words or not limit:
            return []
        digest = session_digest(agent_id, session_id)
        quoted = [_quoted(digest + w) for w in words]
        found_state = await self._search_state(agent_id, session_id, quoted)
        if found_state is None:
            return []
        state, pending = found_state
        dfs = list(state["dfs"])
        if pending:  # rows appended since the last search: index them, and count them in
            counted = [message_terms(m) for m in pending]
            for k, word in enumerate(words):
                dfs[k] = min(dfs[k] + sum(1 for c in counted if word in c), _RANKED + 1)
            texts = [searchable_terms(digest, c) for c in counted]
            await self.db.execute(
                self._index_query,
                agent_id,
                session_id,
                state["pending"],
                texts,
                state["next_seq"],
                state["generation"],
                True,
            )
        # the rarer terms: the rarest, then the next ones while they add few messages to rank (a message that
        # holds only common terms scores too little to be recalled)
        n = max(state["next_seq"], 1)
        picked: list[tuple[int, str]] = []
        ranked = 0
        for df, query in sorted((df, q) for df, q in zip(dfs, quoted, strict=True) if df):
            if picked and ranked + df > _RANKED:
                break
            picked.append((df, query))
            ranked += df
        if not picked:
            return []
        idfs = [math.log(1 + (n - df + 0.5) / (df + 0.5)) for df, _ in picked]
        chosen = [query for _, query in picked]
        rows, messages = await self._unit_rows(
            agent_id, session_id, self._search_query, agent_id, session_id, chosen, idfs, before,
            min(limit, _SEARCHED), float(spread),
        )  # fmt: skip
        return _units_of_rows(rows, messages, before)[:limit]

    async def _search_state(
        self, agent_id: str, session_id: str, quoted: list[str]
    ) -> tuple[Any, list[ChatMessage]] | None:
        """The session's generation and length, how many of its messages hold each of ``quoted`` (capped), and the
        rows appended since its last search (``pending``, and their messages), in one statement. The rows of the
        last window this provider read are not sent again: it holds them parsed (a search usually follows the
        window read that found the newest rows). A long stretch never searched (a session written before the
        index, or imported) is indexed here first, a range of seqs at a time. ``None`` for a session that does not
        exist."""
        while True:
            held = self._windows.get((agent_id, session_id))
            have = (held.generation, held.low, held.high) if held is not None else ("", 0, -1)
            args = (agent_id, session_id, quoted, _RANKED + 1, _INDEX_CHUNK, *have)
            state = await self.db.fetchrow(self._df_query, *args)
            if state is not None and state["uncounted"]:
                await self._recount(agent_id, session_id)
                continue
            if state is None:
                return None
            pending = _pending(state, held)
            if pending is None:  # what this provider held did not match the rows after all: read them
                self._windows.pop((agent_id, session_id))
                continue
            if state["next_seq"] - state["indexed_seq"] <= _INDEX_CHUNK:  # pending: every row the index lacks
                return state, pending
            await self._index_stretch(agent_id, session_id, state, pending)

    async def _index_stretch(self, agent_id: str, session_id: str, state: Any, pending: list[ChatMessage]) -> None:
        """Index every row the terms index lacks up to the session's length in ``state``, a range of
        ``_INDEX_CHUNK`` seqs a statement (``pending`` holds the first range's), and mark the session indexed.
        Each read is a range bounded on both sides, so however it is planned it reads that range only. The terms
        of one range are computed while the server stores the last."""
        digest = session_digest(agent_id, session_id)
        stop, generation = state["next_seq"], state["generation"]
        low = state["indexed_seq"]
        seqs, messages = list(state["pending"]), pending
        storing: asyncio.Future[Any] | None = None
        try:
            while True:
                high = min(low + _INDEX_CHUNK, stop)
                last = high >= stop
                texts = [searchable_terms(digest, message_terms(m)) for m in messages]
                if storing is not None:
                    await storing
                    storing = None
                if seqs or last:  # the last statement marks the session indexed, even with no rows to store
                    storing = asyncio.ensure_future(
                        self.db.execute(self._index_query, agent_id, session_id, seqs, texts, stop, generation, last)
                    )
                if last:
                    break
                low = high
                rows = await self.db.fetch(
                    self._unindexed_query, agent_id, session_id, low, min(low + _INDEX_CHUNK, stop)
                )
                seqs, messages = [r["seq"] for r in rows], messages_from_json([r["body"] for r in rows])
            if storing is not None:
                await storing
        finally:
            if storing is not None and not storing.done():
                storing.cancel()

    async def forget(self, agent_id: str, *, session_id: str | None = None) -> int:
        """Erase the session (every session of the agent when ``session_id`` is ``None``): its messages with
        their terms, its summaries, its embeddings and its session record, generation included (``Forgetter``),
        in one transaction; returns how many messages it held. Other processes' cached copies are never used
        again: every read checks the session's generation on the server, and a summary or terms written back
        under the old generation are refused, as after ``clear``.

        The sessions' records go first (their rows locked, as appends lock them, waiting for appends under way),
        then the messages and what is derived from them, in later statements that see every append committed
        before: removed the other way round, or in one statement, an append committed meanwhile outlived its
        session's record, and the next append to the session failed on a position it held."""
        check_forget(agent_id, session_id)
        where = "agent_id = $1" if session_id is None else "agent_id = $1 AND session_id = $2"
        args = (agent_id,) if session_id is None else (agent_id, session_id)
        tables = [self._summaries]
        embeddings, embedded = self.db.table("embeddings"), self.db.table("embedded")
        if await self.db.fetchval("SELECT to_regclass($1) IS NOT NULL", embeddings):
            tables += [embeddings, embedded]
        for attempt in range(1, _ATTEMPTS + 1):
            try:
                async with self.db.connection() as connection, connection.transaction():
                    await connection.execute(f"DELETE FROM {self._sessions} WHERE {where}", *args)
                    status = await connection.execute(f"DELETE FROM {self._messages} WHERE {where}", *args)
                    for table in tables:
                        await connection.execute(f"DELETE FROM {table} WHERE {where}", *args)
                break
            except BackendUnavailable as error:  # a deadlock the server broke: nothing was done, run it again
                if attempt == _ATTEMPTS or not isinstance(error.__cause__, _RETRIED):
                    raise
        self._cache.drop(agent_id, session_id)
        self._windows.drop(agent_id, session_id)
        self._parsed.drop(agent_id, session_id)
        return int(status.split()[-1])

    async def list_sessions(self, agent_id: str, *, limit: int = 100) -> list[str]:
        """Up to ``limit`` of the agent's session ids that hold messages, sorted (byte order)."""
        check_scope(agent_id=agent_id)
        most, _ = check_page(limit, 0)
        rows = await self.db.fetch(
            f"SELECT s.session_id FROM {self._sessions} s WHERE s.agent_id = $1 AND EXISTS ("
            f"SELECT 1 FROM {self._messages} m WHERE m.agent_id = s.agent_id AND m.session_id = s.session_id) "
            'ORDER BY s.session_id COLLATE "C" LIMIT $2',
            agent_id,
            most,
        )
        return [r["session_id"] for r in rows]

    async def count_messages(self, agent_id: str, *, session_id: str) -> int:
        """How many messages the session holds (an index-only count)."""
        check_scope(agent_id=agent_id, session_id=session_id)
        count = await self.db.fetchval(
            f"SELECT count(*) FROM {self._messages} WHERE agent_id = $1 AND session_id = $2", agent_id, session_id
        )
        return int(count)


__all__ = [
    "MIGRATIONS",
    "PostgresHistoryProvider",
    "message_terms",
    "searchable_terms",
    "session_digest",
]
