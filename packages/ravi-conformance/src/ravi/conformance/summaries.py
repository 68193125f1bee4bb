"""``SummaryStoreContract``: what every store of derived summaries must do."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
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
    refuses_long_ids,
    unique,
)
from ravi.kernel.errors import InvalidArgument
from ravi.kernel.messages import ChatMessage
from ravi.kernel.scope import Scope
from ravi.kernel.storage import HistoryProvider, SessionGeneration, SessionReplacer, SummaryStore

_WRITTEN = datetime(2025, 1, 1, tzinfo=UTC)


def keeps_history(backend: object) -> bool:
    """Whether the store keeps the transcript too (a history provider that tracks generations), so it can refuse
    summaries of a generation that is no longer the session's."""
    return isinstance(backend, HistoryProvider) and isinstance(backend, SessionGeneration)


async def scope_of(backend: SummaryStore, agent_id: str, session_id: str) -> Scope:
    """A scope the store accepts summaries for: for a store that keeps history, the session (written once, with a
    fixed message, so a second call finds the same generation); else the session with a made-up generation."""
    if keeps_history(backend):
        history: HistoryProvider = backend  # type: ignore[assignment]
        message = ChatMessage.user("summarised", id="summarised", created_at=_WRITTEN)
        await history.append(agent_id, message, session_id=session_id)
        generation = await backend.generation(agent_id, session_id=session_id)  # type: ignore[attr-defined]
        return Scope(agent_id, session_id, generation)
    return Scope(agent_id, session_id, "generation-1")


class SummaryStoreContract(ContractBase):
    """Subclass and override the ``backend`` fixture to yield an empty ``SummaryStore``.

    A store on its own keeps what it is given under the full scope. A history provider that keeps summaries too
    (it is a ``HistoryProvider`` with ``SessionGeneration``) also passes the rules of a store beside its
    transcript: a summary of a generation that is no longer the session's is refused, and ``clear`` and
    ``clear_run`` remove the session's summaries.
    """

    contract_name = "SummaryStore"
    pytestmark = pytest.mark.asyncio

    @pytest.fixture
    def backend(self) -> SummaryStore:
        """Override: an empty backend, fresh for each test."""
        raise NotImplementedError("override the 'backend' fixture to build an empty backend")

    @pytest.fixture
    def keeper(self, backend: SummaryStore) -> SummaryStore:
        """The backend, when it keeps the transcript as well; else the test skips."""
        if not keeps_history(backend):
            pytest.skip(f"{type(backend).__name__} keeps no history: it cannot know a session's generation")
        return backend

    async def test_is_a_summary_store(self, backend: SummaryStore) -> None:
        """The backend satisfies the ``SummaryStore`` Protocol: it has every method of it, each ``async def``.

        Fix: give the class each method the message names, as ``async def`` with the Protocol's signature
        (``ravi.kernel.storage.SummaryStore``).
        """
        assert_protocol(backend, SummaryStore)

    async def test_canary_fixture_gives_an_empty_backend_first(self, backend: SummaryStore) -> None:
        """The fixture gives every test an empty backend (the first of two tests that each leave data behind).

        Fix: the store held data before the test ran: give each test an empty store of its own in the ``backend``
        fixture (an in-memory or temporary store), or isolate a persistent one with ``--isolate KIND=OPTION``
        (``--ravi-isolate``) and an ``async def destroy(self)`` that removes what the option names.
        """
        scope = await scope_of(backend, "canary", "canary")
        assert await backend.get_summary(scope, "canary") is None
        assert await backend.put_summary(scope, "canary", "left behind")

    async def test_canary_fixture_gives_an_empty_backend_second(self, backend: SummaryStore) -> None:
        """The fixture gives every test an empty backend (the second of two tests that each leave data behind).

        Fix: give each test a store of its own: build it in the ``backend`` fixture (an in-memory or temporary
        store), or isolate a persistent one with ``--isolate KIND=OPTION`` (``--ravi-isolate``) and an
        ``async def destroy(self)`` that removes what the option names.
        """
        scope = await scope_of(backend, "canary", "canary")
        assert await backend.get_summary(scope, "canary") is None, (
            "state leaked between tests: get_summary(canary scope, 'canary') found the first canary's summary"
        )
        assert await backend.put_summary(scope, "canary", "left behind")

    async def test_put_then_get(self, backend: SummaryStore) -> None:
        """A summary reads back as it was put, and ``put_summary`` says the store holds it.

        Fix: key a summary by agent, session, generation and span id, and make ``put_summary`` return ``True`` once the
        store holds one for the span.
        """
        scope, span = await scope_of(backend, unique("agent"), unique("session")), unique("span")
        assert await backend.put_summary(scope, span, "the user wants a refund for INV-2291") is True
        assert await backend.get_summary(scope, span) == "the user wants a refund for INV-2291"

    async def test_missing_span_is_none(self, backend: SummaryStore) -> None:
        """A span with no summary reads as ``None``.

        Fix: return ``None`` from ``get_summary`` when no summary is kept under the scope and span, never an error or an
        empty string.
        """
        scope = await scope_of(backend, unique("agent"), unique("session"))
        assert await backend.get_summary(scope, unique("span")) is None

    async def test_the_first_text_of_a_span_is_kept(self, backend: SummaryStore) -> None:
        """The first summary put for a span is kept; later ones do not replace it (and ``put_summary`` still says
        the span has one).

        Fix: insert only when the span has no summary (``INSERT ... ON CONFLICT DO NOTHING`` on a primary key of agent,
        session, generation and span, ``dict.setdefault`` in memory), and return ``True`` either way.
        """
        scope, span = await scope_of(backend, unique("agent"), unique("session")), unique("span")
        assert await backend.put_summary(scope, span, "first")
        assert await backend.put_summary(scope, span, "second")
        assert await backend.get_summary(scope, span) == "first"

    async def test_spans_are_isolated(self, backend: SummaryStore) -> None:
        """Summaries of different spans never mix.

        Fix: include the span id in the key of every summary, and look it up by equality.
        """
        scope = await scope_of(backend, unique("agent"), unique("session"))
        await backend.put_summary(scope, "span-a", "for a")
        assert await backend.get_summary(scope, "span-b") is None

    async def test_tenants_with_equal_span_ids_never_see_each_other(self, backend: SummaryStore) -> None:
        """Two agents (tenants) whose sessions and spans have equal ids never see each other's summaries, nor do
        two sessions of one agent: span ids are unique per session, not globally.

        Troubleshooting: key summaries by the whole scope (agent, session, generation) and the span, never by the
        span id alone."""
        a, b, s = unique("agent"), unique("agent"), unique("session")
        mine, theirs, other = (
            await scope_of(backend, a, s),
            await scope_of(backend, b, s),
            await scope_of(backend, a, "x"),
        )
        await backend.put_summary(mine, "span-1", "A's account is 12345")
        assert await backend.get_summary(theirs, "span-1") is None, "one tenant read another's summary"
        assert await backend.get_summary(other, "span-1") is None, "one session read another's summary"
        await backend.put_summary(theirs, "span-1", "B's summary")
        assert await backend.get_summary(mine, "span-1") == "A's account is 12345"
        assert await backend.get_summary(theirs, "span-1") == "B's summary"

    async def test_a_summary_of_another_generation_is_never_returned(self, backend: SummaryStore) -> None:
        """A summary is returned only for the generation it was kept under: a reader of the session after a
        ``clear`` (a new generation) never gets the old conversation's summary, even for an equal span id.

        Fix: include the scope's generation in the key, with ``None`` kept apart from every string (the Postgres store
        writes ``"-"`` for none and ``"+"`` before a generation), and read by the whole scope.
        """
        scope = await scope_of(backend, unique("agent"), unique("session"))
        await backend.put_summary(scope, "span-1", "the old conversation")
        for generation in ("another", None, (scope.generation or "") + "x"):
            later = Scope(scope.agent_id, scope.session_id, generation)
            assert await backend.get_summary(later, "span-1") is None, f"generation {generation!r} read another's"

    async def test_hostile_scopes_never_share_a_summary(self, backend: SummaryStore) -> None:
        """Scopes whose ids hold separators, quotes, escapes or look-alike Unicode never share a key: a naive
        join (``agent + "\\x1f" + session``) or an escape that maps two ids to one spelling aliases them.

        Troubleshooting: encode the scope injectively (``Scope.key()``, separate columns, or an escape that
        escapes itself)."""
        scopes = []
        for agent, session in hostile_pairs():
            scope = await scope_of(backend, agent, session)
            assert await backend.put_summary(scope, "span", f"{agent!r}/{session!r}")
            scopes.append(scope)
        for scope in scopes:
            text = await backend.get_summary(scope, "span")
            assert text == f"{scope.agent_id!r}/{scope.session_id!r}", f"{scope} read {text!r}"

    @settings(max_examples=25, deadline=None, suppress_health_check=PROPERTY_CHECKS)
    @given(agent=hostile_ids(), session=hostile_ids(), other_agent=hostile_ids(), other_session=hostile_ids())
    async def test_scope_encoding_is_injective(
        self, backend: SummaryStore, agent: str, session: str, other_agent: str, other_session: str
    ) -> None:
        """For any two different sessions (ids of any text with separators, quotes and Unicode), a summary kept
        for one is never read for the other (a property over generated ids).

        Fix: key summaries by separate columns for agent, session, generation and span, or by an encoding of them that
        no other tuple shares (an escape that also escapes its own escape character).
        """
        if (agent, session) == (other_agent, other_session):
            return
        tag = unique("")
        first = await scope_of(backend, agent + tag, session)
        second = await scope_of(backend, other_agent + tag, other_session)
        await backend.put_summary(first, "span", "first")
        assert await backend.get_summary(second, "span") is None, f"{first} and {second} share a key"

    async def test_clear_summaries_removes_one_session_or_one_agent(self, backend: SummaryStore) -> None:
        """``clear_summaries`` removes every summary of one session (whatever its generation), or of every session
        of the agent, says how many, and leaves every other agent's.

        Fix: call ``check_scope`` of ``ravi.kernel.values`` on the ids, then delete the summaries of that agent (and
        session), of every generation, by equality on the ids, and return how many went.
        """
        a, b = unique("agent"), unique("agent")
        one, two, other = (
            await scope_of(backend, a, "one"),
            await scope_of(backend, a, "two"),
            await scope_of(backend, b, "one"),
        )
        for scope in (one, two, other):
            await backend.put_summary(scope, "span-1", "x")
            await backend.put_summary(scope, "span-2", "y")
        if not keeps_history(backend):  # a store on its own holds whatever generations it was given
            await backend.put_summary(Scope(a, "one", "older"), "span-1", "z")
        removed = await backend.clear_summaries(a, session_id="one")
        assert removed == (2 if keeps_history(backend) else 3)
        assert await backend.get_summary(one, "span-1") is None
        assert await backend.get_summary(two, "span-1") == "x"
        assert await backend.clear_summaries(a) == 2
        assert await backend.get_summary(two, "span-2") is None
        assert await backend.get_summary(other, "span-2") == "y", "another agent's summaries were removed"
        assert await backend.clear_summaries(a) == 0

    async def test_concurrent_writers_of_one_span_agree(self, backend: SummaryStore) -> None:
        """Concurrent writers of one span leave one of their summaries, and every read returns it.

        Fix: make the write one atomic insert-if-absent on the span's key (``ON CONFLICT DO NOTHING``, ``HSETNX`` on
        Redis, ``setdefault`` under a lock), so the first writer's text stays.
        """
        scope, span = await scope_of(backend, unique("agent"), unique("session")), unique("span")
        await asyncio.gather(*(backend.put_summary(scope, span, f"text {i}") for i in range(20)))
        text = await backend.get_summary(scope, span)
        assert text is not None and text.startswith("text ")
        assert all([await backend.get_summary(scope, span) == text for _ in range(3)])

    async def test_unicode_and_long_text_round_trip(self, backend: SummaryStore) -> None:
        """Unicode and long summaries round-trip exactly.

        Fix: pass ids and text as bound parameters and keep the text in a column or value without a size limit, as
        UTF-8.
        """
        scope = await scope_of(backend, unique("agent") + "-ü漢", unique("session") + "'\"")
        span = unique("span") + "-ü漢🚀'\""
        text = "Zusammenfassung: 漢字 🚀 'quotes' \"$$\" \\ \n" * 5_000
        await backend.put_summary(scope, span, text)
        assert await backend.get_summary(scope, span) == text

    async def test_bad_input_is_refused(self, backend: SummaryStore) -> None:
        """Bad input is refused with a typed error.

        Fix: call ``check_summary_scope`` of ``ravi.kernel.storage.summaries``, then ``check_span`` and
        ``check_summary`` of ``ravi.kernel.values`` (and ``check_scope`` in ``clear_summaries``), before the store sees
        the call.
        """
        scope = await scope_of(backend, unique("agent"), unique("session"))
        with pytest.raises(InvalidArgument):
            await backend.put_summary(scope, "", "text")
        with pytest.raises(InvalidArgument):
            await backend.get_summary(scope, "")
        with pytest.raises(InvalidArgument):
            await backend.put_summary(scope, unique("span"), 42)  # type: ignore[arg-type]
        with pytest.raises(InvalidArgument):  # lone surrogates: no store can keep them
            await backend.put_summary(scope, unique("span"), "text \ud800")
        with pytest.raises(InvalidArgument):
            await backend.put_summary(scope, unique("span") + "\udfff", "text")
        with pytest.raises(InvalidArgument):  # a scope is a Scope, never a bare string or tuple
            await backend.get_summary("agent/session", "span")  # type: ignore[arg-type]
        with pytest.raises(InvalidArgument):
            await backend.put_summary(("agent", "session"), "span", "text")  # type: ignore[arg-type]
        with pytest.raises(InvalidArgument):
            await backend.clear_summaries("")

    async def test_a_stale_generation_is_refused(self, keeper: SummaryStore) -> None:
        """A store beside its transcript refuses a summary of a generation that is no longer the session's (the
        summary was written from what a ``clear`` removed): ``put_summary`` returns ``False`` and keeps
        nothing. A made-up generation, or one of a session never written, is refused the same way.

        Troubleshooting: compare the generation in the same statement, script or lock that writes the summary."""
        history: HistoryProvider = keeper  # type: ignore[assignment]
        a, s = unique("agent"), unique("session")
        old = await scope_of(keeper, a, s)
        await history.clear(a, session_id=s)
        assert await keeper.put_summary(old, "span-1", "from the removed conversation") is False
        assert await keeper.get_summary(old, "span-1") is None
        new = await scope_of(keeper, a, s)
        assert new.generation != old.generation, "clear did not give the session a new generation"
        assert await keeper.put_summary(new, "span-1", "from the new conversation") is True
        assert await keeper.put_summary(Scope(a, s, "made-up"), "span-2", "x") is False
        assert await keeper.put_summary(Scope(a, unique("never-written"), "g"), "span-2", "x") is False
        assert await keeper.get_summary(new, "span-1") == "from the new conversation"

    async def test_clear_and_clear_run_remove_the_sessions_summaries(self, keeper: SummaryStore) -> None:
        """``clear`` removes the session's summaries with its messages, and so does a ``clear_run`` that removed
        something; a ``clear_run`` that removed nothing keeps them. Other sessions keep theirs.

        Fix: remove the session's summaries (those kept without a generation too) in the transaction that ``clear``, or
        a ``clear_run`` that removed a message, gives the session a new generation; a ``clear_run`` that removed nothing
        keeps them, and a summary never gives a session a generation.
        """
        history: HistoryProvider = keeper  # type: ignore[assignment]
        a, s, other = unique("agent"), unique("session"), unique("session")
        await history.append(a, ChatMessage.user("run message"), session_id=s, run_id="r1")
        scope, elsewhere = await scope_of(keeper, a, s), await scope_of(keeper, a, other)
        await keeper.put_summary(scope, "span-1", "x")
        await keeper.put_summary(elsewhere, "span-1", "kept")
        assert await history.clear_run(a, session_id=s, run_id="never-ran") == 0
        assert await keeper.get_summary(scope, "span-1") == "x", "a clear_run that removed nothing removed a summary"
        assert await history.clear_run(a, session_id=s, run_id="r1") == 1
        assert await keeper.get_summary(scope, "span-1") is None
        assert await keeper.clear_summaries(a, session_id=s) == 0, "clear_run left the session's summaries behind"
        scope = await scope_of(keeper, a, s)
        await keeper.put_summary(scope, "span-1", "y")
        await keeper.put_summary(Scope(a, s, None), "span-2", "kept without a generation")
        await history.clear(a, session_id=s)
        assert await keeper.clear_summaries(a, session_id=s) == 0, "clear left the session's summaries behind"
        assert await keeper.get_summary(elsewhere, "span-1") == "kept"
        never = unique("never-written")  # a summary kept without a generation, for a session with no messages
        generations: SessionGeneration = keeper  # type: ignore[assignment]
        assert await keeper.put_summary(Scope(a, never, None), "span-1", "z")
        assert await generations.generation(a, session_id=never) == "", "a summary gave the session a generation"
        await history.clear(a, session_id=never)
        assert await generations.generation(a, session_id=never) == "", "clear gave a session never written one"
        assert await keeper.get_summary(Scope(a, never, None), "span-1") is None, "clear left a summary behind"

    async def test_replace_session_removes_the_sessions_summaries(self, keeper: SummaryStore) -> None:
        """``replace_session`` (``SessionReplacer``, optional) removes the session's summaries with its messages,
        those kept without a generation too, and refuses a summary written back under the old generation.

        Fix: remove every summary of the session, with and without a generation, in the transaction of
        ``replace_session``, and refuse a later ``put_summary`` under the old generation (``False``).
        """
        if not isinstance(keeper, SessionReplacer):
            pytest.skip(f"backend lacks replace_session: {type(keeper).__name__} is not a SessionReplacer")
        a, s = unique("agent"), unique("session")
        old = await scope_of(keeper, a, s)
        await keeper.put_summary(old, "span-1", "of the old transcript")
        await keeper.put_summary(Scope(a, s, None), "span-2", "kept without a generation")
        await keeper.replace_session(a, [ChatMessage.user("loaded")], session_id=s)
        assert await keeper.clear_summaries(a, session_id=s) == 0, "replace_session left the session's summaries"
        assert await keeper.put_summary(old, "span-1", "written back") is False
        assert await keeper.get_summary(old, "span-1") is None

    async def test_puts_racing_clear_leave_nothing_of_the_old_generation(self, keeper: SummaryStore) -> None:
        """Summaries put while the session is being cleared are either removed by the clear or refused: after
        both, nothing of the old generation is left in the store.

        Fix: write a summary only while its generation is the session's, checked in the statement that writes it under a
        share lock of the session row (``SELECT ... FOR SHARE``, which a ``clear`` holding ``FOR UPDATE`` makes wait),
        or in the script or lock that ``clear`` takes.
        """
        history: HistoryProvider = keeper  # type: ignore[assignment]
        for _ in range(5):
            a, s = unique("agent"), unique("session")
            old = await scope_of(keeper, a, s)
            puts = [keeper.put_summary(old, f"span-{i}", "old") for i in range(20)]
            await asyncio.gather(*puts[:10], history.clear(a, session_id=s), *puts[10:])
            assert await keeper.clear_summaries(a, session_id=s) == 0, "a put racing clear outlived it"

    async def test_ids_past_the_limit_are_refused_and_nothing_is_lost(self, backend: SummaryStore) -> None:
        """A span id, agent id or session id of more than ``MAX_ID_BYTES`` UTF-8 bytes is refused by every call
        with ``InvalidArgument`` naming it and the limit, on every backend (PostgreSQL indexes no longer keys), and
        a scope holding one is refused when it is built; what was stored stays.

        Fix: check the span with ``check_span`` and ids with ``check_scope`` of ``ravi.kernel.values``, which
        hold ``MAX_ID_BYTES``.
        """
        a, s = unique("agent"), unique("session")
        scope = await scope_of(backend, a, s)
        assert await backend.put_summary(scope, "kept", "kept summary")

        def calls(long: str) -> dict[str, tuple[str, Callable[[], Awaitable[Any]]]]:
            out: dict[str, tuple[str, Callable[[], Awaitable[Any]]]] = {
                "put_summary(span_id)": ("span_id", lambda: backend.put_summary(scope, long, "x")),
                "get_summary(span_id)": ("span_id", lambda: backend.get_summary(scope, long)),
                "clear_summaries(agent_id)": ("agent_id", lambda: backend.clear_summaries(long)),
                "clear_summaries(session_id)": (
                    "session_id",
                    lambda: backend.clear_summaries(a, session_id=long),
                ),
            }

            async def scope_with(agent: str, session: str, generation: str) -> Scope:
                return Scope(agent, session, generation)

            out["Scope(agent_id)"] = ("agent_id", lambda: scope_with(long, s, "g"))
            out["Scope(session_id)"] = ("session_id", lambda: scope_with(a, long, "g"))
            out["Scope(generation)"] = ("generation", lambda: scope_with(a, s, long))
            return out

        await refuses_long_ids(calls)
        assert await backend.get_summary(scope, "kept") == "kept summary"

    @settings(max_examples=10, deadline=None, suppress_health_check=PROPERTY_CHECKS)
    @given(text=id_texts())
    async def test_ids_at_the_limit_are_stored_and_read_back(self, backend: SummaryStore, text: str) -> None:
        """Agent, session, generation and span ids of exactly ``MAX_ID_BYTES`` UTF-8 bytes, of any text, the four at
        once (a store that keeps the history gives the generation itself), are stored and read back by every
        backend.

        Fix: keep agent, session, generation and span ids whole, as given: keys or columns that hold ``MAX_ID_BYTES``
        bytes of UTF-8 each (``check_span`` refuses a longer span id), the four at once, no truncation.
        """
        tag = unique("")
        a, s, generation, span = (at_limit(text, f"{tag}{part}") for part in "asgp")
        scope = await scope_of(backend, a, s) if keeps_history(backend) else Scope(a, s, generation)
        assert await backend.put_summary(scope, span, "at the limit")
        assert await backend.get_summary(scope, span) == "at the limit"
        assert await backend.clear_summaries(a, session_id=s) == 1
        assert await backend.get_summary(scope, span) is None
