"""The statements of the Postgres history provider, written once per provider for its tables.

Each is written for the plan it needs, whatever the table's statistics say (``docs/decisions.md``, decisions 29
and 59): every read of a session walks its primary key (or the terms index) over a range of seqs bounded on both
sides by values the statement computes before it reads the rows. However the planner then reads the range (in
order, or a bitmap of it), it reads no more than the range: a walk "to the newest row such that" is a few
ranges, each twice the last, looked at newest first (:func:`newest`, :func:`oldest`).
"""

from __future__ import annotations

_BIGGEST = 9_223_372_036_854_775_807
"""The largest bigint: the end of a unit that runs to the end of its session."""


def newest(m: str, below: str, condition: str, first: int, *, probe: bool = False) -> str:
    """SQL for the newest seq below ``below`` (an SQL expression) of a row of session ($1, $2) in table ``m`` for
    which ``condition`` (on the row ``x``) holds, or NULL: the ranges ``first``, ``2 * first``, ... rows long
    below it are looked at newest first, and the walk stops at the first range that holds one. A plan that reads
    every row of a range reads at most twice the rows between the answer and ``below``, plus ``first``; a walk of
    the primary key stops at the answer.

    With ``probe``, the first range is looked at alone first, and the walk is made only when it holds none: the
    same answer, without the recursive walk's own cost for the rows whose answer lies close (a statement that
    looks for thousands, each a few rows away)."""
    walk = f"""(WITH RECURSIVE walk(hi, span, found) AS (
        SELECT ({below})::bigint, {first}::bigint, NULL::bigint
        UNION ALL
        SELECT w.hi - w.span, w.span * 2, (
            SELECT max(x.seq) FROM {m} x WHERE x.agent_id = $1 AND x.session_id = $2
            AND x.seq >= w.hi - w.span AND x.seq < w.hi AND {condition})
        FROM walk w WHERE w.found IS NULL AND w.hi > 0)
    SELECT max(found) FROM walk)"""
    if not probe:
        return walk
    return f"""coalesce((SELECT max(x.seq) FROM {m} x WHERE x.agent_id = $1 AND x.session_id = $2
        AND x.seq >= ({below})::bigint - {first} AND x.seq < ({below})::bigint AND ({below})::bigint > 0
        AND {condition}), {walk})"""


def oldest(m: str, above: str, stop: str, condition: str, first: int, *, probe: bool = False) -> str:
    """SQL for the oldest seq above ``above`` and below ``stop`` (SQL expressions) of a row of session ($1, $2)
    in table ``m`` for which ``condition`` (on the row ``x``) holds, or NULL: :func:`newest`, walking up (and,
    with ``probe``, looking at the first range alone first)."""
    walk = f"""(WITH RECURSIVE walk(lo, span, found) AS (
        SELECT ({above})::bigint + 1, {first}::bigint, NULL::bigint
        UNION ALL
        SELECT w.lo + w.span, w.span * 2, (
            SELECT min(x.seq) FROM {m} x WHERE x.agent_id = $1 AND x.session_id = $2
            AND x.seq >= w.lo AND x.seq < least(w.lo + w.span, {stop}) AND {condition})
        FROM walk w WHERE w.found IS NULL AND w.lo < {stop})
    SELECT min(found) FROM walk)"""
    if not probe:
        return walk
    return f"""coalesce((SELECT min(x.seq) FROM {m} x WHERE x.agent_id = $1 AND x.session_id = $2
        AND x.seq >= ({above})::bigint + 1 AND x.seq < least(({above})::bigint + 1 + {first}, {stop})
        AND {condition}), {walk})"""


_OPENS = "x.role NOT IN ('tool', 'system')"
"""A row that opens a unit: neither a tool result nor a system message."""


class HistoryStatements:
    """The text of the provider's larger statements, for the messages table ``m`` and the sessions table
    ``sessions`` (qualified names, safe to format into SQL)."""

    def __init__(self, m: str, sessions: str) -> None:
        scope = "m.agent_id = $1 AND m.session_id = $2"
        # One statement, one snapshot. The tail starts at the newest message whose running total before it is
        # below (total - tokens), moved back to a message that opens a unit; both are found by walking back in
        # bounded ranges (newest), since a walk bounded on one side only ("the newest row below", with a LIMIT)
        # is read whole, as a bitmap, whenever the planner believes the session a few rows long (a table never
        # analysed, or analysed while an import was uncommitted). For the same reason the window is complete
        # when the tokens before it are those of the system messages before it (every message counts at least
        # 1), not when a walk from the session's start finds none other. Rows of the last window this process
        # read (same generation: its tail, seq in [$5, $6], and the system messages before it) are not sent
        # again: the provider still has them parsed. Each range of seqs is bounded on both sides, even where one
        # bound holds for every row (below next_seq): a bound computed in the statement is unknown when it is
        # planned, and with statistics the planner takes a one-sided range for a third of the table.
        cut = newest(m, "(SELECT next_seq FROM s)", "x.cum_tokens - x.tokens < (SELECT total FROM s) - $3", 256)
        start = newest(m, "(SELECT seq FROM cut) + 1", _OPENS, 16)
        self.window = f"""
WITH s AS (SELECT generation, total_tokens AS total, next_seq FROM {sessions} WHERE agent_id = $1 AND session_id = $2),
cut AS MATERIALIZED (SELECT CASE WHEN (SELECT total IS NULL OR total - $3 <= 0 FROM s) THEN -1
              ELSE coalesce({cut}, -1) END AS seq),
start AS MATERIALIZED (SELECT CASE WHEN (SELECT seq FROM cut) < 0 THEN -1 ELSE coalesce({start}, -1) END AS seq),
head AS MATERIALIZED (SELECT start.seq AS start, coalesce((
              SELECT m.cum_tokens - m.tokens FROM {m} m WHERE {scope} AND m.seq = start.seq), 0) AS before
         FROM start),
info AS (SELECT s.generation, s.total, head.start, s.generation = $4 AS hit, head.before = (
              SELECT coalesce(sum(m.tokens), 0) FROM {m} m WHERE {scope} AND m.role = 'system'
              AND m.seq < head.start) AS complete, head.before
         FROM s, head),
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
        # since the copy of generation $3 that holds the rows below $4 was made. The range's bounds are computed
        # before the rows are read (subqueries, not join conditions): a join's condition may be left to a filter
        # over every row of the session when the planner believes the table empty.
        self.refresh = f"""
WITH s AS (SELECT generation, next_seq FROM {sessions} WHERE agent_id = $1 AND session_id = $2)
SELECT s.generation, s.next_seq, r.seq, r.body FROM s LEFT JOIN (
    SELECT m.seq, m.body FROM {m} m WHERE {scope}
    AND m.seq >= (SELECT CASE WHEN generation = $3 THEN $4 ELSE 0 END FROM s) AND m.seq < (SELECT next_seq FROM s)
) r ON true ORDER BY r.seq"""

        # Relevant recall's search, in two statements. The first counts the session's messages that hold each
        # query term (df), from the terms index alone (the session digest in each lexeme keeps the count to the
        # session), up to a cap: a term held by more messages is common, and its exact count does not matter.
        # The second (``search``, below) ranks, by BM25 (a term counted once per message, a message's length its
        # number of distinct terms against the average of those matched), the messages before offset $5 that hold
        # one of the rarer terms (those the first statement picked), takes the best (2 x $6) to their units (a tool
        # result to its call, a call to the results after it), adds the units bordering the best, and returns each
        # unit's rows with the id of the system message before it. The first statement also returns the rows the
        # terms index lacks among the $5 after the session's indexed_seq (a longer stretch is indexed a range at a
        # time), without the bodies of those this process holds parsed (generation $6, seq $7 to $8: its last
        # window of the session).
        self.df = f"""
SELECT s.generation, s.indexed_seq, s.next_seq, s.total_tokens IS NULL AS uncounted, ARRAY(
    SELECT (SELECT count(*) FROM (
        SELECT 1 FROM (SELECT m.agent_id, m.session_id FROM {m} m WHERE m.terms @@ t.query::tsquery OFFSET 0) x
        WHERE x.agent_id = $1 AND x.session_id = $2 LIMIT $4) c)
    FROM unnest($3::text[]) WITH ORDINALITY AS t(query, i) ORDER BY t.i) AS dfs, u.pending, u.bodies
FROM {sessions} s CROSS JOIN LATERAL (
    SELECT coalesce(array_agg(m.seq ORDER BY m.seq), '{{}}') AS pending, coalesce(array_agg(
        CASE WHEN s.generation = $6 AND m.seq BETWEEN $7 AND $8 THEN NULL ELSE m.body END ORDER BY m.seq), '{{}}')
        AS bodies
    FROM {m} m WHERE {scope} AND m.seq >= s.indexed_seq AND m.seq < least(s.next_seq, s.indexed_seq + $5)
    AND m.terms IS NULL) u
WHERE s.agent_id = $1 AND s.session_id = $2"""
        # The rows the terms index lacks among seqs $3 to $4 (a range of a long stretch never searched).
        self.unindexed = f"""
SELECT m.seq, m.body FROM {m} m WHERE {scope} AND m.seq >= $3 AND m.seq < $4 AND m.terms IS NULL ORDER BY m.seq"""
        # Store the terms (and how many there are) of rows the index lacks, and mark the session indexed up to $5,
        # only while the session is in generation $6, the one the terms were computed in: a clear, clear_run or
        # replace_last in between removed or renumbered rows, and the terms of the removed rows must never land on
        # the rows that now hold their numbers. The session row is locked first, as appends and removals lock it,
        # so the write waits for a removal under way and then finds the generation changed (and never deadlocks
        # with it). A row another searcher has indexed in the meantime is left as it is. The seqs come sorted, and
        # the range they span bounds the rows joined: without it the planner may hash the whole session for each
        # chunk.
        self.index = f"""
WITH g AS MATERIALIZED (SELECT 1 FROM {sessions} WHERE agent_id = $1 AND session_id = $2 AND generation = $6
                        FOR NO KEY UPDATE),
stored AS (UPDATE {m} m SET terms = u.terms::tsvector, term_count = length(u.terms::tsvector)
           FROM unnest($3::bigint[], $4::text[]) AS u(seq, terms)
           WHERE m.agent_id = $1 AND m.session_id = $2 AND m.seq = u.seq AND m.terms IS NULL
           AND m.seq BETWEEN $3[1] AND $3[cardinality($3)] AND EXISTS (SELECT 1 FROM g) RETURNING 1)
UPDATE {sessions} s SET indexed_seq = $5
WHERE s.agent_id = $1 AND s.session_id = $2 AND s.indexed_seq < $5 AND s.generation = $6 AND $7
  AND EXISTS (SELECT 1 FROM g)"""
        # Relevant recall's ranking by words, in one statement: the ranked search, the units bordering the best, and
        # the rows of the units it returns. Each term's query is a value computed in the statement, not a constant
        # the planner can look up in the statistics: with them, a term most of a long session holds was planned as
        # a scan of the whole table. The messages that hold a term come from the terms index, one scan per term,
        # so a message's score is the sum of the idf of the scans that found it, added in the order of the terms,
        # as the in-memory index adds them (added in the order the plan met them, two messages holding the same
        # terms scored a few ulps apart, and the older one could rank first), and its length is its stored
        # term_count: the terms themselves are never read (a tool output's terms run to kilobytes, kept out of
        # line, and reading them was most of the statement). Rows indexed before term_count was kept count their
        # terms instead. The best (2 x $6) messages are taken to their units (:func:`_units`), and the best $6
        # units are the ranking. With a spread $7 above 0, the nearest message that is not a system message
        # before each unit's first and after its last (bounded walks: newest, oldest) scores $7 times the unit,
        # for the units that can still place one among the $6 best (all of them when fewer were found; else those
        # whose score times $7 reaches the lowest); a border inside a unit ranked already that scores at least as
        # much changes nothing, and is left out. The borders are taken to their units the same way, each unit
        # keeps its best score, and the best $6 come back, each unit's rows with the system message before it. A
        # row this process holds parsed (seqs $9, kept in generation $8) is sent without its body when the
        # session's generation, read in this statement, is still $8; those seqs are looked up in a hash of them,
        # built once (an IN over a subquery that does not depend on the row).
        other = "x.role <> 'system'"
        before_first = newest(m, "u.first", other, 16, probe=True)
        after_last = oldest(m, "u.last", "(SELECT next_seq FROM s)", other, 16, probe=True)
        self.search = f"""
WITH s AS (SELECT next_seq, generation FROM {sessions} WHERE agent_id = $1 AND session_id = $2),
q AS MATERIALIZED (SELECT t.query::tsquery AS query, t.idf, t.i
         FROM unnest($3::text[], $4::float8[]) WITH ORDINALITY AS t(query, idf, i)),
hits AS MATERIALIZED (SELECT x.seq, x.role, coalesce(x.term_count, length(x.terms)) AS len,
                             x.cum_tokens - x.tokens AS at, sum(x.idf ORDER BY x.i) AS idf
         FROM (SELECT m.agent_id, m.session_id, m.seq, m.role, m.term_count, m.terms, m.cum_tokens, m.tokens, q.idf,
                      q.i
               FROM q CROSS JOIN LATERAL (
                   SELECT m.agent_id, m.session_id, m.seq, m.role, m.term_count, m.terms, m.cum_tokens, m.tokens
                   FROM {m} m WHERE m.terms @@ q.query OFFSET 0) m) x
         WHERE x.agent_id = $1 AND x.session_id = $2 AND x.role <> 'system' AND x.cum_tokens - x.tokens < $5
         GROUP BY x.seq, x.role, len, at),
average AS MATERIALIZED (SELECT greatest(avg(len), 1) AS len FROM hits),
top AS MATERIALIZED (SELECT h.seq, h.role, h.at,
                            h.idf * 2.2 / (1 + 1.2 * (0.25 + 0.75 * h.len / a.len)) AS score
         FROM hits h, average a ORDER BY score DESC, h.seq DESC LIMIT $6::integer * 2),
{_units(m, "", "top")},
lexical AS MATERIALIZED (SELECT u.first, u.last, u.score, u.at FROM units u WHERE u.score > 0 AND u.wholly
         ORDER BY u.score DESC, u.at DESC LIMIT $6::integer),
sources AS MATERIALIZED (SELECT l.first, l.last, l.score * $7::float8 AS near FROM lexical l
         WHERE $7::float8 > 0 AND l.score * $7::float8 >= (
             SELECT CASE WHEN count(*) >= $6::integer THEN min(f.score) ELSE '-Infinity'::float8 END FROM lexical f)),
ranked AS MATERIALIZED (SELECT generate_series(l.first, l.last) AS seq, l.score FROM lexical l WHERE $7::float8 > 0),
near AS MATERIALIZED (SELECT {before_first} AS seq, u.near AS score FROM sources u
         UNION ALL
         SELECT {after_last}, u.near FROM sources u),
borders AS MATERIALIZED (SELECT x.seq, x.role, x.at, n.score
         FROM (SELECT a.seq, max(a.score) FILTER (WHERE a.near) AS score, max(a.score) FILTER (WHERE NOT a.near) AS kept
               FROM (SELECT seq, score, true AS near FROM near WHERE seq IS NOT NULL
                     UNION ALL
                     SELECT seq, score, false FROM ranked) a
               GROUP BY a.seq) n
         CROSS JOIN LATERAL (SELECT x.seq, x.role, x.cum_tokens - x.tokens AS at FROM {m} x
             WHERE x.agent_id = $1 AND x.session_id = $2 AND x.seq = n.seq AND x.role <> 'system'
             AND x.cum_tokens - x.tokens < $5 LIMIT 1) x
         WHERE n.score IS NOT NULL AND (n.kept IS NULL OR n.kept < n.score)),
{_units(m, "b", "borders")},
chosen AS MATERIALIZED (SELECT d.first, d.last, d.score FROM (
             SELECT DISTINCT ON (a.at) a.first, a.last, a.score, a.at FROM (
                 SELECT l.first, l.last, l.score, l.at, 0 AS pass FROM lexical l
                 UNION ALL
                 SELECT b.first, b.last, b.score, b.at, 1 FROM bunits b WHERE b.score > 0 AND b.wholly) a
             ORDER BY a.at, a.score DESC, a.pass) d
         ORDER BY d.score DESC, d.at DESC LIMIT $6::integer),
placed AS MATERIALIZED (SELECT c.first, c.last, c.score, (
              SELECT y.message_id FROM {m} y WHERE y.agent_id = $1 AND y.session_id = $2 AND y.role = 'system'
              AND y.seq < c.first ORDER BY y.seq DESC LIMIT 1) AS after_system
          FROM chosen c)
SELECT c.first AS opener, c.after_system, r.seq, CASE WHEN (SELECT generation FROM s) = $8
       AND r.seq IN (SELECT h.seq FROM unnest($9::bigint[]) AS h(seq)) THEN NULL ELSE r.body END AS body,
       r.offset, CASE WHEN r.seq = c.first THEN c.score END AS score,
       (SELECT generation FROM s) AS generation
FROM placed c CROSS JOIN LATERAL (
    SELECT m.seq, m.body, m.cum_tokens - m.tokens AS offset FROM {m} m
    WHERE m.agent_id = $1 AND m.session_id = $2 AND m.seq >= c.first AND m.seq <= c.last OFFSET 0) r
ORDER BY c.first, r.seq"""


def _units(m: str, p: str, top: str) -> str:
    """SQL for CTEs ``{p}keyed`` to ``{p}units``: the units of session ($1, $2) that hold the rows of CTE ``top``
    (``seq``, ``role``, ``at``: its offset, ``score``; none a system message), each as its first and last seq, its
    score (the best of its rows in ``top``), its offset (``at``), and whether all of it lies before offset $5
    (``wholly``), cut as :func:`~ravi.kernel.search.unit_end` cuts them.

    A row's span starts at the newest row at or before it that opens a unit (for a tool result, the nearest
    message before it that is neither a tool result nor a system message; the result itself when there is none)
    and ends before the next one. An assistant message making tool calls (read from its body) is one unit with
    its span's rows up to the last that is not a system message (the system messages after it stand alone); in
    any other span each row is a unit of its own. A span's end, and its last row that is not a system message,
    are found by walks bounded on both sides (decision 59), for a span of tool calls only; a row is looked up by
    its seq in a lateral subquery with a LIMIT, which the planner cannot turn into a join of the whole session
    (it did, with statistics saying the table held a few rows). The rows of a span are
    told apart by window functions over the CTE, never by a join of two CTEs: the planner takes a CTE for a few
    rows, and a nested loop over two of a thousand rows each was most of the statement (decision 119)."""
    opener = newest(m, "t.seq", _OPENS, 16, probe=True)
    stop = oldest(m, "k.opener", "(SELECT next_seq FROM s)", _OPENS, 16, probe=True)
    last = newest(m, f"least(coalesce(k.stop, {_BIGGEST}), (SELECT next_seq FROM s))", "x.role <> 'system'", 16,
                  probe=True)  # fmt: skip
    return f"""{p}keyed AS MATERIALIZED (SELECT t.seq, t.score, t.at, CASE WHEN t.role = 'tool'
              THEN coalesce({opener}, t.seq) ELSE t.seq END AS opener
          FROM {top} t),
{p}spans AS MATERIALIZED (SELECT k.seq, k.score, k.at, k.opener, max(k.score) OVER (PARTITION BY k.opener) AS best,
              k.seq = min(k.seq) OVER (PARTITION BY k.opener) AS lead
          FROM {p}keyed k),
{p}flagged AS MATERIALIZED (SELECT k.seq, k.score, k.at, k.opener, k.best, k.lead, o.at AS opened,
              CASE WHEN o.role = 'assistant' THEN EXISTS (
                  SELECT 1 FROM json_array_elements(o.body::json -> 'content') b WHERE b ->> 'type' = 'tool_call')
              ELSE false END AS grouped
          FROM {p}spans k LEFT JOIN LATERAL (SELECT o.role, o.body, o.cum_tokens - o.tokens AS at FROM {m} o
              WHERE k.lead AND o.agent_id = $1 AND o.session_id = $2 AND o.seq = k.opener LIMIT 1) o ON true),
{p}marked AS MATERIALIZED (SELECT f.seq, f.score, f.at, f.opener, f.best, f.lead,
              bool_or(f.grouped) OVER (PARTITION BY f.opener) AS grouped,
              max(f.opened) OVER (PARTITION BY f.opener) AS opened
          FROM {p}flagged f),
{p}groups AS MATERIALIZED (SELECT k.opener, k.best, k.opened, {stop} AS stop FROM {p}marked k
          WHERE k.lead AND k.grouped),
{p}units AS MATERIALIZED (
    SELECT g.opener AS first, l.seq AS last, g.best AS score, g.opened AS at, l.at < $5 AS wholly
    FROM (SELECT k.opener, k.best, k.opened, {last} AS last FROM {p}groups k) g
    CROSS JOIN LATERAL (SELECT l.seq, l.cum_tokens - l.tokens AS at FROM {m} l
        WHERE l.agent_id = $1 AND l.session_id = $2 AND l.seq = g.last LIMIT 1) l
    UNION ALL
    SELECT u.seq, u.seq, u.score, u.at, u.at < $5 FROM {p}marked u WHERE NOT u.grouped)"""


__all__ = ["HistoryStatements", "newest", "oldest"]
