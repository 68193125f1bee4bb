"""A failing contract test says how to fix it wherever its docstring does: the report is all a backend's author
sees of the suite."""

from __future__ import annotations

import inspect
from types import SimpleNamespace
from typing import Any

import pytest

# Imported here so the in-process run below shares it (see test_catches_broken_backends.py).
import ravi.agents.storage  # noqa: F401
from ravi.conformance import CONTRACTS, HistorySearcherContract, WindowReaderContract
from ravi.conformance.plugin import FIX_PREFIXES, contract_fix

ALL = [*CONTRACTS.values(), WindowReaderContract, HistorySearcherContract]


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
