"""A failing contract test says how to fix it wherever its docstring does: the report is all a backend's author
sees of the suite."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from types import SimpleNamespace
from typing import Any

import pytest

# Imported here so the in-process run below shares it (see test_catches_broken_backends.py).
import ravi.agents.storage  # noqa: F401
from ravi.conformance import (
    CONTRACTS,
    CypherCapableContract,
    HistorySearcherContract,
    HybridSearcherContract,
    StrategyContract,
    WindowReaderContract,
)
from ravi.conformance.plugin import FIX_PREFIXES, contract_fix

ALL = [
    *CONTRACTS.values(),
    WindowReaderContract,
    HistorySearcherContract,
    HybridSearcherContract,
    CypherCapableContract,
    StrategyContract,
]


def item(contract: type, name: str) -> Any:
    """What ``contract_fix`` reads of a collected test: its function and its class."""
    return SimpleNamespace(function=getattr(contract, name), cls=contract)


def documented_fixes() -> list[tuple[type, str]]:
    found = []
    for contract in ALL:
        for name, function in inspect.getmembers(contract, inspect.isfunction):
            paragraphs = inspect.cleandoc(function.__doc__ or "").split("\n\n")
            if name.startswith("test_") and any(p.startswith(FIX_PREFIXES) for p in paragraphs):
                found.append((contract, name))
    return found


@pytest.mark.parametrize("contract", CONTRACTS.values(), ids=lambda c: c.__name__)
def test_every_second_canary_says_how_to_isolate(contract: type) -> None:
    """Only the history contract's canary said how to fix a shared store; the others printed the rule alone."""
    fix = contract_fix(item(contract, "test_canary_fixture_gives_an_empty_backend_second"))
    assert fix is not None and "--isolate KIND=OPTION" in fix and "async def destroy(self)" in fix


def test_every_troubleshooting_paragraph_reaches_the_report() -> None:
    """Seventeen tests wrote their fix under "Troubleshooting:", which the report never showed (it read "Fix:")."""
    found = documented_fixes()
    assert any(name == "test_generations_follow_removals" for _, name in found)
    for contract, name in found:
        fix = contract_fix(item(contract, name))
        assert fix and not fix.startswith(FIX_PREFIXES), f"{contract.__name__}.{name}"
    generations = contract_fix(item(CONTRACTS["history"], "test_generations_follow_removals"))
    assert generations is not None and generations.startswith("keep a random token with the session")


def test_a_shared_state_store_is_told_what_leaked_and_how_to_fix_it(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_backend="""
import pytest
from ravi.agents.storage.state import InMemoryStateStore
from ravi.conformance import ShortTermMemoryContract

SHARED = InMemoryStateStore()

class TestShared(ShortTermMemoryContract):
    @pytest.fixture
    def backend(self):
        return SHARED
"""
    )
    result = pytester.runpytest(
        "-p", "no:cacheprovider", "-o", "asyncio_default_fixture_loop_scope=function", "-k", "canary"
    )
    result.assert_outcomes(passed=1, failed=1)
    text = " ".join(result.stdout.str().split())
    assert "get_state('canary') found the first canary's state" in text
    assert "how to fix it" in text and "--isolate KIND=OPTION" in text


@pytest.mark.parametrize(
    ("contract", "name", "check"),
    [
        (CONTRACTS["history"], "test_limits_and_offsets_past_a_servers_integers_ask_for_everything", "check_page"),
        (CONTRACTS["history"], "test_append_many_refuses_what_is_not_a_list_of_messages", "check_append"),
        (CONTRACTS["history"], "test_replace_last_that_fails_changes_nothing", "check_replace"),
        (CONTRACTS["history"], "test_replace_session_that_fails_changes_nothing", "check_append"),
        (WindowReaderContract, "test_bad_arguments_are_refused", "check_count"),
        (CONTRACTS["state"], "test_negative_zero_is_refused", "json_copy"),
        (CONTRACTS["state"], "test_values_no_store_can_keep_are_refused_and_nothing_is_lost", "json_copy"),
    ],
)
def test_a_value_the_kernel_checks_refuse_names_the_check(contract: type, name: str, check: str) -> None:
    """A SQLite store that skipped the kernel's checks failed these with an empty fix: an OverflowError from the
    driver for a limit past 2**63, "did not raise InvalidArgument" for -0.0 or NaN in a state."""
    fix = contract_fix(item(contract, name))
    assert fix is not None and check in fix, f"{contract.__name__}.{name}: {fix!r}"


class NaiveHistory:
    """A first attempt at a history backend: a list per session, no kernel checks, no look-up of held ids."""

    def __init__(self) -> None:
        self.rows: dict[tuple[str, str], list[tuple[str, Any]]] = {}

    async def append(self, agent_id: str, message: Any, *, session_id: str, run_id: str = "") -> None:
        self.rows.setdefault((agent_id, session_id), []).append((run_id, message))

    async def append_many(self, agent_id: str, messages: Any, *, session_id: str, run_id: str = "") -> None:
        for message in messages:
            await self.append(agent_id, message, session_id=session_id, run_id=run_id)

    async def get_messages(self, agent_id: str, *, session_id: str, limit: int | None = None, offset: int = 0) -> Any:
        rows = [m for _, m in self.rows.get((agent_id, session_id), [])][offset:]
        return rows if limit is None else rows[:limit]

    async def clear(self, agent_id: str, *, session_id: str) -> int:
        return len(self.rows.pop((agent_id, session_id), []))

    async def clear_run(self, agent_id: str, *, session_id: str, run_id: str) -> int:
        rows = self.rows.get((agent_id, session_id), [])
        self.rows[(agent_id, session_id)] = [(r, m) for r, m in rows if r != run_id]
        return len(rows) - len(self.rows[(agent_id, session_id)])

    async def count_messages(self, agent_id: str, *, session_id: str) -> int:
        return len(self.rows.get((agent_id, session_id), []))


@pytest.mark.parametrize(
    ("name", "detail", "fix"),
    [
        ("test_append_is_idempotent_by_message_id", "read back ['once', 'once', 'once', 'two', 'once']", "stored_body"),
        (
            "test_append_many_is_all_or_nothing",
            "append_many([ChatMessage.user('first'), 'not a message']) did not raise RaviError",
            "check_append",
        ),
        ("test_retried_appends_racing_clear_run_never_fail", "a message was stored twice", "one transaction"),
        (
            "test_a_message_id_is_a_promise",
            "append_many([a new message, another message under the held id 'm-1']) did not raise MessageConflict",
            "stored JSON body",
        ),
    ],
)
def test_a_first_attempt_is_told_what_broke_and_how_to_fix_it(name: str, detail: str, fix: str) -> None:
    """A history backend without the kernel's checks or a look-up of held ids failed these with a truncated
    comparison (``assert ['once', 'onc...'two', 'once'] == ['once', 'two']``) or pytest's bare "DID NOT RAISE"
    (``DID NOT RAISE MessageConflict``), and no fix."""
    import asyncio

    contract = CONTRACTS["history"]
    with pytest.raises((AssertionError, pytest.fail.Exception)) as raised:
        asyncio.run(getattr(contract(), name)(NaiveHistory()))
    assert detail in str(raised.value)
    found = contract_fix(item(contract, name))
    assert found is not None and fix in found


def test_the_fix_of_ids_at_the_limit_says_to_keep_them_whole() -> None:
    """A backend that stored a retried message twice failed this rule with ``assert [ChatMessage(...)] ==
    [ChatMessage(...)]`` and no fix."""
    found = contract_fix(item(CONTRACTS["history"], "test_ids_at_the_limit_are_stored_and_read_back"))
    assert found is not None and "MAX_ID_BYTES" in found and "retried append" in found


def test_a_state_store_that_returns_what_it_keeps_is_told_to_copy() -> None:
    """A state store that returned the dict it kept failed with ``assert {'list': [1, 2], 'new': True} ==
    {'list': [1]}`` and no fix."""
    import asyncio

    class KeepsTheDict:
        def __init__(self) -> None:
            self.data: dict[str, Any] = {}

        async def get_state(self, session_id: str) -> Any:
            return self.data.get(session_id, {})

        async def set_state(self, session_id: str, state: Any) -> None:
            self.data[session_id] = state

    contract = CONTRACTS["state"]
    with pytest.raises(AssertionError) as raised:
        asyncio.run(contract().test_returned_state_is_a_copy(KeepsTheDict()))  # type: ignore[arg-type]
    assert "changing what get_state returned changed the stored state" in str(raised.value)
    found = contract_fix(item(contract, "test_returned_state_is_a_copy"))
    assert found is not None and "json_copy" in found


def kernel_names() -> set[str]:
    """Every name a module of ``ravi.kernel`` defines or imports."""
    names: set[str] = set()
    for module in pkgutil.walk_packages(importlib.import_module("ravi.kernel").__path__, "ravi.kernel."):
        names.update(vars(importlib.import_module(module.name)))
    return names


CITED = re.compile(r"((?:`\w+` (?:and|or) )*`\w+`) of `(ravi\.kernel[\w.]*)`")
"""A citation of kernel helpers in a fix: "`check_page` of `ravi.kernel.values`", "`a` and `b` of `module`"."""


def test_every_fix_names_only_kernel_functions_that_exist() -> None:
    """A fix that sends a backend's author to a kernel helper must name one that exists, in the module it names:
    every "`name` of `ravi.kernel.module`" is an attribute of that module, and every `check_...` is a name of
    some module of ``ravi.kernel``."""
    known = kernel_names()
    wrong = []
    for contract, name in documented_fixes():
        fix = contract_fix(item(contract, name)) or ""
        for cited, module in CITED.findall(fix):
            found = vars(importlib.import_module(module))
            wrong += [f"{name}: {module}.{n}" for n in re.findall(r"`(\w+)`", cited) if n not in found]
        wrong += [f"{name}: {n}" for n in re.findall(r"`(check_\w+)`", fix) if n not in known]
    assert not wrong, f"fixes name kernel functions that do not exist: {wrong}"


def test_a_fix_written_inside_the_rules_paragraph_reaches_the_report() -> None:
    """The strategy contract wrote its fixes inside the rule's paragraph ("... the same for the same input.
    Troubleshooting: build new messages with ..."), where the report, which reads a paragraph that starts with the
    prefix, never found them."""
    lost = []
    for contract in ALL:
        for name, function in inspect.getmembers(contract, inspect.isfunction):
            written = any(prefix in (function.__doc__ or "") for prefix in FIX_PREFIXES)
            if name.startswith("test_") and written and not contract_fix(item(contract, name)):
                lost.append(f"{contract.__name__}.{name}")
    assert not lost, f"fixes the report never prints: {lost}"
