"""``ShortTermMemoryContract``: what every session-state store must do."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from ravi.conformance._base import ContractBase, unique
from ravi.kernel.errors import InvalidArgument
from ravi.kernel.storage import ShortTermMemory


class ShortTermMemoryContract(ContractBase):
    """Subclass and override the ``state_store`` fixture to yield an empty ``ShortTermMemory``."""

    contract_name = "ShortTermMemory"
    pytestmark = pytest.mark.asyncio

    @pytest.fixture
    def state_store(self) -> ShortTermMemory:
        """Override: an empty backend, fresh for each test."""
        raise NotImplementedError("override the 'state_store' fixture to build an empty backend")

    async def test_is_a_short_term_memory(self, state_store: ShortTermMemory) -> None:
        assert isinstance(state_store, ShortTermMemory)

    async def test_canary_fixture_gives_an_empty_backend_first(self, state_store: ShortTermMemory) -> None:
        assert await state_store.get_state("canary") == {}
        await state_store.set_state("canary", {"left": "behind"})

    async def test_canary_fixture_gives_an_empty_backend_second(self, state_store: ShortTermMemory) -> None:
        assert await state_store.get_state("canary") == {}, "state leaked between tests"
        await state_store.set_state("canary", {"left": "behind"})

    async def test_unknown_session_has_empty_state(self, state_store: ShortTermMemory) -> None:
        assert await state_store.get_state(unique("session")) == {}

    async def test_set_then_get(self, state_store: ShortTermMemory) -> None:
        s = unique("session")
        state = {"step": 3, "plan": ["a", "b"], "nested": {"ok": True, "none": None, "pi": 3.25}}
        await state_store.set_state(s, state)
        assert await state_store.get_state(s) == state

    async def test_set_replaces(self, state_store: ShortTermMemory) -> None:
        s = unique("session")
        await state_store.set_state(s, {"a": 1, "b": 2})
        await state_store.set_state(s, {"c": 3})
        assert await state_store.get_state(s) == {"c": 3}

    async def test_update_merges_top_level_keys_and_returns_the_result(self, state_store: ShortTermMemory) -> None:
        s = unique("session")
        await state_store.set_state(s, {"a": 1, "nested": {"x": 1}})
        merged = await state_store.update_state(s, {"b": 2, "nested": {"y": 2}})
        assert merged == {"a": 1, "b": 2, "nested": {"y": 2}}
        assert await state_store.get_state(s) == merged

    async def test_update_creates_missing_state(self, state_store: ShortTermMemory) -> None:
        s = unique("session")
        assert await state_store.update_state(s, {"first": True}) == {"first": True}

    async def test_concurrent_updates_lose_no_key(self, state_store: ShortTermMemory) -> None:
        s = unique("session")
        await asyncio.gather(*(state_store.update_state(s, {f"k{i}": i}) for i in range(50)))
        assert await state_store.get_state(s) == {f"k{i}": i for i in range(50)}

    async def test_sessions_are_isolated(self, state_store: ShortTermMemory) -> None:
        s1, s2 = unique("session"), unique("session")
        await state_store.set_state(s1, {"who": "one"})
        await state_store.update_state(s2, {"who": "two"})
        assert await state_store.get_state(s1) == {"who": "one"}

    async def test_clear_forgets_and_is_idempotent(self, state_store: ShortTermMemory) -> None:
        s, other = unique("session"), unique("session")
        await state_store.set_state(s, {"a": 1})
        await state_store.set_state(other, {"b": 2})
        await state_store.clear(s)
        await state_store.clear(s)
        assert await state_store.get_state(s) == {}
        assert await state_store.get_state(other) == {"b": 2}

    async def test_unicode_and_hostile_strings_round_trip(self, state_store: ShortTermMemory) -> None:
        s = "sess'ion\"; --ü🚀"
        state = {"ключ": "значение 漢字 🚀", "quote'\"": "\\$$ \n\t", "emoji🧠": ["x" * 10_000]}
        await state_store.set_state(s, state)
        assert await state_store.get_state(s) == state

    async def test_values_come_back_as_json(self, state_store: ShortTermMemory) -> None:
        s = unique("session")
        await state_store.set_state(s, {"tuple": (1, 2), "int": 1, "float": 1.5})
        assert await state_store.get_state(s) == {"tuple": [1, 2], "int": 1, "float": 1.5}

    async def test_bad_input_raises_typed_errors_and_loses_nothing(self, state_store: ShortTermMemory) -> None:
        s = unique("session")
        await state_store.set_state(s, {"kept": 1})
        with pytest.raises(InvalidArgument):
            await state_store.set_state(s, {"bad": object()})
        with pytest.raises(InvalidArgument):
            await state_store.update_state(s, {"bad": {1, 2}})
        with pytest.raises(InvalidArgument):
            await state_store.set_state(s, ["not", "a", "mapping"])  # type: ignore[arg-type]
        with pytest.raises(InvalidArgument):
            await state_store.get_state("")
        assert await state_store.get_state(s) == {"kept": 1}

    async def test_values_no_store_can_keep_are_refused_and_nothing_is_lost(self, state_store: ShortTermMemory) -> None:
        """A value is stored exactly or refused with InvalidArgument: NaN, infinities, lone surrogates and JSON
        nested thousands deep are refused (never a bare ValueError or RecursionError), and the state is kept."""
        s = unique("session")
        await state_store.set_state(s, {"kept": 1})
        deep: dict[str, object] = {}
        for _ in range(5_000):
            deep = {"a": deep}
        bad_states: list[dict[str, Any]] = [
            {"n": float("nan")},
            {"n": float("inf")},
            {"t": "lone \ud800"},
            {"k\udfff": 1},
            {"deep": deep},
        ]
        for bad in bad_states:
            with pytest.raises(InvalidArgument):
                await state_store.set_state(s, bad)
            with pytest.raises(InvalidArgument):
                await state_store.update_state(s, bad)
        assert await state_store.get_state(s) == {"kept": 1}

    async def test_returned_state_is_a_copy(self, state_store: ShortTermMemory) -> None:
        s = unique("session")
        await state_store.set_state(s, {"list": [1]})
        got = await state_store.get_state(s)
        got["list"].append(2)
        got["new"] = True
        assert await state_store.get_state(s) == {"list": [1]}

    async def test_large_state(self, state_store: ShortTermMemory) -> None:
        s = unique("session")
        state = {f"key{i}": {"value": "v" * 100, "i": i} for i in range(2_000)}
        await state_store.set_state(s, state)
        assert await state_store.get_state(s) == state
