"""The schema of the Postgres history: its versioned migrations, applied in order on first use."""

from __future__ import annotations

from ravi.capabilities.postgres._db import Migration

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
    Migration(
        7,
        "generations, summaries beside the transcript, message ids as promises, atomic removals",
        """
-- The session's generation: a random token (never a counter, which would start again when a row is removed),
-- replaced in the statement that removes or renumbers messages. Everything derived from the transcript (terms,
-- summaries, caches in every process) is kept or checked under it. ``epoch`` is still advanced beside it, for
-- providers of earlier versions running meanwhile.
ALTER TABLE {schema}."{prefix}sessions"
    ADD COLUMN generation text NOT NULL DEFAULT replace(gen_random_uuid()::text, '-', '');

-- Summaries of a session, by generation and span ('' is the generation of a summary kept unchecked); removed
-- with the messages by clear, clear_run and replace_last.
CREATE TABLE {schema}."{prefix}session_summaries" (
    agent_id   text NOT NULL,
    session_id text NOT NULL,
    generation text NOT NULL,
    span_id    text NOT NULL,
    text       text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (agent_id, session_id, generation, span_id)
);

-- As version 5, and a message id is a promise: when the batch met ids the session holds (a retry), each must
-- hold the same body, else the whole batch is refused (SQLSTATE RV409, the id in DETAIL) and nothing is stored.
CREATE OR REPLACE FUNCTION {schema}."{prefix}append_messages"(
    p_agent text, p_session text, p_run text, p_ids text[], p_bodies text[], p_roles text[], p_tokens integer[]
) RETURNS integer LANGUAGE plpgsql AS $fn$
DECLARE
    base bigint;
    total bigint;
    added integer;
    added_tokens bigint;
    clash text;
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
        SELECT t.message_id INTO clash FROM unnest(p_ids, p_bodies) AS t(message_id, body)
            JOIN {schema}."{prefix}messages" m
              ON m.message_id = t.message_id AND m.agent_id = p_agent AND m.session_id = p_session
            WHERE m.body <> t.body LIMIT 1;
        IF clash IS NOT NULL THEN
            RAISE EXCEPTION 'message id already stored with different content'
                USING ERRCODE = 'RV409', DETAIL = clash;
        END IF;
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

-- Every removal locks the session row first, as appends do, so removals and appends of one session serialise
-- (never deadlock on each other's message rows), and gives the session a new generation in the same statement.
CREATE FUNCTION {schema}."{prefix}clear_session"(p_agent text, p_session text) RETURNS bigint
LANGUAGE plpgsql AS $fn$
DECLARE
    removed bigint;
BEGIN
    UPDATE {schema}."{prefix}sessions"
        SET generation = replace(gen_random_uuid()::text, '-', ''), epoch = epoch + 1, next_seq = 0,
            total_tokens = 0, indexed_seq = 0
        WHERE agent_id = p_agent AND session_id = p_session;
    removed := 0;
    IF FOUND THEN
        DELETE FROM {schema}."{prefix}messages" WHERE agent_id = p_agent AND session_id = p_session;
        GET DIAGNOSTICS removed = ROW_COUNT;
    END IF;
    -- also the summaries kept without a generation for a session never written
    DELETE FROM {schema}."{prefix}session_summaries" WHERE agent_id = p_agent AND session_id = p_session;
    RETURN removed;
END
$fn$;

-- Removes one run's messages and recomputes the running totals of the rows after the first of them.
CREATE FUNCTION {schema}."{prefix}clear_run"(p_agent text, p_session text, p_run text) RETURNS bigint
LANGUAGE plpgsql AS $fn$
DECLARE
    stop bigint;
    removed bigint;
    first_seq bigint;
    removed_tokens bigint;
    prior bigint;
BEGIN
    SELECT s.next_seq INTO stop FROM {schema}."{prefix}sessions" s
        WHERE s.agent_id = p_agent AND s.session_id = p_session FOR UPDATE;
    IF NOT FOUND THEN
        RETURN 0;
    END IF;
    WITH gone AS (
        DELETE FROM {schema}."{prefix}messages"
        WHERE agent_id = p_agent AND session_id = p_session AND run_id = p_run RETURNING seq, tokens
    )
    SELECT count(*), min(seq), sum(tokens) INTO removed, first_seq, removed_tokens FROM gone;
    IF removed = 0 THEN
        RETURN 0;
    END IF;
    SELECT m.cum_tokens INTO prior FROM {schema}."{prefix}messages" m
        WHERE m.agent_id = p_agent AND m.session_id = p_session AND m.seq < first_seq AND m.seq >= 0
        ORDER BY m.seq DESC LIMIT 1;
    UPDATE {schema}."{prefix}messages" m SET cum_tokens = x.cum FROM (
        SELECT r.seq, coalesce(prior, 0) + sum(r.tokens) OVER (ORDER BY r.seq) AS cum
        FROM {schema}."{prefix}messages" r
        WHERE r.agent_id = p_agent AND r.session_id = p_session AND r.seq > first_seq AND r.seq < stop) x
    WHERE m.agent_id = p_agent AND m.session_id = p_session AND m.seq = x.seq AND m.seq > first_seq
      AND m.seq < stop AND m.cum_tokens IS DISTINCT FROM x.cum;
    UPDATE {schema}."{prefix}sessions"
        SET generation = replace(gen_random_uuid()::text, '-', ''), epoch = epoch + 1,
            total_tokens = total_tokens - removed_tokens
        WHERE agent_id = p_agent AND session_id = p_session;
    DELETE FROM {schema}."{prefix}session_summaries" WHERE agent_id = p_agent AND session_id = p_session;
    RETURN removed;
END
$fn$;

-- Every search probes the terms index once per term of its request; GIN keeps recent entries in a pending list
-- that every probe reads whole (up to 4 MB by default, until autovacuum or a full list merges it). A smaller list
-- keeps each probe short; indexing merges it more often.
ALTER INDEX {schema}."{prefix}messages_terms" SET (gin_pending_list_limit = 256);

-- If the newest message is p_last: remove it and append the replacement in its place (the append's checks
-- included), in one statement under the session lock, with a new generation. False (nothing changed) otherwise.
CREATE FUNCTION {schema}."{prefix}replace_last"(
    p_agent text, p_session text, p_last text, p_run text, p_ids text[], p_bodies text[], p_roles text[],
    p_tokens integer[]
) RETURNS boolean LANGUAGE plpgsql AS $fn$
DECLARE
    last_seq bigint;
    last_id text;
    last_tokens integer;
BEGIN
    PERFORM 1 FROM {schema}."{prefix}sessions" s WHERE s.agent_id = p_agent AND s.session_id = p_session FOR UPDATE;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    SELECT m.seq, m.message_id, m.tokens INTO last_seq, last_id, last_tokens FROM {schema}."{prefix}messages" m
        WHERE m.agent_id = p_agent AND m.session_id = p_session ORDER BY m.seq DESC LIMIT 1;
    IF NOT FOUND OR last_id <> p_last THEN
        RETURN false;
    END IF;
    DELETE FROM {schema}."{prefix}messages" WHERE agent_id = p_agent AND session_id = p_session AND seq = last_seq;
    UPDATE {schema}."{prefix}sessions"
        SET generation = replace(gen_random_uuid()::text, '-', ''), epoch = epoch + 1,
            total_tokens = total_tokens - last_tokens
        WHERE agent_id = p_agent AND session_id = p_session;
    DELETE FROM {schema}."{prefix}session_summaries" WHERE agent_id = p_agent AND session_id = p_session;
    IF cardinality(p_ids) > 0 THEN
        PERFORM {schema}."{prefix}append_messages"(p_agent, p_session, p_run, p_ids, p_bodies, p_roles, p_tokens);
    END IF;
    RETURN true;
END
$fn$;
""",
    ),
    Migration(
        8,
        "terms stemmed and with the sender's name: every session indexed again",
        """
-- ravi.kernel.search.terms now takes English inflections off and searches a message's sender too, so terms
-- stored before would not match a request's. They are dropped; the next search of each session indexes its rows
-- again, as it does rows appended since its last search.
UPDATE {schema}."{prefix}messages" SET terms = NULL WHERE terms IS NOT NULL;
UPDATE {schema}."{prefix}sessions" SET indexed_seq = 0 WHERE indexed_seq > 0;
""",
    ),
    Migration(
        9,
        "the primary key is the one index a read of a session can walk",
        """
-- PostgreSQL 18 walks a btree by its later columns too (a skip scan over the first), so the run index and the
-- unique message ids, which hold agent_id and session_id after a column of their own, could serve any read of a
-- session. When the statistics say the table holds no rows (ANALYZE while a bulk import was uncommitted, or
-- just after a clear), every index costs the planner the same and it took the run index: each row a window
-- wanted cost a walk of the whole session. Both are now keyed by one array that no read of a session names;
-- the statements that look up a run or an id name that array, and nothing else.
CREATE INDEX "{prefix}messages_runs" ON {schema}."{prefix}messages" ((ARRAY[agent_id, session_id, run_id]));
DROP INDEX {schema}."{prefix}messages_by_run";
ALTER INDEX {schema}."{prefix}messages_runs" RENAME TO "{prefix}messages_by_run";
CREATE UNIQUE INDEX "{prefix}messages_keys" ON {schema}."{prefix}messages" ((ARRAY[agent_id, session_id, message_id]));
DROP INDEX {schema}."{prefix}messages_ids";
ALTER INDEX {schema}."{prefix}messages_keys" RENAME TO "{prefix}messages_ids";

-- As version 7, with the ids found through their array, one lookup each, and every range of the renumbering
-- bounded on both sides on the rows it changes (a join's condition alone may be left to a filter over the whole
-- session when the planner believes it a few rows long).
CREATE OR REPLACE FUNCTION {schema}."{prefix}append_messages"(
    p_agent text, p_session text, p_run text, p_ids text[], p_bodies text[], p_roles text[], p_tokens integer[]
) RETURNS integer LANGUAGE plpgsql AS $fn$
DECLARE
    base bigint;
    total bigint;
    added integer;
    added_tokens bigint;
    clash text;
    stop bigint;
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
        ON CONFLICT ((ARRAY[agent_id, session_id, message_id])) DO NOTHING
        RETURNING tokens
    )
    SELECT count(*), coalesce(sum(tokens), 0) INTO added, added_tokens FROM inserted;
    IF added < cardinality(p_ids) THEN
        -- one lookup of the ids' index per id (a join may be planned as a walk of the whole index)
        SELECT t.message_id INTO clash FROM unnest(p_ids, p_bodies) AS t(message_id, body)
            CROSS JOIN LATERAL (
                SELECT m.body FROM {schema}."{prefix}messages" m
                WHERE ARRAY[m.agent_id, m.session_id, m.message_id] = ARRAY[p_agent, p_session, t.message_id]
                LIMIT 1) m
            WHERE m.body <> t.body LIMIT 1;
        IF clash IS NOT NULL THEN
            RAISE EXCEPTION 'message id already stored with different content'
                USING ERRCODE = 'RV409', DETAIL = clash;
        END IF;
        -- some rows were skipped: number the inserted ones without gaps (through negative numbers, so no two
        -- rows ever share a number on the way), with their running totals
        stop := base + cardinality(p_ids);
        WITH numbered AS (
            SELECT m.seq, base + row_number() OVER (ORDER BY m.seq) - 1 AS renumbered,
                   total + sum(m.tokens) OVER (ORDER BY m.seq) AS cum
            FROM {schema}."{prefix}messages" m
            WHERE m.agent_id = p_agent AND m.session_id = p_session AND m.seq >= base AND m.seq < stop
        )
        UPDATE {schema}."{prefix}messages" m SET seq = -n.renumbered - 1, cum_tokens = n.cum FROM numbered n
            WHERE m.agent_id = p_agent AND m.session_id = p_session AND m.seq >= base AND m.seq < stop
              AND m.seq = n.seq;
        UPDATE {schema}."{prefix}messages" SET seq = -seq - 1
            WHERE agent_id = p_agent AND session_id = p_session AND seq >= -stop AND seq < -base;
    END IF;
    UPDATE {schema}."{prefix}sessions" SET next_seq = base + added, total_tokens = total + added_tokens
        WHERE agent_id = p_agent AND session_id = p_session;
    RETURN added;
END
$fn$;

-- As version 7, with the run's rows found through their array, and the running total before the first of them
-- taken from that row (a walk down to the newest row before it was bounded on one side only). The removal is
-- planned for the run it is given, every time (EXECUTE): a run holds one message or most of a session, and a
-- plan made for any run (a generic one, which PL/pgSQL keeps after a few calls) takes each for the average of
-- a few runs a session, and reads the table whole.
CREATE OR REPLACE FUNCTION {schema}."{prefix}clear_run"(p_agent text, p_session text, p_run text) RETURNS bigint
LANGUAGE plpgsql AS $fn$
DECLARE
    stop bigint;
    removed bigint;
    first_seq bigint;
    removed_tokens bigint;
    prior bigint;
BEGIN
    SELECT s.next_seq INTO stop FROM {schema}."{prefix}sessions" s
        WHERE s.agent_id = p_agent AND s.session_id = p_session FOR UPDATE;
    IF NOT FOUND THEN
        RETURN 0;
    END IF;
    EXECUTE $q$
    WITH gone AS (
        DELETE FROM {schema}."{prefix}messages"
        WHERE ARRAY[agent_id, session_id, run_id] = ARRAY[$1, $2, $3]
        RETURNING seq, tokens, cum_tokens - tokens AS before
    )
    SELECT count(*), min(seq), sum(tokens), (array_agg(before ORDER BY seq))[1] FROM gone$q$
        INTO removed, first_seq, removed_tokens, prior USING p_agent, p_session, p_run;
    IF removed = 0 THEN
        RETURN 0;
    END IF;
    UPDATE {schema}."{prefix}messages" m SET cum_tokens = x.cum FROM (
        SELECT r.seq, coalesce(prior, 0) + sum(r.tokens) OVER (ORDER BY r.seq) AS cum
        FROM {schema}."{prefix}messages" r
        WHERE r.agent_id = p_agent AND r.session_id = p_session AND r.seq > first_seq AND r.seq < stop) x
    WHERE m.agent_id = p_agent AND m.session_id = p_session AND m.seq = x.seq AND m.seq > first_seq
      AND m.seq < stop AND m.cum_tokens IS DISTINCT FROM x.cum;
    UPDATE {schema}."{prefix}sessions"
        SET generation = replace(gen_random_uuid()::text, '-', ''), epoch = epoch + 1,
            total_tokens = total_tokens - removed_tokens
        WHERE agent_id = p_agent AND session_id = p_session;
    DELETE FROM {schema}."{prefix}session_summaries" WHERE agent_id = p_agent AND session_id = p_session;
    RETURN removed;
END
$fn$;

-- As version 7, with the newest message found in ranges below the session's next number, each twice the last
-- (a walk bounded on one side only is read whole, as a bitmap, when the planner believes the session short).
CREATE OR REPLACE FUNCTION {schema}."{prefix}replace_last"(
    p_agent text, p_session text, p_last text, p_run text, p_ids text[], p_bodies text[], p_roles text[],
    p_tokens integer[]
) RETURNS boolean LANGUAGE plpgsql AS $fn$
DECLARE
    last_seq bigint;
    last_id text;
    last_tokens integer;
    hi bigint;
    span bigint := 16;
BEGIN
    SELECT s.next_seq INTO hi FROM {schema}."{prefix}sessions" s
        WHERE s.agent_id = p_agent AND s.session_id = p_session FOR UPDATE;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    LOOP
        SELECT max(m.seq) INTO last_seq FROM {schema}."{prefix}messages" m
            WHERE m.agent_id = p_agent AND m.session_id = p_session AND m.seq >= hi - span AND m.seq < hi;
        EXIT WHEN last_seq IS NOT NULL OR hi - span <= 0;
        hi := hi - span;
        span := span * 2;
    END LOOP;
    IF last_seq IS NULL THEN
        RETURN false;
    END IF;
    SELECT m.message_id, m.tokens INTO last_id, last_tokens FROM {schema}."{prefix}messages" m
        WHERE m.agent_id = p_agent AND m.session_id = p_session AND m.seq = last_seq;
    IF last_id <> p_last THEN
        RETURN false;
    END IF;
    DELETE FROM {schema}."{prefix}messages" WHERE agent_id = p_agent AND session_id = p_session AND seq = last_seq;
    UPDATE {schema}."{prefix}sessions"
        SET generation = replace(gen_random_uuid()::text, '-', ''), epoch = epoch + 1,
            total_tokens = total_tokens - last_tokens
        WHERE agent_id = p_agent AND session_id = p_session;
    DELETE FROM {schema}."{prefix}session_summaries" WHERE agent_id = p_agent AND session_id = p_session;
    IF cardinality(p_ids) > 0 THEN
        PERFORM {schema}."{prefix}append_messages"(p_agent, p_session, p_run, p_ids, p_bodies, p_roles, p_tokens);
    END IF;
    RETURN true;
END
$fn$;
""",
    ),
    Migration(
        10,
        "a session's transcript replaced in one statement",
        """
-- A saved conversation put in place of a session's (replace_session): the session's record made (or locked, when
-- it has one) first, then the session cleared (a new generation, its summaries removed) and the batch appended, in
-- one transaction under the session's lock, so a reader sees the old transcript or the new one, a failure leaves
-- the old one, and an append or another replacement creating the session at the same time is waited for (without
-- the record made first, the clear would find nothing to lock and the batch would land after theirs). An empty
-- batch is a clear, which makes no record for a session never written.
CREATE FUNCTION {schema}."{prefix}replace_session"(
    p_agent text, p_session text, p_run text, p_ids text[], p_bodies text[], p_roles text[], p_tokens integer[]
) RETURNS bigint LANGUAGE plpgsql AS $fn$
DECLARE
    removed bigint;
BEGIN
    IF cardinality(p_ids) > 0 THEN
        INSERT INTO {schema}."{prefix}sessions" AS s (agent_id, session_id) VALUES (p_agent, p_session)
            ON CONFLICT (agent_id, session_id) DO UPDATE SET next_seq = s.next_seq;
    END IF;
    removed := {schema}."{prefix}clear_session"(p_agent, p_session);
    IF cardinality(p_ids) > 0 THEN
        PERFORM {schema}."{prefix}append_messages"(p_agent, p_session, p_run, p_ids, p_bodies, p_roles, p_tokens);
    END IF;
    RETURN removed;
END
$fn$;
""",
    ),
    Migration(
        11,
        "each indexed message's number of terms kept beside its terms",
        """
-- Relevant recall's search scores a message by its number of distinct terms (BM25's length). Reading it from the
-- terms themselves read every matched message's terms, kept out of line for a long tool output, and that was most
-- of the search's time; the search now reads this column. Rows indexed before it count their terms instead, so
-- nothing is indexed again. Adding a column without a default rewrites nothing.
ALTER TABLE {schema}."{prefix}messages" ADD COLUMN term_count integer;
""",
    ),
]


__all__ = ["MIGRATIONS"]
