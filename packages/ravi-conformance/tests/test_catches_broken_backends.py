"""The suite must catch real bugs: each broken backend fails, and fails in the contract that names its defect."""

from __future__ import annotations

from pathlib import Path

import pytest

# Imported here so the in-process runs below share it: pytester forgets modules a run imported, and NumPy
# (under the in-memory stores) refuses to be imported twice in one process.
import ravi.agents.storage
import ravi.conformance

BROKEN = Path(__file__).with_name("broken.py").read_text()


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """Run pytest in-process in the pytester directory, as a third party's project would."""
    return pytester.runpytest("-p", "no:cacheprovider", "-o", "asyncio_default_fixture_loop_scope=function", *args)


CASES = [
    # (broken class, contract, a test that must fail)
    (
        "DropsUnderConcurrency",
        "HistoryProviderContract",
        "test_concurrent_writers_all_land_once_in_their_order",
    ),
    ("ReversesOrder", "HistoryProviderContract", "test_order_is_kept_across_appends"),
    ("LeaksAcrossSessions", "HistoryProviderContract", "test_sessions_are_isolated"),
    ("IgnoresRunId", "HistoryProviderContract", "test_clear_run_removes_exactly_that_run"),
    ("StoresDuplicates", "HistoryProviderContract", "test_append_is_idempotent_by_message_id"),
    (
        "ScoresByDistance",
        "VectorStoreContract",
        "test_search_ranks_by_cosine_similarity_higher_is_closer",
    ),
    ("ReplacesOnAdd", "VectorStoreContract", "test_add_is_insert_if_absent"),
    ("ForgetsMemoryTtl", "LongTermMemoryContract", "test_expired_memories_are_never_returned"),
    ("IgnoresNamespaces", "LongTermMemoryContract", "test_namespaces_are_isolated"),
    ("LosesConcurrentUpdates", "ShortTermMemoryContract", "test_concurrent_updates_lose_no_key"),
    ("ForgetsBlobTtl", "BlobStoreContract", "test_expired_blobs_are_gone"),
    ("AcceptsAnyKey", "BlobStoreContract", "test_invalid_keys_are_refused"),
    (
        "KeepsRelationshipsOfDeletedEntities",
        "GraphStoreContract",
        "test_delete_entity_detaches_its_relationships",
    ),
    ("AllowsAnyTransition", "TaskStoreContract", "test_illegal_transitions_raise_and_change_nothing"),
    ("DropsConflictingMessages", "HistoryProviderContract", "test_a_message_id_is_a_promise"),
    ("CountsGenerations", "HistoryProviderContract", "test_generations_follow_removals"),
    ("ReplacesAnyLast", "HistoryProviderContract", "test_replace_last_swaps_the_newest_message_only"),
    ("KeysSummariesBySpan", "SummaryStoreContract", "test_tenants_with_equal_span_ids_never_see_each_other"),
    ("JoinsScopeWithSeparator", "SummaryStoreContract", "test_hostile_scopes_never_share_a_summary"),
    (
        "KeepsSummariesOfClearedSessions",
        "SummaryStoreContract",
        "test_clear_and_clear_run_remove_the_sessions_summaries",
    ),
    ("AcceptsStaleSummaries", "SummaryStoreContract", "test_a_stale_generation_is_refused"),
    (
        "ClearsInsteadOfForgetting",
        "HistoryProviderContract",
        "test_forget_erases_the_session_from_every_read_path",
    ),
    ("ForgetsAgentsByPrefix", "HistoryProviderContract", "test_forget_of_an_agent_erases_all_its_sessions_only"),
    ("ClearGivesAGeneration", "HistoryProviderContract", "test_generations_follow_removals"),
]


@pytest.mark.parametrize(("broken", "contract", "must_fail"), CASES, ids=[c[0] for c in CASES])
def test_suite_fails_the_broken_backend(pytester: pytest.Pytester, broken: str, contract: str, must_fail: str) -> None:
    pytester.makepyfile(broken=BROKEN)
    pytester.makepyfile(
        test_backend=f"""
import pytest
from ravi.conformance import {contract}
from broken import {broken}

class TestBroken({contract}):
    @pytest.fixture
    def backend(self):
        return {broken}()
"""
    )
    result = run(pytester, "-o", "asyncio_mode=strict")
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) >= 1, result.stdout.str()
    failed = {line.split("::")[-1].split(" ")[0].split("[")[0] for line in result.outlines if line.startswith("FAILED")}
    assert must_fail in failed, f"{must_fail} did not fail; failed: {sorted(failed)}"
    rule = getattr(getattr(ravi.conformance, contract), must_fail).__doc__.split("\n\n")[0].split()
    assert "the contract rule that failed" in result.stdout.str()
    expected = " ".join(rule).replace("``", "`")  # the report quotes code with single backticks
    assert expected in " ".join(result.stdout.str().split())  # the failure says which rule broke


def test_every_contract_test_says_its_rule() -> None:
    """Each contract test has a docstring: the rule a failure prints."""
    missing = [
        f"{name}.{test}"
        for name in ravi.conformance.__all__
        if name.endswith("Contract")
        for test, member in vars(getattr(ravi.conformance, name)).items()
        if test.startswith("test_") and not (member.__doc__ or "").strip()
    ]
    assert not missing, missing


def test_silent_overrides_are_caught(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_backend="""
import pytest
from ravi.agents.context.history import InMemoryHistoryProvider
from ravi.conformance import HistoryProviderContract

class TestCheating(HistoryProviderContract):
    @pytest.fixture
    def history(self):
        return InMemoryHistoryProvider()

    async def test_clear_run_removes_exactly_that_run(self, history):
        pass  # "fixed" by deleting the check

    @pytest.mark.xfail(reason="documented limitation: no concurrent writers")
    async def test_concurrent_writers_all_land_once_in_their_order(self, history):
        raise AssertionError("not supported")
"""
    )
    result = run(pytester, "-k", "DO_NOT_OVERRIDE or concurrent_writers")
    result.assert_outcomes(failed=1, xfailed=1)
    result.stdout.fnmatch_lines(["*overrides contract tests without*test_clear_run_removes_exactly_that_run*"])


def test_plugin_runs_the_contract_against_a_registered_backend(pytester: pytest.Pytester) -> None:
    result = run(
        pytester,
        "--ravi-backend",
        "history=memory",
        "--ravi-backend",
        "tasks=memory",
        "--pyargs",
        "ravi.conformance.run",
    )
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) == 0, result.stdout.str()
    assert outcomes["passed"] > 30
    assert outcomes.get("deselected", 0) > 0  # the other kinds are not run


def test_plugin_refuses_a_malformed_choice(pytester: pytest.Pytester) -> None:
    result = run(pytester, "--ravi-backend", "histroy=memory", "--pyargs", "ravi.conformance.run")
    assert result.ret != 0
    result.stderr.fnmatch_lines(
        ["*--ravi-backend histroy=memory: unknown store kind 'histroy'*did you mean 'history'?*"]
    )


def test_a_failure_names_the_call_that_broke_the_rule(pytester: pytest.Pytester) -> None:
    """ "DID NOT RAISE InvalidArgument" used to leave the author to guess which of four bad calls raised nothing."""
    pytester.makepyfile(broken=BROKEN)
    pytester.makepyfile(
        test_backend="""
import pytest
from ravi.conformance import HistoryProviderContract
from broken import AcceptsNegativeOffsets

class TestBroken(HistoryProviderContract):
    @pytest.fixture
    def backend(self):
        return AcceptsNegativeOffsets()
"""
    )
    result = run(pytester, "-k", "bad_input_raises_typed_errors")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*get_messages(offset=-3) did not raise InvalidArgument*"])
    assert "DID NOT RAISE" not in result.stdout.str()


def test_a_shared_fixture_is_told_how_to_fix_it(pytester: pytest.Pytester) -> None:
    """A fixture that shares one store between tests fails the second canary, and the report says how to fix it."""
    pytester.makepyfile(
        test_backend="""
import pytest
from ravi.agents.context.history import InMemoryHistoryProvider
from ravi.conformance import HistoryProviderContract

SHARED = InMemoryHistoryProvider()

class TestShared(HistoryProviderContract):
    @pytest.fixture
    def backend(self):
        return SHARED
"""
    )
    result = run(pytester, "-k", "canary")
    result.assert_outcomes(passed=1, failed=1)
    text = " ".join(result.stdout.str().split())
    assert "how to fix it" in text and "--isolate KIND=OPTION" in text and "async def destroy(self)" in text
    assert "``" not in text.split("how to fix it", 1)[1]  # plain text: code in single backticks, as written
    assert "count_messages('canary') found the first canary's message" in text
