"""``LongTermMemoryContract``: what every long-term memory must do."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from hypothesis import given, settings

from ravi.conformance._base import (
    EXACT_NUMBERS,
    PROPERTY_CHECKS,
    ContractBase,
    assert_protocol,
    at_limit,
    call_or_skip_unsupported,
    eventually,
    id_texts,
    refuses,
    refuses_long_ids,
    skip_without,
    typed,
    unique,
)
from ravi.kernel.errors import InvalidArgument
from ravi.kernel.storage import Forgetter, LongTermMemory

FACTS = [
    "The customer's invoice number is INV-2291 and it was paid in March.",
    "Deploys to production happen on Tuesdays after the release review.",
    "The staging database lives on host db-staging-3 in eu-west.",
    "Alice prefers answers in bullet points, short and direct.",
]


class LongTermMemoryContract(ContractBase):
    """Subclass and override the ``backend`` fixture to yield an empty ``LongTermMemory``."""

    contract_name = "LongTermMemory"
    pytestmark = pytest.mark.asyncio

    @pytest.fixture
    def backend(self) -> LongTermMemory:
        """Override: an empty backend, fresh for each test."""
        raise NotImplementedError("override the 'backend' fixture to build an empty backend")

    async def test_is_a_long_term_memory(self, backend: LongTermMemory) -> None:
        """The backend satisfies the ``LongTermMemory`` Protocol: it has every method of it, each ``async def``.

        Fix: give the class each method the message names, as ``async def`` with the Protocol's signature
        (``ravi.kernel.storage.LongTermMemory``).
        """
        assert_protocol(backend, LongTermMemory)

    async def test_canary_fixture_gives_an_empty_backend_first(self, backend: LongTermMemory) -> None:
        """The fixture gives every test an empty backend (the first of two tests that each leave data behind).

        Fix: the store held data before the test ran: give each test an empty store of its own in the ``backend``
        fixture (an in-memory or temporary store), or isolate a persistent one with ``--isolate KIND=OPTION``
        (``--ravi-isolate``) and an ``async def destroy(self)`` that removes what the option names.
        """
        assert await backend.search("canary", "anything", limit=10) == []
        await backend.save("canary", "left behind")

    async def test_canary_fixture_gives_an_empty_backend_second(self, backend: LongTermMemory) -> None:
        """The fixture gives every test an empty backend (the second of two tests that each leave data behind).

        Fix: give each test a store of its own: build it in the ``backend`` fixture (an in-memory or temporary
        store), or isolate a persistent one with ``--isolate KIND=OPTION`` (``--ravi-isolate``) and an
        ``async def destroy(self)`` that removes what the option names.
        """
        assert await backend.search("canary", "anything", limit=10) == [], (
            "state leaked between tests: search('canary', ...) found the first canary's memory"
        )
        await backend.save("canary", "left behind")

    async def test_save_then_get(self, backend: LongTermMemory) -> None:
        """A saved memory reads back with its content and metadata.

        Fix: keep the memory's id, agent, namespace, content and metadata (``check_memory`` of ``ravi.kernel.values``
        returns the metadata as JSON) and build a ``Memory`` of them on ``get``.
        """
        a = unique("agent")
        memory_id = await backend.save(a, "remember this 漢字", namespace="notes", metadata={"source": "chat"})
        got = await backend.get(a, memory_id, namespace="notes")
        assert got is not None
        assert (got.id, got.content, got.namespace, got.agent_id) == (memory_id, "remember this 漢字", "notes", a)
        assert got.metadata == {"source": "chat"}

    async def test_takes_004s_arguments_in_004s_order(self, backend: LongTermMemory) -> None:
        """004 lists ``save(agent_id, content, namespace, ttl)``, ``search(agent_id, query, namespace, limit)``,
        ``get``/``delete(agent_id, memory_id, namespace)`` and ``clear(agent_id, namespace)``: each takes its
        arguments in that order, by position as by name.

        Fix: declare the parameters in the Protocol's order, as ordinary parameters: ``save(self, agent_id, content,
        namespace="default", ttl=None, *, metadata=None)``, ``search(self, agent_id, query, namespace="default",
        limit=5)``, ``get``/``delete(self, agent_id, memory_id, namespace="default")``, ``clear(self, agent_id,
        namespace=None)``.
        """
        a = unique("agent")
        memory_id = await backend.save(a, "the deploy runs on Tuesdays", "notes", None)
        await backend.save(a, "another namespace's deploy note", "other")
        [found] = await backend.search(a, "deploy Tuesdays", "notes", 5)
        assert (found.id, found.namespace) == (memory_id, "notes")
        got = await backend.get(a, memory_id, "notes")
        assert got is not None and got.content == "the deploy runs on Tuesdays"
        assert await backend.get(a, memory_id, "other") is None
        assert await backend.delete(a, memory_id, "notes") is True
        assert await backend.clear(a, "other") == 1
        assert await backend.search(a, "deploy", "other", 5) == []

    async def test_ids_are_unique(self, backend: LongTermMemory) -> None:
        """Every saved memory gets its own id.

        Fix: give every save a fresh id (``uuid.uuid4().hex``), never one derived from the content or a counter that
        restarts.
        """
        a = unique("agent")
        ids = [await backend.save(a, "same text") for _ in range(5)]
        assert len(set(ids)) == 5

    async def test_search_ranks_the_most_relevant_first(self, backend: LongTermMemory) -> None:
        """``search`` ranks the most relevant memory first.

        Fix: embed the query with the store's ``embedding_client``, score each live memory of the namespace by cosine
        similarity, return the best first with ``score`` set (``memory.model_copy(update={"score": ...})``).
        """
        a = unique("agent")
        ids = [await backend.save(a, fact) for fact in FACTS]
        hits = await backend.search(a, "which host is the staging database on?", limit=4)
        assert hits[0].id == ids[2]
        scores = [h.score for h in hits if h.score is not None]
        assert len(scores) == len(hits), "search results must carry their score"
        assert scores == sorted(scores, reverse=True), "scores must decrease: higher is closer"

    async def test_an_exact_match_scores_higher_than_an_unrelated_memory(self, backend: LongTermMemory) -> None:
        """An exact match scores higher than an unrelated memory.

        Fix: score by cosine similarity of the query's and the memory's embeddings (1 - pgvector's cosine distance),
        higher for closer, and put the score on each result.
        """
        a = unique("agent")
        await backend.save(a, FACTS[0])
        await backend.save(a, FACTS[1])
        hits = await backend.search(a, FACTS[1], limit=2)
        assert hits[0].content == FACTS[1]
        assert hits[0].score is not None and hits[1].score is not None and hits[0].score > hits[1].score

    async def test_scores_are_cosine_similarities_and_ties_come_in_id_order(self, backend: LongTermMemory) -> None:
        """A memory's ``score`` is a cosine similarity, in [-1, 1], as a vector store's is: an exact match scores 1
        at most (the in-memory store gave 1.0000001192092896, its float32 arithmetic's rounding, and a memory saved
        twice could score on either side of another). Memories of one content score the same and come in id order,
        and a ``limit`` that cuts through them keeps those of the first ids.

        Fix: clamp each score to [-1, 1], as the vector stores do."""
        a = unique("agent")
        twins = sorted([await backend.save(a, FACTS[3]) for _ in range(4)])
        for fact in FACTS[:3]:
            await backend.save(a, fact)
        for query in (*FACTS, "something else entirely"):  # each fact's exact match included
            hits = await backend.search(a, query, limit=10)
            assert all(h.score is not None and -1.0 <= h.score <= 1.0 for h in hits), [h.score for h in hits]
        hits = await backend.search(a, FACTS[3], limit=4)
        assert [h.id for h in hits] == twins
        assert len({h.score for h in hits}) == 1
        for limit in (1, 2, 3):  # a limit that cuts through the ties keeps the first ids
            assert [h.id for h in await backend.search(a, FACTS[3], limit=limit)] == twins[:limit]

    async def test_limit_is_respected(self, backend: LongTermMemory) -> None:
        """``search`` returns at most ``limit`` memories.

        Fix: pass ``limit`` through ``check_count`` of ``ravi.kernel.values`` (capped at ``MAX_COUNT``), return ``[]``
        for 0 without embedding the query, and give the driver the capped number.
        """
        a = unique("agent")
        for fact in FACTS:
            await backend.save(a, fact)
        assert len(await backend.search(a, "database", limit=2)) == 2
        assert await backend.search(a, "database", limit=0) == []
        for huge in (2**63, 2**64 + 7):  # past a server's integers: every memory, as in memory (Postgres refused)
            assert len(await backend.search(a, "database", limit=huge)) == len(FACTS)

    async def test_namespaces_are_isolated(self, backend: LongTermMemory) -> None:
        """Memories in one namespace are never found in another.

        Fix: key every memory by agent and namespace (columns, or a Redis set per (agent, namespace)), in ``search``,
        ``get``, ``delete`` and ``clear``.
        """
        a = unique("agent")
        memory_id = await backend.save(a, "in work", namespace="work")
        await backend.save(a, "in home", namespace="home")
        assert [m.content for m in await backend.search(a, "in", namespace="work", limit=5)] == ["in work"]
        assert await backend.get(a, memory_id, namespace="home") is None

    async def test_agents_are_isolated(self, backend: LongTermMemory) -> None:
        """Two agents never see each other's messages, even in a session of the same id.

        Fix: key every memory by agent and namespace, and look one up by ``get`` with the agent's id in the condition,
        never by memory id alone.
        """
        a, b = unique("agent"), unique("agent")
        memory_id = await backend.save(a, "private to a")
        assert await backend.search(b, "private", limit=5) == []
        assert await backend.get(b, memory_id) is None

    async def test_delete_is_idempotent(self, backend: LongTermMemory) -> None:
        """Deleting a memory removes it; deleting a missing id is not an error.

        Fix: return whether a live memory was removed (``DELETE ... RETURNING``), and ``False`` for one already gone,
        without raising.
        """
        a = unique("agent")
        memory_id = await backend.save(a, "short-lived")
        assert await backend.delete(a, memory_id) is True
        assert await backend.delete(a, memory_id) is False
        assert await backend.get(a, memory_id) is None

    async def test_clear_one_namespace_or_all(self, backend: LongTermMemory) -> None:
        """``clear`` empties one namespace, or all of an agent's.

        Fix: remove the agent's memories of that namespace, or of every namespace of the agent when ``namespace`` is
        ``None``, and return how many live ones were removed.
        """
        a, b = unique("agent"), unique("agent")
        for ns in ("x", "x", "y"):
            await backend.save(a, f"fact in {ns}", namespace=ns)
        await backend.save(b, "other agent", namespace="x")
        assert await backend.clear(a, namespace="x") == 2
        assert len(await backend.search(a, "fact", namespace="y", limit=5)) == 1
        assert await backend.clear(a) == 1
        assert len(await backend.search(b, "other", namespace="x", limit=5)) == 1

    async def test_a_memory_saved_during_a_clear_goes_with_it_or_stays_whole(self, backend: LongTermMemory) -> None:
        """Memories saved while the agent's memories are being cleared either go with the clear or stay whole:
        ``get`` and ``search`` both find them, and the next ``clear`` removes them. (Redis left some that ``get``
        found and no later ``clear`` or ``forget`` could reach.)

        Fix: write a memory and the index ``search`` and ``clear`` read in one step (one statement, ``MULTI`` or
        script), and remove them together (Redis: a script that deletes each listed memory key with its index entry, and
        a namespace index only once it is empty), so no memory is left that ``get`` finds and the index lacks.
        """
        for _ in range(8):
            a = unique("agent")
            await backend.save(a, "already there", namespace="ns")
            *results, _ = await asyncio.gather(
                *(backend.save(a, f"fact {i}", namespace="ns") for i in range(5)),
                *(backend.save(a, f"fact {i}", namespace=f"ns{i}") for i in range(3)),
                backend.clear(a),
            )
            ids = [str(memory_id) for memory_id in results]
            spaces = ["ns"] * 5 + [f"ns{i}" for i in range(3)]
            for memory_id, ns in zip(ids, spaces, strict=True):
                if await backend.get(a, memory_id, namespace=ns) is not None:
                    found = await backend.search(a, "fact", namespace=ns, limit=100)
                    assert memory_id in [m.id for m in found], "a memory get finds is missing from search"
            await backend.clear(a)
            left = [i for i, ns in zip(ids, spaces, strict=True) if await backend.get(a, i, namespace=ns) is not None]
            assert left == [], f"{len(left)} memories saved during a clear outlived the next clear"

    async def test_search_of_an_empty_namespace_is_empty(self, backend: LongTermMemory) -> None:
        """Searching an empty namespace returns nothing.

        Fix: return ``[]`` for a namespace without live memories, without raising for a missing table, key or dimension.
        """
        assert await backend.search(unique("agent"), "anything", namespace=unique("ns"), limit=3) == []

    async def test_expired_memories_are_never_returned(self, backend: LongTermMemory) -> None:
        """A memory past its TTL is never returned by ``get`` or ``search``.

        Fix: keep ``expires_at`` (the ``ttl`` that ``check_memory`` of ``ravi.kernel.values`` returns in seconds) and
        filter on it in ``get`` and ``search`` (``expires_at IS NULL OR expires_at > now()``), or let the server expire
        the key (``PEXPIRE``) and drop ids whose key is gone.
        """
        skip_without(self.capabilities, "ttl", reason="memories saved with a ttl")
        a = unique("agent")
        keep = await backend.save(a, "durable fact about deployment")
        gone = await call_or_skip_unsupported(backend.save(a, "fleeting fact about deployment", ttl=0.3), "ttl")
        assert await backend.get(a, gone) is not None

        async def expired() -> bool:
            return await backend.get(a, gone) is None

        await eventually(expired, within=0.3 + self.capabilities.ttl_resolution + 5, what="ttl expiry")
        assert [m.id for m in await backend.search(a, "fact about deployment", limit=5)] == [keep]

    async def test_bad_input_raises_typed_errors(self, backend: LongTermMemory) -> None:
        """Bad input raises a typed error (a limit that is a bool or a float included).

        Fix: call ``check_memory`` of ``ravi.kernel.values`` in ``save``, and ``check_scope`` and ``check_count`` in
        ``search``, before the store sees the call.
        """
        a = unique("agent")
        kept = await backend.save(a, "kept")
        with pytest.raises(InvalidArgument):
            await backend.save(a, "negative ttl", ttl=-1)
        with pytest.raises(InvalidArgument):
            await backend.save("", "no agent")
        for bad in (-1, True, 2.0):  # a bool is not a count of 1, as everywhere a count is given
            with pytest.raises(InvalidArgument):
                await backend.search(a, "q", limit=bad)  # type: ignore[arg-type]
        assert await backend.get(a, kept) is not None

    async def test_a_namespace_that_is_not_text_is_refused(self, backend: LongTermMemory) -> None:
        """A namespace that is not a string raises ``InvalidArgument`` on every call, and removes nothing.

        Fix: check ``namespace`` with ``check_scope`` of ``ravi.kernel.values`` in every call (``clear`` included, when
        it is not ``None``) before anything is read or removed.
        """
        a = unique("agent")
        kept = await backend.save(a, "kept")
        for bad in (5, b"ns", ""):
            with pytest.raises(InvalidArgument):
                await backend.clear(a, namespace=bad)  # type: ignore[arg-type]
            with pytest.raises(InvalidArgument):
                await backend.search(a, "q", namespace=bad)  # type: ignore[arg-type]
            with pytest.raises(InvalidArgument):
                await backend.save(a, "x", namespace=bad)  # type: ignore[arg-type]
        assert await backend.get(a, kept) is not None

    async def test_values_no_store_can_keep_are_refused_and_nothing_is_stored(self, backend: LongTermMemory) -> None:
        """TTLs no server can hold (infinite, 1e17 s), NaN or an integer of 5,000 digits in metadata and lone
        surrogates are refused with InvalidArgument before anything is written.

        Fix: call ``check_memory`` of ``ravi.kernel.values`` first: it refuses a ttl no server holds (``ttl_seconds``),
        metadata that is not JSON every store keeps (``json_copy``) and content with a lone surrogate, before anything
        is written.
        """
        a = unique("agent")
        bad_calls: dict[str, Callable[[], Awaitable[Any]]] = {
            "save(ttl=inf)": lambda: backend.save(a, "forever", ttl=float("inf")),
            "save(ttl=1e17)": lambda: backend.save(a, "too long", ttl=1e17),
            "save(metadata={'n': nan})": lambda: backend.save(a, "nan", metadata={"n": float("nan")}),
            "save(metadata={'n': 10**5000})": lambda: backend.save(a, "huge", metadata={"n": 10**5000}),
            "save(content with a lone surrogate)": lambda: backend.save(a, "lone \ud800 surrogate"),
            "save(metadata key with a lone surrogate)": lambda: backend.save(a, "bad key", metadata={"k\udfff": 1}),
        }
        await refuses(InvalidArgument, bad_calls)
        assert await backend.search(a, "forever too long nan lone bad key", limit=10) == []

    async def test_ids_that_are_not_text_are_refused(self, backend: LongTermMemory) -> None:
        """A memory id with a lone surrogate or a NUL (which PostgreSQL keeps in no text), or not a string, is
        InvalidArgument on every call, reads included, not a crash; so is an agent or namespace with a NUL, and
        nothing is saved.

        Fix: check ids with ``check_scope`` of ``ravi.kernel.values``."""
        a = unique("agent")
        with pytest.raises(InvalidArgument):
            await backend.save("a\x00", "x")
        with pytest.raises(InvalidArgument):
            await backend.save(a, "x", namespace="n\x00")
        assert await backend.search(a, "x") == []
        for bad in ("m\ud800", "m\x00", 42):
            with pytest.raises(InvalidArgument):
                await backend.get(a, bad)  # type: ignore[arg-type]
            with pytest.raises(InvalidArgument):
                await backend.delete(a, bad)  # type: ignore[arg-type]
        with pytest.raises(InvalidArgument):
            await backend.search(a, "q", namespace="n\udfff")

    async def test_metadata_numbers_keep_their_type_and_value(self, backend: LongTermMemory) -> None:
        """Every number in a memory's metadata comes back with its type and value (``1e16`` stays a float).

        Fix: keep metadata as JSON text, or in ``jsonb`` with floats written in positional notation with a decimal
        point, since jsonb prints a float of 1e16 or more as an integer.
        """
        a = unique("agent")
        memory_id = await backend.save(a, "numbers", metadata=EXACT_NUMBERS)
        got = await backend.get(a, memory_id)
        assert got is not None and typed(got.metadata) == typed(EXACT_NUMBERS)

    async def test_unicode_and_long_content(self, backend: LongTermMemory) -> None:
        """Unicode and long content round-trip exactly.

        Fix: keep content in a column or value without a size limit, as UTF-8, passed as a bound parameter, and the
        namespace as given.
        """
        a = unique("agent")
        text = "Grüße aus 東京 🚀 " * 2_000
        memory_id = await backend.save(a, text, namespace="ünï")
        got = await backend.get(a, memory_id, namespace="ünï")
        assert got is not None and got.content == text

    async def test_forget_erases_the_agent_or_its_session_only(self, backend: LongTermMemory) -> None:
        """``forget`` (``Forgetter``, optional) of a session erases the agent's memories whose metadata has that
        ``session_id``, in every namespace; of an agent, every memory of it; never another agent's, nor another
        session's; and a second call removes nothing.

        Fix: call ``check_forget`` of ``ravi.kernel.storage`` first; for an agent, remove every memory of it in every
        namespace; for a session, those whose metadata's ``session_id`` equals it (``metadata @> '{"session_id": ...}'``
        on Postgres); return how many.
        """
        if not isinstance(backend, Forgetter):
            pytest.skip(f"backend lacks forget: {type(backend).__name__} is not a Forgetter")
        a, b = unique("agent"), unique("agent")
        ids: dict[tuple[str, str, str | None], str] = {}
        for agent in (a, b):
            for ns in ("default", "other"):
                for session in ("s1", "s2"):
                    ids[agent, ns, session] = await backend.save(
                        agent, f"fact of {session}", namespace=ns, metadata={"session_id": session}
                    )
            ids[agent, "default", None] = await backend.save(agent, "a fact of no session")
        assert await backend.forget(a, session_id="s1") == 2
        assert await backend.forget(a, session_id="s1") == 0
        for (agent, ns, tag), memory_id in ids.items():
            kept = await backend.get(agent, memory_id, namespace=ns)
            assert (kept is None) == (agent == a and tag == "s1"), f"{agent} {ns} {tag}"
        assert await backend.forget(a) == 3
        for (agent, ns, _), memory_id in ids.items():
            assert (await backend.get(agent, memory_id, namespace=ns) is None) == (agent == a)
        assert await backend.search(a, "fact", limit=10) == []
        await refuses(InvalidArgument, {"forget('')": lambda: backend.forget("")})

    async def test_ids_past_the_limit_are_refused_and_nothing_is_lost(self, backend: LongTermMemory) -> None:
        """An agent id, namespace or memory id of more than ``MAX_ID_BYTES`` UTF-8 bytes is refused by every call
        with ``InvalidArgument`` naming it and the limit, on every backend (PostgreSQL indexes no longer keys);
        what was stored stays.

        Fix: check ids with ``check_scope`` (``check_memory`` for ``save``) of ``ravi.kernel.values``.
        """
        a = unique("agent")
        kept = await backend.save(a, "kept fact")

        def calls(long: str) -> dict[str, tuple[str, Callable[[], Awaitable[Any]]]]:
            out: dict[str, tuple[str, Callable[[], Awaitable[Any]]]] = {
                "save(agent_id)": ("agent_id", lambda: backend.save(long, "fact")),
                "save(namespace)": ("namespace", lambda: backend.save(a, "fact", namespace=long)),
                "search(agent_id)": ("agent_id", lambda: backend.search(long, "fact")),
                "search(namespace)": ("namespace", lambda: backend.search(a, "fact", namespace=long)),
                "get(memory_id)": ("memory_id", lambda: backend.get(a, long)),
                "delete(memory_id)": ("memory_id", lambda: backend.delete(a, long)),
                "clear(agent_id)": ("agent_id", lambda: backend.clear(long)),
                "clear(namespace)": ("namespace", lambda: backend.clear(a, namespace=long)),
            }
            if isinstance(backend, Forgetter):
                out["forget(agent_id)"] = ("agent_id", lambda: backend.forget(long))
            return out

        await refuses_long_ids(calls)
        memory = await backend.get(a, kept)
        assert memory is not None and memory.content == "kept fact"

    @settings(max_examples=10, deadline=None, suppress_health_check=PROPERTY_CHECKS)
    @given(text=id_texts())
    async def test_ids_at_the_limit_are_stored_and_read_back(self, backend: LongTermMemory, text: str) -> None:
        """An agent id and a namespace of exactly ``MAX_ID_BYTES`` UTF-8 bytes, of any text, keep their memories on
        every backend.

        Fix: keep agent ids and namespaces whole, as given: keys or columns that hold ``MAX_ID_BYTES`` bytes of UTF-8
        (``check_scope`` refuses longer ones), no truncation.
        """
        tag = unique("")
        a, ns = at_limit(text, f"{tag}a"), at_limit(text, f"{tag}n")
        memory_id = await backend.save(a, "a fact at the limit", namespace=ns)
        got = await backend.get(a, memory_id, namespace=ns)
        assert got is not None and (got.agent_id, got.namespace, got.content) == (a, ns, "a fact at the limit")
        assert [m.id for m in await backend.search(a, "fact", namespace=ns)] == [memory_id]
        assert await backend.clear(a, namespace=ns) == 1
