"""The statements of the Postgres history provider, written once per provider for its tables.

Each is written for the plan it needs: every read of a session walks its primary key, and every range of seqs is
bounded on both sides (``docs/decisions.md``, decision 29).
"""

from __future__ import annotations


class HistoryStatements:
    """The text of the provider's larger statements, for the messages table ``m`` and the sessions table
    ``sessions`` (qualified names, safe to format into SQL)."""

    def __init__(self, m: str, sessions: str) -> None:
        scope = "m.agent_id = $1 AND m.session_id = $2"
        # One statement, one snapshot. Each range of seqs is bounded on both sides, even where one bound holds
        # for every row (below next_seq): a bound computed in the statement is unknown when it is planned, and
        # with statistics the planner takes a one-sided range for a third of the table and scans it whole.
        # The tail starts at the newest message whose running total before it is
        # below (total - tokens), moved back to a message that is neither a tool result nor a system message;
        # rows of the last window this process read (same generation: its tail, seq in [$5, $6], and the system
        # messages before it) are not sent again: the provider still has them parsed.
        self.window = f"""
WITH s AS (SELECT generation, total_tokens AS total, next_seq FROM {sessions} WHERE agent_id = $1 AND session_id = $2),
cut AS (SELECT CASE WHEN (SELECT total FROM s) - $3 <= 0 THEN -1 ELSE coalesce((
              SELECT m.seq FROM {m} m WHERE {scope} AND m.cum_tokens - m.tokens < (SELECT total FROM s) - $3
              ORDER BY m.seq DESC LIMIT 1), -1) END AS seq),
start AS (SELECT CASE WHEN (SELECT seq FROM cut) < 0 THEN -1 ELSE coalesce((
              SELECT m.seq FROM {m} m WHERE {scope} AND m.seq <= (SELECT seq FROM cut)
              AND m.role NOT IN ('tool', 'system') ORDER BY m.seq DESC LIMIT 1), -1) END AS seq),
info AS (SELECT s.generation, s.total, start.seq AS start, s.generation = $4 AS hit, (
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
SELECT info.generation, info.total, info.start, info.complete, info.before, p.seq, p.tokens, p.body
FROM info LEFT JOIN picked p ON true ORDER BY p.seq"""

        # A whole read, in one statement: the session's generation and next number, and every message appended
        # since the copy of generation $3 that holds the rows below $4 was made.
        self.refresh = f"""
SELECT s.generation, s.next_seq, m.seq, m.body FROM {sessions} s
LEFT JOIN {m} m ON m.agent_id = s.agent_id AND m.session_id = s.session_id
    AND m.seq >= CASE WHEN s.generation = $3 THEN $4 ELSE 0 END AND m.seq < s.next_seq
WHERE s.agent_id = $1 AND s.session_id = $2 ORDER BY m.seq"""

        # Relevant recall's search, in two statements. The first counts the session's messages that hold each
        # query term (df), from the terms index alone (the session digest in each lexeme keeps the count to the
        # session), up to a cap: a term held by more messages is common, and its exact count does not matter.
        # The second ranks, by BM25 (a term counted once per message, a message's length its number of distinct
        # terms against the average of those matched), the messages before offset $6 that hold one of the rarer
        # terms (those the first statement picked), takes the best (2 x $7) to their units (a tool result to its
        # call, a call to the results after it) and returns each unit's rows with the id of the system message
        # before it. Every read of a session walks its primary key. The first statement also returns the rows
        # the terms index lacks, without the bodies of those this process holds parsed (generation $6, seq $7 to
        # $8: its last window of the session).
        self.df = f"""
SELECT s.generation, s.indexed_seq, s.next_seq, s.total_tokens IS NULL AS uncounted, ARRAY(
    SELECT (SELECT count(*) FROM (
        SELECT 1 FROM (SELECT m.agent_id, m.session_id FROM {m} m WHERE m.terms @@ t.query::tsquery OFFSET 0) x
        WHERE x.agent_id = $1 AND x.session_id = $2 LIMIT $4) c)
    FROM unnest($3::text[]) WITH ORDINALITY AS t(query, i) ORDER BY t.i) AS dfs, ARRAY(
    SELECT m.seq FROM {m} m WHERE m.agent_id = $1 AND m.session_id = $2 AND m.seq >= s.indexed_seq
    AND m.seq < s.next_seq AND m.terms IS NULL ORDER BY m.seq LIMIT $5) AS pending, ARRAY(
    SELECT CASE WHEN s.generation = $6 AND m.seq BETWEEN $7 AND $8 THEN NULL ELSE m.body END
    FROM {m} m WHERE m.agent_id = $1 AND m.session_id = $2 AND m.seq >= s.indexed_seq
    AND m.seq < s.next_seq AND m.terms IS NULL ORDER BY m.seq LIMIT $5) AS bodies
FROM {sessions} s WHERE s.agent_id = $1 AND s.session_id = $2"""
        # Store the terms of rows the index lacks, and mark the session indexed up to $5, only while the session
        # is in generation $6, the one the terms were computed in: a clear, clear_run or replace_last in between
        # removed or renumbered rows, and the terms of the removed rows must never land on the rows that now
        # hold their numbers. The session row is locked first, as appends and removals lock it, so the write
        # waits for a removal under way and then finds the generation changed (and never deadlocks with it). A
        # row another searcher has indexed in the meantime is left as it is. The seqs come sorted, and the range
        # they span bounds the rows joined: without it the planner may hash the whole session for each chunk.
        self.index = f"""
WITH g AS MATERIALIZED (SELECT 1 FROM {sessions} WHERE agent_id = $1 AND session_id = $2 AND generation = $6
                        FOR NO KEY UPDATE),
stored AS (UPDATE {m} m SET terms = u.terms::tsvector FROM unnest($3::bigint[], $4::text[]) AS u(seq, terms)
           WHERE m.agent_id = $1 AND m.session_id = $2 AND m.seq = u.seq AND m.terms IS NULL
           AND m.seq BETWEEN $3[1] AND $3[cardinality($3)] AND EXISTS (SELECT 1 FROM g) RETURNING 1)
UPDATE {sessions} s SET indexed_seq = $5
WHERE s.agent_id = $1 AND s.session_id = $2 AND s.indexed_seq < $5 AND s.generation = $6 AND $7
  AND EXISTS (SELECT 1 FROM g)"""
        self.search = f"""
WITH q AS MATERIALIZED (SELECT t.query::tsquery AS query, t.idf FROM unnest($3::text[], $4::float8[]) AS t(query, idf)),
hits AS MATERIALIZED (SELECT x.seq, x.role, x.terms || ''::tsvector AS terms FROM (
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


__all__ = ["HistoryStatements"]
