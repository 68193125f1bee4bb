"""``PostgresHistoryProvider``: durable conversation history on PostgreSQL."""

from __future__ import annotations

import asyncio
import hashlib
import math
from bisect import bisect_left
from collections import Counter, OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Unpack

from ravi.capabilities.postgres._db import Migration, PoolOptions, PostgresStore
from ravi.capabilities.postgres.options import PostgresHistoryOptions
from ravi.kernel.messages import ChatMessage, messages_from_json
from ravi.kernel.search import UnitMatch, message_text, terms, unit_end
from ravi.kernel.storage.history import HistoryWindow, check_append, check_search, window_of
from ravi.kernel.tokens import stored_tokens
from ravi.kernel.values import check_page, check_scope

MIGRATIONS = [
    Migration(
        1,
        "sessions and messages",
        """
CREATE TABLE {schema}."{prefix}sessions" (
    agent_id   text   NOT NULL,
    session_id text   NOT NULL,
    next_seq   bigint NOT NULL DEFAULT 0,
    epoch      bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (agent_id, session_id)
);
CREATE TABLE {schema}."{prefix}messages" (
    agent_id   text   NOT NULL,
    session_id text   NOT NULL,
    seq        bigint NOT NULL,
    run_id     text   NOT NULL,
    message_id text   NOT NULL,
    body       text   NOT NULL,
    PRIMARY KEY (agent_id, session_id, seq),
    UNIQUE (agent_id, session_id, message_id)
);
CREATE INDEX "{prefix}messages_by_run" ON {schema}."{prefix}messages" (agent_id, session_id, run_id);

-- One round trip per batch. The session row is locked first, so appends to one session are serialised and
-- numbered without gaps; each later statement takes a fresh snapshot and sees every earlier append.
CREATE FUNCTION {schema}."{prefix}append_messages"(
    p_agent text, p_session text, p_run text, p_ids text[], p_bodies text[]
) RETURNS integer LANGUAGE plpgsql AS $fn$
DECLARE
    base bigint;
    added integer;
BEGIN
    INSERT INTO {schema}."{prefix}sessions" AS s (agent_id, session_id) VALUES (p_agent, p_session)
        ON CONFLICT (agent_id, session_id) DO UPDATE SET next_seq = s.next_seq
        RETURNING s.next_seq INTO base;
    WITH incoming AS (
        SELECT t.message_id, t.body, t.ord FROM unnest(p_ids, p_bodies) WITH ORDINALITY AS t(message_id, body, ord)
    ), firsts AS (
        SELECT DISTINCT ON (message_id) message_id, body, ord FROM incoming ORDER BY message_id, ord
    ), fresh AS (
        SELECT f.message_id, f.body, f.ord FROM firsts f
        WHERE NOT EXISTS (SELECT 1 FROM {schema}."{prefix}messages" m
                          WHERE m.agent_id = p_agent AND m.session_id = p_session AND m.message_id = f.message_id)
    )
    INSERT INTO {schema}."{prefix}messages" (agent_id, session_id, seq, run_id, message_id, body)
    SELECT p_agent, p_session, base + row_number() OVER (ORDER BY ord) - 1, p_run, message_id, body FROM fresh;
    GET DIAGNOSTICS added = ROW_COUNT;
    UPDATE {schema}."{prefix}sessions" SET next_seq = base + added
        WHERE agent_id = p_agent AND session_id = p_session;
    RETURN added;
END
$fn$;
""",
    ),
    Migration(
        2,
        "stored token counts and roles, for windowed reads",
        """
-- Each message keeps its stored token count and the running total of its session up to and including it; the
-- session keeps its total. NULL counts (rows written before this version) are filled in on the first windowed
-- read of their session.
ALTER TABLE {schema}."{prefix}messages" ADD COLUMN role text, ADD COLUMN tokens integer, ADD COLUMN cum_tokens bigint;
UPDATE {schema}."{prefix}messages" SET role = body::jsonb ->> 'role';
ALTER TABLE {schema}."{prefix}sessions" ADD COLUMN total_tokens bigint;
UPDATE {schema}."{prefix}sessions" s SET total_tokens = 0 WHERE NOT EXISTS (
    SELECT 1 FROM {schema}."{prefix}messages" m WHERE m.agent_id = s.agent_id AND m.session_id = s.session_id);
ALTER TABLE {schema}."{prefix}sessions" ALTER COLUMN total_tokens SET DEFAULT 0;
CREATE INDEX "{prefix}messages_systems" ON {schema}."{prefix}messages" (agent_id, session_id, seq)
    WHERE role = 'system';
DROP FUNCTION {schema}."{prefix}append_messages"(text, text, text, text[], text[]);

CREATE FUNCTION {schema}."{prefix}append_messages"(
    p_agent text, p_session text, p_run text, p_ids text[], p_bodies text[], p_roles text[], p_tokens integer[]
) RETURNS integer LANGUAGE plpgsql AS $fn$
DECLARE
    base bigint;
    total bigint;
    added integer;
    added_tokens bigint;
BEGIN
    INSERT INTO {schema}."{prefix}sessions" AS s (agent_id, session_id) VALUES (p_agent, p_session)
        ON CONFLICT (agent_id, session_id) DO UPDATE SET next_seq = s.next_seq
        RETURNING s.next_seq, s.total_tokens INTO base, total;
    WITH incoming AS (
        SELECT t.message_id, t.body, t.role, t.tokens, t.ord
        FROM unnest(p_ids, p_bodies, p_roles, p_tokens) WITH ORDINALITY AS t(message_id, body, role, tokens, ord)
    ), firsts AS (
        SELECT DISTINCT ON (message_id) message_id, body, role, tokens, ord FROM incoming ORDER BY message_id, ord
    ), fresh AS (
        SELECT f.* FROM firsts f
        WHERE NOT EXISTS (SELECT 1 FROM {schema}."{prefix}messages" m
                          WHERE m.agent_id = p_agent AND m.session_id = p_session AND m.message_id = f.message_id)
    )
    , inserted AS (
        INSERT INTO {schema}."{prefix}messages"
            (agent_id, session_id, seq, run_id, message_id, body, role, tokens, cum_tokens)
        SELECT p_agent, p_session, base + row_number() OVER (ORDER BY ord) - 1, p_run, message_id, body, role,
               tokens, total + sum(tokens) OVER (ORDER BY ord)
        FROM fresh
        RETURNING tokens
    )
    SELECT count(*), coalesce(sum(tokens), 0) INTO added, added_tokens FROM inserted;
    UPDATE {schema}."{prefix}sessions" SET next_seq = base + added, total_tokens = total + added_tokens
        WHERE agent_id = p_agent AND session_id = p_session;
    RETURN added;
END
$fn$;
""",
    ),
    Migration(
        3,
        "appends probe each incoming id through the unique index, never the session",
        """
-- A batch is inserted as it comes; the unique index on message ids skips ids the session already holds (a
-- retried append) or that the batch repeats, one index probe per row whatever the planner's statistics say.
-- Only when some were skipped are the batch's rows renumbered, so the numbering stays gap-free. The session row
-- is locked first, as before, so appends to one session are serialised.
CREATE OR REPLACE FUNCTION {schema}."{prefix}append_messages"(
    p_agent text, p_session text, p_run text, p_ids text[], p_bodies text[], p_roles text[], p_tokens integer[]
) RETURNS integer LANGUAGE plpgsql AS $fn$
DECLARE
    base bigint;
    total bigint;
    added integer;
    added_tokens bigint;
BEGIN
    SELECT s.next_seq, s.total_tokens INTO base, total FROM {schema}."{prefix}sessions" s
        WHERE s.agent_id = p_agent AND s.session_id = p_session FOR UPDATE;
    IF NOT FOUND THEN
        INSERT INTO {schema}."{prefix}sessions" AS s (agent_id, session_id) VALUES (p_agent, p_session)
            ON CONFLICT (agent_id, session_id) DO UPDATE SET next_seq = s.next_seq
            RETURNING s.next_seq, s.total_tokens INTO base, total;
    END IF;
    WITH inserted AS (
        INSERT INTO {schema}."{prefix}messages"
            (agent_id, session_id, seq, run_id, message_id, body, role, tokens, cum_tokens)
        SELECT p_agent, p_session, base + t.ord - 1, p_run, t.message_id, t.body, t.role, t.tokens,
               total + sum(t.tokens) OVER (ORDER BY t.ord)
        FROM unnest(p_ids, p_bodies, p_roles, p_tokens) WITH ORDINALITY AS t(message_id, body, role, tokens, ord)
        ORDER BY t.ord
        ON CONFLICT (agent_id, session_id, message_id) DO NOTHING
        RETURNING tokens
    )
    SELECT count(*), coalesce(sum(tokens), 0) INTO added, added_tokens FROM inserted;
    IF added < cardinality(p_ids) THEN
        -- some rows were skipped: number the inserted ones without gaps (through negative numbers, so no two
        -- rows ever share a number on the way), with their running totals
        WITH numbered AS (
            SELECT m.seq, base + row_number() OVER (ORDER BY m.seq) - 1 AS renumbered,
                   total + sum(m.tokens) OVER (ORDER BY m.seq) AS cum
            FROM {schema}."{prefix}messages" m
            WHERE m.agent_id = p_agent AND m.session_id = p_session AND m.seq >= base
        )
        UPDATE {schema}."{prefix}messages" m SET seq = -n.renumbered - 1, cum_tokens = n.cum FROM numbered n
            WHERE m.agent_id = p_agent AND m.session_id = p_session AND m.seq = n.seq;
        UPDATE {schema}."{prefix}messages" SET seq = -seq - 1
            WHERE agent_id = p_agent AND session_id = p_session AND seq < 0;
    END IF;
    UPDATE {schema}."{prefix}sessions" SET next_seq = base + added, total_tokens = total + added_tokens
        WHERE agent_id = p_agent AND session_id = p_session;
    RETURN added;
END
$fn$;
""",
    ),
    Migration(
        4,
        "searchable terms of each message, for relevant recall",
        """
-- The searchable terms of each message (ravi.kernel.search.terms, counted) as a tsvector whose lexemes carry a
-- digest of the session, so the GIN index finds one session's matches without touching any other's. Appends do
-- not write them: the first search of a session after an append indexes the rows it lacks (below
-- ``indexed_seq``, every row has its terms), so sessions that are never searched cost nothing more.
ALTER TABLE {schema}."{prefix}messages" ADD COLUMN terms tsvector;
CREATE INDEX "{prefix}messages_terms" ON {schema}."{prefix}messages" USING gin (terms);
ALTER TABLE {schema}."{prefix}sessions" ADD COLUMN indexed_seq bigint NOT NULL DEFAULT 0;
-- The primary key is the one index that leads with (agent_id, session_id), so every read of a session walks it
-- in seq order, whatever the statistics say: the run index and the unique ids lead with their own column.
DROP INDEX {schema}."{prefix}messages_by_run";
CREATE INDEX "{prefix}messages_by_run" ON {schema}."{prefix}messages" (run_id, agent_id, session_id);
CREATE UNIQUE INDEX "{prefix}messages_ids" ON {schema}."{prefix}messages" (message_id, agent_id, session_id);
ALTER TABLE {schema}."{prefix}messages" DROP CONSTRAINT "{prefix}messages_agent_id_session_id_message_id_key";
""",
    ),
    Migration(
        5,
        "a retried batch renumbers only its own rows",
        """
-- The rows a batch inserted lie in [base, base + batch size): bounding the renumbering on both sides keeps it on
-- the primary key once the function's plans are generic, where ``seq >= base`` alone was planned as a third of
-- the table and scanned it whole.
CREATE OR REPLACE FUNCTION {schema}."{prefix}append_messages"(
    p_agent text, p_session text, p_run text, p_ids text[], p_bodies text[], p_roles text[], p_tokens integer[]
) RETURNS integer LANGUAGE plpgsql AS $fn$
DECLARE
    base bigint;
    total bigint;
    added integer;
    added_tokens bigint;
BEGIN
    SELECT s.next_seq, s.total_tokens INTO base, total FROM {schema}."{prefix}sessions" s
        WHERE s.agent_id = p_agent AND s.session_id = p_session FOR UPDATE;
    IF NOT FOUND THEN
        INSERT INTO {schema}."{prefix}sessions" AS s (agent_id, session_id) VALUES (p_agent, p_session)
            ON CONFLICT (agent_id, session_id) DO UPDATE SET next_seq = s.next_seq
            RETURNING s.next_seq, s.total_tokens INTO base, total;
    END IF;
    WITH inserted AS (
        INSERT INTO {schema}."{prefix}messages"
            (agent_id, session_id, seq, run_id, message_id, body, role, tokens, cum_tokens)
        SELECT p_agent, p_session, base + t.ord - 1, p_run, t.message_id, t.body, t.role, t.tokens,
               total + sum(t.tokens) OVER (ORDER BY t.ord)
        FROM unnest(p_ids, p_bodies, p_roles, p_tokens) WITH ORDINALITY AS t(message_id, body, role, tokens, ord)
        ORDER BY t.ord
        ON CONFLICT (agent_id, session_id, message_id) DO NOTHING
        RETURNING tokens
    )
    SELECT count(*), coalesce(sum(tokens), 0) INTO added, added_tokens FROM inserted;
    IF added < cardinality(p_ids) THEN
        -- some rows were skipped: number the inserted ones without gaps (through negative numbers, so no two
        -- rows ever share a number on the way), with their running totals
        WITH numbered AS (
            SELECT m.seq, base + row_number() OVER (ORDER BY m.seq) - 1 AS renumbered,
                   total + sum(m.tokens) OVER (ORDER BY m.seq) AS cum
            FROM {schema}."{prefix}messages" m
            WHERE m.agent_id = p_agent AND m.session_id = p_session
              AND m.seq >= base AND m.seq < base + cardinality(p_ids)
        )
        UPDATE {schema}."{prefix}messages" m SET seq = -n.renumbered - 1, cum_tokens = n.cum FROM numbered n
            WHERE m.agent_id = p_agent AND m.session_id = p_session AND m.seq = n.seq;
        UPDATE {schema}."{prefix}messages" SET seq = -seq - 1
            WHERE agent_id = p_agent AND session_id = p_session AND seq < 0;
    END IF;
    UPDATE {schema}."{prefix}sessions" SET next_seq = base + added, total_tokens = total + added_tokens
        WHERE agent_id = p_agent AND session_id = p_session;
    RETURN added;
END
$fn$;
""",
    ),
    Migration(
        6,
        "appends leave the terms index alone",
        """
-- Rows are appended without terms (a search indexes them later); a GIN index keeps an entry even for a NULL
-- value, so every append wrote to it. Only rows with terms are indexed now: every search condition on terms
-- (``terms @@ query``) implies that they are not NULL, so the searches use it as before.
DROP INDEX {schema}."{prefix}messages_terms";
CREATE INDEX "{prefix}messages_terms" ON {schema}."{prefix}messages" USING gin (terms) WHERE terms IS NOT NULL;
""",
    ),
]


_INDEXED_CHARS = 100_000
_LONGEST_TERM = 200
_RANKED = 2_000
"""How many messages a search ranks at most beyond those holding its rarest term."""
_INDEX_CHUNK = 2_000
"""How many rows the terms index takes in one statement."""


def session_digest(agent_id: str, session_id: str) -> str:
    """The prefix of a session's lexemes: 8 hex digits of a digest of ``(agent_id, session_id)``, so the terms
    index finds one session's matches without touching the others' (a collision only costs a filtered row)."""
    return hashlib.sha256(f"{agent_id}\x00{session_id}".encode()).hexdigest()[:8] + ":"


def _quoted(lexeme: str) -> str:
    if "'" in lexeme or "\\" in lexeme:
        return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"
    return "'" + lexeme + "'"


# A term's positions in the tsvector text: ``1``, ``1,2``, ... up to 256 of them, written once.
_POSITIONS = [",".join(map(str, range(1, n + 1))) for n in range(257)]


def message_terms(message: ChatMessage) -> Counter[str]:
    """The terms a message is indexed under, with how often each occurs: those of its first 100,000 characters
    (a tsvector holds at most 1 MB) up to 200 characters long (longer "words" are blobs, never asked for)."""
    counted = Counter(terms(message_text(message)[:_INDEXED_CHARS]))
    for term in [t for t in counted if len(t) > _LONGEST_TERM]:
        del counted[term]
    return counted


def searchable_terms(scope: str, counted: Counter[str]) -> str:
    """The tsvector text of a message's terms (:func:`message_terms`): each prefixed with the session's digest,
    with as many positions as it occurs (at most 256), so a search can weigh repeated terms."""
    return " ".join(f"{_quoted(scope + term)}:{_POSITIONS[min(n, 256)]}" for term, n in counted.items())


@dataclass(frozen=True)
class _Cached:
    """A session as read at one moment: replaced, never changed."""

    epoch: int
    next_seq: int
    messages: list[ChatMessage]


@dataclass(frozen=True)
class _Window:
    """The messages of the last window read from a session, by seq, in one life (``epoch``) of the session: its
    tail (seq ``low`` to ``high``) and the system messages before it."""

    epoch: int
    low: int
    high: int
    seqs: list[int]
    messages: list[ChatMessage]


class PostgresHistoryProvider(PostgresStore):
    """The ``HistoryProvider`` contract on PostgreSQL (asyncpg, a connection pool).

    * Each session's messages are numbered in a strict order with no gaps or duplicates, even with many
      concurrent writers (appends to one session are serialised by a row lock on the session).
    * ``append_many`` is one round trip; a retried append of a message id already in the session is ignored.
    * ``get_messages`` is one query served by the primary key. Messages are immutable, so the provider keeps
      the sessions it read last (``cache_sessions`` of them) and fetches only what was appended since; a
      ``clear`` or ``clear_run`` from any process bumps the session's epoch and invalidates the copy.
    * ``clear_run`` and ``count_messages`` use indexes, not scans.

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
        self._cache: OrderedDict[tuple[str, str], _Cached] = OrderedDict()
        self._windows: OrderedDict[tuple[str, str], _Window] = OrderedDict()
        self._cache_size = cache_sessions
        m, sessions = self._messages, self._sessions
        scope = "m.agent_id = $1 AND m.session_id = $2"
        # One statement, one snapshot. Each range of seqs is bounded on both sides, even where one bound holds
        # for every row (below next_seq): a bound computed in the statement is unknown when it is planned, and
        # with statistics the planner takes a one-sided range for a third of the table and scans it whole.
        # The tail starts at the newest message whose running total before it is
        # below (total - tokens), moved back to a message that is neither a tool result nor a system message;
        # rows of the last window this process read (same epoch: its tail, seq in [$5, $6], and the system
        # messages before it) are not sent again: the provider still has them parsed.
        self._window_query = f"""
WITH s AS (SELECT epoch, total_tokens AS total, next_seq FROM {sessions} WHERE agent_id = $1 AND session_id = $2),
cut AS (SELECT CASE WHEN (SELECT total FROM s) - $3 <= 0 THEN -1 ELSE coalesce((
              SELECT m.seq FROM {m} m WHERE {scope} AND m.cum_tokens - m.tokens < (SELECT total FROM s) - $3
              ORDER BY m.seq DESC LIMIT 1), -1) END AS seq),
start AS (SELECT CASE WHEN (SELECT seq FROM cut) < 0 THEN -1 ELSE coalesce((
              SELECT m.seq FROM {m} m WHERE {scope} AND m.seq <= (SELECT seq FROM cut)
              AND m.role NOT IN ('tool', 'system') ORDER BY m.seq DESC LIMIT 1), -1) END AS seq),
info AS (SELECT s.epoch, s.total, start.seq AS start, s.epoch = $4 AS hit, (
              SELECT m.seq FROM {m} m WHERE {scope} AND m.seq < start.seq AND m.role <> 'system'
              ORDER BY m.seq LIMIT 1) IS NULL AS complete, coalesce((
              SELECT m.cum_tokens - m.tokens FROM {m} m WHERE {scope} AND m.seq = start.seq), 0) AS before
         FROM s, start),
picked AS (
    (SELECT m.seq, m.tokens, m.body FROM {m} m WHERE {scope}
        AND m.seq >= (SELECT CASE WHEN hit THEN greatest(start, $6 + 1) ELSE start END FROM info)
        AND m.seq < (SELECT next_seq FROM s)
        ORDER BY m.seq)
    UNION ALL
    (SELECT m.seq, m.tokens, m.body FROM {m} m WHERE {scope} AND (SELECT hit FROM info)
        AND m.seq >= (SELECT start FROM info) AND m.seq < $5 AND m.role <> 'system'
        ORDER BY m.seq)
    UNION ALL
    (SELECT m.seq, m.tokens, m.body FROM {m} m WHERE {scope} AND m.role = 'system'
        AND m.seq < (SELECT start FROM info) AND (NOT (SELECT hit FROM info) OR m.seq > $6)
        ORDER BY m.seq)
)
SELECT info.epoch, info.total, info.start, info.complete, info.before, p.seq, p.tokens, p.body
FROM info LEFT JOIN picked p ON true ORDER BY p.seq"""

        # A whole read, in one statement: the session's epoch and next number, and every message appended since
        # the copy of epoch $3 that holds the rows below $4 was made.
        self._refresh_query = f"""
SELECT s.epoch, s.next_seq, m.seq, m.body FROM {sessions} s
LEFT JOIN {m} m ON m.agent_id = s.agent_id AND m.session_id = s.session_id
    AND m.seq >= CASE WHEN s.epoch = $3 THEN $4 ELSE 0 END AND m.seq < s.next_seq
WHERE s.agent_id = $1 AND s.session_id = $2 ORDER BY m.seq"""

        # Relevant recall's search, in two statements. The first counts the session's messages that hold each
        # query term (df), from the terms index alone (the session digest in each lexeme keeps the count to the
        # session), up to a cap: a term held by more messages is common, and its exact count does not matter.
        # The second ranks, by BM25 (a term counted once per message, a message's length its number of distinct
        # terms against the average of those matched), the messages before offset $6 that hold one of the rarer
        # terms (those the first statement picked), takes the best (2 x $7) to their units (a tool result to its
        # call, a call to the results after it) and returns each unit's rows with the id of the system message
        # before it. Every read of a session walks its primary key.
        self._df_query = f"""
SELECT s.epoch, s.indexed_seq, s.next_seq, s.total_tokens IS NULL AS uncounted, ARRAY(
    SELECT (SELECT count(*) FROM (
        SELECT 1 FROM (SELECT m.agent_id, m.session_id FROM {m} m WHERE m.terms @@ t.query::tsquery OFFSET 0) x
        WHERE x.agent_id = $1 AND x.session_id = $2 LIMIT $4) c)
    FROM unnest($3::text[]) WITH ORDINALITY AS t(query, i) ORDER BY t.i) AS dfs, ARRAY(
    SELECT m.seq FROM {m} m WHERE m.agent_id = $1 AND m.session_id = $2 AND m.seq >= s.indexed_seq
    AND m.seq < s.next_seq AND m.terms IS NULL ORDER BY m.seq LIMIT $5) AS pending, ARRAY(
    SELECT m.body FROM {m} m WHERE m.agent_id = $1 AND m.session_id = $2 AND m.seq >= s.indexed_seq
    AND m.seq < s.next_seq AND m.terms IS NULL ORDER BY m.seq LIMIT $5) AS bodies
FROM {sessions} s WHERE s.agent_id = $1 AND s.session_id = $2"""
        # Store the terms of rows the index lacks, and mark the session indexed up to $5 (if still in epoch $6:
        # a clear or clear_run in between may have changed the rows). A row another searcher has indexed in the
        # meantime is left as it is. The seqs come sorted, and the range they span bounds the rows joined:
        # without it the planner may hash the whole session for each chunk.
        self._index_query = f"""
WITH stored AS (UPDATE {m} m SET terms = u.terms::tsvector FROM unnest($3::bigint[], $4::text[]) AS u(seq, terms)
                WHERE m.agent_id = $1 AND m.session_id = $2 AND m.seq = u.seq AND m.terms IS NULL
                AND m.seq BETWEEN $3[1] AND $3[cardinality($3)] RETURNING 1)
UPDATE {sessions} s SET indexed_seq = $5
WHERE s.agent_id = $1 AND s.session_id = $2 AND s.indexed_seq < $5 AND s.epoch = $6 AND $7"""
        self._search_query = f"""
WITH q AS MATERIALIZED (SELECT t.query::tsquery AS query, t.idf FROM unnest($3::text[], $4::float8[]) AS t(query, idf)),
hits AS MATERIALIZED (SELECT x.seq, x.role, x.terms FROM (
             SELECT m.agent_id, m.session_id, m.seq, m.role, m.terms, m.cum_tokens, m.tokens FROM {m} m
             WHERE m.terms @@ $5::tsquery OFFSET 0) x
         WHERE x.agent_id = $1 AND x.session_id = $2 AND x.role <> 'system' AND x.cum_tokens - x.tokens < $6),
average AS MATERIALIZED (SELECT greatest(avg(length(terms)), 1) AS len FROM hits),
top AS MATERIALIZED (SELECT h.seq, h.role, (SELECT sum(q.idf) FROM q WHERE h.terms @@ q.query) * 2.2
                            / (1 + 1.2 * (0.25 + 0.75 * length(h.terms) / a.len)) AS score
         FROM hits h, average a ORDER BY score DESC, h.seq DESC LIMIT $7 * 2),
keyed AS MATERIALIZED (SELECT t.seq, t.score, CASE WHEN t.role = 'tool' THEN coalesce((
              SELECT o.seq FROM {m} o WHERE o.agent_id = $1 AND o.session_id = $2 AND o.seq < t.seq
              AND o.role NOT IN ('tool', 'system') ORDER BY o.seq DESC LIMIT 1), t.seq) ELSE t.seq END AS opener
          FROM top t),
spans AS MATERIALIZED (SELECT k.opener, coalesce((
              SELECT n.seq FROM {m} n WHERE n.agent_id = $1 AND n.session_id = $2 AND n.seq > k.opener
              AND n.role NOT IN ('tool', 'system') ORDER BY n.seq LIMIT 1), 9223372036854775807) AS stop, (
              SELECT y.message_id FROM {m} y WHERE y.agent_id = $1 AND y.session_id = $2 AND y.role = 'system'
              AND y.seq < k.opener ORDER BY y.seq DESC LIMIT 1) AS after_system
          FROM (SELECT DISTINCT opener FROM keyed) k)
SELECT sp.opener, sp.after_system, r.seq, r.body, r.offset, k.score
FROM spans sp CROSS JOIN LATERAL (
    SELECT m.seq, m.body, m.cum_tokens - m.tokens AS offset FROM {m} m
    WHERE m.agent_id = $1 AND m.session_id = $2 AND m.seq >= sp.opener AND m.seq < sp.stop OFFSET 0) r
LEFT JOIN keyed k ON k.seq = r.seq
ORDER BY sp.opener, r.seq"""

    async def append(self, agent_id: str, message: ChatMessage, *, session_id: str, run_id: str = "") -> None:
        """Add one message at the end of the session."""
        await self.append_many(agent_id, [message], session_id=session_id, run_id=run_id)

    async def append_many(
        self, agent_id: str, messages: Sequence[ChatMessage], *, session_id: str, run_id: str = ""
    ) -> None:
        """Add messages at the end of the session in one round trip, all or none."""
        check_append(agent_id, session_id, run_id, messages)
        if not messages:
            return
        ids = [m.id for m in messages]
        bodies = [m.model_dump_json() for m in messages]
        roles = [m.role for m in messages]
        tokens = [stored_tokens(m) for m in messages]
        await self.db.fetchval(
            f"SELECT {self._append}($1, $2, $3, $4, $5, $6, $7)",
            *(agent_id, session_id, run_id, ids, bodies, roles, tokens),
        )

    async def get_messages(
        self, agent_id: str, *, session_id: str, limit: int | None = None, offset: int = 0
    ) -> list[ChatMessage]:
        """The session's messages, oldest first, from ``offset``, at most ``limit``; one query."""
        check_scope(agent_id=agent_id, session_id=session_id)
        check_page(limit, offset)
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

    async def _refresh(self, agent_id: str, session_id: str) -> list[ChatMessage]:
        key = (agent_id, session_id)
        # A snapshot: the copy is never changed in place, so concurrent readers that start from the same copy
        # each build their own newer one from it, and none can add the same rows twice.
        base = self._cache.get(key)
        rows = await self.db.fetch(
            self._refresh_query,
            agent_id,
            session_id,
            base.epoch if base else -1,
            base.next_seq if base else 0,
        )
        if not rows:
            self._cache.pop(key, None)
            return []
        epoch, next_seq = rows[0]["epoch"], rows[0]["next_seq"]
        fresh = messages_from_json([r["body"] for r in rows if r["body"] is not None])
        if base is not None and base.epoch == epoch:
            copy = _Cached(epoch, next_seq, base.messages + fresh if fresh else base.messages)
        else:
            copy = _Cached(epoch, next_seq, fresh)
        current = self._cache.get(key)
        # Keep whichever copy is newer: a slower reader must not put back an older one (or one of a cleared epoch).
        if current is None or current is base or (current.epoch, current.next_seq) <= (copy.epoch, copy.next_seq):
            self._cache[key] = copy
            self._cache.move_to_end(key)
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return copy.messages  # never changed in place: callers get slices of it

    async def clear(self, agent_id: str, *, session_id: str) -> int:
        """Remove the session; returns how many messages it held."""
        check_scope(agent_id=agent_id, session_id=session_id)
        async with self.db.connection() as connection, connection.transaction():
            await connection.execute(
                f"UPDATE {self._sessions} SET epoch = epoch + 1, next_seq = 0, total_tokens = 0, indexed_seq = 0 "
                "WHERE agent_id = $1 AND session_id = $2",
                agent_id,
                session_id,
            )
            status = await connection.execute(
                f"DELETE FROM {self._messages} WHERE agent_id = $1 AND session_id = $2", agent_id, session_id
            )
        self._cache.pop((agent_id, session_id), None)
        self._windows.pop((agent_id, session_id), None)
        return int(status.split()[-1])

    async def clear_run(self, agent_id: str, *, session_id: str, run_id: str) -> int:
        """Remove exactly the messages ``run_id`` wrote to the session; returns how many."""
        check_scope(agent_id=agent_id, session_id=session_id, run_id=run_id)
        async with self.db.connection() as connection, connection.transaction():
            status = await connection.execute(
                f"DELETE FROM {self._messages} WHERE agent_id = $1 AND session_id = $2 AND run_id = $3",
                agent_id,
                session_id,
                run_id,
            )
            removed = int(status.split()[-1])
            if removed:
                await self._recount_running_totals(connection, agent_id, session_id)
                await connection.execute(
                    f"UPDATE {self._sessions} SET epoch = epoch + 1 WHERE agent_id = $1 AND session_id = $2",
                    agent_id,
                    session_id,
                )
        if removed:
            self._cache.pop((agent_id, session_id), None)
            self._windows.pop((agent_id, session_id), None)
        return removed

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
        check_page(tokens, 0)
        key = (agent_id, session_id)
        cached = self._windows.get(key)
        rows = await self.db.fetch(
            self._window_query,
            agent_id,
            session_id,
            tokens,
            cached.epoch if cached else -1,
            cached.low if cached else 0,
            cached.high if cached else -1,
        )
        if not rows:  # no such session
            self._windows.pop(key, None)
            return HistoryWindow([], 0, True)
        first = rows[0]
        start = first["start"]
        found = [r for r in rows if r["seq"] is not None]
        fresh_seqs: list[int] = [r["seq"] for r in found]
        fresh = messages_from_json([r["body"] for r in found], [r["tokens"] for r in found])
        seqs, messages = fresh_seqs, fresh
        if cached is not None and cached.epoch == first["epoch"]:  # what this view shares with the last one
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
            self._windows.pop(key, None)
            return HistoryWindow([], 0, True)
        if first["total"] is None:  # written before counts were kept: this read was of the whole session
            await self._recount(agent_id, session_id)
            view = window_of(messages, tokens)
            start = -1
        else:
            view = HistoryWindow(messages, bisect_left(seqs, start), bool(first["complete"]), int(first["before"]))
        if self._cache_size:
            low = seqs[bisect_left(seqs, start)] if bisect_left(seqs, start) < len(seqs) else seqs[-1] + 1
            self._windows[key] = _Window(first["epoch"], low, seqs[-1], seqs, messages)
            self._windows.move_to_end(key)
            while len(self._windows) > self._cache_size:
                self._windows.popitem(last=False)
        return view

    async def search_units(
        self, agent_id: str, *, session_id: str, query: str, before: int, limit: int
    ) -> list[UnitMatch]:
        """The units before offset ``before`` that best match ``query`` (``HistorySearcher``): one query, BM25
        over the session's terms index, so recall never reads the session. Rows appended since the session's last
        search are indexed first (by this search, once for every process)."""
        check_scope(agent_id=agent_id, session_id=session_id)
        check_search(query, before, limit)
        words = sorted({t for t in terms(query) if len(t) <= _LONGEST_TERM})
        if not words or not limit:
            return []
        digest = session_digest(agent_id, session_id)
        quoted = [_quoted(digest + w) for w in words]
        state = await self._search_state(agent_id, session_id, quoted)
        if state is None:
            return []
        dfs = list(state["dfs"])
        if state["pending"]:  # rows appended since the last search: index them, and count them in
            counted = [message_terms(m) for m in messages_from_json(state["bodies"])]
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
                state["epoch"],
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
        rows = await self.db.fetch(
            self._search_query, agent_id, session_id, chosen, idfs, " | ".join(chosen), before, limit
        )
        spans: dict[int, list[Any]] = {}
        for r in rows:
            if r["opener"] is not None:
                spans.setdefault(r["opener"], []).append(r)
        found: list[UnitMatch] = []
        for span in spans.values():
            messages = messages_from_json([r["body"] for r in span])
            i = 0
            while i < len(messages):
                j = unit_end(messages, i)
                scores = [r["score"] for r, m in zip(span[i:j], messages[i:j], strict=True) if m.role != "system"]
                best = max((x for x in scores if x is not None), default=None)
                if best is not None and best > 0 and span[i]["offset"] is not None and span[i]["offset"] < before:
                    anchor = span[0]["after_system"]
                    if i:  # a unit after the span's first: the newest system message before it may lie inside
                        anchor = next((m.id for m in reversed(messages[:i]) if m.role == "system"), anchor)
                    found.append(UnitMatch(float(best), tuple(messages[i:j]), int(span[i]["offset"]), anchor))
                i = j
        found.sort(key=lambda u: (-u.score, -u.offset))
        return found[:limit]

    async def _search_state(self, agent_id: str, session_id: str, quoted: list[str]) -> Any:
        """The session's epoch and length, how many of its messages hold each of ``quoted`` (capped), and the
        rows appended since its last search (``pending``, with their ``bodies``), in one statement. A long
        stretch never searched (a session written before the index, or imported) is indexed here first, a
        chunk at a time. ``None`` for a session that does not exist."""
        args = (agent_id, session_id, quoted, _RANKED + 1, _INDEX_CHUNK)
        state = await self.db.fetchrow(self._df_query, *args)
        if state is not None and state["uncounted"]:
            await self._recount(agent_id, session_id)
            state = await self.db.fetchrow(self._df_query, *args)
        while state is not None and len(state["pending"]) >= _INDEX_CHUNK:
            await self._index_stretch(agent_id, session_id, state)
            state = await self.db.fetchrow(self._df_query, *args)
        return state

    async def _index_stretch(self, agent_id: str, session_id: str, state: Any) -> None:
        """Index every row the terms index lacks up to the session's length in ``state``, a chunk a statement,
        and mark the session indexed. The terms of one chunk are computed while the server stores the last."""
        digest = session_digest(agent_id, session_id)
        stop, epoch = state["next_seq"], state["epoch"]
        seqs, bodies = list(state["pending"]), list(state["bodies"])
        storing: asyncio.Future[Any] | None = None
        try:
            while True:
                texts = [searchable_terms(digest, message_terms(m)) for m in messages_from_json(bodies)]
                last = len(seqs) < _INDEX_CHUNK
                if storing is not None:
                    await storing
                storing = asyncio.ensure_future(
                    self.db.execute(self._index_query, agent_id, session_id, seqs, texts, stop, epoch, last)
                )
                if last:
                    break
                rows = await self.db.fetch(
                    f"SELECT seq, body FROM {self._messages} WHERE agent_id = $1 AND session_id = $2 AND seq > $3 "
                    "AND seq < $4 AND terms IS NULL ORDER BY seq LIMIT $5",
                    agent_id,
                    session_id,
                    seqs[-1],
                    stop,
                    _INDEX_CHUNK,
                )
                seqs, bodies = [r["seq"] for r in rows], [r["body"] for r in rows]
            await storing
        finally:
            if storing is not None and not storing.done():
                storing.cancel()

    async def list_sessions(self, agent_id: str, *, limit: int = 100) -> list[str]:
        """Up to ``limit`` of the agent's session ids that hold messages, sorted (byte order)."""
        check_scope(agent_id=agent_id)
        check_page(limit, 0)
        rows = await self.db.fetch(
            f"SELECT s.session_id FROM {self._sessions} s WHERE s.agent_id = $1 AND EXISTS ("
            f"SELECT 1 FROM {self._messages} m WHERE m.agent_id = s.agent_id AND m.session_id = s.session_id) "
            'ORDER BY s.session_id COLLATE "C" LIMIT $2',
            agent_id,
            limit,
        )
        return [r["session_id"] for r in rows]

    async def count_messages(self, agent_id: str, *, session_id: str) -> int:
        """How many messages the session holds (an index-only count)."""
        check_scope(agent_id=agent_id, session_id=session_id)
        count = await self.db.fetchval(
            f"SELECT count(*) FROM {self._messages} WHERE agent_id = $1 AND session_id = $2", agent_id, session_id
        )
        return int(count)


__all__ = ["PostgresHistoryProvider"]
