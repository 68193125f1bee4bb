"""The OpenAI Agents SDK's own tests of its sessions, ported to ``RaviSession`` (``tests/upstream``, regenerated
by ``scripts/upstream/port.py``), on the in-memory store; ``tests-integration/test_upstream_suites.py`` runs
them on Postgres and Redis."""

from __future__ import annotations

from upstream_suites import described, run


def test_the_sdks_own_session_tests_pass_on_ravi() -> None:
    summary = run("openai-agents")
    print(described(summary))  # the counts, for the integration page
    assert summary["failed"] == 0, described(summary) + "\n" + summary["output"]
    assert summary["passed"] and summary["built"], described(summary)
    assert all(reason.startswith("not for Ravi: ") or "fakeredis" in reason or "real Redis" in reason
               for reason in summary["skips"]), summary["skips"]  # fmt: skip
