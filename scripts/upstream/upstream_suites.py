"""Run one ported framework suite (see ``port.py``) in its own pytest process, on a store chosen by environment.

Each suite runs apart from Ravi's own tests: it has its own ``pytest.ini`` (the upstream options) and its own
``tests`` package, as upstream. :func:`run` returns the summary its plugin prints (``RAVI-UPSTREAM {...}``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
SUITES = {
    "openai-agents": ROOT / "packages/ravi-integrations-openai-agents/tests/upstream/openai_agents",
    "langchain-core": ROOT / "packages/ravi-integrations-langchain/tests/upstream/langchain_core",
    "langchain-postgres": ROOT / "packages/ravi-integrations-langchain/tests/upstream/langchain_postgres",
    "langchain": ROOT / "packages/ravi-integrations-langchain/tests/upstream/langchain",
    "autogen-core": ROOT / "packages/ravi-integrations-autogen/tests/upstream/autogen_core",
    "autogen-agentchat": ROOT / "packages/ravi-integrations-autogen/tests/upstream/autogen_agentchat",
}


def run(suite: str, *, history: Mapping[str, str] | None = None, env: Mapping[str, str] | None = None,
        timeout: float = 900) -> dict[str, Any]:  # fmt: skip
    """Run ``suite`` on the in-memory store, or, with ``history`` (``{"backend": "postgres", "dsn": ...}``), on the
    history store those options configure; ``env`` adds variables. Returns the plugin's summary, with the
    process's output tail under ``"output"``.

    Raises:
        AssertionError: the run printed no summary (it could not start), with its output.
    """
    variables = {k: v for k, v in os.environ.items() if not k.startswith("RAVI_")}
    variables["PYTHONDONTWRITEBYTECODE"] = "1"
    if history:
        variables["RAVI_UPSTREAM_STORE"] = "configured"
        variables.update({f"RAVI_HISTORY__{key.upper()}": value for key, value in history.items()})
    variables.update(env or {})
    folder = SUITES[suite]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "--tb=short", "-c", str(folder / "pytest.ini"),
         "--rootdir", str(folder), str(folder / "tests")],
        cwd=folder, env=variables, capture_output=True, text=True, check=False, timeout=timeout,
    )  # fmt: skip
    output = done.stdout + done.stderr
    lines = [line for line in output.splitlines() if line.startswith("RAVI-UPSTREAM ")]
    assert lines, f"{suite} printed no summary (exit {done.returncode}):\n{output[-6_000:]}"
    summary: dict[str, Any] = json.loads(lines[-1].removeprefix("RAVI-UPSTREAM "))
    summary["output"] = output[-6_000:]
    return summary


def described(summary: Mapping[str, Any]) -> str:
    """One line for a test report: the counts, then the failures."""
    counts = ", ".join(f"{k} {summary[k]}" for k in ("ported", "passed", "skipped", "failed", "built"))
    return f"{summary['suite']} {summary['version']} on {summary['store']}: {counts}; failures: {summary['failures']}"
