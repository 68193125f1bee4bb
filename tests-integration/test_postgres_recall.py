"""Relevant recall's hybrid search on a real PostgreSQL: the terms index with the neighbours of each match, and the
meaning of a request by pgvector, kept in the database and embedded once for every worker."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

import pytest
from servers import Server, closing

from ravi.agents.context import CompactionPipeline, InMemoryHistoryProvider, RelevantRecallStrategy, WindowRequest
from ravi.capabilities.postgres import PostgresHistoryProvider
from ravi.kernel.embeddings import HashingEmbeddingClient
from ravi.kernel.errors import ConfigurationError, InvalidArgument
from ravi.kernel.messages import ChatMessage, ToolCallBlock
from ravi.kernel.values import MAX_ID_BYTES


class Counting(HashingEmbeddingClient):
    """A deterministic embedder that records what it embeds."""

    def __init__(self) -> None:
        super().__init__(dimension=64)
        self.texts: list[str] = []

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.texts.extend(texts)
        return await super().embed(texts)


def _conversation(n: int) -> list[ChatMessage]:
    messages = [ChatMessage.system("be brief")]
    for i in range(n):
        if i == 30:
            messages += [
                ChatMessage.user("any tips for the dying fern on my desk?", name="Sam"),
                ChatMessage.assistant("water it less and move it to the east window", name="Maya"),
            ]
        messages += [ChatMessage.user(f"chat {i} about the weekend", name="Sam"), ChatMessage.assistant(f"ok {i}")]
    return messages


def _made(kind: str, text: str, i: int) -> ChatMessage:
    """The ``i``-th message of a generated session: a turn of ``kind`` (``call``: a tool call, answered by the
    ``tool`` result after it) holding ``text``."""
    text = f"{text} n{i}"
    if kind == "call":
        return ChatMessage(role="assistant", content=[ToolCallBlock(id=f"c{i}", name="look", arguments={})])
    if kind == "tool":
        return ChatMessage.tool(f"c{i - 1}", text)
    return {"user": ChatMessage.user, "assistant": ChatMessage.assistant, "system": ChatMessage.system}[kind](text)


async def test_the_neighbours_of_a_match_and_the_closest_in_meaning_come_from_the_database(
    postgres_server: Server, pg_schema: str
) -> None:
    """The words find the question about the fern; its neighbour, the answer (which shares no word with the
    request), comes with half its score; by meaning, units are found in the database too."""
    messages = _conversation(200)
    question, answer = messages[61], messages[62]
    embedder = Counting()
    async for history in closing(PostgresHistoryProvider(postgres_server.address, schema=pg_schema)):
        await history.append_many("a", messages, session_id="s")
        found = await history.search_hybrid(
            "a", session_id="s", query="tips for the fern", before=10**9, limit=5, spread=0.5,
            embedder=embedder, model="hashing-64",
        )  # fmt: skip
        lexical = [u.messages[0].id for u in found.lexical]
        assert lexical[:2] == [question.id, answer.id]
        assert found.lexical[1].score == 0.5 * found.lexical[0].score
        assert found.meaning, "nothing found by meaning"
        assert all(u.messages[0].role != "system" for u in found.meaning)
        embedded = len(embedder.texts)
        assert embedded == sum(1 for m in messages if m.role != "system") + 1  # every message once, and the query
        again = await history.search_hybrid(
            "a", session_id="s", query="fern", before=10**9, limit=5, embedder=embedder, model="hashing-64"
        )
        assert len(embedder.texts) == embedded + 1 and again.meaning  # nothing embedded again: only the query
    async for history in closing(PostgresHistoryProvider(postgres_server.address, schema=pg_schema)):
        worker = Counting()  # a fresh worker finds the embeddings in the database
        await history.append_many("a", [ChatMessage.user("and the fern again?")], session_id="s")
        await history.search_hybrid(
            "a", session_id="s", query="fern", before=10**9, limit=5, embedder=worker, model="hashing-64"
        )
        assert worker.texts == ["and the fern again?", "fern"]


async def test_nothing_embedded_before_a_clear_is_found_after_it(postgres_server: Server, pg_schema: str) -> None:
    """A cleared session written again with other words is embedded afresh: no unit of its old life is found,
    by words or by meaning, even by a provider that searched it before."""
    embedder = Counting()
    async for history in closing(PostgresHistoryProvider(postgres_server.address, schema=pg_schema)):
        await history.append_many("a", _conversation(50), session_id="s")
        await history.search_hybrid(
            "a", session_id="s", query="fern", before=10**9, limit=5, embedder=embedder, model="hashing-64"
        )
        await history.clear("a", session_id="s")
        fresh = [ChatMessage.user(f"note {i} on the budget spreadsheet") for i in range(40)]
        await history.append_many("a", fresh, session_id="s")
        found = await history.search_hybrid(
            "a", session_id="s", query="fern tips", before=10**9, limit=5, spread=0.5, embedder=embedder,
            model="hashing-64",
        )  # fmt: skip
        ids = {m.id for m in fresh}
        assert all(m.id in ids for u in [*found.lexical, *found.meaning] for m in u.messages)


async def test_a_tool_unit_found_by_meaning_comes_whole(postgres_server: Server, pg_schema: str) -> None:
    call = ToolCallBlock(id="c1", name="lookup", arguments={"q": "host"})
    unit = [
        ChatMessage.assistant(None, tool_calls=[call]),
        ChatMessage.system("a note among the results"),
        ChatMessage.tool("c1", "the staging database listens on port 6543 at zanzibar-7"),
    ]
    messages = [ChatMessage.user("start"), *unit, *(ChatMessage.user(f"turn {i}") for i in range(30))]
    async for history in closing(PostgresHistoryProvider(postgres_server.address, schema=pg_schema)):
        await history.append_many("a", messages, session_id="s")
        found = await history.search_hybrid(
            "a", session_id="s", query="staging database port", before=10**9, limit=3, embedder=Counting(),
            model="hashing-64",
        )  # fmt: skip
        assert list(found.meaning[0].messages) == unit
        assert list(found.lexical[0].messages) == unit


async def test_recall_on_postgres_reads_only_the_window_with_words_and_meaning(
    postgres_server: Server, pg_schema: str
) -> None:
    """The default recall (words and meaning fused) on Postgres: a fresh worker reads the newest rows, and the
    answer to the request comes back from the database."""
    messages = [*_conversation(1_500), ChatMessage.user("what did Maya suggest for the fern?", name="Sam")]
    async for history in closing(PostgresHistoryProvider(postgres_server.address, schema=pg_schema)):
        await history.append_many("a", messages, session_id="s")
    async for history in closing(PostgresHistoryProvider(postgres_server.address, schema=pg_schema)):
        pipeline = CompactionPipeline([RelevantRecallStrategy(600, meaning=Counting())])
        window = (await pipeline.window(WindowRequest("a", "s", history=history))).messages
        assert ("a", "s") not in history._cache, "the session was read whole"
        assert messages[62].id in {m.id for m in window}
        assert window[-1] == messages[-1]


async def test_meaning_looks_back_over_the_newest_messages_only(
    postgres_server: Server, pg_schema: str, monkeypatch: object
) -> None:
    """A search by meaning scans the session's newest ``MEANING_ROWS`` messages (its cost stays a window's); the
    words still find an older one."""
    import ravi.capabilities.postgres.hybrid as hybrid

    monkeypatch.setattr(hybrid, "MEANING_ROWS", 50)  # type: ignore[attr-defined]
    messages = [ChatMessage.user("the walrus sleeps on the ice"), *(ChatMessage.user(f"turn {i}") for i in range(100))]
    async for history in closing(PostgresHistoryProvider(postgres_server.address, schema=pg_schema)):
        await history.append_many("a", messages, session_id="s")
        found = await history.search_hybrid(
            "a", session_id="s", query="walrus", before=10**9, limit=3, embedder=Counting(), model="hashing-64"
        )
        assert found.lexical[0].messages[0] == messages[0]
        assert all(u.messages[0] != messages[0] for u in found.meaning)


async def test_the_best_units_with_neighbours_are_those_of_the_whole_ranking(
    postgres_server: Server, pg_schema: str
) -> None:
    """Asked for the ``limit`` best, the search returns the first ``limit`` of the ranking of every match with
    every neighbour: leaving out the borders of matches too low to place one changes nothing."""
    messages = [ChatMessage.system("be brief")]
    for i in range(60):  # each question a different length, so every score differs
        filler = " ".join(f"w{i}x{k}" for k in range(i % 7 + 2 * (i // 7)))
        messages += [ChatMessage.user(f"fern question {filler}"), ChatMessage.assistant(f"answer {i}")]
        messages += [ChatMessage.user(f"aside {i}"), ChatMessage.assistant(f"noted {i}")]
    async for history in closing(PostgresHistoryProvider(postgres_server.address, schema=pg_schema)):
        await history.append_many("a", messages, session_id="s")
        whole = await history.search_hybrid("a", session_id="s", query="fern", before=10**9, limit=500, spread=0.5)
        assert len(whole.lexical) == 179  # every question, the answer after it and the turn before it
        for limit in (1, 5, 20, 59, 60, 61, 90):
            found = await history.search_hybrid(
                "a", session_id="s", query="fern", before=10**9, limit=limit, spread=0.5
            )
            expected = [(u.messages[0].id, u.score) for u in whole.lexical[:limit]]
            assert [(u.messages[0].id, u.score) for u in found.lexical] == expected, limit


def test_neighbours_are_scored_as_the_units_that_hold_them_whatever_the_session(
    postgres_server: Server, pg_schema: str
) -> None:
    """With ``spread``, every unit scores the best of its own match and ``spread`` times each unit it borders (the
    nearest non-system message before its first and after its last lies in it), over sessions of calls, results,
    system messages and turns in any order, matches bordering matches included; the search returns the first
    ``limit`` of that ranking, each unit whole."""
    import asyncio
    import uuid

    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from ravi.kernel.search import unit_at

    words = st.lists(st.sampled_from(["fern", "moss", "walrus", "lunch", "fern fern"]), min_size=0, max_size=3)
    kinds = st.sampled_from(["user", "assistant", "call", "tool", "system"])

    async def check(history: PostgresHistoryProvider, turns: list[tuple[str, list[str]]], limit: int) -> None:
        session = uuid.uuid4().hex
        messages = [_made(kind, " ".join(text), i) for i, (kind, text) in enumerate(turns)]
        await history.append_many("a", messages, session_id=session)
        own = await history.search_units("a", session_id=session, query="fern moss", before=10**9, limit=10**6)
        where = {m.id: i for i, m in enumerate(messages)}
        scores: dict[int, float] = {}
        for unit in own:
            start = where[unit.messages[0].id]
            scores[start] = max(scores.get(start, 0.0), unit.score)
        for unit in own:
            first, last = where[unit.messages[0].id], where[unit.messages[-1].id]
            near = [
                next((k for k in range(first - 1, -1, -1) if messages[k].role != "system"), None),
                next((k for k in range(last + 1, len(messages)) if messages[k].role != "system"), None),
            ]
            for k in near:
                if k is not None:
                    start = unit_at(messages, k)[0]
                    scores[start] = max(scores.get(start, 0.0), unit.score * 0.5)
        expected = sorted(
            ((start, score) for start, score in scores.items()), key=lambda x: (-x[1], -where[messages[x[0]].id])
        )[:limit]
        found = await history.search_hybrid(
            "a", session_id=session, query="fern moss", before=10**9, limit=limit, spread=0.5
        )
        got = [(where[u.messages[0].id], u.score) for u in found.lexical]
        assert got == expected
        for unit in found.lexical:
            start = where[unit.messages[0].id]
            assert list(unit.messages) == messages[slice(*unit_at(messages, start))]

    with asyncio.Runner() as runner:
        history = PostgresHistoryProvider(postgres_server.address, schema=pg_schema)

        @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
        @given(turns=st.lists(st.tuples(kinds, words), min_size=1, max_size=40), limit=st.integers(1, 30))
        def sessions(turns: list[tuple[str, list[str]]], limit: int) -> None:
            runner.run(check(history, turns, limit))

        try:
            sessions()
        finally:
            runner.run(history.close())


async def test_an_offset_or_limit_past_a_servers_integers_finds_everything_by_words_and_meaning(
    postgres_server: Server, pg_schema: str
) -> None:
    """``search_hybrid`` with ``before`` and ``limit`` past a 64-bit integer (or twice a 32-bit one) finds what a
    search of the whole session finds; they were sent to the server as they were, which refused them."""
    history = PostgresHistoryProvider(postgres_server.address, schema=pg_schema)

    async def search(before: int, limit: int) -> list[list[list[str]]]:
        found = await history.search_hybrid(
            "a", session_id="s", query="quokka", before=before, limit=limit, spread=0.5,
            embedder=Counting(), model="hashing-64",
        )  # fmt: skip
        return [[[m.id for m in u.messages] for u in units] for units in (found.lexical, found.meaning)]

    try:
        await history.append_many("a", [ChatMessage.user(f"quokka note {i}") for i in range(4)], session_id="s")
        expected = await search(10**9, 100)
        assert len(expected[0]) == 4
        for huge in (2**30 + 1, 2**63, 2**64 + 7):
            assert await search(huge, huge) == expected
    finally:
        await history.close()


async def test_a_forget_while_a_search_embeds_leaves_no_embedding_of_the_forgotten_messages(
    postgres_server: Server, pg_schema: str
) -> None:
    """A search embeds a session's messages outside any transaction (the embedder is a remote call), then stores
    the vectors. Another worker forgetting the session meanwhile erased the messages and their embeddings, and the
    search then stored the vectors of the forgotten messages after it, under the session's epoch, which a new
    session of that id starts again from: they outlived the forget, and a new session reusing the message ids was
    searched by the forgotten texts' meaning. What a search embeds is stored only while the session it read is
    still there, in the same generation."""
    forgotten = [ChatMessage.user("my passport number is X1234567", id=f"m{i}") for i in range(3)]
    reused = [ChatMessage.user(f"the weather is mild today {i}", id=f"m{i}") for i in range(3)]
    history = PostgresHistoryProvider(postgres_server.address, schema=pg_schema)
    other = PostgresHistoryProvider(postgres_server.address, schema=pg_schema)

    class ForgetsMidway(Counting):
        async def embed(self, texts: Sequence[str]) -> list[list[float]]:
            if not self.texts:  # the session's rows, read before the forget: another worker forgets the session
                await other.forget("a", session_id="s")
            return await super().embed(texts)

    try:
        await history.append_many("a", forgotten, session_id="s")
        found = await history.search_hybrid(
            "a", session_id="s", query="passport", before=10**9, limit=5, embedder=ForgetsMidway(), model="m"
        )
        assert found.meaning == []
        left = await history.db.fetchval(
            f"SELECT count(*) FROM {history.db.table('embeddings')} WHERE agent_id = 'a' AND session_id = 's'"
        )
        assert left == 0, "vectors of forgotten messages were stored after the forget"

        await history.append_many("a", reused, session_id="s")
        embedder = Counting()
        await history.search_hybrid(
            "a", session_id="s", query="passport number", before=10**9, limit=5, embedder=embedder, model="m"
        )
        assert embedder.texts[:3] == [m.text for m in reused], "the new session's messages were not embedded"
    finally:
        await history.close()
        await other.close()


async def test_a_model_name_is_an_id_held_to_the_shared_limit(postgres_server: Server, pg_schema: str) -> None:
    """Postgres keys a session's embeddings by agent, session and model name together: names of exactly
    ``MAX_ID_BYTES`` UTF-8 bytes are embedded and found, in memory and in Postgres alike, and a model name one byte
    longer is ``InvalidArgument`` naming it and the limit on both, with nothing embedded."""
    agent, session, model = (part + "\U0001f680" * (MAX_ID_BYTES // 4 - 1) + "abc" for part in "asm")
    assert {len(x.encode()) for x in (agent, session, model)} == {MAX_ID_BYTES}
    messages = _conversation(5)
    async for history in closing(PostgresHistoryProvider(postgres_server.address, schema=pg_schema)):
        for store in (InMemoryHistoryProvider(), history):
            await store.append_many(agent, messages, session_id=session)
            embedder = Counting()
            with pytest.raises(InvalidArgument, match=f"model.*{MAX_ID_BYTES}"):
                await store.search_hybrid(
                    agent, session_id=session, query="fern", before=10**9, limit=5, embedder=embedder, model=model + "x"
                )
            assert embedder.texts == []
            found = await store.search_hybrid(
                agent, session_id=session, query="weekend", before=10**9, limit=5, embedder=embedder, model=model
            )
            assert found.meaning, f"{type(store).__name__} found nothing by meaning"


def _units_as_before(rows: Sequence[dict[str, object]], messages: Sequence[ChatMessage], before: int) -> list[object]:
    """The units of a statement's rows as the provider cut them before ``_units_of_rows``: rows grouped by opener,
    each group cut with ``unit_end``, each unit's anchor looked for again in the messages before it."""
    from ravi.kernel.search import UnitMatch, unit_end

    def wholly_before(span: Sequence[dict[str, object]]) -> bool:
        return all(r["offset"] is not None and r["offset"] < before for r in span)  # type: ignore[operator]

    spans: dict[object, tuple[list[dict[str, object]], list[ChatMessage]]] = {}
    for r, message in zip(rows, messages, strict=True):
        if r["opener"] is not None:
            span_rows, span_messages = spans.setdefault(r["opener"], ([], []))
            span_rows.append(r)
            span_messages.append(message)
    found = []
    for span, group in spans.values():
        i = 0
        while i < len(group):
            j = unit_end(group, i)
            scores = [r["score"] for r, m in zip(span[i:j], group[i:j], strict=True) if m.role != "system"]
            best = max((x for x in scores if x is not None), default=None)  # type: ignore[type-var]
            if best is not None and best > 0 and wholly_before(span[i:j]):  # type: ignore[operator]
                anchor = span[0]["after_system"]
                if i:
                    anchor = next((m.id for m in reversed(group[:i]) if m.role == "system"), anchor)
                found.append(UnitMatch(float(best), tuple(group[i:j]), int(span[i]["offset"]), anchor))  # type: ignore[arg-type, call-overload]
            i = j
    found.sort(key=lambda u: (-u.score, -u.offset))
    return found


def test_units_are_cut_from_a_statements_rows_as_before_whatever_the_rows() -> None:
    """``_units_of_rows`` (one pass, a unit of one message taken without slicing) gives exactly the units the
    provider cut before, in the same order, over spans of calls, results, system messages and turns in any order,
    scores missing, zero, negative or tied, offsets missing, and any ``before``."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from ravi.capabilities.postgres.hybrid import _units_of_rows

    kinds = st.sampled_from(["user", "assistant", "call", "tool", "system"])
    scores = st.one_of(st.none(), st.sampled_from([0.0, -1.0, 0.5, 1.0, 2.0]))
    span = st.lists(st.tuples(kinds, scores, st.booleans()), min_size=1, max_size=8)

    @settings(max_examples=400, deadline=None)
    @given(
        spans=st.lists(st.tuples(span, st.booleans()), max_size=8),
        loose=st.lists(st.tuples(kinds, scores, st.booleans()), max_size=3),
        before=st.integers(0, 80),
    )
    def check(
        spans: list[tuple[list[tuple[str, float | None, bool]], bool]],
        loose: list[tuple[str, float | None, bool]],
        before: int,
    ) -> None:
        rows: list[dict[str, object]] = []
        messages: list[ChatMessage] = []
        seq = 0
        groups = [(g, anchored) for g, anchored in spans] + ([(loose, False)] if loose else [])
        for n, (group, anchored) in enumerate(groups):
            opener = None if loose and n == len(groups) - 1 else seq
            for kind, score, counted in group:
                if kind == "call":
                    message = ChatMessage(
                        role="assistant", content=[ToolCallBlock(id=f"c{seq}", name="f", arguments={})]
                    )
                elif kind == "tool":
                    message = ChatMessage.tool(f"c{seq - 1}", f"result {seq}")
                else:
                    message = {
                        "user": ChatMessage.user,
                        "assistant": ChatMessage.assistant,
                        "system": ChatMessage.system,
                    }[kind](f"text {seq}")
                after = f"s{opener}" if anchored else None
                rows.append(
                    {"opener": opener, "after_system": after, "offset": 3 * seq if counted else None, "score": score}
                )
                messages.append(message)
                seq += 1
        assert _units_of_rows(rows, messages, before) == _units_as_before(rows, messages, before)

    check()


def test_neighbours_come_back_as_when_every_border_was_fetched_whatever_the_session(
    postgres_server: Server, pg_schema: str
) -> None:
    """``search_hybrid`` fetches the units of only the borders that can change the ranking (a border inside a unit
    found already, scoring no more than it, is left out): its units are exactly those of fetching every border's
    unit and keeping each unit's best score (scores, messages, offsets and the system message each is placed
    after), over generated sessions with system messages, tool calls and results, any ``before`` and ``limit``."""
    import asyncio
    import uuid

    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from ravi.kernel.tokens import stored_tokens

    words = st.lists(st.sampled_from(["fern", "moss", "walrus", "fern fern"]), min_size=0, max_size=3)
    kinds = st.sampled_from(["user", "assistant", "call", "tool", "system"])

    async def every_border(
        history: PostgresHistoryProvider, session: str, messages: list[ChatMessage], before: int, limit: int
    ) -> list[object]:
        """The ranking as made before: every border of the matches fetched, then merged by offset."""
        found = await history.search_units("a", session_id=session, query="fern moss", before=before, limit=limit)
        if not found:
            return found  # type: ignore[return-value]
        floor = min(u.score for u in found) if len(found) >= limit else float("-inf")
        where = {m.id: i for i, m in enumerate(messages)}
        near: dict[int, float] = {}
        for unit in found:
            if unit.score * 0.5 < floor:
                continue
            first, last = where[unit.messages[0].id], where[unit.messages[-1].id]
            for k in (
                next((k for k in range(first - 1, -1, -1) if messages[k].role != "system"), None),
                next((k for k in range(last + 1, len(messages)) if messages[k].role != "system"), None),
            ):
                if k is not None:
                    near[k] = max(near.get(k, float("-inf")), unit.score * 0.5)
        if not near:
            return found  # type: ignore[return-value]
        bordering = await history._units_of("a", session, list(near.items()), before)
        best = {u.offset: u for u in found}
        for unit in bordering:
            if unit.offset not in best or unit.score > best[unit.offset].score:
                best[unit.offset] = unit
        return sorted(best.values(), key=lambda u: (-u.score, -u.offset))[:limit]

    async def check(history: PostgresHistoryProvider, turns: list[tuple[str, list[str]]], cut: int, limit: int) -> None:
        session = uuid.uuid4().hex
        messages = [_made(kind, " ".join(text), i) for i, (kind, text) in enumerate(turns)]
        await history.append_many("a", messages, session_id=session)
        stored = await history.get_messages("a", session_id=session)
        before = sum(stored_tokens(m) for m in stored[:cut]) if cut < len(stored) else 10**9
        found = await history.search_hybrid(
            "a", session_id=session, query="fern moss", before=before, limit=limit, spread=0.5
        )
        assert found.lexical == await every_border(history, session, messages, before, limit)

    with asyncio.Runner() as runner:
        history = PostgresHistoryProvider(postgres_server.address, schema=pg_schema)

        @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
        @given(
            turns=st.lists(st.tuples(kinds, words), min_size=1, max_size=40),
            cut=st.integers(0, 45),
            limit=st.integers(1, 30),
        )
        def sessions(turns: list[tuple[str, list[str]]], cut: int, limit: int) -> None:
            runner.run(check(history, turns, cut, limit))

        try:
            sessions()
        finally:
            runner.run(history.close())


async def test_units_and_borders_far_from_their_match_are_found_whole(postgres_server: Server, pg_schema: str) -> None:
    """A match in the 40th result of a call is recalled with the call and every result (the call lies past the
    first range the search looks at), and the turns bordering it across 30 system messages on each side come
    whole too."""
    calls = [ToolCallBlock(id=f"c{i}", name="look", arguments={}) for i in range(40)]
    results = [ChatMessage.tool(f"c{i}", "walrus seen" if i == 39 else f"nothing {i}") for i in range(40)]
    question, answer = ChatMessage.user("where did it go"), ChatMessage.user("it went north")
    systems = [ChatMessage.system(f"note {i}") for i in range(30)]
    messages = [
        ChatMessage.user("start"),
        question,
        *systems,
        ChatMessage(role="assistant", content=calls),
        *results,
        *[ChatMessage.system(f"later {i}") for i in range(30)],
        answer,
        ChatMessage.user("end"),
    ]
    async for history in closing(PostgresHistoryProvider(postgres_server.address, schema=pg_schema)):
        await history.append_many("a", messages, session_id="s")
        found = await history.search_hybrid("a", session_id="s", query="walrus", before=10**9, limit=5, spread=0.5)
        units = [[m.id for m in u.messages] for u in found.lexical]
        assert units[0] == [messages[32].id, *(r.id for r in results)]
        assert sorted(units[1:]) == sorted([[question.id], [answer.id]])
        assert [u.score for u in found.lexical[1:]] == [found.lexical[0].score * 0.5] * 2


@pytest.fixture
async def without_pgvector(postgres_server: Server) -> AsyncIterator[str]:
    """The DSN of a fresh database of the session's server where pgvector is not available: its extension search
    path (PostgreSQL 18's ``extension_control_path``) names a directory without it, as a server without the
    extension installed has none."""
    import uuid
    from urllib.parse import urlsplit, urlunsplit

    import asyncpg

    name = f"novector_{uuid.uuid4().hex[:12]}"
    admin = await asyncpg.connect(postgres_server.address)
    try:
        if int(await admin.fetchval("SHOW server_version_num")) < 180000:
            pytest.skip("a server without pgvector is made with extension_control_path, from PostgreSQL 18")
        await admin.execute(f'CREATE DATABASE "{name}"')
        await admin.execute(f"ALTER DATABASE \"{name}\" SET extension_control_path = '/nonexistent/ravi-no-extensions'")
    finally:
        await admin.close()
    parts = urlsplit(postgres_server.address)
    yield urlunsplit(parts._replace(path=f"/{name}"))
    admin = await asyncpg.connect(postgres_server.address)
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await admin.close()


async def test_meaning_on_a_server_without_pgvector_is_a_configuration_error_naming_it(without_pgvector: str) -> None:
    """Asked to search by meaning (an ``embedder``) where pgvector cannot be had, the provider says so, naming the
    extension and how to install it, at every such call; by words alone it searches as before. It returned no
    units by meaning (logged once), so recall by meaning went quietly without the meaning."""
    session = _conversation(40)
    async for history in closing(PostgresHistoryProvider(without_pgvector, schema="ravi")):
        await history.append_many("a", session, session_id="s")
        words = await history.search_hybrid("a", session_id="s", query="dying fern", before=10**9, limit=3)
        assert words.lexical and words.meaning == []
        for _ in range(2):
            with pytest.raises(ConfigurationError, match="pgvector") as raised:
                await history.search_hybrid(
                    "a", session_id="s", query="dying fern", before=10**9, limit=3, embedder=Counting(), model="m"
                )
            assert "CREATE EXTENSION vector" in (raised.value.hint or "")
        pipeline = CompactionPipeline([RelevantRecallStrategy(200, meaning=Counting())])
        with pytest.raises(ConfigurationError, match="pgvector"):
            await pipeline.window(WindowRequest("a", "s", history=history))
        pipeline = CompactionPipeline([RelevantRecallStrategy(200, meaning=None)])  # words only: no pgvector needed
        assert (await pipeline.window(WindowRequest("a", "s", history=history))).messages


async def test_meaning_auto_without_pgvector_recalls_by_words_and_says_so_once(
    without_pgvector: str, caplog: pytest.LogCaptureFixture
) -> None:
    """``meaning="auto"`` (the default) uses meaning where it can be had: on a server without pgvector recall
    ranks by words, with one warning naming pgvector, as with the offline model not installed; asked for
    explicitly (``"offline"``), meaning without pgvector stays an error."""
    from ravi.agents.embeddings import offline_embedding_client

    if offline_embedding_client() is None:
        pytest.skip("the offline embedding model (the embeddings extra) is not installed")
    session = _conversation(40)
    async for history in closing(PostgresHistoryProvider(without_pgvector, schema="ravi")):
        await history.append_many("a", session, session_id="s")
        words = CompactionPipeline([RelevantRecallStrategy(200, meaning=None)])
        auto = CompactionPipeline([RelevantRecallStrategy(200)])
        with caplog.at_level("WARNING"):
            for _ in range(3):
                window = await auto.window(WindowRequest("a", "s", history=history))
                assert window.messages == (await words.window(WindowRequest("a", "s", history=history))).messages
        warned = [r for r in caplog.records if "pgvector" in r.getMessage()]
        assert len(warned) == 1, [r.getMessage() for r in caplog.records]
        offline = CompactionPipeline([RelevantRecallStrategy(200, meaning="offline")])
        with pytest.raises(ConfigurationError, match="pgvector"):
            await offline.window(WindowRequest("a", "s", history=history))


async def test_meaning_where_this_user_may_not_create_pgvector_is_permission_denied_saying_who_can(
    postgres_server: Server,
) -> None:
    """pgvector installed on the server but not created in the database, and a user that may not create it (it
    is not a trusted extension): the search by meaning is ``PermissionDenied`` saying the statement a superuser
    runs, not taken for a missing extension."""
    import uuid
    from urllib.parse import urlsplit, urlunsplit

    import asyncpg

    from ravi.kernel.errors import PermissionDenied

    name = f"plain_{uuid.uuid4().hex[:12]}"
    admin = await asyncpg.connect(postgres_server.address)
    try:
        await admin.execute(f'CREATE ROLE "{name}" LOGIN')
        await admin.execute(f'CREATE DATABASE "{name}"')
        await admin.execute(f'GRANT CREATE ON DATABASE "{name}" TO "{name}"')
    finally:
        await admin.close()
    parts = urlsplit(postgres_server.address)
    host = parts.netloc.rsplit("@", 1)[-1]
    dsn = urlunsplit(parts._replace(netloc=f"{name}@{host}", path=f"/{name}"))
    try:
        async for history in closing(PostgresHistoryProvider(dsn, schema="ravi")):
            await history.append_many("a", _conversation(5), session_id="s")
            with pytest.raises(PermissionDenied, match="pgvector") as raised:
                await history.search_hybrid(
                    "a", session_id="s", query="weekend", before=10**9, limit=3, embedder=Counting(), model="m"
                )
            assert "CREATE EXTENSION vector" in (raised.value.hint or "")
    finally:
        admin = await asyncpg.connect(postgres_server.address)
        try:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            await admin.execute(f'DROP ROLE IF EXISTS "{name}"')
        finally:
            await admin.close()
