"""Relevant recall's hybrid search on PostgreSQL: the terms index with each match's neighbours, and the meaning of
the request with pgvector, both in the database (``HybridSearcher``).

By words, the provider's own search (``search_units``: BM25 over the terms index) finds the best units, and the
same statement finds the unit right before and right after each (walking the primary key), scores them ``spread``
times the unit they border, and returns the best of both (decision 119).

By meaning, every message of a session is embedded once per model, by the first search that needs it (in any
worker), and kept beside the messages in ``<prefix>embeddings`` (a pgvector column, created with the extension
on first use). A search embeds only the rows appended since, then asks for the messages closest to the request,
among the session's newest ``MEANING_ROWS`` (5,000), exactly (those rows by the session's key, ordered by
cosine distance, the newest first among equal distances, as ``match_units`` orders equal units), and returns
their units. An embedding records the id of the message it came from and the
session's epoch, so nothing embedded before a ``clear`` or ``clear_run`` is ever returned: a session whose epoch
changed is embedded again.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import islice
from typing import Any

from ravi.kernel.embeddings import check_embeddings
from ravi.kernel.errors import BackendUnavailable, ConfigurationError, PermissionDenied, RaviError
from ravi.kernel.llm import EmbeddingClient
from ravi.kernel.messages import ChatMessage, messages_from_json
from ravi.kernel.search import MEANING_LOOKBACK, UnitMatch, message_text, opens_group
from ravi.kernel.storage.history import HybridMatches, check_hybrid, check_search
from ravi.kernel.values import check_scope

from ._cache import Lru, Parsed
from ._db import _ATTEMPTS, _RACED_CREATE
from ._history_sql import newest, oldest

MEANING_ROWS = MEANING_LOOKBACK
"""How far back a search by meaning looks: the session's newest messages, so its cost stays that of a window (an
exact scan of every message of a 100,000-message session took half a second); words look at the whole session."""
EMBEDDED_CHARS = 2_000
"""How much of a message's searchable text is embedded (the start says what a long tool output is about)."""
_EMBED_CHUNK = 1_000
"""How many rows are embedded and stored in one step."""
KEPT_MESSAGES = 8_192
"""How many of the messages searches of one session returned are kept parsed: those returned most recently (a
recall window of a 100,000-token budget returns about 4,600)."""

_SETUP = """
CREATE EXTENSION IF NOT EXISTS vector;
CREATE TABLE IF NOT EXISTS {embeddings} (
    agent_id   text   NOT NULL,
    session_id text   NOT NULL,
    model      text   NOT NULL,
    seq        bigint NOT NULL,
    message_id text   NOT NULL,
    epoch      bigint NOT NULL,
    embedding  vector NOT NULL,
    PRIMARY KEY (agent_id, session_id, model, seq)
);
CREATE TABLE IF NOT EXISTS {embedded} (
    agent_id   text   NOT NULL,
    session_id text   NOT NULL,
    model      text   NOT NULL,
    epoch      bigint NOT NULL,
    upto       bigint NOT NULL,
    last_id    text,
    PRIMARY KEY (agent_id, session_id, model)
);
"""

_NOT_INSTALLED = ("0A000", "58P01")
"""What ``CREATE EXTENSION vector`` fails with where pgvector is not installed: "extension is not available" (no
control file), or "could not access file" (its library is missing)."""
_INSTALL_PGVECTOR = (
    "install pgvector on the database server (a package such as postgresql-17-pgvector for the server's major "
    "version, or built from its source; the server of `ravi dev postgres` has it); Ravi then runs CREATE EXTENSION "
    'vector on first use. Or search by words alone: no embedder (relevant recall\'s meaning = "none")'
)
"""How to get pgvector, said when a search by meaning finds it missing."""


class HybridSearch:
    """``search_hybrid`` for :class:`~ravi.capabilities.postgres.PostgresHistoryProvider` (a mixin: it uses the
    provider's connection, tables and its ranking by words)."""

    db: Any
    _messages: str
    _sessions: str
    _parsed: Lru[Parsed]
    _meaning_ready = False  # pgvector and the embeddings tables were found or made

    async def _search_words(
        self, agent_id: str, session_id: str, query: str, before: int, limit: int, spread: float
    ) -> list[UnitMatch]:
        raise NotImplementedError  # the provider's

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
        """The units before offset ``before`` that best match ``query`` by the terms index, with the units
        bordering each match scored ``spread`` times its score, and, with an ``embedder``, those closest in
        meaning by pgvector (``HybridSearcher``). Rows not yet embedded under ``model`` are embedded first, once
        for every worker. Without an embedder, pgvector is not needed.

        Raises:
            ConfigurationError: an ``embedder`` is given and pgvector is not installed on the server; the
                message says how to install it.
        """
        check_scope(agent_id=agent_id, session_id=session_id)
        before, limit = check_search(query, before, limit)
        check_hybrid(spread, embedder, model)
        if not limit or not query:
            return HybridMatches([], [])
        lexical = await self._search_words(agent_id, session_id, query, before, limit, spread)
        meaning: list[UnitMatch] = []
        if embedder is not None:
            await self._set_up_meaning()
            meaning = await self._by_meaning(agent_id, session_id, query, before, limit, embedder, model)
        return HybridMatches(lexical, meaning)

    async def _unit_rows(self, agent_id: str, session_id: str, query: str, *args: Any) -> tuple[Any, list[ChatMessage]]:
        """The rows of a statement returning units (``query``, taking ``args`` then the generation and the seqs of
        the messages this provider keeps parsed for the session) and the message of each row. The statement sends
        no body of a message kept, when the session's generation, read in that statement, is the one it was kept
        in; those messages are taken from what is kept, the others parsed, and the rows' messages are kept (with
        those kept before, of the same generation, up to ``KEPT_MESSAGES``), replacing the entry."""
        key = (agent_id, session_id)
        held = self._parsed.get(key)
        while True:
            have = (held.generation, list(held.messages)) if held is not None else ("", [])
            rows = await self.db.fetch(query, *args, *have)
            fresh = iter(messages_from_json([r["body"] for r in rows if r["body"] is not None]))
            messages: list[ChatMessage] = []
            for r in rows:
                if r["body"] is not None:
                    messages.append(next(fresh))
                elif held is not None and (kept := held.messages.get(r["seq"])) is not None:
                    messages.append(kept)
                else:  # not sent, yet not kept (the statement did not match what it was given): read all again
                    break
            else:
                break
            held = None
        if rows and self._parsed.size:
            generation = rows[0]["generation"]
            entry = dict(zip((r["seq"] for r in rows[:KEPT_MESSAGES]), messages[:KEPT_MESSAGES], strict=True))
            if held is not None and held.generation == generation and len(entry) < KEPT_MESSAGES:
                # the rows' messages first, then those kept before that the rows did not hold, in their order
                merged = dict(entry)
                merged.update(held.messages)
                merged.update(entry)
                entry = merged if len(merged) <= KEPT_MESSAGES else dict(islice(merged.items(), KEPT_MESSAGES))
            self._parsed.keep(key, Parsed(generation, entry))
        return rows, messages

    async def _units_of(
        self, agent_id: str, session_id: str, hits: Sequence[tuple[int, float]], before: int
    ) -> list[UnitMatch]:
        """The whole units holding the messages ``hits`` (seq, score) names, each scored by its best hit, those
        lying before ``before``, best first: a tool result's unit starts at its call, and a call's takes the
        results after it (with the system message before each unit, for placing it)."""
        m = self._messages
        # As the provider's search: each hit looked up by its seq (one lookup each), the unit's ends found by
        # walks bounded on both sides (decision 59). Rows kept parsed come without their bodies, as there.
        opens = "x.role NOT IN ('tool', 'system')"
        opener = newest(m, "t.seq", opens, 16, probe=True)
        stop = oldest(m, "k.opener", "(SELECT next_seq FROM s)", opens, 16, probe=True)
        rows, messages = await self._unit_rows(
            agent_id,
            session_id,
            f"""
WITH s AS (SELECT next_seq, generation FROM {self._sessions} WHERE agent_id = $1 AND session_id = $2),
top AS (SELECT h.seq, h.score, x.role FROM unnest($3::bigint[], $4::float8[]) AS h(seq, score)
        CROSS JOIN LATERAL (SELECT x.role FROM {m} x WHERE x.agent_id = $1 AND x.session_id = $2 AND x.seq = h.seq
            AND x.role <> 'system' AND x.cum_tokens - x.tokens < $5 LIMIT 1) x),
keyed AS MATERIALIZED (SELECT t.seq, t.score, CASE WHEN t.role = 'tool' THEN coalesce({opener}, t.seq)
              ELSE t.seq END AS opener
          FROM top t),
spans AS MATERIALIZED (SELECT k.opener, k.seqs, k.scores, coalesce({stop}, 9223372036854775807) AS stop, (
              SELECT y.message_id FROM {m} y WHERE y.agent_id = $1 AND y.session_id = $2 AND y.role = 'system'
              AND y.seq < k.opener AND y.seq >= 0 ORDER BY y.seq DESC LIMIT 1) AS after_system
          FROM (SELECT opener, array_agg(seq) AS seqs, array_agg(score) AS scores FROM keyed GROUP BY opener) k)
SELECT sp.opener, sp.after_system, r.seq, CASE WHEN (SELECT generation FROM s) = $6
       AND r.seq IN (SELECT h.seq FROM unnest($7::bigint[]) AS h(seq)) THEN NULL ELSE r.body END AS body,
       r.offset, sp.scores[array_position(sp.seqs, r.seq)] AS score,
       (SELECT generation FROM s) AS generation
FROM spans sp CROSS JOIN LATERAL (
    SELECT o.seq, o.body, o.cum_tokens - o.tokens AS offset FROM {m} o
    WHERE o.agent_id = $1 AND o.session_id = $2 AND o.seq >= sp.opener
    AND o.seq < least(sp.stop, (SELECT next_seq FROM s)) OFFSET 0) r
ORDER BY sp.opener, r.seq""",
            agent_id,
            session_id,
            [seq for seq, _ in hits],
            [float(score) for _, score in hits],
            before,
        )
        return _units_of_rows(rows, messages, before)

    async def _set_up_meaning(self) -> None:
        """Make sure pgvector and the embeddings tables are there (set up on first use).

        Callers on other event loops (threads) or in other processes may set them up at the same moment: the
        server then refuses all but one ``CREATE ... IF NOT EXISTS`` of the same object with a unique violation
        (or "type already exists"), once the other has committed, so the setup is run again, and finds them there.
        A server that cannot be reached raises ``BackendUnavailable`` and decides nothing.

        Raises:
            ConfigurationError: pgvector is not installed on the server (asked again at the next call, so
                installing it needs no restart).
            PermissionDenied: the extension is installed but not created in the database, and this user may
                not create it.
        """
        if self._meaning_ready:
            return
        embeddings, embedded = self.db.table("embeddings"), self.db.table("embedded")
        for attempt in range(1, _ATTEMPTS + 1):
            try:
                await self.db.execute(_SETUP.format(embeddings=embeddings, embedded=embedded))
            except BackendUnavailable:
                raise  # the server is away: nothing is known of pgvector yet
            except RaviError as error:
                if attempt < _ATTEMPTS and isinstance(error.__cause__, _RACED_CREATE):
                    continue
                cause = getattr(error.__cause__, "sqlstate", None)
                if cause in _NOT_INSTALLED:
                    raise ConfigurationError(
                        "search by meaning (search_hybrid with an embedder) on Postgres needs the pgvector "
                        f"extension, which this server does not have: {error.__cause__}",
                        hint=_INSTALL_PGVECTOR,
                    ) from error
                if isinstance(error, PermissionDenied):
                    raise PermissionDenied(
                        f"search by meaning on Postgres needs the pgvector extension in this database: {error}",
                        hint="a superuser runs CREATE EXTENSION vector once in this database",
                    ) from error
                raise
            self._meaning_ready = True
            return

    async def _by_meaning(
        self,
        agent_id: str,
        session_id: str,
        query: str,
        before: int,
        limit: int,
        embedder: EmbeddingClient,
        model: str,
    ) -> list[UnitMatch]:
        done = await self._embed_pending(agent_id, session_id, embedder, model)
        if done is None:
            return []
        epoch, stop = done
        [vector] = check_embeddings(await embedder.embed([query]), 1, embedder.dimension)
        embeddings, m = self.db.table("embeddings"), self._messages
        # The embedding goes as text cast to vector: a pool shared with a pgvector store has its codec, which
        # takes arrays only, and a bare $4::vector parameter would be handed to it.
        # The messages are bounded by the same range of seqs as the embeddings (it holds for both, since the
        # join is on seq): the two ranges are merged in one pass instead of a lookup per embedding.
        rows = await self.db.fetch(
            f"""
WITH cut AS (SELECT coalesce((SELECT c.seq FROM {m} c WHERE c.agent_id = $1 AND c.session_id = $2
                              AND c.seq >= 0 AND c.seq < $8 AND c.cum_tokens - c.tokens < $6
                              ORDER BY c.seq DESC LIMIT 1), -1) AS seq)
SELECT e.seq, 1 - (e.embedding <=> $4::text::vector) AS score FROM {embeddings} e
JOIN {m} x ON x.agent_id = e.agent_id AND x.session_id = e.session_id AND x.seq = e.seq AND x.message_id = e.message_id
WHERE e.agent_id = $1 AND e.session_id = $2 AND e.model = $3 AND e.epoch = $5
  AND e.seq > (SELECT seq FROM cut) - $9 AND e.seq <= (SELECT seq FROM cut)
  AND x.seq > (SELECT seq FROM cut) - $9 AND x.seq <= (SELECT seq FROM cut)
  AND x.cum_tokens - x.tokens < $6 AND x.role <> 'system'
ORDER BY e.embedding <=> $4::text::vector, e.seq DESC LIMIT $7""",
            agent_id,
            session_id,
            model,
            _vector_text(vector),
            epoch,
            before,
            limit,  # the closest messages: about as many units (a tool group may hold several)
            stop,
            MEANING_ROWS,
        )
        hits = [(r["seq"], float(r["score"])) for r in rows if r["score"] is not None and r["score"] > 0]
        if not hits:
            return []
        return (await self._units_of(agent_id, session_id, hits, before))[:limit]

    async def _embed_pending(
        self, agent_id: str, session_id: str, embedder: EmbeddingClient, model: str
    ) -> tuple[int, int] | None:
        """Embed the session's rows not yet embedded under ``model`` (all of them when its epoch changed, or the
        row last embedded is no longer the same message); the session's epoch and length, or ``None`` for no
        session (or one cleared or forgotten meanwhile).

        The rows are embedded outside any transaction (the embedder is a remote call), so their vectors are stored
        only while the session is still the one read, in the same generation, its record locked until they are:
        a worker that forgot the session meanwhile had erased its embeddings, and vectors stored after that
        outlived the forget under an epoch a new session of the id starts again from."""
        embeddings, embedded, m, sessions = (
            self.db.table("embeddings"),
            self.db.table("embedded"),
            self._messages,
            self._sessions,
        )
        state = await self.db.fetchrow(
            f"""
SELECT s.epoch, s.generation, s.next_seq, e.epoch AS done_epoch, e.upto, e.last_id, (
    SELECT x.message_id FROM {m} x WHERE x.agent_id = $1 AND x.session_id = $2 AND x.seq = e.upto - 1) AS at_last
FROM {sessions} s LEFT JOIN {embedded} e ON e.agent_id = s.agent_id AND e.session_id = s.session_id AND e.model = $3
WHERE s.agent_id = $1 AND s.session_id = $2""",
            agent_id,
            session_id,
            model,
        )
        if state is None:
            return None
        epoch, generation, stop = state["epoch"], state["generation"], state["next_seq"]
        upto = state["upto"] or 0
        if state["done_epoch"] != epoch or upto > stop or (upto and state["at_last"] != state["last_id"]):
            # Only rows of earlier epochs go: a search on another loop or in another process may have stored rows
            # of this epoch (and recorded them done) since the state above was read, and they are valid; the rows
            # embedded again from 0 below replace any of this epoch that are not.
            await self.db.execute(
                f"DELETE FROM {embeddings} WHERE agent_id = $1 AND session_id = $2 AND model = $3 AND epoch < $4",
                agent_id,
                session_id,
                model,
                epoch,
            )
            upto = 0
        while upto < stop:
            rows = await self.db.fetch(
                f"SELECT seq, message_id, body FROM {m} WHERE agent_id = $1 AND session_id = $2 AND seq >= $3 "
                "AND seq < $4 ORDER BY seq LIMIT $5",
                agent_id,
                session_id,
                upto,
                stop,
                _EMBED_CHUNK,
            )
            if not rows:
                break
            messages = messages_from_json([r["body"] for r in rows])
            wanted = [
                (r, text)
                for r, message in zip(rows, messages, strict=True)
                if message.role != "system" and (text := _embedded_text(message)).strip()
            ]
            vectors = (
                check_embeddings(await embedder.embed([text for _, text in wanted]), len(wanted), embedder.dimension)
                if wanted
                else []
            )
            async with self.db.connection() as connection, connection.transaction():
                live = await connection.fetchval(
                    f"SELECT true FROM {sessions} WHERE agent_id = $1 AND session_id = $2 AND generation = $3 "
                    "FOR SHARE",
                    agent_id,
                    session_id,
                    generation,
                )
                if not live:  # cleared or forgotten since it was read: nothing embedded of it is kept
                    return None
                if wanted:
                    await connection.execute(
                        f"""
INSERT INTO {embeddings} (agent_id, session_id, model, seq, message_id, epoch, embedding)
SELECT $1, $2, $3, u.seq, u.id, $4, u.v::vector FROM unnest($5::bigint[], $6::text[], $7::text[]) AS u(seq, id, v)
ON CONFLICT (agent_id, session_id, model, seq) DO UPDATE
    SET message_id = excluded.message_id, epoch = excluded.epoch, embedding = excluded.embedding""",
                        agent_id,
                        session_id,
                        model,
                        epoch,
                        [r["seq"] for r, _ in wanted],
                        [r["message_id"] for r, _ in wanted],
                        [_vector_text(v) for v in vectors],
                    )
                upto = rows[-1]["seq"] + 1
                await connection.execute(
                    f"""
INSERT INTO {embedded} AS e (agent_id, session_id, model, epoch, upto, last_id) VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (agent_id, session_id, model) DO UPDATE SET epoch = $4, upto = $5, last_id = $6
    WHERE e.epoch <> $4 OR e.upto < $5""",
                    agent_id,
                    session_id,
                    model,
                    epoch,
                    upto,
                    rows[-1]["message_id"],
                )
        return int(epoch), int(stop)


def _units_of_rows(rows: Sequence[Any], messages: Sequence[ChatMessage], before: int) -> list[UnitMatch]:
    """The units a statement returning units gave (``rows``, each with its ``opener``, ``after_system``,
    ``offset`` and ``score``, ordered by opener then seq, and the message of each), best first: each span of rows
    with one opener is cut into units as :func:`~ravi.kernel.search.unit_end` cuts them (an assistant message
    making tool calls with the tool results and system messages after it, trailing system messages standing alone;
    any other message alone), and a unit is kept when its best score (of its messages that are not system
    messages, the first of equal ones) is above 0 and all of it lies before offset ``before``. A unit is placed
    after the newest system message before it in its span, else after the span's ``after_system``. Rows without
    an opener are left out.

    One pass over the rows, each looked at once: thousands of units a search (most of a recall window's time in
    the process went to slicing each unit's rows and messages and scanning them again)."""
    found: list[UnitMatch] = []
    n = len(rows)
    k = 0
    while k < n:
        opener = rows[k]["opener"]
        if opener is None:
            k += 1
            continue
        end = k + 1
        while end < n and rows[end]["opener"] == opener:
            end += 1
        anchor = rows[k]["after_system"]
        i = k
        while i < end:
            message = messages[i]
            role = message.role
            if role == "system":  # alone: scores nothing, and places what follows it
                anchor = message.id
                i += 1
                continue
            j = i + 1
            if role == "assistant" and opens_group(message):
                while j < end and messages[j].role in ("tool", "system"):
                    j += 1
                while j - 1 > i and messages[j - 1].role == "system":
                    j -= 1
            if j == i + 1:
                r = rows[i]
                best, offset = r["score"], r["offset"]
                if best is not None and best > 0 and offset is not None and offset < before:
                    found.append(UnitMatch(float(best), (message,), int(offset), anchor))
                i = j
                continue
            best = None
            wholly = True
            placed = anchor
            for t in range(i, j):
                r = rows[t]
                offset = r["offset"]
                if offset is None or not offset < before:
                    wholly = False
                x = messages[t]
                if x.role == "system":
                    anchor = x.id
                else:
                    score = r["score"]
                    if score is not None and (best is None or score > best):
                        best = score
            if best is not None and best > 0 and wholly:
                found.append(UnitMatch(float(best), tuple(messages[i:j]), int(rows[i]["offset"]), placed))
            i = j
        k = end
    found.sort(key=lambda u: (-u.score, -u.offset))
    return found


def _embedded_text(message: ChatMessage) -> str:
    return message_text(message)[:EMBEDDED_CHARS]


def _vector_text(vector: Sequence[float]) -> str:
    """pgvector's text form of ``vector`` (``[0.1,0.2]``)."""
    return "[" + ",".join(repr(float(x)) for x in vector) + "]"


__all__ = ["HybridSearch"]
