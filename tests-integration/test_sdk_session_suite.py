"""The OpenAI Agents SDK's own session tests, run against ``RaviSession`` on Postgres and on Redis.

The same files run on the in-memory store with the package's tests (``packages/ravi-integrations-openai-agents/
tests/sdk``); here a separate pytest process points them at a real server through configuration alone
(``RAVI_SDK_SUITE=configured`` plus ``RAVI_HISTORY__*``), as a user would swap stores.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from servers import Server

SUITE = Path(__file__).parents[1] / "packages" / "ravi-integrations-openai-agents" / "tests" / "sdk"


def run_suite(**history: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAVI_")}
    env["RAVI_SDK_SUITE"] = "configured"
    env.update({f"RAVI_HISTORY__{key.upper()}": value for key, value in history.items()})
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(SUITE)],
        cwd=SUITE.parents[3],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    out = done.stdout[-4_000:]
    assert done.returncode == 0, out + done.stderr[-2_000:]
    passed = re.search(r"(\d+) passed", out)
    assert passed is not None and int(passed.group(1)) >= 50, out
    return out


def test_the_sdk_session_tests_pass_on_postgres(postgres_server: Server, pg_schema: str) -> None:
    """Issue 17: the framework's own tests for its session interface pass against the Ravi adapter on Postgres."""
    run_suite(backend="postgres", dsn=postgres_server.address, schema=pg_schema)


def test_the_sdk_session_tests_pass_on_redis(redis_server: Server) -> None:
    """The same on Redis; every session is scoped under a run-unique agent id, so nothing collides."""
    run_suite(backend="redis", url=redis_server.address)
