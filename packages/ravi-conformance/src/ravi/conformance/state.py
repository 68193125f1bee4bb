"""``ShortTermMemoryContract``: what every session-state store must do."""

from __future__ import annotations

import asyncio
from collections import UserDict
from collections.abc import Awaitable, Callable
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given, settings

from ravi.conformance._base import (
    EXACT_NUMBERS,
    PROPERTY_CHECKS,
    ContractBase,
    assert_protocol,
    at_limit,
    id_texts,
    json_numbers,
    refuses,
    refuses_long_ids,
    typed,
    unique,
)
from ravi.kernel.errors import InvalidArgument
from ravi.kernel.storage import ReservedState, ShortTermMemory


class ShortTermMemoryContract(ContractBase):
    """Subclass and override the ``backend`` fixture to yield an empty ``ShortTermMemory``."""

    contract_name = "ShortTermMemory"
    pytestmark = pytest.mark.asyncio

    @pytest.fixture
    def backend(self) -> ShortTermMemory:
        """Override: an empty backend, fresh for each test."""
        raise NotImplementedError("override the 'backend' fixture to build an empty backend")

    async def test_is_a_short_term_memory(self, backend: ShortTermMemory) -> None:
        """The backend satisfies the ``ShortTermMemory`` Protocol: it has every method of it, each ``async def``.

        Fix: give the class each method the message names, as ``async def`` with the Protocol's signature
        (``ravi.kernel.storage.ShortTermMemory``).
        """
        assert_protocol(backend, ShortTermMemory)

    async def test_canary_fixture_gives_an_empty_backend_first(self, backend: ShortTermMemory) -> None:
        """The fixture gives every test an empty backend (the first of two tests that each leave data behind).

        Fix: the store held data before the test ran: give each test an empty store of its own in the ``backend``
        fixture (an in-memory or temporary store), or isolate a persistent one with ``--isolate KIND=OPTION``
        (``--ravi-isolate``) and an ``async def destroy(self)`` that removes what the option names.
        """
        assert await backend.get_state("canary") == {}
        await backend.set_state("canary", {"left": "behind"})

    async def test_canary_fixture_gives_an_empty_backend_second(self, backend: ShortTermMemory) -> None:
        """The fixture gives every test an empty backend (the second of two tests that each leave data behind).

        Fix: give each test a store of its own: build it in the ``backend`` fixture (an in-memory or temporary
        store), or isolate a persistent one with ``--isolate KIND=OPTION`` (``--ravi-isolate``) and an
        ``async def destroy(self)`` that removes what the option names.
        """
        assert await backend.get_state("canary") == {}, (
            "state leaked between tests: get_state('canary') found the first canary's state"
        )
        await backend.set_state("canary", {"left": "behind"})

    async def test_the_reserved_place_is_apart_from_every_session(self, backend: ShortTermMemory) -> None:
        """A store with a place of Ravi's own (``ReservedState.reserved()``) keeps it apart from the sessions'
        states: a session of the same name neither reads, writes nor clears what is kept there.

        Fix: key the reserved place's states where no session id reaches (a table or key kind of their own).
        """
        if not isinstance(backend, ReservedState):
            pytest.skip(f"backend lacks reserved: {type(backend).__name__} is not a ReservedState")
        reserved = backend.reserved()
        assert isinstance(reserved, ShortTermMemory)
        name = unique("session")
        await reserved.set_state(name, {"own": 1})
        assert await backend.get_state(name) == {}
        await backend.update_state(name, {"own": 2})
        await backend.clear(name)
        assert await reserved.get_state(name) == {"own": 1}
        assert await backend.reserved().get_state(name) == {"own": 1}
        await reserved.clear(name)
        assert await reserved.get_state(name) == {}

    async def test_closing_the_reserved_place_leaves_the_store_working(self, backend: ShortTermMemory) -> None:
        """The place of Ravi's own uses its store's connections (``ReservedState.reserved()``): closing it (its
        ``aclose``, or leaving ``async with``) releases nothing, so the store's calls, those under way among them,
        and the place itself keep working until the store is closed.

        Fix: make ``aclose`` of what ``reserved()`` returns release nothing; the store's own ``aclose`` releases
        the connections.
        """
        if not isinstance(backend, ReservedState):
            pytest.skip(f"backend lacks reserved: {type(backend).__name__} is not a ReservedState")
        reserved = backend.reserved()
        name = unique("session")
        await reserved.set_state(name, {"own": 1})
        close = getattr(reserved, "aclose", None)
        writes = [backend.update_state(name, {f"k{i}": i}) for i in range(20)]
        if close is not None:
            await asyncio.gather(*writes, close())
        else:
            await asyncio.gather(*writes)
        assert await backend.get_state(name) == {f"k{i}": i for i in range(20)}
        assert await reserved.get_state(name) == {"own": 1}
        await reserved.clear(name)

    async def test_unknown_session_has_empty_state(self, backend: ShortTermMemory) -> None:
        """The state of an unknown session is an empty dict.

        Fix: return a new empty dict for a session with no stored state (a missing row, key or hash), never ``None`` and
        never an error.
        """
        assert await backend.get_state(unique("session")) == {}

    async def test_set_then_get(self, backend: ShortTermMemory) -> None:
        """State reads back as it was set.

        Fix: keep the whole state as one JSON value (``json_copy`` of ``ravi.kernel.values``, then JSON text, a
        ``jsonb`` column or a hash of JSON fields) and give back a fresh dict parsed from it.
        """
        s = unique("session")
        state = {"step": 3, "plan": ["a", "b"], "nested": {"ok": True, "none": None, "pi": 3.25}}
        await backend.set_state(s, state)
        assert await backend.get_state(s) == state

    async def test_set_replaces(self, backend: ShortTermMemory) -> None:
        """``set_state`` replaces the whole state.

        Fix: make ``set_state`` replace the stored state whole (``INSERT ... ON CONFLICT DO UPDATE SET state =
        EXCLUDED.state``; on Redis, delete the hash and write it in one ``MULTI``), not merge into it.
        """
        s = unique("session")
        await backend.set_state(s, {"a": 1, "b": 2})
        await backend.set_state(s, {"c": 3})
        assert await backend.get_state(s) == {"c": 3}

    async def test_update_merges_top_level_keys_and_returns_the_result(self, backend: ShortTermMemory) -> None:
        """``update_state`` merges top-level keys and returns the merged state.

        Fix: merge the patch into the top level only (a key of the patch replaces the stored key's whole value: ``state
        || patch`` on Postgres, one hash field per key on Redis, ``dict.update`` in memory), and return the state the
        same statement or transaction wrote.
        """
        s = unique("session")
        await backend.set_state(s, {"a": 1, "nested": {"x": 1}})
        merged = await backend.update_state(s, {"b": 2, "nested": {"y": 2}})
        assert merged == {"a": 1, "b": 2, "nested": {"y": 2}}
        assert await backend.get_state(s) == merged

    async def test_update_takes_the_patch_by_name(self, backend: ShortTermMemory) -> None:
        """``update_state(session_id, patch)``: 004 names the keys to merge ``patch``, so a caller may pass them by
        that name.

        Fix: name the parameters as the Protocol does: ``async def update_state(self, session_id: str, patch:
        Mapping[str, Any])`` and ``set_state(self, session_id, state)``.
        """
        s = unique("session")
        await backend.set_state(session_id=s, state={"a": 1})
        assert await backend.update_state(session_id=s, patch={"b": 2}) == {"a": 1, "b": 2}

    async def test_update_creates_missing_state(self, backend: ShortTermMemory) -> None:
        """``update_state`` on an unknown session creates its state.

        Fix: let ``update_state`` insert the patch as the whole state when the session has none (an upsert: ``INSERT ...
        ON CONFLICT (session_id) DO UPDATE``), and return it.
        """
        s = unique("session")
        assert await backend.update_state(s, {"first": True}) == {"first": True}

    async def test_concurrent_updates_lose_no_key(self, backend: ShortTermMemory) -> None:
        """Concurrent ``update_state`` calls lose no key.

        Fix: merge on the store, in one atomic step: one statement (``state || EXCLUDED.state``), one ``MULTI`` on
        Redis, or a read and write under a lock in memory; never read the state, merge in Python and write it back
        unguarded.
        """
        s = unique("session")
        await asyncio.gather(*(backend.update_state(s, {f"k{i}": i}) for i in range(50)))
        assert await backend.get_state(s) == {f"k{i}": i for i in range(50)}

    async def test_sessions_are_isolated(self, backend: ShortTermMemory) -> None:
        """Two sessions never see each other's messages.

        Fix: key each state by its session id alone, as given (a primary key, or one Redis key per session built from
        the whole id).
        """
        s1, s2 = unique("session"), unique("session")
        await backend.set_state(s1, {"who": "one"})
        await backend.update_state(s2, {"who": "two"})
        assert await backend.get_state(s1) == {"who": "one"}

    async def test_clear_forgets_and_is_idempotent(self, backend: ShortTermMemory) -> None:
        """``clear`` forgets the state; clearing again is not an error.

        Fix: make ``clear`` delete the session's row or key, and nothing when there is none (``DELETE``, ``DEL``,
        ``dict.pop(session_id, None)``), without raising.
        """
        s, other = unique("session"), unique("session")
        await backend.set_state(s, {"a": 1})
        await backend.set_state(other, {"b": 2})
        await backend.clear(s)
        await backend.clear(s)
        assert await backend.get_state(s) == {}
        assert await backend.get_state(other) == {"b": 2}

    async def test_unicode_and_hostile_strings_round_trip(self, backend: ShortTermMemory) -> None:
        """Unicode and hostile strings in keys and values round-trip exactly.

        Fix: pass the session id and the state's JSON as bound parameters or client arguments, never formatted into a
        statement, and keep text as UTF-8 (``json_copy`` of ``ravi.kernel.values`` refuses only what no store keeps).
        """
        s = "sess'ion\"; --ü🚀"
        state = {"ключ": "значение 漢字 🚀", "quote'\"": "\\$$ \n\t", "emoji🧠": ["x" * 10_000]}
        await backend.set_state(s, state)
        assert await backend.get_state(s) == state

    async def test_values_come_back_as_json(self, backend: ShortTermMemory) -> None:
        """Values come back as JSON types: lists, not tuples; dicts, not the mappings they were given as (a
        ``MappingProxyType``, a ``UserDict``), which are refused by nothing and stored as the objects they hold.

        Fix: store what ``json_copy`` of ``ravi.kernel.values`` returns (plain dicts and lists)."""
        s = unique("session")
        await backend.set_state(s, {"tuple": (1, 2), "int": 1, "float": 1.5})
        assert await backend.get_state(s) == {"tuple": [1, 2], "int": 1, "float": 1.5}
        await backend.set_state(s, MappingProxyType({"proxy": MappingProxyType({"a": (1,)}), "user": UserDict(b=2)}))
        merged = await backend.update_state(s, UserDict(more=MappingProxyType({"c": 3})))
        assert merged == await backend.get_state(s) == {"proxy": {"a": [1]}, "user": {"b": 2}, "more": {"c": 3}}

    async def test_numbers_keep_their_type_and_value(self, backend: ShortTermMemory) -> None:
        """Every number comes back as it was set, by ``get_state`` and by ``update_state``'s result: a float
        that is a whole number stays a float (``1e16``, not ``10000000000000000``), the extremes of a double and
        integers beyond 64 bits are exact.

        Troubleshooting: a jsonb column keeps numbers as decimals and prints large floats without an exponent;
        write floats in positional notation with a decimal point, which jsonb keeps."""
        s = unique("session")
        await backend.set_state(s, EXACT_NUMBERS)
        assert typed(await backend.get_state(s)) == typed(EXACT_NUMBERS)
        merged = await backend.update_state(s, {"more": [1e30, 3.0]})
        assert typed(merged) == typed({**EXACT_NUMBERS, "more": [1e30, 3.0]})

    @settings(max_examples=25, deadline=None, suppress_health_check=PROPERTY_CHECKS)
    @given(number=json_numbers())
    async def test_any_number_round_trips_exactly(self, backend: ShortTermMemory, number: float) -> None:
        """Any finite float and any integer comes back with its type and value (a property).

        Fix: check the state with ``json_copy`` of ``ravi.kernel.values`` and keep it as JSON text; a ``jsonb`` column
        prints a float of 1e16 or more without its exponent, which reads back as an int, so write floats there in
        positional notation with a decimal point (``10000000000000000.0``), as the Postgres store does.
        """
        s = unique("session")
        await backend.set_state(s, {"n": number})
        assert typed(await backend.get_state(s)) == typed({"n": number})

    async def test_negative_zero_is_refused(self, backend: ShortTermMemory) -> None:
        """``-0.0`` is refused with InvalidArgument (a jsonb column keeps it as ``0``), the state kept.

        Fix: store what ``json_copy`` of ``ravi.kernel.values`` returns for a state or a patch (it refuses
        ``-0.0``), never the argument itself.
        """
        s = unique("session")
        await backend.set_state(s, {"kept": 1})
        await refuses(
            InvalidArgument,
            {
                "set_state({'z': -0.0})": lambda: backend.set_state(s, {"z": -0.0}),
                "update_state({'z': [-0.0]})": lambda: backend.update_state(s, {"z": [-0.0]}),
            },
        )
        assert await backend.get_state(s) == {"kept": 1}

    async def test_bad_input_raises_typed_errors_and_loses_nothing(self, backend: ShortTermMemory) -> None:
        """Bad input raises a typed error and loses nothing already stored.

        Fix: check what a call is given before the store sees it: ``check_scope(session_id=...)`` of
        ``ravi.kernel.values`` for the session id (non-empty, valid text) and ``json_copy`` for a state or its
        updates (a JSON object every store keeps exactly; it returns the plain copy to store).
        """
        s = unique("session")
        await backend.set_state(s, {"kept": 1})
        bad_calls: dict[str, Callable[[], Awaitable[Any]]] = {
            "set_state({'bad': object()})": lambda: backend.set_state(s, {"bad": object()}),
            "update_state({'bad': {1, 2}})": lambda: backend.update_state(s, {"bad": {1, 2}}),
            "set_state(a list, not a mapping)": lambda: backend.set_state(s, ["not", "a", "mapping"]),  # type: ignore[arg-type]
            "get_state('')": lambda: backend.get_state(""),
            "get_state(a session id with a lone surrogate)": lambda: backend.get_state("s\ud800"),
            "clear(a session id with a lone surrogate)": lambda: backend.clear("\udfff"),
            # a NUL, which PostgreSQL keeps in no text: refused by every store, reads included
            "get_state(a session id with a NUL)": lambda: backend.get_state("s\x00"),
            "update_state(a session id with a NUL)": lambda: backend.update_state("s\x00", {"x": 1}),
        }
        await refuses(InvalidArgument, bad_calls)
        assert await backend.get_state(s) == {"kept": 1}

    async def test_values_no_store_can_keep_are_refused_and_nothing_is_lost(self, backend: ShortTermMemory) -> None:
        """A value is stored exactly or refused with InvalidArgument: NaN, infinities, lone surrogates, JSON
        nested thousands deep and integers of more digits than Python reads back from JSON (4,300) are refused
        (never a bare ValueError or RecursionError), and the state is kept.

        Fix: store what ``json_copy`` of ``ravi.kernel.values`` returns for a state or a patch, never the argument
        itself: it refuses every such value with ``InvalidArgument``.
        """
        s = unique("session")
        await backend.set_state(s, {"kept": 1})
        deep: dict[str, object] = {}
        for _ in range(5_000):
            deep = {"a": deep}
        bad_states: dict[str, dict[str, Any]] = {  # named, not repr(bad): one is nested 5,000 deep
            "a state holding NaN": {"n": float("nan")},
            "a state holding infinity": {"n": float("inf")},
            "a state holding a lone surrogate": {"t": "lone \ud800"},
            "a state with a lone surrogate in a key": {"k\udfff": 1},
            "a state nested 5,000 deep": {"deep": deep},
            "a state holding an integer of 5,000 digits": {"n": [10**5000]},
        }
        for shown, bad in bad_states.items():
            await refuses(
                InvalidArgument,
                {
                    f"set_state({shown})": lambda bad=bad: backend.set_state(s, bad),  # type: ignore[misc]
                    f"update_state({shown})": lambda bad=bad: backend.update_state(s, bad),  # type: ignore[misc]
                },
            )
        assert await backend.get_state(s) == {"kept": 1}

    async def test_returned_state_is_a_copy(self, backend: ShortTermMemory) -> None:
        """Changing returned state does not change what is stored.

        Fix: return a new object from every read (`json_copy` of what the store keeps, or the state decoded from
        its stored JSON), never the dict the store keeps.
        """
        s = unique("session")
        await backend.set_state(s, {"list": [1]})
        got = await backend.get_state(s)
        got["list"].append(2)
        got["new"] = True
        stored = await backend.get_state(s)
        assert stored == {"list": [1]}, f"changing what get_state returned changed the stored state to {stored}"

    async def test_large_state(self, backend: ShortTermMemory) -> None:
        """A large state round-trips exactly.

        Fix: keep the state in a column or value without a size limit (``text`` or ``jsonb``, not ``varchar(n)``); on
        Redis, one hash field per top-level key or one string.
        """
        s = unique("session")
        state = {f"key{i}": {"value": "v" * 100, "i": i} for i in range(2_000)}
        await backend.set_state(s, state)
        assert await backend.get_state(s) == state

    async def test_ids_past_the_limit_are_refused_and_nothing_is_lost(self, backend: ShortTermMemory) -> None:
        """A session id of more than ``MAX_ID_BYTES`` UTF-8 bytes is refused by every call with ``InvalidArgument``
        naming it and the limit, on every backend (PostgreSQL indexes no longer keys); stored state stays.

        Fix: check the session id with ``check_scope`` of ``ravi.kernel.values``, which holds ``MAX_ID_BYTES``.
        """
        s = unique("session")
        await backend.set_state(s, {"kept": 1})
        await refuses_long_ids(
            lambda long: {
                "get_state()": ("session_id", lambda: backend.get_state(long)),
                "set_state()": ("session_id", lambda: backend.set_state(long, {"a": 1})),
                "update_state()": ("session_id", lambda: backend.update_state(long, {"a": 1})),
                "clear()": ("session_id", lambda: backend.clear(long)),
            }
        )
        assert await backend.get_state(s) == {"kept": 1}

    @settings(max_examples=10, deadline=None, suppress_health_check=PROPERTY_CHECKS)
    @given(text=id_texts())
    async def test_ids_at_the_limit_are_stored_and_read_back(self, backend: ShortTermMemory, text: str) -> None:
        """A session id of exactly ``MAX_ID_BYTES`` UTF-8 bytes, of any text, keeps its state on every backend.

        Fix: keep session ids whole, as given: a key or column that holds ``MAX_ID_BYTES`` bytes of UTF-8
        (``check_scope`` of ``ravi.kernel.values`` refuses longer ones), with no truncation or normalisation.
        """
        s = at_limit(text, unique(""))
        await backend.set_state(s, {"a": 1})
        assert await backend.update_state(s, {"b": 2}) == {"a": 1, "b": 2}
        assert await backend.get_state(s) == {"a": 1, "b": 2}
        await backend.clear(s)
        assert await backend.get_state(s) == {}
