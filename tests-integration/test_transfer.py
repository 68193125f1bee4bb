"""``ravi export | ravi import`` between two real backends: a session of every message kind moves from Redis to
Postgres (and back) with its run ids and order, and importing it twice stores nothing."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from servers import Server

from ravi.agents.settings import RaviSettings, build_store
from ravi.conformance.history import every_kind
from ravi.kernel.storage import StoredMessage, stored_body

RAVI = str(Path(sys.executable).with_name("ravi"))


def config(path: Path, section: dict[str, str]) -> Path:
    path.write_text("[history]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in section.items()))
    return path


async def stored(section: dict[str, str], agent: str, session: str) -> list[StoredMessage]:
    history = build_store("history", RaviSettings(history=section))
    try:
        return await history.get_stored(agent, session_id=session)
    finally:
        await history.close()


def test_export_piped_into_import_moves_sessions_between_backends_losslessly(
    postgres_server: Server, redis_server: Server, tmp_path: Path
) -> None:
    tag = uuid.uuid4().hex[:12]
    redis = {"backend": "redis", "url": redis_server.address, "prefix": f"x{tag}"}
    postgres = {"backend": "postgres", "dsn": postgres_server.address, "schema": f"transfer_{tag}"}
    from_redis, to_postgres = config(tmp_path / "redis.toml", redis), config(tmp_path / "postgres.toml", postgres)
    agent = "alice"
    runs = [("r1", every_kind()[:4]), ("r2", every_kind()[4:])]

    async def write() -> None:
        history = build_store("history", RaviSettings(history=redis))
        try:
            for session in ("s1", "s 2"):
                for run_id, batch in runs:
                    await history.append_many(agent, batch, session_id=session, run_id=run_id)
        finally:
            await history.close()

    asyncio.run(write())
    pipe = f"{RAVI} export {agent} --config {from_redis} | {RAVI} import - --config {to_postgres} --json"
    for attempt in range(2):
        done = subprocess.run(pipe, shell=True, capture_output=True, text=True, check=False, timeout=120)
        assert done.returncode == 0, done.stderr
        report = json.loads(done.stdout)
        assert {r["session_id"]: r["messages"] for r in report} == {"s1": 9, "s 2": 9}
        assert {r["session_id"]: r["added"] for r in report} == dict.fromkeys(("s1", "s 2"), 9 if attempt == 0 else 0)
        assert "exported 18 messages" in done.stderr
    expected = [(stored_body(m), run_id) for run_id, batch in runs for m in batch]
    for session in ("s1", "s 2"):
        for section in (redis, postgres):
            got = asyncio.run(stored(section, agent, session))
            assert [(stored_body(x.message), x.run_id) for x in got] == expected, (section["backend"], session)

    # and back, one session, through a file
    export_file = tmp_path / "s1.jsonl"
    back = {**redis, "prefix": f"y{tag}"}
    to_redis = config(tmp_path / "back.toml", back)
    run = [RAVI, "export", agent, "--session", "s1", "--config", str(to_postgres), "--output", str(export_file)]
    assert subprocess.run(run, capture_output=True, text=True, check=False, timeout=120).returncode == 0
    done = subprocess.run(
        [RAVI, "import", str(export_file), "--config", str(to_redis)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert [(stored_body(x.message), x.run_id) for x in asyncio.run(stored(back, agent, "s1"))] == expected

    # a conflicting id is refused by name, and nothing of its batch is stored
    lines = export_file.read_text().splitlines()
    record = json.loads(lines[2])
    record["message"]["content"] = [{"type": "text", "text": "changed"}]
    lines[2] = json.dumps(record)
    export_file.write_text("\n".join(lines) + "\n")
    done = subprocess.run(
        [RAVI, "import", str(export_file), "--config", str(to_redis)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 1 and record["message"]["id"] in done.stderr
    assert len(asyncio.run(stored(back, agent, "s1"))) == len(expected)


def test_two_imports_of_one_file_at_once_store_each_message_once(
    postgres_server: Server, redis_server: Server, tmp_path: Path
) -> None:
    """Two ``ravi import`` processes given the same export at the same moment both find the sessions without its
    ids when they check them, then both append, in batches that interleave: the store's own append, which skips
    a message whose id the session holds, is what keeps each message once and the file's order. Both processes
    are released together by closing their standard input, which they read whole before checking."""
    from ravi.kernel.messages import ChatMessage
    from ravi.kernel.storage.transfer import export_line

    tag = uuid.uuid4().hex[:12]
    sections = {
        "postgres": {"backend": "postgres", "dsn": postgres_server.address, "schema": f"race_{tag}"},
        "redis": {"backend": "redis", "url": redis_server.address, "prefix": f"race{tag}"},
    }
    runs = [("r1", 700), ("r2", 400), ("r1", 300)]  # three runs of each session: batches of 500 and fewer
    expected: dict[str, list[tuple[str, str]]] = {}
    lines = []
    for session in ("s1", "s2"):
        expected[session] = []
        for k, (run, n) in enumerate(runs):
            for i in range(n):
                message = ChatMessage.user(f"{session} {k} {i}", id=f"{session}-{k}-{i}")
                lines.append(export_line("alice", session, StoredMessage(message, run)))
                expected[session].append((stored_body(message), run))
    data = "".join(line + "\n" for line in lines).encode()
    for name, section in sections.items():
        target = config(tmp_path / f"{name}.toml", section)
        imports = [
            subprocess.Popen(
                [RAVI, "import", "-", "--config", str(target), "--json"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            for _ in range(2)
        ]
        for process in imports:  # each copies what it reads and waits for the end of its input
            assert process.stdin is not None
            process.stdin.write(data)
            process.stdin.flush()
        for process in imports:
            assert process.stdin is not None
            process.stdin.close()
            process.stdin = None  # closed: communicate() has nothing to send
        for process in imports:
            out, err = process.communicate(timeout=300)
            assert process.returncode == 0, err.decode()
            report = json.loads(out)
            assert {r["session_id"]: r["messages"] for r in report} == {"s1": 1400, "s2": 1400}, name
        for session in ("s1", "s2"):
            got = asyncio.run(stored(section, "alice", session))
            assert [(stored_body(x.message), x.run_id) for x in got] == expected[session], (name, session)


async def imports_at_once(
    section: dict[str, str], exports: list[list[str]], monkeypatch: pytest.MonkeyPatch
) -> list[dict[tuple[str, str], tuple[int, int]]]:
    """What ``ravi import`` reports for each of ``exports``, imported at once into the store ``section`` names,
    each import with a store of its own; each import's first append waits until every import has reached its
    own, so all have checked and counted the sessions before any stores."""
    from ravi.agents.cli import imports

    arrived: set[object] = set()
    every = asyncio.Event()

    def gated(kind: str, *args: object, **kwargs: object) -> object:
        store = build_store(kind, RaviSettings(history=section))
        append = store.append_many

        async def append_many(*args: object, **kwargs: object) -> object:
            task = asyncio.current_task()
            if task not in arrived:
                arrived.add(task)
                if len(arrived) == len(exports):
                    every.set()
                await every.wait()
            return await append(*args, **kwargs)

        store.append_many = append_many  # type: ignore[method-assign]
        return store

    monkeypatch.setattr(imports, "build_store", gated)
    return list(await asyncio.gather(*(imports._import(lambda lines=lines: iter(lines), None) for lines in exports)))


def test_two_imports_of_overlapping_exports_at_once_each_report_what_they_stored(
    postgres_server: Server, redis_server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two imports at once (each with its own connection to the server, as two ``ravi import`` processes have),
    of exports sharing 5 of their 10 messages, both read the session before either stores: each reports the
    messages its own appends stored (10 and 5, whichever stored first), as the server counted them, not the
    session's growth meanwhile (which holds the other's too)."""
    from datetime import UTC, datetime

    from ravi.kernel.messages import ChatMessage
    from ravi.kernel.storage.transfer import export_line

    tag = uuid.uuid4().hex[:12]
    sections = {
        "postgres": {"backend": "postgres", "dsn": postgres_server.address, "schema": f"count_{tag}"},
        "redis": {"backend": "redis", "url": redis_server.address, "prefix": f"count{tag}"},
    }
    when = datetime(2026, 1, 5, tzinfo=UTC)
    messages = [ChatMessage.user(f"turn {i}", id=f"m{i}", created_at=when) for i in range(15)]
    first = [export_line("a", "s", StoredMessage(m, "r1")) for m in messages[:10]]
    second = [export_line("a", "s", StoredMessage(m, "r1")) for m in messages[5:]]
    for name, section in sections.items():
        done = asyncio.run(imports_at_once(section, [first, second], monkeypatch))
        assert sorted(d["a", "s"] for d in done) == [(10, 5), (10, 10)], (name, done)
        got = asyncio.run(stored(section, "a", "s"))
        assert sorted(x.message.id for x in got) == sorted(m.id for m in messages), name
