"""``HistoryProviderContract``: what every ``HistoryProvider`` must do."""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given, settings

from ravi.conformance._base import (
    PROPERTY_CHECKS,
    ContractBase,
    assert_protocol,
    at_limit,
    hostile_ids,
    hostile_pairs,
    id_texts,
    refuses,
    refuses_long_ids,
    unique,
)
from ravi.kernel.errors import InvalidArgument, MessageConflict, RaviError
from ravi.kernel.messages import (
    ChatMessage,
    DocumentBlock,
    ImageBlock,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
)
from ravi.kernel.scope import Scope
from ravi.kernel.search import UnitMatch, unit_at
from ravi.kernel.storage import (
    Forgetter,
    HistoryProvider,
    HistorySearcher,
    HistoryWindow,
    HybridSearcher,
    RunReader,
    SessionGeneration,
    SessionLister,
    SessionReplacer,
    SummaryStore,
    TailEditor,
    WindowReader,
    stored_body,
    window_start,
)
from ravi.kernel.storage.transfer import export_session, import_records, parse_export, split_lines
from ravi.kernel.tokens import stored_tokens

A_DICT = {"role": "user", "content": "a dict"}
"""A message as a dict, which ``append`` must refuse: it takes ``ChatMessage`` objects."""


def texts(messages: list[ChatMessage]) -> list[str]:
    return [m.text for m in messages]


def every_kind() -> list[ChatMessage]:
    """A conversation holding every kind of message and block, with names, metadata and exact timestamps (fixed
    ids, so two calls give the same messages)."""
    at = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
    calls = (
        ToolCallBlock(id="c1", name="search", arguments={"q": "zèbre", "n": 3, "deep": {"x": [1, 2.5, None]}}),
        ToolCallBlock(id="c2", name="fetch", arguments={}),
    )
    return [
        ChatMessage.system("be exact", id="k0", created_at=at),
        ChatMessage.user("look 🦓", id="k1", name="alice", metadata={"lang": "fr", "n": 1}, created_at=at),
        ChatMessage(
            id="k2",
            role="user",
            content=(
                TextBlock(text="these:"),
                ImageBlock(url="https://example.com/a.png", detail="high"),
                DocumentBlock(data="JVBERi0=", media_type="application/pdf", title="a.pdf"),
            ),
        ),
        ChatMessage(
            id="k3",
            role="assistant",
            content=(ThinkingBlock(thinking="two lookups", signature="sig=="), TextBlock(text="checking"), *calls),
        ),
        ChatMessage.tool("c1", "3 results", id="k4", name="search"),
        ChatMessage.tool("c2", "timeout", is_error=True, id="k5", name="fetch", metadata={"retry": True}),
        ChatMessage.assistant("found it", id="k6"),
        ChatMessage.user('multi\nline \u2028 \u2029 \x85 \x0c and "quotes"', id="k7"),
        ChatMessage.assistant("", id="k8"),
    ]


class HistoryProviderContract(ContractBase):
    """Subclass and override the ``backend`` fixture to yield an empty ``HistoryProvider``.

    Example:
        >>> class TestMyHistory(HistoryProviderContract):
        ...     @pytest.fixture
        ...     def backend(self):
        ...         return MyHistory()
    """

    contract_name = "HistoryProvider"
    pytestmark = pytest.mark.asyncio

    @pytest.fixture
    def backend(self) -> HistoryProvider:
        """Override: an empty backend, fresh for each test."""
        raise NotImplementedError("override the 'backend' fixture to build an empty backend")

    @pytest.fixture
    def peer(self, backend: HistoryProvider) -> HistoryProvider:
        """Override: a second provider on the same store as ``backend``, as another process would have one, so
        its caches are held to the writes of the first. Without it, the tests that use it read through
        ``backend`` alone."""
        return backend

    async def test_is_a_history_provider(self, backend: HistoryProvider) -> None:
        """The backend satisfies the ``HistoryProvider`` Protocol: it has every method of it, each ``async def``.

        Fix: give the class each method the message names, as ``async def`` with the Protocol's signature
        (``ravi.kernel.storage.HistoryProvider``).
        """
        assert_protocol(backend, HistoryProvider)

    async def test_canary_fixture_gives_an_empty_backend_first(self, backend: HistoryProvider) -> None:
        """The fixture gives every test an empty backend (the first of two tests that each leave data behind).

        Fix: the store held data before the test ran: give each test an empty store of its own in the ``backend``
        fixture (an in-memory or temporary store), or isolate a persistent one with ``--isolate KIND=OPTION``
        (``--ravi-isolate``) and an ``async def destroy(self)`` that removes what the option names.
        """
        assert await backend.count_messages("canary", session_id="canary") == 0
        await backend.append("canary", ChatMessage.user("left behind"), session_id="canary")

    async def test_canary_fixture_gives_an_empty_backend_second(self, backend: HistoryProvider) -> None:
        """The fixture gives every test an empty backend (the second of two tests that each leave data behind).

        Fix: give each test a store of its own: build it in the ``backend`` fixture (an in-memory or temporary
        store), or isolate a persistent one with ``--isolate KIND=OPTION`` (``--ravi-isolate``) and an
        ``async def destroy(self)`` that removes what the option names.
        """
        assert await backend.count_messages("canary", session_id="canary") == 0, (
            "state leaked between tests: count_messages('canary') found the first canary's message"
        )
        await backend.append("canary", ChatMessage.user("left behind"), session_id="canary")

    async def test_append_then_read_back_exactly(self, backend: HistoryProvider) -> None:
        """A message reads back equal to the one appended, every field included.

        Fix: store each message whole, as its JSON body (``stored_body`` of ``ravi.kernel.storage``), and read it back
        with ``messages_from_json`` of ``ravi.kernel.messages``; columns of role and text lose blocks, names, metadata
        and the offset of ``created_at``.
        """
        call = ToolCallBlock(id="call-1", name="lookup", arguments={"q": "ünïcode", "n": [1, 2.5, None, True]})
        messages = [
            ChatMessage.system("rules", name="ops"),
            ChatMessage(role="user", content=(TextBlock(text="look"), ImageBlock(url="data:image/png;base64,AAAA"))),
            ChatMessage(
                role="assistant",
                content=(ThinkingBlock(thinking="hmm", signature="sig"), call),
                metadata={"model": "m", "cost": {"in": 3}},
            ),
            ChatMessage.tool("call-1", "found", is_error=True),
        ]
        a, s = unique("agent"), unique("session")
        await backend.append_many(a, messages, session_id=s)
        got = await backend.get_messages(a, session_id=s)
        assert got == messages
        assert all(m.created_at.tzinfo is not None for m in got)

    async def test_order_is_kept_across_appends(self, backend: HistoryProvider) -> None:
        """Messages read back in the order they were appended, across calls.

        Fix: order a session by a position the store assigns as it appends (a per-session counter taken under the
        session's lock, the tail of a Redis list), never by ``created_at``, which the caller sets and may lie in the
        past.
        """
        a, s = unique("agent"), unique("session")
        await backend.append(a, ChatMessage.user("1"), session_id=s)
        await backend.append_many(a, [ChatMessage.user("2"), ChatMessage.user("3")], session_id=s)
        await backend.append(a, ChatMessage.user("4"), session_id=s)
        # created_at does not decide the order: append order does
        await backend.append(a, ChatMessage.user("5", created_at=datetime(2000, 1, 1, tzinfo=UTC)), session_id=s)
        assert texts(await backend.get_messages(a, session_id=s)) == ["1", "2", "3", "4", "5"]

    @pytest.mark.parametrize(
        ("limit", "offset", "expected"),
        [
            (None, 0, "01234"),
            (2, 0, "01"),
            (2, 3, "34"),
            (10, 3, "34"),
            (0, 0, ""),
            (None, 5, ""),
            (None, 9, ""),
            (1, 4, "4"),
            (None, 2, "234"),
        ],
    )
    async def test_limit_and_offset(
        self, backend: HistoryProvider, limit: int | None, offset: int, expected: str
    ) -> None:
        """``get_messages`` pages with ``limit`` and ``offset`` over the session in order.

        Fix: pass ``limit`` and ``offset`` through ``check_page`` of ``ravi.kernel.values``, then skip ``offset``
        messages in append order and take at most ``limit`` (``None`` is no limit, 0 is none); an offset past the end
        reads ``[]``.
        """
        a, s = unique("agent"), unique("session")
        await backend.append_many(a, [ChatMessage.user(str(i)) for i in range(5)], session_id=s)
        got = await backend.get_messages(a, session_id=s, limit=limit, offset=offset)
        assert "".join(texts(got)) == expected

    async def test_limits_and_offsets_past_a_servers_integers_ask_for_everything(
        self, backend: HistoryProvider
    ) -> None:
        """A limit, offset or token count larger than a 64-bit integer is read as the in-memory store reads it:
        no store holds that many messages, so it asks for all of them (or, as an offset, for none). Postgres and
        Redis refused such a number as a value they could not store.

        Fix: pass ``limit`` and ``offset`` through ``check_page`` of ``ravi.kernel.values`` and a token budget
        through ``check_count``, and give the driver the numbers they return: both cap a count at ``MAX_COUNT``
        (2**63 - 1), which a database's integer holds.
        """
        a, s = unique("agent"), unique("session")
        await backend.append_many(a, [ChatMessage.user(str(i)) for i in range(5)], session_id=s)
        for huge in (2**63 - 1, 2**63, 2**64 + 7):
            assert "".join(texts(await backend.get_messages(a, session_id=s, limit=huge))) == "01234"
            assert "".join(texts(await backend.get_messages(a, session_id=s, limit=huge, offset=3))) == "34"
            assert await backend.get_messages(a, session_id=s, offset=huge) == []
            assert await backend.get_messages(a, session_id=s, limit=2, offset=huge) == []
            if isinstance(backend, RunReader):
                stored = await backend.get_stored(a, session_id=s, limit=huge, offset=1)
                assert "".join(texts([x.message for x in stored])) == "1234"
                assert await backend.get_stored(a, session_id=s, limit=1, offset=huge) == []
            if isinstance(backend, SessionLister):
                assert await backend.list_sessions(a, limit=huge) == [s]
            if isinstance(backend, WindowReader):
                window = await backend.read_window(a, session_id=s, tokens=huge)
                assert "".join(texts(window.messages)) == "01234"

    async def test_count_messages(self, backend: HistoryProvider) -> None:
        """``count_messages`` is the number of messages in the session.

        Fix: count the session's stored messages by the key ``get_messages`` reads (each held id once), 0 for a session
        never written; a Redis list's ``LLEN`` or a ``count(*)`` of the session's rows, not a counter kept apart that a
        retry or ``clear_run`` can leave wrong.
        """
        a, s = unique("agent"), unique("session")
        assert await backend.count_messages(a, session_id=s) == 0
        await backend.append_many(a, [ChatMessage.user(str(i)) for i in range(7)], session_id=s)
        assert await backend.count_messages(a, session_id=s) == 7

    async def test_agents_are_isolated(self, backend: HistoryProvider) -> None:
        """Two agents never see each other's messages, even in a session of the same id.

        Fix: key every message by both ``agent_id`` and ``session_id`` (separate columns, or an encoding of the pair no
        other pair shares) in every read and in ``clear``.
        """
        s = unique("session")
        a, b = unique("agent"), unique("agent")
        await backend.append(a, ChatMessage.user("for a"), session_id=s)
        await backend.append(b, ChatMessage.user("for b"), session_id=s)
        assert texts(await backend.get_messages(a, session_id=s)) == ["for a"]
        await backend.clear(a, session_id=s)
        assert texts(await backend.get_messages(b, session_id=s)) == ["for b"]

    async def test_sessions_are_isolated(self, backend: HistoryProvider) -> None:
        """Two sessions never see each other's messages.

        Fix: key every message by both ``agent_id`` and ``session_id`` (separate columns, or an encoding of the pair no
        other pair shares) in every read and count.
        """
        a = unique("agent")
        s1, s2 = unique("session"), unique("session")
        await backend.append(a, ChatMessage.user("one"), session_id=s1)
        await backend.append(a, ChatMessage.user("two"), session_id=s2)
        assert texts(await backend.get_messages(a, session_id=s1)) == ["one"]
        assert await backend.count_messages(a, session_id=s2) == 1

    async def test_clear_removes_the_session_only(self, backend: HistoryProvider) -> None:
        """``clear`` removes one session and leaves every other.

        Fix: remove the messages of that (agent, session) pair only, and return how many there were: 0, not an error,
        for a session already empty.
        """
        a, s, other = unique("agent"), unique("session"), unique("session")
        await backend.append_many(a, [ChatMessage.user("x"), ChatMessage.user("y")], session_id=s)
        await backend.append(a, ChatMessage.user("z"), session_id=other)
        assert await backend.clear(a, session_id=s) == 2
        assert await backend.get_messages(a, session_id=s) == []
        assert await backend.clear(a, session_id=s) == 0  # idempotent
        assert texts(await backend.get_messages(a, session_id=other)) == ["z"]

    async def test_clear_run_removes_exactly_that_run(self, backend: HistoryProvider) -> None:
        """``clear_run`` removes the messages of one run and keeps the rest in order.

        Fix: keep each message's ``run_id`` beside it (``""`` when none was given), remove exactly the session's
        messages of that run, keep the others in their order, and return how many were removed (0 for a run that wrote
        nothing).
        """
        a, s, other = unique("agent"), unique("session"), unique("session")
        await backend.append(a, ChatMessage.user("r1-a"), session_id=s, run_id="r1")
        await backend.append(a, ChatMessage.user("r2-a"), session_id=s, run_id="r2")
        await backend.append(a, ChatMessage.user("r1-b"), session_id=s, run_id="r1")
        await backend.append(a, ChatMessage.user("untagged"), session_id=s)
        await backend.append(a, ChatMessage.user("r1-other-session"), session_id=other, run_id="r1")
        assert await backend.clear_run(a, session_id=s, run_id="r1") == 2
        assert texts(await backend.get_messages(a, session_id=s)) == ["r2-a", "untagged"]
        assert texts(await backend.get_messages(a, session_id=other)) == ["r1-other-session"]
        assert await backend.clear_run(a, session_id=s, run_id="r1") == 0
        assert await backend.clear_run(a, session_id=s, run_id="never-ran") == 0

    async def test_append_is_idempotent_by_message_id(self, backend: HistoryProvider) -> None:
        """Appending a message whose id the session holds changes nothing.

        Fix: before a message is stored, look its id up in the session, in the same transaction (a unique index on
        agent, session and message id with `INSERT ... ON CONFLICT DO NOTHING`, or a lookup under the lock that
        inserts), and skip it when the stored body (`stored_body`) is the same; a batch that repeats a message
        stores it once. `append_many` returns how many messages it stored, counted in that same step (or `None`).
        """
        a, s = unique("agent"), unique("session")
        message = ChatMessage.user("once")
        await backend.append(a, message, session_id=s)
        await backend.append(a, message, session_id=s)  # a retried append
        added = await backend.append_many(a, [message, ChatMessage.user("two"), message], session_id=s)
        assert added in (1, None), f"append_many stored 'two' alone but said it stored {added!r}"
        got = texts(await backend.get_messages(a, session_id=s))
        assert got == ["once", "two"], (
            f"appending 'once' three times (once, a retry, twice in a batch with 'two') read back {got}, "
            "not ['once', 'two']"
        )

    async def test_the_same_message_id_may_live_in_two_sessions(self, backend: HistoryProvider) -> None:
        """One message id may be stored in two sessions, independently.

        Fix: make a message id unique per session, not per store: the unique index (or the look-up of held ids) covers
        agent, session and message id together.
        """
        a, s1, s2 = unique("agent"), unique("session"), unique("session")
        message = ChatMessage.user("shared")
        await backend.append(a, message, session_id=s1)
        await backend.append(a, message, session_id=s2)
        assert await backend.count_messages(a, session_id=s2) == 1

    async def test_concurrent_writers_all_land_once_in_their_order(self, backend: HistoryProvider) -> None:
        """Concurrent writers' messages all land, once each, each writer's in its order.

        Fix: make each ``append_many`` one transaction that numbers its messages under the session's lock (``SELECT ...
        FOR UPDATE`` of a sessions row on Postgres, one script on Redis, a ``threading.Lock`` in memory), so two writers
        never take one position, never interleave inside a batch, and a retry never stores a message twice.
        """
        a, s = unique("agent"), unique("session")
        writers, each = 50, 8

        async def writer(w: int) -> None:
            for i in range(each):
                if i % 2:
                    await backend.append(a, ChatMessage.user(f"{w}:{i}"), session_id=s, run_id=f"w{w}")
                else:
                    await backend.append_many(a, [ChatMessage.user(f"{w}:{i}")], session_id=s, run_id=f"w{w}")

        await asyncio.gather(*(writer(w) for w in range(writers)))
        got = texts(await backend.get_messages(a, session_id=s))
        assert len(got) == writers * each, "messages were lost or duplicated"
        assert len(set(got)) == len(got), "a message was stored twice"
        for w in range(writers):
            mine = [int(t.split(":")[1]) for t in got if t.startswith(f"{w}:")]
            assert mine == list(range(each)), f"writer {w}'s order was not kept"
        assert await backend.count_messages(a, session_id=s) == writers * each

    async def test_concurrent_readers_during_appends_see_each_message_once(self, backend: HistoryProvider) -> None:
        """Readers racing appends (and each other) each see a prefix of the transcript: no message twice, none
        skipped, none out of order; and what a later reader sees is the whole transcript.

        Fix: read a session in one snapshot (one statement, one script, or under the lock appends take), so a read sees
        a batch whole or not at all; a read cache checks the session's generation and length in the round trip that
        reads, before serving its copy.
        """
        a, s = unique("agent"), unique("session")
        await backend.append(a, ChatMessage.user("0"), session_id=s)
        await backend.get_messages(a, session_id=s)  # fills a read cache, if the backend keeps one
        expected = ["0"]
        for step in range(1, 16):
            batch = [ChatMessage.user(f"{step}.{i}") for i in range(3)]
            expected += texts(batch)
            reads = [backend.get_messages(a, session_id=s) for _ in range(4)]
            append = asyncio.ensure_future(backend.append_many(a, batch, session_id=s))
            seen = await asyncio.gather(*reads)  # racing the append, which was scheduled first
            await append
            for got in seen:
                got_texts = texts(got)
                assert len(got_texts) == len(set(got_texts)), f"a reader saw a message twice: {got_texts}"
                assert got_texts == expected[: len(got_texts)], "a reader skipped a message or saw one out of order"
            after = [backend.get_messages(a, session_id=s) for _ in range(3)]
            for got in await asyncio.gather(*after):
                assert texts(got) == expected, "a read after the append did not return the whole transcript"
        assert await backend.count_messages(a, session_id=s) == len(expected)

    async def test_a_provider_that_lists_sessions_lists_exactly_those_with_messages(
        self, backend: HistoryProvider
    ) -> None:
        """``list_sessions`` is optional (``SessionLister``); a provider that has it lists the agent's sessions
        that hold messages, sorted, and no other agent's.

        Fix: list the agent's sessions that hold a message now (not one emptied by ``clear`` or ``clear_run``), by
        equality on the agent id, sorted, at most ``limit`` (checked with ``check_count`` of ``ravi.kernel.values``).
        """
        if not isinstance(backend, SessionLister):
            pytest.skip(f"backend lacks list_sessions: {type(backend).__name__} is not a SessionLister")
        a, other = unique("agent"), unique("agent")
        for s in ("s-b", "s-a", "s-c"):
            await backend.append(a, ChatMessage.user(s), session_id=s)
        await backend.append(other, ChatMessage.user("x"), session_id="s-z")
        await backend.clear(a, session_id="s-c")
        await backend.append(a, ChatMessage.user("gone"), session_id="s-d", run_id="r")
        await backend.clear_run(a, session_id="s-d", run_id="r")
        assert await backend.list_sessions(a) == ["s-a", "s-b"]
        assert await backend.list_sessions(a, limit=1) == ["s-a"]

    async def test_large_and_unicode_payloads_round_trip(self, backend: HistoryProvider) -> None:
        """Large messages and any Unicode round-trip exactly.

        Fix: keep bodies in a column or value without a size limit (``text`` on Postgres, not ``varchar(n)``), as UTF-8,
        and pass them as bound parameters or script arguments, never formatted into a statement.
        """
        a, s = unique("agent"), unique("session")
        big = "ä漢🚀'\"\\$$;--\r\n" * 100_000
        messages = [ChatMessage.user(big), ChatMessage.assistant("emoji 🧠 and RTL עברית")]
        await backend.append_many(a, messages, session_id=s)
        assert await backend.get_messages(a, session_id=s) == messages

    async def test_timestamps_round_trip_with_their_offset(self, backend: HistoryProvider) -> None:
        """``created_at`` comes back as the same instant with the same UTC offset, from the first year to the
        last, naive or aware; an offset that is not a whole number of minutes (a zone's local mean time before
        1900, +00:19:32) is refused when the message is built, since JSON timestamps keep minutes only and the
        instant would move.

        Fix: read ``created_at`` from the stored JSON body (``stored_body``), which keeps the instant with its UTC
        offset, or no offset for a naive time; a ``timestamptz`` column keeps the instant but not its offset, and gives
        a naive time back aware.
        """
        a, s = unique("agent"), unique("session")
        stamps = [
            datetime(1, 1, 1, tzinfo=UTC),
            datetime(9999, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC),
            datetime(2024, 1, 1, 12, 0, 0, 1, tzinfo=timezone(timedelta(hours=5, minutes=30))),
            datetime(2024, 1, 1, 12, tzinfo=timezone(-timedelta(hours=23, minutes=59))),
            datetime(2024, 1, 1, 12),
        ]
        messages = [ChatMessage.user(f"at {i}", created_at=stamp) for i, stamp in enumerate(stamps)]
        await backend.append_many(a, messages, session_id=s)
        got = await backend.get_messages(a, session_id=s)
        assert [(m.created_at, m.created_at.utcoffset()) for m in got] == [(t, t.utcoffset()) for t in stamps]
        for offset in (timedelta(minutes=19, seconds=32), -timedelta(hours=23, minutes=59, seconds=59, microseconds=1)):
            with pytest.raises(InvalidArgument):
                ChatMessage.user("local mean time", created_at=datetime(1900, 1, 1, tzinfo=timezone(offset)))

    async def test_nul_characters_round_trip_or_are_refused(self, backend: HistoryProvider) -> None:
        """A NUL character is stored exactly or refused, never changed.

        Fix: keep the body as JSON text (``stored_body``), where a NUL is the escape ``\\u0000``: a ``text`` column
        holds it, a ``jsonb`` column refuses it. A store that cannot keep it raises ``InvalidArgument`` before it writes
        anything.
        """
        a, s = unique("agent"), unique("session")
        message = ChatMessage.user("before\x00after")
        try:
            await backend.append(a, message, session_id=s)
        except InvalidArgument:
            assert await backend.count_messages(a, session_id=s) == 0
            return
        assert await backend.get_messages(a, session_id=s) == [message]

    async def test_hostile_scope_ids_round_trip(self, backend: HistoryProvider) -> None:
        """Agent and session ids with quotes, separators and Unicode round-trip and stay isolated.

        Fix: pass ids to the store as bound parameters or script arguments, never formatted into a statement or a
        pattern (``LIKE``, ``SCAN MATCH``), and keep ``run_id`` exactly as given, newlines included.
        """
        for agent, session, run in [("a'; DROP TABLE x; --", 's"\\', "r%_*"), ("ünï 漢 🚀", "s" * 300, "r\n\t")]:
            await backend.append(agent, ChatMessage.user("hi"), session_id=session, run_id=run)
            assert texts(await backend.get_messages(agent, session_id=session)) == ["hi"]
            assert await backend.clear_run(agent, session_id=session, run_id=run) == 1

    async def test_bad_input_raises_typed_errors_and_loses_nothing(self, backend: HistoryProvider) -> None:
        """Bad input raises a typed error and loses nothing already stored.

        Fix: check every argument with the kernel's checks before the store sees it: ``check_scope`` of
        ``ravi.kernel.values`` for ids (non-empty, valid text; ``run_id`` may be empty), ``check_page`` for
        ``limit`` and ``offset``, ``check_append`` of ``ravi.kernel.storage`` for what ``append_many`` is given.
        """
        a, s = unique("agent"), unique("session")
        await backend.append(a, ChatMessage.user("kept"), session_id=s)
        bad_calls: dict[str, Callable[[], Awaitable[Any]]] = {
            "get_messages(limit=-1)": lambda: backend.get_messages(a, session_id=s, limit=-1),
            "get_messages(offset=-3)": lambda: backend.get_messages(a, session_id=s, offset=-3),
            "append(a dict, not a ChatMessage)": lambda: backend.append(a, A_DICT, session_id=s),  # type: ignore[arg-type]
            "append(agent_id='')": lambda: backend.append("", ChatMessage.user("no agent"), session_id=s),
            # ids no store can encode: a driver's UnicodeEncodeError must not leak out of a read or a removal
            "get_messages(agent_id with a lone surrogate)": lambda: backend.get_messages("a\ud800", session_id=s),
            "count_messages(session_id with a lone surrogate)": lambda: backend.count_messages(a, session_id="\udfff"),
            "clear(session_id with a lone surrogate)": lambda: backend.clear(a, session_id="s\ud800"),
            "clear_run(run_id with a lone surrogate)": lambda: backend.clear_run(a, session_id=s, run_id="\ud800"),
            # ids with a NUL, which PostgreSQL keeps in no text: refused by every store, reads included
            "get_messages(agent_id with a NUL)": lambda: backend.get_messages("a\x00", session_id=s),
            "append(session_id with a NUL)": lambda: backend.append(a, ChatMessage.user("x"), session_id="s\x00"),
            "clear_run(run_id with a NUL)": lambda: backend.clear_run(a, session_id=s, run_id="r\x00"),
            # ids that are not strings (a list cannot key a lock: a bare TypeError leaked from the hybrid provider)
            "append(agent_id a list)": lambda: backend.append([a], ChatMessage.user("x"), session_id=s),  # type: ignore[arg-type]
            "append_many(session_id a list)": lambda: backend.append_many(a, [ChatMessage.user("x")], session_id=[s]),  # type: ignore[arg-type]
            "clear(session_id a dict)": lambda: backend.clear(a, session_id={s: 1}),  # type: ignore[arg-type]
            "clear_run(agent_id a list)": lambda: backend.clear_run([a], session_id=s, run_id="r"),  # type: ignore[arg-type]
            "get_messages(session_id a list)": lambda: backend.get_messages(a, session_id=[s]),  # type: ignore[arg-type]
        }
        await refuses(InvalidArgument, bad_calls)
        assert texts(await backend.get_messages(a, session_id=s)) == ["kept"]

    async def test_ids_past_the_limit_are_refused_and_nothing_is_lost(self, backend: HistoryProvider) -> None:
        """An agent, session, run or message id of more than ``MAX_ID_BYTES`` UTF-8 bytes is refused by every call
        with ``InvalidArgument`` naming it and the limit, on every backend (PostgreSQL indexes no longer keys), and
        what was stored stays.

        Fix: check ids with the kernel's checks (``check_scope``, ``check_append``, ``check_replace``), which hold
        ``MAX_ID_BYTES``, before the store sees them.
        """
        a, s = unique("agent"), unique("session")
        kept = ChatMessage.user("kept", id="m")
        await backend.append(a, kept, session_id=s, run_id="r")

        def calls(long: str) -> dict[str, tuple[str, Callable[[], Awaitable[Any]]]]:
            out: dict[str, tuple[str, Callable[[], Awaitable[Any]]]] = {
                "append(agent_id)": (
                    "agent_id",
                    lambda: backend.append(long, ChatMessage.user("x"), session_id=s),
                ),
                "append(session_id)": (
                    "session_id",
                    lambda: backend.append(a, ChatMessage.user("x"), session_id=long),
                ),
                "append(run_id)": (
                    "run_id",
                    lambda: backend.append(a, ChatMessage.user("x"), session_id=s, run_id=long),
                ),
                "append(message id)": (
                    "messages[0].id",
                    lambda: backend.append(a, ChatMessage.user("x", id=long), session_id=s),
                ),
                "append_many(second message id)": (
                    "messages[1].id",
                    lambda: backend.append_many(
                        a, [ChatMessage.user("ok"), ChatMessage.user("x", id=long)], session_id=s
                    ),
                ),
                "get_messages(agent_id)": ("agent_id", lambda: backend.get_messages(long, session_id=s)),
                "get_messages(session_id)": ("session_id", lambda: backend.get_messages(a, session_id=long)),
                "count_messages(session_id)": (
                    "session_id",
                    lambda: backend.count_messages(a, session_id=long),
                ),
                "clear(agent_id)": ("agent_id", lambda: backend.clear(long, session_id=s)),
                "clear_run(run_id)": ("run_id", lambda: backend.clear_run(a, session_id=s, run_id=long)),
            }
            if isinstance(backend, TailEditor):
                out["replace_last(message_id)"] = (
                    "message_id",
                    lambda: backend.replace_last(a, session_id=s, message_id=long, messages=[ChatMessage.user("x")]),
                )
                out["replace_last(a replacement's id)"] = (
                    "messages[0].id",
                    lambda: backend.replace_last(
                        a, session_id=s, message_id="m", messages=[ChatMessage.user("x", id=long)]
                    ),
                )
            if isinstance(backend, SessionReplacer):
                out["replace_session(session_id)"] = (
                    "session_id",
                    lambda: backend.replace_session(a, [ChatMessage.user("x")], session_id=long),
                )
                out["replace_session(message id)"] = (
                    "messages[0].id",
                    lambda: backend.replace_session(a, [ChatMessage.user("x", id=long)], session_id=s),
                )
            if isinstance(backend, SessionGeneration):
                out["generation(session_id)"] = ("session_id", lambda: backend.generation(a, session_id=long))
            if isinstance(backend, SessionLister):
                out["list_sessions(agent_id)"] = ("agent_id", lambda: backend.list_sessions(long))
            if isinstance(backend, RunReader):
                out["get_stored(session_id)"] = ("session_id", lambda: backend.get_stored(a, session_id=long))
            if isinstance(backend, WindowReader):
                out["read_window(session_id)"] = (
                    "session_id",
                    lambda: backend.read_window(a, session_id=long, tokens=100),
                )
            if isinstance(backend, HistorySearcher):
                out["search_units(agent_id)"] = (
                    "agent_id",
                    lambda: backend.search_units(long, session_id=s, query="kept", before=100, limit=5),
                )
            if isinstance(backend, Forgetter):
                out["forget(session_id)"] = ("session_id", lambda: backend.forget(a, session_id=long))
            return out

        await refuses_long_ids(calls)
        assert await backend.get_messages(a, session_id=s) == [kept]
        assert await backend.count_messages(a, session_id=s) == 1

    @settings(max_examples=10, deadline=None, suppress_health_check=PROPERTY_CHECKS)
    @given(text=id_texts())
    async def test_ids_at_the_limit_are_stored_and_read_back(self, backend: HistoryProvider, text: str) -> None:
        """Agent, session, run and message ids of exactly ``MAX_ID_BYTES`` UTF-8 bytes, of any text, are stored and
        read back by every backend, the four of them at once (a property over generated text).

        Fix: keep ids whole, as given: columns or keys that hold `MAX_ID_BYTES` bytes of UTF-8, no truncation,
        no normalisation; a retried append of such an id finds it held and stores nothing
        (`test_append_is_idempotent_by_message_id`).
        """
        tag = unique("")
        agent, session, run, mid = (at_limit(text, f"{tag}{part}") for part in "asrm")
        message = ChatMessage.user("at the limit", id=mid)
        await backend.append(agent, message, session_id=session, run_id=run)
        await backend.append(agent, message, session_id=session, run_id=run)  # a retry: the id is found again
        got = await backend.get_messages(agent, session_id=session)
        assert got == [message], (
            f"one message appended twice (a retry) with ids at the limit read back as {len(got)} "
            f"messages{'' if len(got) != 1 else ', changed'}, not the one appended"
        )
        assert await backend.count_messages(agent, session_id=session) == 1
        if isinstance(backend, TailEditor):
            replaced = ChatMessage.user("replaced", id=at_limit(text, f"{tag}n"))
            assert await backend.replace_last(
                agent, session_id=session, message_id=mid, messages=[replaced], run_id=run
            )
            message = replaced
        assert await backend.get_messages(agent, session_id=session) == [message]
        assert await backend.clear_run(agent, session_id=session, run_id=run) == 1
        assert await backend.get_messages(agent, session_id=session) == []

    async def test_append_many_is_all_or_nothing(self, backend: HistoryProvider) -> None:
        """``append_many`` with one bad message stores none of them.

        Fix: call `check_append` of `ravi.kernel.storage` first (it refuses an item that is not a `ChatMessage`
        with `InvalidArgument`), and write the batch in one transaction, so an error on any message stores none.
        """
        a, s = unique("agent"), unique("session")
        bad: list[Any] = [ChatMessage.user("first"), "not a message"]
        await refuses(
            RaviError,
            {
                "append_many([ChatMessage.user('first'), 'not a message'])": lambda: backend.append_many(
                    a, bad, session_id=s
                )
            },
        )
        count = await backend.count_messages(a, session_id=s)
        assert count == 0, f"append_many refused a batch but stored {count} of its messages"
        await backend.append_many(a, [], session_id=s)
        assert await backend.count_messages(a, session_id=s) == 0

    async def test_a_message_id_is_a_promise(self, backend: HistoryProvider) -> None:
        """A message id is a promise: appending a different message under an id the session holds is refused
        with ``MessageConflict``, the whole batch with it (nothing stored, nothing dropped silently); so is a
        batch that holds two different messages under one id. Re-appending the same message stays a no-op.

        Troubleshooting: compare the stored JSON body of an id already held with the incoming one, in the same
        statement or script that appends, before anything of the batch is written."""
        a, s = unique("agent"), unique("session")
        kept = ChatMessage.user("the original", id="m-1")
        await backend.append(a, kept, session_id=s)
        changed = ChatMessage.user("something else", id="m-1")
        held: list[str] = []

        async def conflicting_batch() -> None:
            try:
                await backend.append_many(a, [ChatMessage.user("fresh"), changed], session_id=s)
            except MessageConflict as error:
                held.append(error.message_id)
                raise

        await refuses(
            MessageConflict,
            {"append_many([a new message, another message under the held id 'm-1'])": conflicting_batch},
        )
        assert held == ["m-1"], f"MessageConflict named {held[0]!r}, not the held id 'm-1'"
        assert await backend.get_messages(a, session_id=s) == [kept], "a refused batch stored part of itself"
        twice = [ChatMessage.user("one", id="m-3"), ChatMessage.user("two", id="m-3")]
        await refuses(
            MessageConflict,
            {"append(another message under the held id 'm-1')": lambda: backend.append(a, changed, session_id=s)},
        )
        await backend.append_many(a, [kept, ChatMessage.user("second", id="m-2"), kept], session_id=s)  # a retry
        assert texts(await backend.get_messages(a, session_id=s)) == ["the original", "second"]
        await refuses(
            MessageConflict,
            {
                "append_many(two different messages under one id 'm-3')": lambda: backend.append_many(
                    a, twice, session_id=s
                )
            },
        )
        assert await backend.count_messages(a, session_id=s) == 2
        await backend.append(a, changed, session_id=unique("session"))  # the same id in another session is free

    async def test_append_many_refuses_what_is_not_a_list_of_messages(self, backend: HistoryProvider) -> None:
        """``append_many`` given ``None``, a string or a dict instead of a sequence of messages raises
        ``InvalidArgument`` (never ``TypeError``) and stores nothing.

        Fix: call ``check_append`` of ``ravi.kernel.storage`` with what ``append_many`` is given, before the
        store sees it.
        """
        a, s = unique("agent"), unique("session")
        for bad in (None, "hello", {"role": "user"}, 5):
            with pytest.raises(InvalidArgument):
                await backend.append_many(a, bad, session_id=s)  # type: ignore[arg-type]
        assert await backend.count_messages(a, session_id=s) == 0

    async def test_a_new_conversation_after_clear_reuses_ids_freely(
        self, backend: HistoryProvider, peer: HistoryProvider
    ) -> None:
        """After ``clear`` (and after ``clear_run`` for the run's messages), the session may reuse the removed ids,
        positions and sizes for different messages: nothing of the old conversation is read, or in the way, by
        this provider or by a second one on the same store whose read cache held the old conversation.

        Troubleshooting: check a cached copy against the session's generation on every read, and never let a
        generation (or the counter a cache compares) come back after a removal."""
        a, s = unique("agent"), unique("session")
        old = [ChatMessage.user(f"old {i}", id=str(i)) for i in range(4)]
        await backend.append_many(a, old, session_id=s, run_id="r1")
        for reader in (backend, peer):  # fills the read caches, if the providers keep them
            assert await reader.get_messages(a, session_id=s) == old
        await backend.clear(a, session_id=s)
        new = [ChatMessage.user(f"new {i}", id=str(i)) for i in range(4)]
        await backend.append_many(a, new, session_id=s, run_id="r1")
        for reader in (backend, peer):
            assert await reader.get_messages(a, session_id=s) == new, "a reader returned the removed conversation"
        assert await backend.clear_run(a, session_id=s, run_id="r1") == 4
        newer = [ChatMessage.user(f"newer {i}", id=str(i)) for i in range(2)]
        await backend.append_many(a, newer, session_id=s, run_id="r2")
        for reader in (backend, peer):
            assert await reader.get_messages(a, session_id=s) == newer

    async def test_concurrent_clear_runs_of_one_session_all_succeed(self, backend: HistoryProvider) -> None:
        """Many ``clear_run`` calls on one session at once, with appends racing them, all succeed (no deadlock,
        no "kept being cleared"), each removes exactly its run, and every other message stays once, in order.

        Troubleshooting: lock the session before removing its run's messages and recomputing what depends on
        their positions (the same lock appends take, taken first), so removals serialise instead of
        deadlocking; retry a deadlock the server still reports."""
        a, s = unique("agent"), unique("session")
        runs = [f"r{i}" for i in range(16)]
        for round_ in range(3):
            for run in runs:
                await backend.append_many(
                    a, [ChatMessage.user(f"{run}.{round_}.{k}") for k in range(3)], session_id=s, run_id=run
                )
        late = [ChatMessage.user(f"late {i}") for i in range(8)]
        removed = await asyncio.gather(
            *(backend.clear_run(a, session_id=s, run_id=run) for run in runs[:12]),
            *(backend.append(a, message, session_id=s, run_id="late") for message in late),
        )
        assert list(removed[:12]) == [9] * 12
        kept = texts(await backend.get_messages(a, session_id=s))
        expected = [f"{r}.{n}.{k}" for n in range(3) for r in runs[12:] for k in range(3)]
        assert [t for t in kept if not t.startswith("late")] == expected
        assert sorted(t for t in kept if t.startswith("late")) == sorted(texts(late))

    async def test_retried_appends_racing_clear_run_never_fail(self, backend: HistoryProvider) -> None:
        """Retried appends that carry messages of the run being removed race its ``clear_run`` without error: each
        message ends up stored once or not at all, and nothing else is touched.

        Fix: make each call one transaction on the store (a lock around it, `BEGIN IMMEDIATE` on SQLite, one
        statement or script on a server), and look up held ids in the transaction that inserts, so a retry that
        races the removal stores a message once or finds it held.
        """
        a, s = unique("agent"), unique("session")
        for _ in range(4):
            doomed = [ChatMessage.user(f"doomed {i}") for i in range(20)]
            await backend.append_many(a, doomed, session_id=s, run_id="doomed")
            kept = ChatMessage.user("kept")
            await backend.append(a, kept, session_id=s, run_id="kept")
            await asyncio.gather(
                *(backend.append_many(a, doomed[i : i + 5], session_id=s, run_id="doomed") for i in range(0, 20, 5)),
                backend.clear_run(a, session_id=s, run_id="doomed"),
                *(backend.append_many(a, [*doomed[i : i + 5], kept], session_id=s, run_id="doomed") for i in (0, 10)),
            )
            got = texts(await backend.get_messages(a, session_id=s))
            assert len(got) == len(set(got)), "a message was stored twice"
            assert "kept" in got
            await backend.clear(a, session_id=s)

    async def test_hostile_scopes_never_share_a_session(self, backend: HistoryProvider) -> None:
        """Agents and sessions whose ids hold separators, quotes, escapes or look-alike Unicode never see each
        other's messages (a key encoding that joins or escapes carelessly aliases them).

        Troubleshooting: encode the scope injectively: separate columns, a JSON array, or an escape that also
        escapes its own escape character."""
        pairs = hostile_pairs()
        for agent, session in pairs:
            await backend.append(agent, ChatMessage.user(f"{agent!r}/{session!r}", id="same-id"), session_id=session)
        for agent, session in pairs:
            got = texts(await backend.get_messages(agent, session_id=session))
            assert got == [f"{agent!r}/{session!r}"], f"({agent!r}, {session!r}) read {got}"

    @settings(max_examples=25, deadline=None, suppress_health_check=PROPERTY_CHECKS)
    @given(agent=hostile_ids(), session=hostile_ids(), other_agent=hostile_ids(), other_session=hostile_ids())
    async def test_scope_encoding_is_injective(
        self, backend: HistoryProvider, agent: str, session: str, other_agent: str, other_session: str
    ) -> None:
        """For any two different sessions (ids of any text with separators, quotes and Unicode), a message
        appended to one is never read from the other (a property over generated ids).

        Fix: encode the (agent, session) pair injectively: separate columns, a JSON array, or an escape that also
        escapes its own escape character; never join the ids with a separator they may contain.
        """
        if (agent, session) == (other_agent, other_session):
            return
        tag = unique("")
        await backend.append(agent + tag, ChatMessage.user("first", id="m"), session_id=session)
        got = await backend.get_messages(other_agent + tag, session_id=other_session)
        assert got == [], f"({agent!r}, {session!r}) and ({other_agent!r}, {other_session!r}) share a key"

    async def test_generations_follow_removals(self, backend: HistoryProvider) -> None:
        """``generation`` (``SessionGeneration``, optional) is ``""`` for a session never written (a ``clear`` or
        ``clear_run`` of one leaves it so), the same across appends, and new after ``clear``, a ``clear_run`` that
        removed something, ``replace_last`` and ``replace_session``: never one the session had before.

        Troubleshooting: keep a random token with the session (not a counter, which restarts when the session
        is removed or expires), replaced in the same statement or script that removes messages."""
        if not isinstance(backend, SessionGeneration):
            pytest.skip(f"backend lacks generation: {type(backend).__name__} is not a SessionGeneration")
        a, s = unique("agent"), unique("session")
        assert await backend.generation(a, session_id=s) == ""
        await backend.clear(a, session_id=s)
        await backend.clear_run(a, session_id=s, run_id="r1")
        assert await backend.generation(a, session_id=s) == "", "a clear of a session never written gave it one"
        seen: set[str] = {""}

        async def new_one(after: str) -> str:
            generation = await backend.generation(a, session_id=s)
            assert generation not in seen, f"{after} kept the generation, or gave back an earlier one"
            seen.add(generation)
            return generation

        await backend.append(a, ChatMessage.user("1"), session_id=s, run_id="r1")
        current = await new_one("the first append")
        await backend.append(a, ChatMessage.user("2"), session_id=s, run_id="r2")
        assert await backend.generation(a, session_id=s) == current, "an append changed the generation"
        await backend.clear_run(a, session_id=s, run_id="never-ran")
        assert await backend.generation(a, session_id=s) == current, "a clear_run that removed nothing changed it"
        await backend.clear_run(a, session_id=s, run_id="r1")
        current = await new_one("a clear_run that removed a message")
        for _ in range(3):
            await backend.clear(a, session_id=s)
            current = await new_one("clear")
            await backend.append(a, ChatMessage.user("again"), session_id=s)
            if await backend.generation(a, session_id=s) != current:
                current = await new_one("the first append after a clear")
        if isinstance(backend, TailEditor):
            last = (await backend.get_messages(a, session_id=s))[-1]
            assert await backend.replace_last(a, session_id=s, message_id=last.id)
            await new_one("replace_last")
        if isinstance(backend, SessionReplacer):
            await backend.replace_session(a, [ChatMessage.user("replaced")], session_id=s)
            await new_one("replace_session")
        other = unique("session")
        await backend.append(a, ChatMessage.user("x"), session_id=other)
        assert await backend.generation(a, session_id=other) not in seen, "two sessions share a generation"

    async def test_forget_erases_the_session_from_every_read_path(
        self, backend: HistoryProvider, peer: HistoryProvider
    ) -> None:
        """``forget`` (``Forgetter``, optional) of a session leaves nothing of it readable by any read path of
        this provider or of another on the same store that read it before (messages, windows, search, summaries,
        the list of sessions, the session's record: its generation is ``""`` again), refuses a summary written
        back under its old generation, is idempotent, and touches neither another session of the agent nor the
        same session id under another agent.

        Troubleshooting: remove every record of the session (messages, terms, summaries, embeddings, its
        generation), and check the generation on the server in every cached read."""
        if not isinstance(backend, Forgetter):
            pytest.skip(f"backend lacks forget: {type(backend).__name__} is not a Forgetter")
        a, b, s, other = unique("agent"), unique("agent"), unique("session"), unique("session")
        secret = [ChatMessage.user("my account is 4711 zebra", id="1"), ChatMessage.assistant("noted zebra", id="2")]
        for agent, session in ((a, s), (a, other), (b, s)):
            await backend.append_many(agent, secret, session_id=session, run_id="r")
        old = await backend.generation(a, session_id=s) if isinstance(backend, SessionGeneration) else None
        if isinstance(backend, SummaryStore):
            assert await backend.put_summary(Scope(a, s, old), "span", "the account is 4711")
        for reader in {id(backend): backend, id(peer): peer}.values():  # warm every cache
            await reader.get_messages(a, session_id=s)
            if isinstance(reader, WindowReader):
                await reader.read_window(a, session_id=s, tokens=10**6)
            if isinstance(reader, HistorySearcher):
                await reader.search_units(a, session_id=s, query="zebra", before=10**9, limit=5)

        assert await backend.forget(a, session_id=s) == 2
        for reader in {id(backend): backend, id(peer): peer}.values():
            name = "the provider that forgot" if reader is backend else "another provider"
            assert await reader.get_messages(a, session_id=s) == [], f"{name}: get_messages still returns it"
            assert await reader.count_messages(a, session_id=s) == 0, f"{name}: count_messages still counts it"
            if isinstance(reader, WindowReader):
                window = await reader.read_window(a, session_id=s, tokens=10**6)
                assert window.messages == [], f"{name}: read_window still returns it"
            if isinstance(reader, HistorySearcher):
                found = await reader.search_units(a, session_id=s, query="zebra", before=10**9, limit=5)
                assert found == [], f"{name}: search_units still finds it"
            if isinstance(reader, SummaryStore):
                assert await reader.get_summary(Scope(a, s, old), "span") is None, f"{name}: its summary is kept"
            if isinstance(reader, SessionLister):
                assert s not in await reader.list_sessions(a), f"{name}: list_sessions still lists it"
        if isinstance(backend, SessionGeneration):
            generation = await backend.generation(a, session_id=s)
            assert generation == "", "the session's record (its generation) outlived forget"
        if isinstance(backend, SummaryStore) and old is not None:
            assert not await backend.put_summary(Scope(a, s, old), "late", "x"), "a late summary was kept"
        assert await backend.forget(a, session_id=s) == 0, "a second forget found something to remove"
        for agent, session in ((a, other), (b, s)):
            assert texts(await backend.get_messages(agent, session_id=session)) == texts(secret), (
                f"forget removed ({agent!r}, {session!r}) too"
            )
        await backend.append_many(a, secret, session_id=s)  # the session id starts again, afresh
        assert texts(await backend.get_messages(a, session_id=s)) == texts(secret)
        if isinstance(backend, SessionGeneration):
            assert await backend.generation(a, session_id=s) != old, "a forgotten generation came back"

    async def test_forget_of_an_agent_erases_all_its_sessions_only(self, backend: HistoryProvider) -> None:
        """``forget`` (``Forgetter``) without a session erases every session of the agent (hostile ids
        included), and nothing of any other agent, even one whose id starts with the first's.

        Fix: call ``check_forget`` of ``ravi.kernel.storage`` first, and find the agent's sessions by equality on the
        agent id (a column, or a set of session keys kept per agent), never by a prefix or glob of a joined key, which
        also matches ``agent2`` or ``*agent``.
        """
        if not isinstance(backend, Forgetter):
            pytest.skip(f"backend lacks forget: {type(backend).__name__} is not a Forgetter")
        a = unique("agent") + "*|{x}"
        sessions = ["s", "s*", "a|b", "{tag}", "%2A", "x:y"]
        others = (a + "2", a[:-1], "*" + a)
        for session in sessions:
            await backend.append(a, ChatMessage.user(f"hi {session}"), session_id=session)
            for agent in others:
                await backend.append(agent, ChatMessage.user("keep"), session_id=session)
        assert await backend.forget(a) == len(sessions)
        for session in sessions:
            assert await backend.count_messages(a, session_id=session) == 0, f"session {session!r} survived"
            for agent in others:
                assert await backend.count_messages(agent, session_id=session) == 1, f"{agent!r} lost {session!r}"
        assert await backend.forget(a) == 0
        await refuses(
            InvalidArgument,
            {
                "forget('')": lambda: backend.forget(""),
                "forget(a, session_id='')": lambda: backend.forget(a, session_id=""),
                "forget(5)": lambda: backend.forget(5),  # type: ignore[arg-type]
            },
        )
        for agent in others:
            await backend.forget(agent)

    async def test_forget_racing_appends_never_fails_them_and_leaves_no_orphan(self, backend: HistoryProvider) -> None:
        """``forget`` (``Forgetter``) racing appends to the same session never makes an append fail, and leaves no
        message of the forgotten session behind: after the race, each writer's stored messages are in its order,
        every message once, and a last ``forget`` leaves the session empty and writable.

        Troubleshooting: lock the session first (as appends do), then remove its messages in a statement that
        sees every append committed before the lock was granted."""
        if not isinstance(backend, Forgetter):
            pytest.skip(f"backend lacks forget: {type(backend).__name__} is not a Forgetter")
        a, s = unique("agent"), unique("session")
        written: dict[int, list[str]] = {}

        async def writer(n: int) -> None:
            for k in range(15):
                batch = [ChatMessage.user(f"{n}.{k}.{j} " + "x" * (k * 13 % 200)) for j in range(3)]
                await backend.append_many(a, batch, session_id=s, run_id=f"w{n}")
                written.setdefault(n, []).extend(m.id for m in batch)

        async def forgetter() -> None:
            for _ in range(15):
                await backend.forget(a, session_id=s)
                await asyncio.sleep(0)

        await asyncio.gather(*(writer(n) for n in range(8)), forgetter())
        stored = [m.id for m in await backend.get_messages(a, session_id=s)]
        assert len(stored) == len(set(stored)) == await backend.count_messages(a, session_id=s)
        position = {i: p for p, i in enumerate(stored)}
        for ids in written.values():
            places = [position[i] for i in ids if i in position]
            assert places == sorted(places), "a writer's messages are out of order"
        await backend.forget(a, session_id=s)
        assert await backend.get_messages(a, session_id=s) == []
        await backend.append(a, ChatMessage.user("again"), session_id=s)
        assert texts(await backend.get_messages(a, session_id=s)) == ["again"]

    async def test_export_and_import_round_trip_every_message_kind(self, backend: HistoryProvider) -> None:
        """``get_stored`` (``RunReader``, optional) returns every message exactly as appended with its run id, in
        order; an export of the session (:mod:`ravi.kernel.storage.transfer`) imported under another agent holds
        the same messages, runs and order; importing it again stores nothing; a different message under an
        imported id is ``MessageConflict`` naming the id, and changes nothing.

        Fix: keep each message's ``run_id`` and return it with ``get_stored`` (``RunReader``), in append order, paged by
        ``check_page`` as ``get_messages`` is; ``import_records`` of ``ravi.kernel.storage.transfer`` calls
        ``append_many`` per run, so an ``append_many`` that skips held ids and raises ``MessageConflict`` for a changed
        one (``test_a_message_id_is_a_promise``) is all the import needs.
        """
        if not isinstance(backend, RunReader):
            pytest.skip(f"backend lacks get_stored: {type(backend).__name__} is not a RunReader")
        a, b, s = unique("agent"), unique("agent"), unique("session")
        runs = [("r1", every_kind()[:5]), ("", every_kind()[5:7]), ("r2", every_kind()[7:])]
        for run_id, batch in runs:
            await backend.append_many(a, batch, session_id=s, run_id=run_id)
        expected = [(stored_body(m), run_id) for run_id, batch in runs for m in batch]
        stored = await backend.get_stored(a, session_id=s)
        assert [(stored_body(x.message), x.run_id) for x in stored] == expected, "a message or run id changed"
        page = await backend.get_stored(a, session_id=s, limit=3, offset=4)
        assert [(stored_body(x.message), x.run_id) for x in page] == expected[4:7]

        lines = await export_session(backend, a, s)
        text = "".join(line + "\n" for line in lines)
        assert text.splitlines() == lines, "a line of the export holds a character readers take for a line end"
        records = [replace(r, agent_id=b) for r in parse_export(split_lines(text))]
        first = await import_records(backend, records)
        assert list(first) == [(b, s)] and first[b, s].records == len(expected)
        assert first[b, s].stored in (len(expected), None), "append_many said it stored another number"
        assert [(stored_body(x.message), x.run_id) for x in await backend.get_stored(b, session_id=s)] == expected
        again = await import_records(backend, records)
        assert again[b, s].stored in (0, None), "append_many said it stored messages the session held"
        assert await backend.count_messages(b, session_id=s) == len(expected), "a second import stored something"
        changed = records[3].message.model_copy(update={"content": (TextBlock(text="another text"),)})
        with pytest.raises(MessageConflict) as conflict:
            await import_records(backend, [replace(records[3], message=changed)])
        assert records[3].message.id in str(conflict.value)
        assert await backend.count_messages(b, session_id=s) == len(expected)
        assert await backend.clear_run(b, session_id=s, run_id="r2") == len(runs[2][1])
        kept = [x.message.id for x in await backend.get_stored(b, session_id=s)]
        assert kept == [m.id for _, batch in runs[:2] for m in batch], "run ids did not survive the copy"
        with pytest.raises(InvalidArgument, match="line 2"):
            parse_export([lines[0], '{"format": "ravi.session/1", "agent_id": ""}'])

    async def test_replace_last_swaps_the_newest_message_only(self, backend: HistoryProvider) -> None:
        """``replace_last`` (``TailEditor``, optional) replaces the newest message when its id matches (its
        replacement tagged with ``run_id``), and changes nothing (returning ``False``) when the newest message is
        another one or the session is empty.

        Fix: call ``check_replace`` of ``ravi.kernel.storage`` first; then, in one transaction, compare the id of the
        session's newest message with ``message_id``, return ``False`` changing nothing when it differs (or the session
        is empty), else remove it, append ``messages`` tagged ``run_id`` and give the session a new generation
        (``new_generation`` of ``ravi.kernel.scope``).
        """
        if not isinstance(backend, TailEditor):
            pytest.skip(f"backend lacks replace_last: {type(backend).__name__} is not a TailEditor")
        a, s = unique("agent"), unique("session")
        assert await backend.replace_last(a, session_id=s, message_id="nothing") is False
        first, last = ChatMessage.user("first"), ChatMessage.assistant("last")
        await backend.append_many(a, [first, last], session_id=s, run_id="r1")
        assert await backend.replace_last(a, session_id=s, message_id=first.id) is False
        assert await backend.get_messages(a, session_id=s) == [first, last]
        shorter = ChatMessage.assistant("shorter")
        assert await backend.replace_last(a, session_id=s, message_id=last.id, messages=[shorter], run_id="r2")
        assert await backend.get_messages(a, session_id=s) == [first, shorter]
        assert await backend.count_messages(a, session_id=s) == 2
        assert await backend.clear_run(a, session_id=s, run_id="r2") == 1
        assert await backend.replace_last(a, session_id=s, message_id=first.id) is True
        assert await backend.get_messages(a, session_id=s) == []
        again = ChatMessage.user("the removed id is free again", id=last.id)
        await backend.append(a, again, session_id=s)
        assert await backend.get_messages(a, session_id=s) == [again]

    async def test_concurrent_replace_last_of_one_message_has_one_winner(self, backend: HistoryProvider) -> None:
        """Concurrent ``replace_last`` calls naming the same newest message: exactly one wins, and the session
        holds its replacement; appends racing them are never reordered or lost.

        Fix: compare the newest message's id and replace it under the session's lock, the one appends take (``SELECT ...
        FOR UPDATE`` of the sessions row, one script on Redis), so the first call wins and the others find another
        newest message.
        """
        if not isinstance(backend, TailEditor):
            pytest.skip(f"backend lacks replace_last: {type(backend).__name__} is not a TailEditor")
        for _ in range(5):
            a, s = unique("agent"), unique("session")
            head, last = ChatMessage.user("head"), ChatMessage.assistant("last")
            await backend.append_many(a, [head, last], session_id=s)
            replacements = [ChatMessage.assistant(f"replacement {i}") for i in range(8)]
            racing = [ChatMessage.user(f"racing {i}") for i in range(3)]
            results = await asyncio.gather(
                *(backend.replace_last(a, session_id=s, message_id=last.id, messages=[r]) for r in replacements),
                backend.append_many(a, racing, session_id=s),
            )
            won = [r for r, ok in zip(replacements, results[:8], strict=True) if ok]
            got = await backend.get_messages(a, session_id=s)
            assert len(won) <= 1, f"{len(won)} replace_last calls of one message won"
            if won:
                assert got == [head, won[0], *racing], "a replacement was not where the replaced message was"
            else:  # the appends came first: the named message was no longer the newest
                assert got == [head, last, *racing]

    async def test_replace_last_that_fails_changes_nothing(self, backend: HistoryProvider) -> None:
        """A ``replace_last`` refused for its replacement (an item that is not a message, or a message id the
        session holds for another message) changes nothing: the newest message stays.

        Fix: call ``check_replace`` of ``ravi.kernel.storage.history`` before the store sees the call, and remove
        the newest message and write its replacement in one transaction, so that a ``MessageConflict`` raised
        while writing rolls the removal back.
        """
        if not isinstance(backend, TailEditor):
            pytest.skip(f"backend lacks replace_last: {type(backend).__name__} is not a TailEditor")
        a, s = unique("agent"), unique("session")
        first, last = ChatMessage.user("first", id="m-1"), ChatMessage.assistant("last", id="m-2")
        await backend.append_many(a, [first, last], session_id=s)
        generation = await backend.generation(a, session_id=s) if isinstance(backend, SessionGeneration) else None
        with pytest.raises(InvalidArgument):
            await backend.replace_last(a, session_id=s, message_id=last.id, messages=["not a message"])  # type: ignore[list-item]
        clash = ChatMessage.assistant("another first", id="m-1")
        with pytest.raises(MessageConflict):
            await backend.replace_last(a, session_id=s, message_id=last.id, messages=[clash])
        assert await backend.get_messages(a, session_id=s) == [first, last]
        if generation is not None:
            assert await backend.generation(a, session_id=s) == generation  # type: ignore[attr-defined]

    async def test_replace_session_puts_the_batch_in_place_of_the_transcript(
        self, backend: HistoryProvider, peer: HistoryProvider
    ) -> None:
        """``replace_session`` (``SessionReplacer``, optional) makes the batch the session's transcript, tagged
        with ``run_id``, and returns how many messages the session held: the old ids are free again, readers
        whose caches held the old transcript (this provider and another on the same store) read the new one,
        other sessions are untouched, an empty batch is ``clear``, and a session never written is written.

        Fix: call ``check_append`` of ``ravi.kernel.storage`` first; then, in one transaction under the session's lock,
        remove every message, summary and held id of the session, give it a new generation (so every cache reads again)
        and append the batch tagged ``run_id``; return how many messages it held.
        """
        if not isinstance(backend, SessionReplacer):
            pytest.skip(f"backend lacks replace_session: {type(backend).__name__} is not a SessionReplacer")
        a, s, other = unique("agent"), unique("session"), unique("session")
        old = [ChatMessage.user(f"old {i}", id=f"m{i}") for i in range(5)]
        await backend.append_many(a, old, session_id=s, run_id="r1")
        await backend.append(a, ChatMessage.user("another session"), session_id=other)
        for reader in (backend, peer):  # fills the read caches, if the providers keep them
            assert await reader.get_messages(a, session_id=s) == old
        new = [ChatMessage.user(f"new {i}", id=f"m{i}") for i in range(3)]
        assert await backend.replace_session(a, new, session_id=s, run_id="r2") == 5
        for reader in (backend, peer):
            assert await reader.get_messages(a, session_id=s) == new, "a reader returned the replaced transcript"
        assert await backend.count_messages(a, session_id=s) == 3
        assert texts(await backend.get_messages(a, session_id=other)) == ["another session"]
        if isinstance(backend, RunReader):
            assert [m.run_id for m in await backend.get_stored(a, session_id=s)] == ["r2"] * 3
        assert await backend.clear_run(a, session_id=s, run_id="r1") == 0, "a replaced message outlived it"
        assert await backend.replace_session(a, [], session_id=s) == 3
        assert await backend.get_messages(a, session_id=s) == []
        never = unique("session")
        assert await backend.replace_session(a, old, session_id=never) == 0
        assert await backend.get_messages(a, session_id=never) == old

    async def test_replace_session_that_fails_changes_nothing(self, backend: HistoryProvider) -> None:
        """A ``replace_session`` refused for its batch (an item that is not a message, two different messages
        under one id, a bad scope) changes nothing: the transcript and its generation stay.

        Fix: call ``check_append`` of ``ravi.kernel.storage`` with the new transcript before the store sees it, and
        remove the old one and write the new one in one transaction.
        """
        if not isinstance(backend, SessionReplacer):
            pytest.skip(f"backend lacks replace_session: {type(backend).__name__} is not a SessionReplacer")
        a, s = unique("agent"), unique("session")
        held = [ChatMessage.user("first", id="m-1"), ChatMessage.assistant("second", id="m-2")]
        await backend.append_many(a, held, session_id=s)
        generation = await backend.generation(a, session_id=s) if isinstance(backend, SessionGeneration) else None
        with pytest.raises(InvalidArgument):
            await backend.replace_session(a, [ChatMessage.user("ok"), A_DICT], session_id=s)  # type: ignore[list-item]
        with pytest.raises(InvalidArgument):
            await backend.replace_session(a, ChatMessage.user("not a list"), session_id=s)  # type: ignore[arg-type]
        with pytest.raises(InvalidArgument):
            await backend.replace_session(a, [ChatMessage.user("ok")], session_id=s, run_id=7)  # type: ignore[arg-type]
        twice = [ChatMessage.user("one", id="x"), ChatMessage.user("two", id="x")]
        with pytest.raises(MessageConflict):
            await backend.replace_session(a, twice, session_id=s)
        assert await backend.get_messages(a, session_id=s) == held
        if generation is not None:
            assert await backend.generation(a, session_id=s) == generation  # type: ignore[attr-defined]

    async def test_readers_never_see_a_replaced_session_empty_or_mixed(self, backend: HistoryProvider) -> None:
        """Readers racing ``replace_session`` read one whole transcript, the one before or the one after, never
        an empty session or a mix; concurrent replacements leave exactly one of their batches.

        Troubleshooting: remove and write in one transaction or script; a clear followed by an append lets a
        reader in between."""
        if not isinstance(backend, SessionReplacer):
            pytest.skip(f"backend lacks replace_session: {type(backend).__name__} is not a SessionReplacer")
        a, s = unique("agent"), unique("session")
        batches = [[ChatMessage.user(f"v{v} m{i}") for i in range(6)] for v in range(9)]
        await backend.append_many(a, batches[0], session_id=s)
        whole = [texts(batch) for batch in batches]
        for v in range(1, 6):
            reads: list[Any] = await asyncio.gather(
                backend.get_messages(a, session_id=s),
                backend.replace_session(a, batches[v], session_id=s),
                *(backend.get_messages(a, session_id=s) for _ in range(6)),
            )
            for read in (reads[0], *reads[2:]):
                assert texts(read) in whole[v - 1 : v + 1], f"a reader saw {texts(read)} during a replacement"
        await asyncio.gather(*(backend.replace_session(a, batch, session_id=s) for batch in batches[6:]))
        assert texts(await backend.get_messages(a, session_id=s)) in whole[6:]

    async def test_replacements_of_a_session_never_written_leave_one_batch(self, backend: HistoryProvider) -> None:
        """Replacements and an append racing on a session never written serialise as on any other session: the
        session ends holding one replacement's batch, with the appended message after it or not at all, never two
        batches mixed nor the appended message before the batch.

        Troubleshooting: a replacement must take the session's lock even when the session has no record yet (create
        the record first, as an append does); a store that locks only a record it finds lets two writers of a new
        session each append after the other."""
        if not isinstance(backend, SessionReplacer):
            pytest.skip(f"backend lacks replace_session: {type(backend).__name__} is not a SessionReplacer")
        a = unique("agent")
        batches = [[ChatMessage.user(f"v{v} m{i}") for i in range(4)] for v in range(3)]
        allowed = [texts(batch) + tail for batch in batches for tail in ([], ["appended"])]
        # reads at once first, so a store with a pool of connections has them open: writers then race for real
        await asyncio.gather(*(backend.count_messages(a, session_id=unique("session")) for _ in range(8)))
        mixed: list[list[str]] = []
        for _ in range(40):
            s = unique("session")
            await asyncio.gather(
                backend.append(a, ChatMessage.user("appended"), session_id=s),
                *(backend.replace_session(a, batch, session_id=s) for batch in batches),
            )
            held = texts(await backend.get_messages(a, session_id=s))
            if held not in allowed:
                mixed.append(held)
        assert not mixed, f"{len(mixed)} of {40} new sessions ended mixed, such as {mixed[0]}"

    async def test_replace_session_without_messages_is_clear(self, backend: HistoryProvider) -> None:
        """``replace_session`` with no messages is ``clear``: a written session is emptied in a new generation and
        its summaries go; a session never written stays so (generation ``""``, no messages).

        Fix: with no messages, call ``clear``: a session that holds messages gets a new generation, and a session never
        written stays unwritten (no row, no generation).
        """
        if not isinstance(backend, SessionReplacer):
            pytest.skip(f"backend lacks replace_session: {type(backend).__name__} is not a SessionReplacer")
        a, s, never = unique("agent"), unique("session"), unique("session")
        await backend.append_many(a, [ChatMessage.user("one"), ChatMessage.user("two")], session_id=s)
        generations = isinstance(backend, SessionGeneration)
        before = await backend.generation(a, session_id=s) if generations else None  # type: ignore[attr-defined]
        assert await backend.replace_session(a, [], session_id=s) == 2
        assert await backend.get_messages(a, session_id=s) == []
        assert await backend.replace_session(a, [], session_id=never) == 0
        assert await backend.count_messages(a, session_id=never) == 0
        if generations:
            assert await backend.generation(a, session_id=s) not in ("", before)  # type: ignore[attr-defined]
            assert await backend.generation(a, session_id=never) == "", (  # type: ignore[attr-defined]
                "replace_session with no messages gave a session never written a generation"
            )

    async def test_readers_cannot_change_the_store(self, backend: HistoryProvider) -> None:
        """Changing what a read returned does not change what is stored.

        Fix: return a new list on every read (a slice or a list built from the rows), never the list the store keeps;
        messages are immutable, so they may be shared.
        """
        a, s = unique("agent"), unique("session")
        await backend.append(a, ChatMessage.user("original", metadata={"k": "v"}), session_id=s)
        got = await backend.get_messages(a, session_id=s)
        got.append(ChatMessage.user("sneaked in"))
        with pytest.raises(TypeError):
            got[0].metadata["k"] = "changed"
        assert texts(await backend.get_messages(a, session_id=s)) == ["original"]


def _transcript(tag: str = "") -> list[ChatMessage]:
    """A session with system messages here and there, tool groups, and turns of very different sizes."""
    out: list[ChatMessage] = [ChatMessage.system(f"rules{tag}")]
    for i in range(12):
        out.append(ChatMessage.user(f"q{i}{tag} " + "x" * (i * 37 % 200)))
        if i % 3 == 1:
            calls = [ToolCallBlock(id=f"c{i}-{k}{tag}", name="look", arguments={"k": k}) for k in range(2)]
            out.append(ChatMessage.assistant(None, tool_calls=calls))
            out.append(ChatMessage.tool(f"c{i}-0{tag}", "r" * (i * 53 % 300)))
            if i == 4:
                out.append(ChatMessage.system(f"note{tag}"))  # a system message inside a tool group
            out.append(ChatMessage.tool(f"c{i}-1{tag}", "done"))
        if i == 7:
            out.append(ChatMessage.system(f"later rules{tag}"))
        out.append(ChatMessage.assistant(f"a{i}{tag} " + "y" * (i * 71 % 150)))
    return out


def check_view(session: list[ChatMessage], view: HistoryWindow, tokens: int) -> None:
    """``view`` is a windowed read of ``session`` with ``tokens``: a tail that holds at least the reference
    rule's, with every system message before it, and ``head``, ``complete`` and ``before`` (when given) telling
    the truth."""
    tail = view.tail
    assert tail == session[len(session) - len(tail) :], "the tail is not the newest messages of the session, in order"
    start = len(session) - len(tail)
    assert start <= window_start(session, tokens), "the tail is shorter than the stored counts allow"
    before = [m for m in session[:start] if m.role == "system"]
    assert view.messages[: view.head] == before, "the system messages before the tail are not all there, in order"
    assert view.head == len(before)
    assert view.complete == (len(before) == start), "complete must say whether the read is the whole session"
    if view.before is not None:
        assert view.before == sum(map(stored_tokens, session[:start])), (
            "before must be the stored tokens of every message before the tail"
        )


class WindowReaderContract(ContractBase):
    """The windowed read (``WindowReader``), an optional ability of a history provider. Subclass and override
    the ``backend`` fixture; a provider without it is skipped with the reason."""

    contract_name = "WindowReader"
    pytestmark = pytest.mark.asyncio

    @pytest.fixture
    def backend(self) -> HistoryProvider:
        """Override: an empty backend, fresh for each test."""
        raise NotImplementedError("override the 'backend' fixture to build an empty backend")

    @pytest.fixture
    def reader(self, backend: HistoryProvider) -> WindowReader:
        if not isinstance(backend, WindowReader):
            pytest.skip(f"backend lacks read_window: {type(backend).__name__} is not a WindowReader")
        return backend

    @pytest.fixture
    def peer(self, backend: HistoryProvider) -> HistoryProvider:
        """Override: a second provider on the same store as ``backend``, as another process would have one, so
        the caches of each are held to the writes of the other. Without it, the tests that need it skip."""
        pytest.skip("no peer fixture: override 'peer' with a second provider on the same store")

    @pytest.mark.parametrize("seed", range(12))
    async def test_cached_reads_follow_another_process_writes(
        self, backend: HistoryProvider, reader: WindowReader, peer: HistoryProvider, seed: int
    ) -> None:
        """Windowed reads, of any size and in any order, stay right while another provider on the same store
        appends (retries included), removes runs and clears the session; so do the other provider's own.

        Fix: keep each message's ``stored_tokens`` (``ravi.kernel.tokens``) and a running total with it, recompute the
        totals when ``clear_run`` removes messages, and check a cached window against the session's generation and
        length in the round trip that reads, so another process's append, ``clear_run`` or ``clear`` is never served
        from the cache.
        """
        rng = random.Random(seed)
        a, s = unique("agent"), unique("session")
        stored: list[tuple[ChatMessage, str]] = []
        pending = [m for k in range(4) for m in _transcript(f"-{k}")]
        readers = [reader, peer] if isinstance(peer, WindowReader) else [reader]
        for _ in range(30):
            op = rng.random()
            writer = rng.choice([backend, peer])
            if op < 0.4 and pending:
                run = rng.choice(["r0", "r1", "r2"])
                batch, pending = pending[: rng.randint(1, 9)], pending[rng.randint(1, 9) :]
                retried = [m for m, _ in stored[-rng.randint(0, 3) :]] if stored and rng.random() < 0.3 else []
                await writer.append_many(a, [*retried, *batch], session_id=s, run_id=run)
                held = {m.id for m, _ in stored}
                for m in batch:
                    if m.id not in held:
                        stored.append((m, run))
                        held.add(m.id)
            elif op < 0.5:
                run = rng.choice(["r0", "r1", "r2"])
                await writer.clear_run(a, session_id=s, run_id=run)
                stored = [(m, r) for m, r in stored if r != run]
            elif op < 0.53:
                await writer.clear(a, session_id=s)
                stored = []
            else:
                tokens = rng.choice([0, 5, 30, 90, 250, 600, 2_000, 10**6])
                session = [m for m, _ in stored]
                check_view(session, await rng.choice(readers).read_window(a, session_id=s, tokens=tokens), tokens)

    async def test_an_empty_session_is_an_empty_complete_read(self, reader: WindowReader) -> None:
        """Reading an empty session gives no messages and a complete read.

        Fix: return a window with no messages, ``head=0`` and ``complete=True`` for a session never written or cleared,
        without creating it.
        """
        view = await reader.read_window(unique("agent"), session_id=unique("session"), tokens=100)
        assert (view.messages, view.head, view.complete) == ([], 0, True)

    async def test_the_read_follows_the_stored_counts(self, backend: HistoryProvider, reader: WindowReader) -> None:
        """The read follows the stored counts: the newest messages past the budget, moved back to a whole unit.

        Fix: start the tail where ``window_start`` of ``ravi.kernel.storage`` does: add the ``stored_tokens`` of each
        message from the newest back until the sum passes ``tokens`` (that message included), then move back past tool
        results and system messages; a store holding the transcript in memory can return ``window_of``.
        """
        a, s = unique("agent"), unique("session")
        session = _transcript()
        await backend.append_many(a, session[:20], session_id=s)
        await backend.append_many(a, session[20:], session_id=s)
        total = sum(stored_tokens(m) for m in session)
        for tokens in [0, 1, 10, 40, 75, 120, 200, 333, 500, 800, total - 1, total, total + 50]:
            check_view(session, await reader.read_window(a, session_id=s, tokens=tokens), tokens)
        assert (await reader.read_window(a, session_id=s, tokens=total)).complete

    async def test_the_read_says_where_its_tail_starts(self, backend: HistoryProvider, reader: WindowReader) -> None:
        """``before`` is the stored tokens before the tail, so strategies can place a read in its session (a
        rolling summary finds its checkpoint by it). Optional: without it, such pipelines read sessions whole.

        Fix: set ``before`` to the sum of the ``stored_tokens`` of every message before the tail (a running total kept
        with each row makes it one look-up), as ``window_of`` of ``ravi.kernel.storage`` does.
        """
        a, s = unique("agent"), unique("session")
        session = _transcript()
        await backend.append_many(a, session, session_id=s)
        views = [await reader.read_window(a, session_id=s, tokens=tokens) for tokens in (0, 50, 400, 10**6)]
        if any(view.before is None for view in views):
            pytest.skip(f"{type(reader).__name__}.read_window leaves before unset: pipelines that need it read whole")
        for tokens, view in zip((0, 50, 400, 10**6), views, strict=True):
            check_view(session, view, tokens)
        assert views[-1].before == 0

    async def test_the_read_returns_the_stored_messages_exactly(
        self, backend: HistoryProvider, reader: WindowReader
    ) -> None:
        """The read returns the stored messages exactly, as ``get_messages`` does.

        Fix: build the window from the stored bodies ``get_messages`` reads (``messages_from_json`` of
        ``ravi.kernel.messages``), not from a copy kept for counting.
        """
        a, s = unique("agent"), unique("session")
        session = _transcript("ü漢")
        await backend.append_many(a, session, session_id=s)
        view = await reader.read_window(a, session_id=s, tokens=10_000_000)
        assert view.messages == await backend.get_messages(a, session_id=s) == session

    async def test_counts_stay_right_after_clear_run(self, backend: HistoryProvider, reader: WindowReader) -> None:
        """Counts stay right after ``clear_run`` removes messages from the middle.

        Fix: when ``clear_run`` removes messages, recompute the running totals of the messages after the first one
        removed, in the same transaction, so ``before`` and the tail's start follow the messages that remain.
        """
        a, s = unique("agent"), unique("session")
        session = _transcript()
        for i, message in enumerate(session):
            await backend.append(a, message, session_id=s, run_id=f"r{i % 3}")
        await backend.clear_run(a, session_id=s, run_id="r1")
        kept = [m for i, m in enumerate(session) if i % 3 != 1]
        assert await backend.get_messages(a, session_id=s) == kept
        for tokens in [0, 30, 90, 250, 600]:
            check_view(kept, await reader.read_window(a, session_id=s, tokens=tokens), tokens)
        after = ChatMessage.user("after")
        await backend.append(a, after, session_id=s)
        check_view([*kept, after], await reader.read_window(a, session_id=s, tokens=5), 5)

    async def test_counts_stay_right_after_retried_appends(
        self, backend: HistoryProvider, reader: WindowReader
    ) -> None:
        """Batches that repeat ids already stored, or repeat an id within the batch, count only what they add.

        Fix: add a message's ``stored_tokens`` to the totals only when it is stored: skip ids the session holds and
        repeats within the batch before counting.
        """
        a, s = unique("agent"), unique("session")
        session = _transcript()
        await backend.append_many(a, session[:10], session_id=s)
        await backend.append_many(a, [*session[5:18], session[12], *session[8:22]], session_id=s)  # a retry
        await backend.append_many(a, session[18:], session_id=s)
        assert await backend.get_messages(a, session_id=s) == session
        for tokens in [0, 30, 90, 250, 600, sum(stored_tokens(m) for m in session)]:
            check_view(session, await reader.read_window(a, session_id=s, tokens=tokens), tokens)

    async def test_a_cleared_session_reads_empty_and_starts_again(
        self, backend: HistoryProvider, reader: WindowReader
    ) -> None:
        """A cleared session reads empty and counts again from zero.

        Fix: make ``clear`` remove the totals and give the session a new generation with its messages, so a cached
        window is dropped and a session written again counts from zero.
        """
        a, s = unique("agent"), unique("session")
        await backend.append_many(a, _transcript(), session_id=s)
        await reader.read_window(a, session_id=s, tokens=50)
        await backend.clear(a, session_id=s)
        assert (await reader.read_window(a, session_id=s, tokens=50)).messages == []
        fresh = [ChatMessage.system("new"), ChatMessage.user("x" * 400), ChatMessage.user("last")]
        await backend.append_many(a, fresh, session_id=s)
        check_view(fresh, await reader.read_window(a, session_id=s, tokens=20), 20)

    async def test_sessions_and_agents_are_isolated(self, backend: HistoryProvider, reader: WindowReader) -> None:
        """Windowed reads of different sessions and agents never mix.

        Fix: read the tail and the system messages before it by the (agent, session) key the messages are stored under,
        and key a cache of windows by both ids.
        """
        a, b, s = unique("agent"), unique("agent"), unique("session")
        await backend.append_many(a, [ChatMessage.system("a's"), ChatMessage.user("for a")], session_id=s)
        await backend.append_many(b, [ChatMessage.user("for b")], session_id=s)
        await backend.append_many(a, [ChatMessage.user("other")], session_id=unique("session"))
        view = await reader.read_window(a, session_id=s, tokens=1_000)
        assert texts(view.messages) == ["a's", "for a"]

    async def test_bad_arguments_are_refused(self, reader: WindowReader) -> None:
        """A negative, missing or non-integer token budget, or an empty agent id, is refused with
        ``InvalidArgument``.

        Fix: check the budget with ``check_count(tokens, "tokens")`` and the ids with ``check_scope`` of
        ``ravi.kernel.values`` before the store sees them.
        """
        await reader.read_window("agent", session_id="s", tokens=0)
        await refuses(
            InvalidArgument,
            {
                f"read_window(tokens={bad!r})": lambda bad=bad: reader.read_window(  # type: ignore[misc]
                    "agent", session_id="s", tokens=bad
                )
                for bad in (None, 1.5, float("nan"), True)
            },
        )
        with pytest.raises(InvalidArgument):
            await reader.read_window("agent", session_id="s", tokens=-1)
        with pytest.raises(InvalidArgument):
            await reader.read_window("", session_id="s", tokens=10)
        with pytest.raises(InvalidArgument):
            await reader.read_window("agent", session_id="s", tokens="10")  # type: ignore[arg-type]

    async def test_totals_add_up_after_racing_clear_runs_and_appends(
        self, backend: HistoryProvider, reader: WindowReader
    ) -> None:
        """After ``clear_run`` calls race each other, appends and retried appends, every windowed read still
        places its tail right: ``before`` is the sum of the stored tokens before the tail, and the tail is the
        newest messages, whatever the budget.

        Troubleshooting: recompute running totals under the session's lock (the one appends take), so a removal
        never interleaves with an append or another removal."""
        a, s = unique("agent"), unique("session")
        runs = [f"r{i}" for i in range(8)]
        for k, message in enumerate(_transcript()):
            await backend.append(a, message, session_id=s, run_id=runs[k % len(runs)])
        stored = await backend.get_messages(a, session_id=s)
        fresh = [ChatMessage.user(f"fresh {i} " + "w" * (i * 29 % 120)) for i in range(12)]
        await asyncio.gather(
            *(backend.clear_run(a, session_id=s, run_id=run) for run in runs[:5]),
            *(backend.append_many(a, fresh[i : i + 3], session_id=s, run_id="fresh") for i in range(0, 12, 3)),
            *(backend.append_many(a, stored[i : i + 4], session_id=s, run_id="retry") for i in range(0, 20, 4)),
        )
        session = await backend.get_messages(a, session_id=s)
        assert len(session) == len({m.id for m in session}), "a message was stored twice"
        total = sum(stored_tokens(m) for m in session)
        for tokens in [0, 10, 60, 200, 500, total - 1, total, total + 10]:
            check_view(session, await reader.read_window(a, session_id=s, tokens=tokens), tokens)

    async def test_a_new_conversation_reusing_ids_and_offsets_reads_only_itself(
        self, backend: HistoryProvider, reader: WindowReader, peer: HistoryProvider
    ) -> None:
        """After ``clear`` and ``clear_run``, a new conversation with the old ids, positions and token counts is
        what every windowed read returns, through this provider and through a second one whose cache held the
        old conversation's window.

        Fix: key a cached window by the session's generation, compared in the round trip that reads, not by message ids,
        positions or token counts, which a new conversation after ``clear`` or ``clear_run`` may repeat.
        """
        readers = [reader, peer] if isinstance(peer, WindowReader) else [reader]
        a, s = unique("agent"), unique("session")
        old = [ChatMessage.user(f"old {i:02d} " + "o" * 40, id=str(i)) for i in range(12)]
        new = [ChatMessage.user(f"new {i:02d} " + "n" * 40, id=str(i)) for i in range(12)]
        await backend.append_many(a, old, session_id=s, run_id="r")
        for view_of in readers:
            check_view(old, await view_of.read_window(a, session_id=s, tokens=60), 60)
        await backend.clear(a, session_id=s)
        await backend.append_many(a, new, session_id=s, run_id="r")
        for view_of in readers:
            for tokens in (60, 10**6):
                check_view(new, await view_of.read_window(a, session_id=s, tokens=tokens), tokens)
        await backend.clear_run(a, session_id=s, run_id="r")
        await backend.append_many(a, old, session_id=s, run_id="r")
        for view_of in readers:
            check_view(old, await view_of.read_window(a, session_id=s, tokens=60), 60)

    async def test_the_read_carries_the_sessions_generation(
        self, backend: HistoryProvider, reader: WindowReader
    ) -> None:
        """A store that tracks generations (``SessionGeneration``) returns with each windowed read the generation
        it read (``HistoryWindow.generation``): the session's, before and after a ``clear``.

        Fix: read the session's generation in the statement or script that reads the window and return it as
        ``HistoryWindow.generation`` (``window_of`` takes it as its third argument).
        """
        if not isinstance(backend, SessionGeneration):
            pytest.skip(f"backend lacks generation: {type(backend).__name__} is not a SessionGeneration")
        a, s = unique("agent"), unique("session")
        await backend.append_many(a, _transcript(), session_id=s)
        for tokens in (0, 100, 10**6):
            view = await reader.read_window(a, session_id=s, tokens=tokens)
            assert view.generation == await backend.generation(a, session_id=s)
        await backend.clear(a, session_id=s)
        await backend.append(a, ChatMessage.user("new"), session_id=s)
        view = await reader.read_window(a, session_id=s, tokens=50)
        assert view.generation == await backend.generation(a, session_id=s)

    async def test_reads_racing_appends_see_each_message_once(
        self, backend: HistoryProvider, reader: WindowReader
    ) -> None:
        """Reads racing appends see each message once, in order.

        Fix: read the totals and the window's messages in one snapshot (one statement, one script, or under the lock
        appends take), so a read sees a batch whole or not at all.
        """
        a, s = unique("agent"), unique("session")
        session: list[ChatMessage] = [ChatMessage.system("rules")]
        await backend.append_many(a, session, session_id=s)
        for step in range(12):
            batch = [ChatMessage.user(f"{step}.{i} " + "z" * (step * 13)) for i in range(3)]
            reads = [reader.read_window(a, session_id=s, tokens=60 * (k + 1)) for k in range(3)]
            append = asyncio.ensure_future(backend.append_many(a, batch, session_id=s))
            views = await asyncio.gather(*reads)
            await append
            for k, view in enumerate(views):
                seen = texts(view.messages)
                assert len(seen) == len(set(seen)), f"a read saw a message twice: {seen}"
                # the read is of the session before or after the append, never in between
                before_or_after = [session, [*session, *batch]]
                assert any(
                    len(view.tail) <= len(whole) and view.tail == whole[len(whole) - len(view.tail) :]
                    for whole in before_or_after
                ), f"read {k} raced an append and saw part of it"
            session += batch
        check_view(session, await reader.read_window(a, session_id=s, tokens=100), 100)


def _offsets(session: list[ChatMessage]) -> list[int]:
    """The stored tokens before each message of ``session`` (and, last, the total)."""
    out = [0]
    for m in session:
        out.append(out[-1] + stored_tokens(m))
    return out


def check_matches(session: list[ChatMessage], matches: list[UnitMatch], *, before: int, limit: int) -> None:
    """``matches`` is a search of ``session``: whole units as stored, each before ``before``, placed by its offset
    and the system message it follows, best first, no unit twice, at most ``limit``."""
    assert len(matches) <= limit, f"{len(matches)} units for a limit of {limit}"
    offsets = _offsets(session)
    position = {m.id: i for i, m in enumerate(session)}
    starts = []
    for match in matches:
        assert match.messages, "a match without messages"
        first = position.get(match.messages[0].id)
        assert first is not None, "a matched message is not in the session"
        hit = next(position[m.id] for m in match.messages if m.role != "system")
        start, end = unit_at(session, hit)
        assert list(match.messages) == session[start:end], "a match is not one whole unit, exactly as stored"
        assert match.offset == offsets[start], "offset must be the stored tokens before the unit"
        assert offsets[start] < before, "a unit at or after the offset searched before"
        systems = [m.id for m in session[:start] if m.role == "system"]
        assert match.after_system == (systems[-1] if systems else None), "after_system is not the system before it"
        starts.append(start)
    assert len(starts) == len(set(starts)), "a unit came back twice"
    scores = [m.score for m in matches]
    assert all(s > 0 for s in scores) and scores == sorted(scores, reverse=True), "not best first, or unscored"


class HistorySearcherContract(ContractBase):
    """The search of a session (``HistorySearcher``), an optional ability of a history provider that lets
    relevant recall read only the window. Subclass and override the ``backend`` fixture; a provider without it
    is skipped with the reason."""

    contract_name = "HistorySearcher"
    pytestmark = pytest.mark.asyncio

    @pytest.fixture
    def backend(self) -> HistoryProvider:
        """Override: an empty backend, fresh for each test."""
        raise NotImplementedError("override the 'backend' fixture to build an empty backend")

    @pytest.fixture
    def searcher(self, backend: HistoryProvider) -> HistorySearcher:
        if not isinstance(backend, HistorySearcher):
            pytest.skip(f"backend lacks search_units: {type(backend).__name__} is not a HistorySearcher")
        return backend

    @pytest.fixture
    def peer(self, backend: HistoryProvider) -> HistoryProvider:
        """Override: a second provider on the same store as ``backend``, as another process would have one.
        Without it, the tests that use it search through ``backend`` alone."""
        return backend

    async def test_a_rare_word_finds_its_whole_tool_unit(
        self, backend: HistoryProvider, searcher: HistorySearcher
    ) -> None:
        """A word only a tool result holds finds the unit: the call, every result and the system message among
        them, as stored, placed after the system message before it.

        Fix: index each message under ``indexed_terms`` of ``ravi.kernel.search``, look up the ``query_terms`` of the
        query, and widen each match to its unit with ``unit_at`` (a tool result back to its call, on through its results
        and the system messages among them); ``match_units`` does the ranking, offsets and ``after_system`` for a store
        that holds the session's messages.
        """
        a, s = unique("agent"), unique("session")
        session = _transcript()
        calls = [ToolCallBlock(id="find-0", name="lookup", arguments={"k": "host"})]
        unit = [
            ChatMessage.assistant(None, tool_calls=calls),
            ChatMessage.system("a note inside the group"),
            ChatMessage.tool("find-0", "the staging database listens on port 6543 at zanzibar-7"),
        ]
        session[8:8] = unit  # before a user turn
        session += [ChatMessage.user("where is zanzibar-7?")]
        await backend.append_many(a, session, session_id=s)
        total = _offsets(session)[-1]
        matches = await searcher.search_units(a, session_id=s, query="zanzibar-7 port", before=total, limit=5)
        check_matches(session, matches, before=total, limit=5)
        assert unit in [list(m.messages) for m in matches]
        before = _offsets(session)[len(session) - 1]  # the question itself is not searched
        matches = await searcher.search_units(a, session_id=s, query="zanzibar-7", before=before, limit=5)
        check_matches(session, matches, before=before, limit=5)
        assert [list(m.messages) for m in matches] == [unit]

    @pytest.mark.parametrize("cut", [0, 3, 9, 17, 30])
    async def test_only_units_before_the_offset_and_at_most_limit(
        self, backend: HistoryProvider, searcher: HistorySearcher, cut: int
    ) -> None:
        """Every unit lies before ``before``, best first, none twice, at most ``limit``.

        Fix: call ``check_search`` of ``ravi.kernel.storage`` first; rank only messages whose units end before offset
        ``before`` (the stored tokens before a message), keep each unit once, best first, at most ``limit``; an empty
        query or ``limit=0`` is ``[]``.
        """
        a, s = unique("agent"), unique("session")
        session = _transcript()
        await backend.append_many(a, session, session_id=s)
        before = _offsets(session)[min(cut, len(session))]
        for query, limit in [("q1 q4 a7 look done", 3), ("x y r look", 50), ("nothing-matches-this", 10)]:
            matches = await searcher.search_units(a, session_id=s, query=query, before=before, limit=limit)
            check_matches(session, matches, before=before, limit=limit)
        assert await searcher.search_units(a, session_id=s, query="", before=before, limit=5) == []
        assert await searcher.search_units(a, session_id=s, query="look", before=before, limit=0) == []

    async def test_a_shallower_search_gives_the_first_units_of_a_deeper_one(
        self, backend: HistoryProvider, searcher: HistorySearcher
    ) -> None:
        """The best ``limit`` units are the first ``limit`` of the whole ranking, whatever ``limit`` is asked: relevant
        recall keeps a deeper ranking for a request and takes its first units for a window that asks for fewer.

        Fix: order the whole ranking by score, the newer unit first among equals (a total order), and cut it at
        ``limit`` last; never cut the matches before grouping them into units, nor order ties by how they were read.
        """
        a, s = unique("agent"), unique("session")
        session = _transcript()
        await backend.append_many(a, session, session_id=s)
        before = _offsets(session)[-1]
        for query in ("q1 q4 a7 look done", "x y r look", "look"):
            deep = await searcher.search_units(a, session_id=s, query=query, before=before, limit=64)
            for limit in (1, 2, 3, 5, 8, 13):
                shallow = await searcher.search_units(a, session_id=s, query=query, before=before, limit=limit)
                assert [(list(m.messages), m.offset) for m in shallow] == [
                    (list(m.messages), m.offset) for m in deep[:limit]
                ], f"limit={limit}, query={query!r}"

    async def test_system_messages_are_never_matches(self, backend: HistoryProvider, searcher: HistorySearcher) -> None:
        """A window keeps every system message anyway: a word only they hold finds nothing.

        Fix: leave system messages out of the ranking (``match_units`` of ``ravi.kernel.search`` skips them); they come
        back only as the ``after_system`` of a unit.
        """
        a, s = unique("agent"), unique("session")
        session = [ChatMessage.system("the secret word is quokka"), ChatMessage.user("hello"), ChatMessage.user("x")]
        await backend.append_many(a, session, session_id=s)
        assert await searcher.search_units(a, session_id=s, query="quokka", before=10**9, limit=5) == []

    async def test_any_script_matches(self, backend: HistoryProvider, searcher: HistorySearcher) -> None:
        """Accents and case are ignored, and Greek, Cyrillic and Chinese are found (Chinese by character pairs).

        Fix: index and query with ``terms`` of ``ravi.kernel.search`` (through ``indexed_terms`` and ``query_terms``),
        which fold case and accents and split Chinese into character pairs; a server's own parser
        (``to_tsvector('english', ...)``) does not.
        """
        a, s = unique("agent"), unique("session")
        said = {
            "Η Αθήνα είναι όμορφη": "αθηνα",
            "Москва большая": "МОСКВА",
            "我们在东京见面": "东京",
            "Die Straße ist lang": "strasse",
            "un café crème": "CAFE",
        }
        session = [ChatMessage.user(text) for text in said]
        await backend.append_many(a, session, session_id=s)
        for message, (_, query) in zip(session, said.items(), strict=True):
            matches = await searcher.search_units(a, session_id=s, query=query, before=10**9, limit=5)
            assert [list(m.messages) for m in matches][:1] == [[message]], f"{query!r} did not find {message.text!r}"

    async def test_later_appends_are_found_and_removed_ones_are_not(
        self, backend: HistoryProvider, searcher: HistorySearcher
    ) -> None:
        """A search sees what was appended since the last one, and nothing of a removed run or cleared session.

        Fix: index what was appended since the last search before searching, and keep the index under the session's
        generation, so ``clear`` and ``clear_run`` drop it (or the entries of the removed messages) and no term lands on
        a message that now holds a removed one's position.
        """
        a, s = unique("agent"), unique("session")
        await backend.append_many(a, [ChatMessage.user("the walrus sleeps")], session_id=s, run_id="r1")
        assert len(await searcher.search_units(a, session_id=s, query="walrus", before=10**9, limit=5)) == 1
        late = ChatMessage.assistant("a walrus again, and a narwhal")
        await backend.append_many(a, [late], session_id=s, run_id="r2")
        matches = await searcher.search_units(a, session_id=s, query="narwhal", before=10**9, limit=5)
        assert [list(m.messages) for m in matches] == [[late]]
        await backend.clear_run(a, session_id=s, run_id="r1")
        matches = await searcher.search_units(a, session_id=s, query="walrus", before=10**9, limit=5)
        assert [list(m.messages) for m in matches] == [[late]]
        assert matches[0].offset == 0
        await backend.clear(a, session_id=s)
        assert await searcher.search_units(a, session_id=s, query="walrus", before=10**9, limit=5) == []

    async def test_sessions_and_agents_are_isolated(self, backend: HistoryProvider, searcher: HistorySearcher) -> None:
        """A search sees its own session only.

        Fix: restrict every look-up of the index to the (agent, session) pair: an index shared by sessions filters on
        both ids.
        """
        a, b, s, t = unique("agent"), unique("agent"), unique("session"), unique("session")
        await backend.append_many(a, [ChatMessage.user("ocelot in a")], session_id=s)
        await backend.append_many(a, [ChatMessage.user("ocelot in a/t")], session_id=t)
        await backend.append_many(b, [ChatMessage.user("ocelot in b")], session_id=s)
        matches = await searcher.search_units(a, session_id=s, query="ocelot", before=10**9, limit=5)
        assert [m.messages[0].text for m in matches] == ["ocelot in a"]
        assert await searcher.search_units(a, session_id=unique("s"), query="ocelot", before=10**9, limit=5) == []

    async def test_tenants_with_equal_message_ids_never_see_each_others_hits(
        self, backend: HistoryProvider, searcher: HistorySearcher
    ) -> None:
        """Two agents whose sessions and messages have equal ids never find each other's messages.

        Fix: key index entries by agent, session and position (or message id), never by message id alone, which another
        agent's session may hold.
        """
        a, b, s = unique("agent"), unique("agent"), unique("session")
        await backend.append_many(a, [ChatMessage.user("a's account 12345 quokka", id="1")], session_id=s)
        await backend.append_many(b, [ChatMessage.user("b's note about the weather", id="1")], session_id=s)
        await searcher.search_units(b, session_id=s, query="weather", before=10**9, limit=5)  # b's index is built
        assert await searcher.search_units(b, session_id=s, query="quokka 12345", before=10**9, limit=5) == []
        matches = await searcher.search_units(a, session_id=s, query="quokka", before=10**9, limit=5)
        assert [m.messages[0].text for m in matches] == ["a's account 12345 quokka"]

    async def test_a_new_conversation_reusing_ids_finds_only_its_own_words(
        self, backend: HistoryProvider, searcher: HistorySearcher, peer: HistoryProvider
    ) -> None:
        """A search racing ``clear`` and the appends of a new conversation that reuses the old ids, offsets and
        positions never indexes the new messages under the old words: afterwards the old words find nothing and
        the new ones find their messages, through this provider and through a second one on the same store.

        Troubleshooting: write a search's terms back only if the session is still in the generation the search
        read, in the same statement."""
        other = peer if isinstance(peer, HistorySearcher) else searcher
        for round_ in range(12):
            a, s = unique("agent"), unique("session")
            old = [ChatMessage.user(f"walrus{k} gazebo{round_}", id=str(k)) for k in range(30)]
            new = [ChatMessage.user(f"narwhal{k} pergola{round_}", id=str(k)) for k in range(30)]
            await backend.append_many(a, old, session_id=s)

            async def renew() -> None:
                await backend.clear(a, session_id=s)  # noqa: B023 - awaited within the iteration
                await backend.append_many(a, new, session_id=s)  # noqa: B023

            await asyncio.gather(
                searcher.search_units(a, session_id=s, query=f"gazebo{round_}", before=10**9, limit=3), renew()
            )
            for search in (searcher, other):
                for k in (0, 17, 29):
                    stale = await search.search_units(a, session_id=s, query=f"walrus{k}", before=10**9, limit=3)
                    assert stale == [], f"round {round_}: an old word found {[m.messages[0].text for m in stale]}"
                    found = await search.search_units(a, session_id=s, query=f"narwhal{k}", before=10**9, limit=3)
                    assert [m.messages[0].text for m in found] == [new[k].text], f"round {round_}: a new word"

    async def test_huge_messages_and_queries_never_break_the_session(
        self, backend: HistoryProvider, searcher: HistorySearcher
    ) -> None:
        """A message of 1 MB of CJK text, one of 200,000 distinct words and a query of 1 MB are indexed and
        searched (at most their first terms), or refused with a typed error; either way the session's later
        searches work and find what they should.

        Troubleshooting: cap the terms a message is indexed under (``ravi.kernel.search.indexed_terms``) and
        the terms a query looks up (``ravi.kernel.search.query_terms``)."""
        a, s = unique("agent"), unique("session")
        rng = random.Random(7)
        cjk = "".join(chr(0x4E00 + rng.randrange(20_000)) for _ in range(350_000))
        words = " ".join(f"w{i:06d}" for i in range(200_000))
        needle = ChatMessage.user("the staging database listens at zanzibar-7")
        for huge in (ChatMessage.user(cjk), ChatMessage.user(words)):
            with contextlib.suppress(InvalidArgument):
                await backend.append(a, huge, session_id=s)
        await backend.append(a, needle, session_id=s)
        await backend.append(a, ChatMessage.user("thanks"), session_id=s)
        for query in ("zanzibar-7", cjk[:12], "w000001", words[:1_000_000] + " zanzibar-7", "zanzibar-7 " + cjk):
            await searcher.search_units(a, session_id=s, query=query, before=10**9, limit=3)
        matches = await searcher.search_units(a, session_id=s, query="zanzibar-7", before=10**9, limit=3)
        assert [list(m.messages) for m in matches] == [[needle]]
        matches = await searcher.search_units(a, session_id=s, query="w000001 " * 3, before=10**9, limit=3)
        assert [m.messages[0].text[:7] for m in matches] in ([], ["w000000"]), "a search found the wrong message"

    async def test_an_offset_or_limit_past_a_servers_integers_finds_everything(
        self, backend: HistoryProvider, searcher: HistorySearcher
    ) -> None:
        """``before`` and ``limit`` larger than a 64-bit integer (or than twice a 32-bit one) search the whole
        session for every match, as the in-memory store does; Postgres refused them as values it could not
        store.

        Fix: take ``before`` and ``limit`` from ``check_search`` of ``ravi.kernel.storage``, which caps them at
        ``MAX_COUNT``, and cap any number a statement computes from them (a ``LIMIT`` of twice ``limit``) below what its
        integer holds.
        """
        a, s = unique("agent"), unique("session")
        await backend.append_many(a, [ChatMessage.user(f"quokka note {i}") for i in range(3)], session_id=s)
        expected = await searcher.search_units(a, session_id=s, query="quokka", before=10**9, limit=10)
        assert len(expected) == 3
        for huge in (2**30 + 1, 2**63, 2**64 + 7):
            assert await searcher.search_units(a, session_id=s, query="quokka", before=huge, limit=huge) == expected

    async def test_bad_arguments_are_refused(self, searcher: HistorySearcher) -> None:
        """A query that is not text, a negative offset or limit, or an empty agent id: ``InvalidArgument``.

        Fix: call ``check_search`` of ``ravi.kernel.storage`` and ``check_scope`` of ``ravi.kernel.values`` before the
        store sees the call.
        """
        bad: list[dict[str, Any]] = [
            {"query": 3, "before": 0, "limit": 1},
            {"query": "x", "before": -1, "limit": 1},
            {"query": "x", "before": 0, "limit": -1},
            {"query": "x", "before": 0, "limit": True},
        ]
        for kwargs in bad:
            with pytest.raises(InvalidArgument):
                await searcher.search_units("agent", session_id="s", **kwargs)
        with pytest.raises(InvalidArgument):
            await searcher.search_units("", session_id="s", query="x", before=0, limit=1)


class TopicEmbedder:
    """A deterministic embedding client for the hybrid search's rules: a text's vector says which of a few topic
    words it holds (``walrus``, ``seal``, ``narwhal``), so which messages lie closest to a query is known exactly;
    a text with none of them points elsewhere. It records every text it was given, in order."""

    TOPICS = ("walrus", "seal", "narwhal")

    def __init__(self) -> None:
        self.texts: list[str] = []

    @property
    def dimension(self) -> int:
        """One number per topic, and one for a text with none."""
        return len(self.TOPICS) + 1

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text: 1 for each topic word it holds, else a unit vector apart from every topic."""
        self.texts.extend(texts)
        out = []
        for text in texts:
            words = text.lower()
            vector = [1.0 if topic in words else 0.0 for topic in self.TOPICS]
            out.append([*vector, 0.0 if any(vector) else 1.0])
        return out

    def times(self, text: str) -> int:
        """How many times ``text`` was embedded."""
        return self.texts.count(text)


def _animals(tag: str = "") -> list[ChatMessage]:
    """A session whose messages each hold one topic word of :class:`TopicEmbedder`, or two, or none, with a
    system message and a tool group among them."""
    calls = [ToolCallBlock(id=f"t{tag}", name="lookup", arguments={"q": "habitat"})]
    return [
        ChatMessage.system(f"rules{tag}: a narwhal is a whale"),
        ChatMessage.user(f"hello{tag}"),
        ChatMessage.assistant(f"the walrus sleeps on ice{tag}"),
        ChatMessage.user(f"and what about the seal{tag}?"),
        ChatMessage.assistant(None, tool_calls=calls),
        ChatMessage.tool(f"t{tag}", f"a narwhal lives in arctic water{tag}"),
        ChatMessage.assistant(f"the walrus and the seal share the coast{tag}"),
        ChatMessage.user(f"thanks{tag}"),
        ChatMessage.assistant(f"you are welcome{tag}"),
    ]


def _units(matches: list[UnitMatch]) -> list[list[ChatMessage]]:
    return [list(m.messages) for m in matches]


class HybridSearcherContract(ContractBase):
    """The search of a session by its words and by its meaning in one call (``HybridSearcher``), an optional
    ability of a history provider that relevant recall prefers to ``search_units``. Subclass and override the
    ``backend`` fixture; a provider without it is skipped with the reason. The rules by meaning give the
    provider :class:`TopicEmbedder`, whose vectors make the closest messages known."""

    contract_name = "HybridSearcher"
    pytestmark = pytest.mark.asyncio

    @pytest.fixture
    def backend(self) -> HistoryProvider:
        """Override: an empty backend, fresh for each test."""
        raise NotImplementedError("override the 'backend' fixture to build an empty backend")

    @pytest.fixture
    def searcher(self, backend: HistoryProvider) -> HybridSearcher:
        if not isinstance(backend, HybridSearcher):
            pytest.skip(f"backend lacks search_hybrid: {type(backend).__name__} is not a HybridSearcher")
        return backend

    @pytest.fixture
    def peer(self, backend: HistoryProvider) -> HistoryProvider:
        """Override: a second provider on the same store as ``backend``, as another process would have one.
        Without it, the tests that use it search through ``backend`` alone."""
        return backend

    @pytest.mark.parametrize("cut", [0, 3, 9, 17, 30])
    async def test_words_rank_as_search_units_does(
        self, backend: HistoryProvider, searcher: HybridSearcher, cut: int
    ) -> None:
        """Without ``spread``, the units found by words are the ones ``search_units`` gives for the same query,
        offset and limit (when the provider has both), and either way whole units before ``before``, best first,
        at most ``limit``; without an embedder the units by meaning are none.

        Troubleshooting: rank by words with the provider's own ``search_units``, and score neighbours only when
        ``spread`` is above 0."""
        a, s = unique("agent"), unique("session")
        session = _transcript()
        await backend.append_many(a, session, session_id=s)
        before = _offsets(session)[min(cut, len(session))]
        for query, limit in [("q1 q4 a7 look done", 3), ("x y r look", 50), ("nothing-matches-this", 10)]:
            found = await searcher.search_hybrid(a, session_id=s, query=query, before=before, limit=limit)
            check_matches(session, found.lexical, before=before, limit=limit)
            assert found.meaning == [], "units by meaning came back without an embedder"
            if isinstance(searcher, HistorySearcher):
                units = await searcher.search_units(a, session_id=s, query=query, before=before, limit=limit)
                assert found.lexical == units, f"{query!r}: the words' ranking is not search_units'"

    async def test_an_empty_query_or_a_zero_limit_finds_nothing(
        self, backend: HistoryProvider, searcher: HybridSearcher
    ) -> None:
        """An empty query and a limit of 0 find nothing, by words or by meaning, as ``search_units`` does.

        Fix: call ``check_search`` and ``check_hybrid`` of ``ravi.kernel.storage.history`` first, then return
        ``HybridMatches([], [])`` for an empty query or ``limit=0``, before embedding anything.
        """
        a, s = unique("agent"), unique("session")
        await backend.append_many(a, _animals(), session_id=s)
        embedder = TopicEmbedder()
        for query, limit in [("", 5), ("walrus", 0)]:
            found = await searcher.search_hybrid(
                a, session_id=s, query=query, before=10**9, limit=limit, spread=0.5, embedder=embedder, model="m"
            )
            assert (found.lexical, found.meaning) == ([], []), f"query {query!r} with limit {limit} found units"

    async def test_a_matchs_neighbours_score_spread_times_it(
        self, backend: HistoryProvider, searcher: HybridSearcher
    ) -> None:
        """With ``spread``, the nearest message on each side of a match that is not a system message scores
        ``spread`` times the match (its unit comes back with that score); nothing else scores, and with
        ``spread`` 0 the neighbours do not come back at all.

        Troubleshooting: see ``ravi.kernel.search.spread``, the reference rule."""
        a, s = unique("agent"), unique("session")
        session = [
            ChatMessage.user("good morning"),
            ChatMessage.assistant("what can I do for you"),
            ChatMessage.system("be brief"),
            ChatMessage.user("where does the quokka live?"),
            ChatMessage.system("be kind"),
            ChatMessage.assistant("on an island near Perth"),
            ChatMessage.user("thanks a lot"),
        ]
        await backend.append_many(a, session, session_id=s)
        alone = await searcher.search_hybrid(a, session_id=s, query="quokka", before=10**9, limit=5)
        assert _units(alone.lexical) == [[session[3]]], "without spread, only the match comes back"
        score = alone.lexical[0].score
        found = await searcher.search_hybrid(a, session_id=s, query="quokka", before=10**9, limit=5, spread=0.5)
        check_matches(session, found.lexical, before=10**9, limit=5)
        got = {m.messages[0].text: m.score for m in found.lexical}
        assert set(got) == {session[1].text, session[3].text, session[5].text}, "not the match and its neighbours"
        assert got[session[3].text] == pytest.approx(score)
        assert got[session[1].text] == pytest.approx(score * 0.5), "the neighbour before must score spread times it"
        assert got[session[5].text] == pytest.approx(score * 0.5), "the neighbour after must score spread times it"
        assert found.lexical[0].messages[0].text == session[3].text, "the match must come first"
        before = _offsets(session)[5]  # the neighbour after lies past the offset searched before
        cut = await searcher.search_hybrid(a, session_id=s, query="quokka", before=before, limit=5, spread=0.5)
        assert {m.messages[0].text for m in cut.lexical} == {session[1].text, session[3].text}
        one = await searcher.search_hybrid(a, session_id=s, query="quokka", before=10**9, limit=1, spread=1.0)
        check_matches(session, one.lexical, before=10**9, limit=1)

    async def test_meaning_finds_the_closest_units(self, backend: HistoryProvider, searcher: HybridSearcher) -> None:
        """With an embedder, the units whose messages lie closest to the query's embedding come back by meaning
        (a tool result's with its call), best first, before ``before``, at most ``limit``, and never a system
        message; a unit no closer than at a right angle is no match.

        Fix: embed each message's ``message_text`` of ``ravi.kernel.search`` once per ``model`` and keep it with the
        session; embed the query, score the newest ``MEANING_LOOKBACK`` messages before ``before`` by cosine similarity,
        and turn the scores into units with ``match_units``, which drops system messages and scores of 0 or less.
        """
        a, s = unique("agent"), unique("session")
        session = _animals()
        await backend.append_many(a, session, session_id=s)
        embedder = TopicEmbedder()
        search = searcher.search_hybrid
        found = await search(a, session_id=s, query="narwhal", before=10**9, limit=5, embedder=embedder, model="m")
        check_matches(session, found.meaning, before=10**9, limit=5)
        assert _units(found.meaning) == [session[4:6]], "not the tool result about narwhals with its call alone"
        assert found.lexical == (await search(a, session_id=s, query="narwhal", before=10**9, limit=5)).lexical
        found = await search(a, session_id=s, query="walrus", before=10**9, limit=5, embedder=embedder, model="m")
        check_matches(session, found.meaning, before=10**9, limit=5)
        assert sorted(m.messages[0].text for m in found.meaning) == sorted([session[2].text, session[6].text])
        found = await search(a, session_id=s, query="seal", before=10**9, limit=1, embedder=embedder, model="m")
        check_matches(session, found.meaning, before=10**9, limit=1)
        assert _units(found.meaning) in ([[session[3]]], [[session[6]]]), "not one of the closest"
        before = _offsets(session)[6]  # the last message about walruses lies past it
        found = await search(a, session_id=s, query="walrus", before=before, limit=5, embedder=embedder, model="m")
        check_matches(session, found.meaning, before=before, limit=5)
        assert _units(found.meaning) == [[session[2]]]

    async def test_equal_meanings_come_newest_first_and_a_limit_keeps_the_newest(
        self, backend: HistoryProvider, searcher: HybridSearcher
    ) -> None:
        """Units of one embedding (exactly equal scores) come newest first, as ``match_units`` orders equal units,
        and a ``limit`` that cuts through them keeps the newest, so one search gives the same units on every store.
        Only exact ties are held to it: stores measure in float32 or float64 and may order near-equal scores apart.

        Fix: order the closest messages by distance, then newest first, before the limit is applied (Postgres
        ordered by distance alone, and its ``LIMIT`` kept any of the tied rows)."""
        a, s = unique("agent"), unique("session")
        session = [
            ChatMessage.user(f"a seal, number {i}") if i % 2 == 0 else ChatMessage.assistant(f"noted {i}")
            for i in range(40)
        ]
        await backend.append_many(a, session, session_id=s)
        newest_first = [[m] for m in reversed(session) if "seal" in (m.text or "")]
        embedder = TopicEmbedder()
        for limit in (1, 3, 7, 19):
            found = await searcher.search_hybrid(
                a, session_id=s, query="seal", before=10**9, limit=limit, embedder=embedder, model="m"
            )
            check_matches(session, found.meaning, before=10**9, limit=limit)
            assert _units(found.meaning) == newest_first[:limit], f"limit {limit}: not the newest of the equal units"

    async def test_each_message_is_embedded_once_per_model(
        self, backend: HistoryProvider, searcher: HybridSearcher
    ) -> None:
        """A store keeps the embedding of each message under ``model``: later searches embed only what was
        appended since, and a search under another model embeds every message again, once; back under the first
        model, nothing is embedded again.

        Troubleshooting: key the kept embeddings by the session's full scope and the model, and remember how far
        the session was embedded."""
        a, s = unique("agent"), unique("session")
        session = _animals()
        await backend.append_many(a, session, session_id=s)
        embedder = TopicEmbedder()
        texts = [m.text for m in session if m.role != "system" and m.text]
        for query in ("walrus", "seal"):
            await searcher.search_hybrid(
                a, session_id=s, query=query, before=10**9, limit=3, embedder=embedder, model="m"
            )
        late = ChatMessage.user("one more seal question")
        await backend.append(a, late, session_id=s)
        found = await searcher.search_hybrid(
            a, session_id=s, query="seal", before=10**9, limit=5, embedder=embedder, model="m"
        )
        assert [late] in _units(found.meaning), "a message appended since the last search was not found by meaning"
        for text in [*texts, late.text]:
            assert embedder.times(text) == 1, f"{text!r} was embedded {embedder.times(text)} times under one model"
        await searcher.search_hybrid(
            a, session_id=s, query="walrus", before=10**9, limit=3, embedder=embedder, model="n"
        )
        for text in [*texts, late.text]:
            assert embedder.times(text) == 2, f"{text!r} was not embedded once more under another model"
        await searcher.search_hybrid(a, session_id=s, query="seal", before=10**9, limit=3, embedder=embedder, model="m")
        for text in [*texts, late.text]:
            assert embedder.times(text) == 2, f"{text!r} was embedded again under a model it was embedded under"

    async def test_sessions_and_agents_are_isolated(self, backend: HistoryProvider, searcher: HybridSearcher) -> None:
        """A search sees its own session only, by words and by meaning, even with equal message ids elsewhere.

        Fix: key kept embeddings and index entries by agent, session and position (and model), never by message id
        alone, which another session may hold.
        """
        a, b, s, t = unique("agent"), unique("agent"), unique("session"), unique("session")
        mine = ChatMessage.user("walrus in a", id="1")
        await backend.append_many(a, [mine], session_id=s)
        await backend.append_many(a, [ChatMessage.user("walrus in a/t", id="1")], session_id=t)
        await backend.append_many(b, [ChatMessage.user("walrus in b", id="1")], session_id=s)
        embedder = TopicEmbedder()
        for agent, session in ((b, s), (a, t)):  # the others' embeddings are made first
            await searcher.search_hybrid(
                agent, session_id=session, query="walrus", before=10**9, limit=5, embedder=embedder, model="m"
            )
        found = await searcher.search_hybrid(
            a, session_id=s, query="walrus", before=10**9, limit=5, embedder=embedder, model="m"
        )
        assert _units(found.lexical) == [[mine]], "another session's message came back by words"
        assert _units(found.meaning) == [[mine]], "another session's message came back by meaning"
        none = await searcher.search_hybrid(
            a, session_id=unique("s"), query="walrus", before=10**9, limit=5, embedder=embedder, model="m"
        )
        assert (none.lexical, none.meaning) == ([], [])

    async def test_nothing_removed_comes_back_by_words_or_meaning(
        self, backend: HistoryProvider, searcher: HybridSearcher, peer: HistoryProvider
    ) -> None:
        """After ``clear_run`` and ``clear``, nothing of the removed messages is found by words or by meaning,
        through this provider or a second one on the same store, even when a new conversation reuses their ids
        and positions: the embeddings die with the messages they came from.

        Troubleshooting: keep each embedding with the message id and the session's generation (or epoch) it was
        made in, and drop or ignore those of another."""
        other = peer if isinstance(peer, HybridSearcher) else searcher
        a, s = unique("agent"), unique("session")
        embedder = TopicEmbedder()
        old = [ChatMessage.user(f"walrus fact {k}", id=str(k)) for k in range(4)]
        await backend.append_many(a, old[:2], session_id=s, run_id="r1")
        await backend.append_many(a, old[2:], session_id=s, run_id="r2")
        for search in (searcher, other):
            found = await search.search_hybrid(
                a, session_id=s, query="walrus", before=10**9, limit=5, embedder=embedder, model="m"
            )
            assert len(found.lexical) == 4 and len(found.meaning) == 4
        await backend.clear_run(a, session_id=s, run_id="r1")
        for search in (searcher, other):
            found = await search.search_hybrid(
                a, session_id=s, query="walrus", before=10**9, limit=5, embedder=embedder, model="m"
            )
            assert sorted(_units(found.meaning), key=str) == sorted([[m] for m in old[2:]], key=str)
            assert sorted(_units(found.lexical), key=str) == sorted([[m] for m in old[2:]], key=str)
        await backend.clear(a, session_id=s)
        new = [ChatMessage.user(f"narwhal fact {k}", id=str(k)) for k in range(4)]
        await backend.append_many(a, new, session_id=s)
        for search in (searcher, other):
            found = await search.search_hybrid(
                a, session_id=s, query="walrus", before=10**9, limit=5, embedder=embedder, model="m"
            )
            assert found.lexical == [], "a cleared message was found by words"
            assert found.meaning == [], "a cleared message's embedding was found by meaning"
            found = await search.search_hybrid(
                a, session_id=s, query="narwhal", before=10**9, limit=5, embedder=embedder, model="m"
            )
            assert sorted(_units(found.meaning), key=str) == sorted([[m] for m in new], key=str)

    async def test_an_offset_or_limit_past_a_servers_integers_finds_everything(
        self, backend: HistoryProvider, searcher: HybridSearcher
    ) -> None:
        """``before`` and ``limit`` larger than a 64-bit integer search the whole session, by words and by
        meaning.

        Fix: take ``before`` and ``limit`` from ``check_search`` of ``ravi.kernel.storage.history`` (capped at
        ``MAX_COUNT``), and cap any number a statement computes from them below what its integer holds.
        """
        a, s = unique("agent"), unique("session")
        await backend.append_many(a, [ChatMessage.user(f"walrus note {i}") for i in range(3)], session_id=s)
        embedder = TopicEmbedder()
        for huge in (2**30 + 1, 2**63, 2**64 + 7):
            found = await searcher.search_hybrid(
                a, session_id=s, query="walrus", before=huge, limit=huge, spread=0.5, embedder=embedder, model="m"
            )
            assert len(found.lexical) == 3 and len(found.meaning) == 3

    async def test_bad_arguments_are_refused(self, searcher: HybridSearcher) -> None:
        """What ``search_units`` refuses, a spread outside [0, 1] (NaN, negative, above 1, a bool), an embedder
        that is not an ``EmbeddingClient`` instance, and a missing or too long model name: ``InvalidArgument``.

        Troubleshooting: call ``ravi.kernel.storage.history.check_search`` and ``check_hybrid`` first."""
        bad: list[dict[str, Any]] = [
            {"query": 3},
            {"before": -1},
            {"limit": -1},
            {"limit": True},
            {"spread": float("nan")},
            {"spread": -0.1},
            {"spread": 1.5},
            {"spread": True},
            {"embedder": "an embedder"},
            {"embedder": TopicEmbedder},
            {"embedder": TopicEmbedder(), "model": ""},
            {"embedder": TopicEmbedder(), "model": "m" * 1_000},
        ]
        for change in bad:
            kwargs: dict[str, Any] = {"query": "x", "before": 0, "limit": 1, **change}
            with pytest.raises(InvalidArgument):
                await searcher.search_hybrid("agent", session_id="s", **kwargs)
        with pytest.raises(InvalidArgument):
            await searcher.search_hybrid("", session_id="s", query="x", before=0, limit=1)
