"""``ravi conformance`` against real servers: each test gets a scope of its own and leaves nothing behind."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import asyncpg
import redis.asyncio as aioredis
from servers import Server


def conformance(tmp_path: Path, spec: str, toml: str) -> subprocess.CompletedProcess[str]:
    """``ravi conformance SPEC --json`` in a project whose ravi.toml is ``toml``."""
    (tmp_path / "ravi.toml").write_text(toml)
    return subprocess.run(
        [sys.executable, "-c", "from ravi.agents.cli import main; main()", "conformance", spec, "--json"],
        cwd=tmp_path,
        env={k: v for k, v in os.environ.items() if not k.startswith("RAVI_")},
        capture_output=True,
        text=True,
        check=False,
    )


def test_a_postgres_run_is_isolated_and_leaves_no_schema_behind(tmp_path: Path, postgres_server: Server) -> None:
    """Each run with --isolate history=schema used to leave 27 ravi_<hex> schemas; without it, the suite wrote
    into the real "ravi" schema. Isolation is now the default for Ravi's backends, and each scope is dropped."""

    async def schemas() -> set[str]:
        connection = await asyncpg.connect(postgres_server.address)
        try:
            rows = await connection.fetch("SELECT nspname FROM pg_namespace WHERE nspname LIKE 'ravi%'")
        finally:
            await connection.close()
        return {r["nspname"] for r in rows}

    before = asyncio.run(schemas())
    done = conformance(tmp_path, "history", f'[history]\nbackend = "postgres"\ndsn = "{postgres_server.address}"\n')
    assert done.returncode == 0, done.stderr[-2_000:]
    results = json.loads(done.stdout)
    assert sum(r["outcome"] == "passed" for r in results) > 20
    assert asyncio.run(schemas()) == before
    # the cross-process cache tests used to skip with "override 'peer' fixture": the runner supplies it now
    cached = [r for r in results if r["test"].startswith("test_cached_reads_follow_another_process_writes")]
    assert len(cached) == 12 and all(r["outcome"] == "passed" for r in cached), cached[:1]
    # the search's contract was never run by the command: Postgres searches, so it runs and passes
    searched = [r for r in results if r["contract"] == "HistorySearcher"]
    assert len(searched) > 10 and all(r["outcome"] == "passed" for r in searched), searched[:1]


def test_a_redis_run_leaves_no_key_behind(tmp_path: Path, redis_server: Server) -> None:
    async def keys() -> int:
        client = aioredis.Redis.from_url(redis_server.address)
        try:
            return len([k async for k in client.scan_iter(match="ravi_*")])
        finally:
            await client.aclose()

    done = conformance(tmp_path, "history=redis", f'[history]\nurl = "{redis_server.address}"\n')
    assert done.returncode == 0, done.stderr[-2_000:]
    assert asyncio.run(keys()) == 0
    cached = [r for r in json.loads(done.stdout) if r["test"].startswith("test_cached_reads_follow")]
    assert len(cached) == 12 and all(r["outcome"] == "passed" for r in cached), cached[:1]
