"""``ravi export`` and ``ravi import`` on the in-memory store: the errors they give (the round trip between
real backends is in ``tests-integration/test_transfer.py``), and the kernel's line format."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from ravi.agents.context import InMemoryHistoryProvider
from ravi.kernel.errors import InvalidArgument
from ravi.kernel.messages import ChatMessage
from ravi.kernel.storage import StoredMessage, stored_body
from ravi.kernel.storage.transfer import export_line, export_session, import_records, parse_export, split_lines

RAVI = str(Path(sys.executable).with_name("ravi"))


def ravi(tmp_path: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    (tmp_path / "ravi.toml").write_text('[history]\nbackend = "memory"\n')
    return subprocess.run(
        [RAVI, *args], cwd=tmp_path, input=stdin, capture_output=True, text=True, check=False, timeout=60
    )


def test_import_refuses_a_missing_file_and_a_bad_line_by_name(tmp_path: Path) -> None:
    missing = ravi(tmp_path, "import", "nope.jsonl")
    assert missing.returncode == 1 and "no file 'nope.jsonl'" in missing.stderr
    bad = ravi(tmp_path, "import", "-", stdin='{"format": "ravi.session/1"}\n')
    assert bad.returncode == 1 and "line 1" in bad.stderr
    unknown = ravi(tmp_path, "export", "a", "--session", "s")
    assert unknown.returncode == 1 and "has no session 's'" in unknown.stderr


def test_a_file_that_is_not_utf8_or_cannot_be_written_is_an_error_not_a_traceback(tmp_path: Path) -> None:
    """A binary file given to ``ravi import`` (or a stdin that is not UTF-8), and an ``--output`` in a folder that
    does not exist, printed a Python traceback (UnicodeDecodeError, FileNotFoundError)."""
    (tmp_path / "binary.jsonl").write_bytes(b"\xff\xfe\x00 not text\n")
    for args, stdin in ((("import", "binary.jsonl"), b""), (("import", "-"), b"\xff\xfe\n")):
        (tmp_path / "ravi.toml").write_text('[history]\nbackend = "memory"\n')
        done = subprocess.run([RAVI, *args], cwd=tmp_path, input=stdin, capture_output=True, check=False, timeout=60)
        stderr = done.stderr.decode()
        assert done.returncode == 1 and "UTF-8" in stderr and "Traceback" not in stderr, stderr
    unwritable = ravi(tmp_path, "export", "a", "--output", str(tmp_path / "no" / "such" / "folder" / "a.jsonl"))
    assert unwritable.returncode == 1 and "Traceback" not in unwritable.stderr, unwritable.stderr
    assert "cannot write" in unwritable.stderr


def test_a_failed_export_leaves_the_output_file_as_it_was(tmp_path: Path) -> None:
    """``--output`` opened the file for writing before the export ran: an export that failed (an unknown session)
    emptied a file already there, or left an empty one."""
    kept = tmp_path / "kept.jsonl"
    kept.write_text("what was there\n")
    failed = ravi(tmp_path, "export", "a", "--session", "s", "--output", str(kept))
    assert failed.returncode == 1 and "has no session 's'" in failed.stderr
    assert kept.read_text() == "what was there\n"
    assert not (tmp_path / "new.jsonl").exists()
    failed = ravi(tmp_path, "export", "a", "--session", "s", "--output", str(tmp_path / "new.jsonl"))
    assert failed.returncode == 1 and not (tmp_path / "new.jsonl").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept.jsonl", "ravi.toml"]  # nothing partial left


def test_an_export_replaces_the_output_file_whole_and_keeps_its_mode(tmp_path: Path) -> None:
    (tmp_path / "ravi.toml").write_text('[history]\nbackend = "memory"\n')
    out = tmp_path / "out.jsonl"
    out.write_text("old\n")
    out.chmod(0o640)
    done = ravi(tmp_path, "export", "a", "--output", str(out))  # the agent has no sessions: an empty export
    assert done.returncode == 0, done.stderr
    assert out.read_text() == "" and out.stat().st_mode & 0o777 == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.jsonl", "ravi.toml"]


def test_import_reads_what_a_shell_substitutes_and_refuses_a_folder(tmp_path: Path) -> None:
    """``ravi import /dev/null`` (or a pipe from ``<(...)``) said there was no such file."""
    empty = ravi(tmp_path, "import", "/dev/null")
    assert empty.returncode == 0, empty.stderr
    folder = ravi(tmp_path, "import", str(tmp_path))
    assert folder.returncode == 1 and "cannot read" in folder.stderr and "Traceback" not in folder.stderr


def test_an_import_that_keeps_nothing_says_so(tmp_path: Path) -> None:
    """``ravi import s1.jsonl`` with no configuration imported into the in-memory history, reported "5 new" and
    exited 0, and the messages were gone with the process; an empty input (``ravi export ... | ravi import -``
    after a failed export) printed nothing at all. Both now say so on standard error (exit status 0)."""
    line = json.dumps(
        {
            "format": "ravi.session/1",
            "agent_id": "a",
            "session_id": "s",
            "run_id": "r",
            "message": {
                "id": "m1",
                "role": "user",
                "content": [{"type": "text", "text": "hi"}],
                "name": None,
                "metadata": {},
                "created_at": "2026-01-05T09:00:00Z",
            },
        }
    )
    done = ravi(tmp_path, "import", "-", stdin=line + "\n")
    assert done.returncode == 0, done.stderr
    assert "session 's': 1 message, 1 new" in done.stdout
    assert "the history is in memory" in done.stderr and "--config" in done.stderr
    for source in ("-", "/dev/null"):
        empty = ravi(tmp_path, "import", source)
        assert empty.returncode == 0 and empty.stdout == "", empty.stderr
        assert "nothing to import" in empty.stderr, empty.stderr


async def test_a_round_trip_through_text_keeps_every_character() -> None:
    source, target = InMemoryHistoryProvider(), InMemoryHistoryProvider()
    messages = [ChatMessage.user(f"a{c}b", id=str(i)) for i, c in enumerate("\n\r\u2028\u2029\x85\x0c\x1c\x00")]
    await source.append_many("a", messages, session_id="s", run_id="r")
    text = "\r\n".join(await export_session(source, "a", "s")) + "\r\n"  # written on Windows, say
    await import_records(target, parse_export(split_lines(text)))
    assert [stored_body(m) for m in await target.get_messages("a", session_id="s")] == list(map(stored_body, messages))


def test_an_export_refuses_a_symbolic_link_and_writes_to_a_descriptor(tmp_path: Path) -> None:
    """``--output`` through a symbolic link replaced the file the link named: a link planted in a shared folder
    (``/tmp/out.jsonl`` -> ``~/.bashrc``) had the export overwrite a file the user never named, and a dangling
    link made a file where it pointed. ``--output /dev/fd/1`` (or ``/dev/stdout``) with standard output sent to a
    file was refused, or replaced the link under /dev."""
    target = tmp_path / "target.jsonl"
    target.write_text("old\n")
    target.chmod(0o644)
    link = tmp_path / "link.jsonl"
    link.symlink_to(target)
    dangling = tmp_path / "dangling.jsonl"
    dangling.symlink_to(tmp_path / "made.jsonl")
    for output in (link, dangling):
        done = ravi(tmp_path, "export", "a", "--output", str(output))
        assert done.returncode == 1 and "symbolic link" in done.stderr, done.stderr
        assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert link.is_symlink() and target.read_text() == "old\n" and target.stat().st_mode & 0o777 == 0o644
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dangling.jsonl", "link.jsonl", "ravi.toml", "target.jsonl"]
    sent = tmp_path / "sent.txt"
    sent.write_text("before\n")
    with sent.open("a") as stdout:
        done = subprocess.run(
            [RAVI, "export", "a", "--output", "/dev/fd/1"],
            cwd=tmp_path,
            stdout=stdout,
            stderr=subprocess.PIPE,
            text=True,
            check=False,
            timeout=60,
        )
    assert done.returncode == 0, done.stderr
    assert sent.read_text() == "before\n"  # nothing to export; the file written to is the one stdout went to


@pytest.mark.parametrize("signame", ["SIGTERM", "SIGHUP"])
def test_an_export_ended_by_a_signal_leaves_no_partial_file(tmp_path: Path, signame: str) -> None:
    """``kill`` (SIGTERM, as a container's stop sends) ended the process before it could remove the file it was
    writing: a hidden ``.out.jsonl.*.partial`` stayed beside the output. So did SIGHUP (the terminal closed). The
    handler raised ``SystemExit`` wherever the process was, and the unwinding went through the store, which may
    wait on an unanswering server; it was set after the file was made. The test waits for the line the export
    prints once its file is made, and sends the signal while the store waits on a server that never answers."""
    import signal
    import socket

    sent = getattr(signal, signame)
    with socket.socket() as server:  # a Postgres that takes connections (the system accepts them) and never answers
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        port = server.getsockname()[1]
        (tmp_path / "pg.toml").write_text(
            f'[history]\nbackend = "postgres"\ndsn = "postgresql://u:p@127.0.0.1:{port}/db"\n'
        )
        export = subprocess.Popen(
            [RAVI, "export", "a", "--output", "out.jsonl", "--config", "pg.toml"],
            cwd=tmp_path,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert export.stderr is not None
        ready = export.stderr.readline()  # an empty line if the export ended without reaching it
        assert ready == "exporting to 'out.jsonl' ...\n", ready + export.stderr.read()
        assert any(p.name.endswith(".partial") for p in tmp_path.iterdir())
        export.send_signal(sent)
        export.communicate(timeout=120)
    assert export.returncode == 128 + sent
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pg.toml"]


def test_a_new_export_file_is_readable_by_its_owner_only(tmp_path: Path) -> None:
    """A transcript is private: ``--output`` made its new file with the umask's mode (0644 under the usual 022),
    readable by every user of the machine."""
    (tmp_path / "ravi.toml").write_text('[history]\nbackend = "memory"\n')
    done = subprocess.run(
        [RAVI, "export", "a", "--output", "new.jsonl"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
        umask=0o022,
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "new.jsonl").stat().st_mode & 0o777 == 0o600


def test_import_refuses_a_line_nested_too_deep_or_with_a_key_twice(tmp_path: Path) -> None:
    """A line nested a thousand levels deep printed a RecursionError traceback; a line holding a key twice
    (``"agent_id": "a", "agent_id": "b"``) was imported under the last one, silently, where JSON readers
    disagree on which value counts."""

    from ravi.kernel.errors import InvalidArgument

    deep = '{"format": "ravi.session/1", "message": ' + "[" * 100_000 + "]" * 100_000 + "}"
    done = ravi(tmp_path, "import", "-", stdin=deep + "\n")
    assert done.returncode == 1 and "line 1" in done.stderr and "Traceback" not in done.stderr, done.stderr[-300:]
    message = '{"id": "m", "role": "user", "content": [{"type": "text", "text": "hi", "text": "ho"}]}'
    twice = [
        '{"format": "ravi.session/1", "agent_id": "a", "agent_id": "b", "session_id": "s", "run_id": "r", '
        '"message": {"id": "m", "role": "user", "content": []}}',
        f'{{"format": "ravi.session/1", "agent_id": "a", "session_id": "s", "run_id": "r", "message": {message}}}',
    ]
    for line in twice:
        with pytest.raises(InvalidArgument, match=r"line 2 .*twice"):
            parse_export(["", line])
    done = ravi(tmp_path, "import", "-", stdin=twice[0] + "\n")
    assert done.returncode == 1 and "'agent_id' twice" in done.stderr, done.stderr


def test_import_refuses_a_file_giving_one_message_id_two_messages_before_storing_any(tmp_path: Path) -> None:
    """A file holding two different messages (or one under two runs) with one id in one session stored the
    batches before the second, then failed with ``MessageConflict``: the import stopped halfway."""
    import json

    from ravi.kernel.errors import InvalidArgument

    def line(session: str, run: str, id_: str, text: str) -> str:
        content = [{"type": "text", "text": text}]
        message = {"id": id_, "role": "user", "content": content, "created_at": "2026-01-01T00:00:00Z"}
        record = {"format": "ravi.session/1", "agent_id": "a", "session_id": session, "run_id": run}
        return json.dumps({**record, "message": message})

    first, other = line("s", "r1", "m1", "hi"), line("s", "r2", "m2", "then")
    for second in (line("s", "r2", "m1", "changed"), line("s", "r2", "m1", "hi")):
        with pytest.raises(InvalidArgument, match=r"line 3 .*'m1'.*line 1"):
            parse_export([first, other, second])
    assert len(parse_export([first, other, first, line("t", "r1", "m1", "another session")])) == 4
    done = ravi(tmp_path, "import", "-", stdin="\n".join([first, other, line("s", "r2", "m1", "changed")]) + "\n")
    assert done.returncode == 1 and "line 3" in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert done.stdout == ""


async def test_import_refuses_a_message_without_its_id_or_timestamp() -> None:
    """A line whose message had no ``id`` (or no ``created_at``) was given a new one at each import: importing the
    same file again stored every message twice, or failed with ``MessageConflict``, where it stores nothing."""
    import json

    from ravi.kernel.errors import InvalidArgument

    content = [{"type": "text", "text": "hi"}]
    whole = {"id": "m1", "role": "user", "content": content, "created_at": "2026-01-01T00:00:00Z"}
    for missing in ("id", "created_at"):
        message = {k: v for k, v in whole.items() if k != missing}
        record = {"format": "ravi.session/1", "agent_id": "a", "session_id": "s", "run_id": "r", "message": message}
        with pytest.raises(InvalidArgument, match=f"line 1: message has no {missing!r}"):
            parse_export([json.dumps(record)])
    history = InMemoryHistoryProvider()
    record = {"format": "ravi.session/1", "agent_id": "a", "session_id": "s", "run_id": "r", "message": whole}
    for _ in range(2):
        await import_records(history, parse_export([json.dumps(record)]))
    assert await history.count_messages("a", session_id="s") == 1


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="giving a file to another user needs root")
def test_an_export_replacing_a_file_keeps_its_owner(tmp_path: Path) -> None:
    """``--output`` over another user's file (run with sudo, say) handed the file to the user who ran the export:
    its owner and group changed with its contents."""
    (tmp_path / "ravi.toml").write_text('[history]\nbackend = "memory"\n')
    out = tmp_path / "theirs.jsonl"
    out.write_text("old\n")
    os.chown(out, 65534, 65534)
    done = ravi(tmp_path, "export", "a", "--output", str(out))
    assert done.returncode == 0, done.stderr
    assert out.read_text() == "" and (out.stat().st_uid, out.stat().st_gid) == (65534, 65534)


def test_an_export_writes_a_file_whose_name_is_as_long_as_the_system_allows(tmp_path: Path) -> None:
    """``--output`` with a name of 240 characters or more (the limit is 255) was refused as too long: the hidden
    file written beside it first added its prefix and suffix to the name."""
    name = "x" * 249 + ".jsonl"
    done = ravi(tmp_path, "export", "a", "--output", name)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ravi.toml", name]


async def test_an_import_meeting_a_held_id_stores_nothing_of_the_file() -> None:
    """An import whose later batch met an id the session held for another message stored the batches before it,
    then failed with ``MessageConflict``: the file was half imported."""
    from ravi.kernel.errors import MessageConflict

    history = InMemoryHistoryProvider()
    held = ChatMessage.user("held", id="m9")
    await history.append_many("a", [held], session_id="t", run_id="r")
    source = InMemoryHistoryProvider()
    await source.append_many("a", [ChatMessage.user("one", id="m1")], session_id="s", run_id="r")
    await source.append_many("a", [ChatMessage.user("another", id="m9")], session_id="t", run_id="r")
    lines = await export_session(source, "a", "s") + await export_session(source, "a", "t")
    with pytest.raises(MessageConflict, match="m9"):
        await import_records(history, parse_export(lines))
    assert await history.count_messages("a", session_id="s") == 0
    assert [stored_body(m) for m in await history.get_messages("a", session_id="t")] == [stored_body(held)]


def test_an_export_refuses_to_replace_a_read_only_file(tmp_path: Path) -> None:
    """``--output`` over a file its owner made read-only (0444) replaced it, where a shell's ``>`` refuses."""
    (tmp_path / "ravi.toml").write_text('[history]\nbackend = "memory"\n')
    kept = tmp_path / "kept.jsonl"
    kept.write_text("keep me\n")
    kept.chmod(0o444)
    done = ravi(tmp_path, "export", "a", "--output", str(kept))
    assert done.returncode == 1 and "read-only" in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert kept.read_text() == "keep me\n" and kept.stat().st_mode & 0o777 == 0o444
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept.jsonl", "ravi.toml"]


def _record(created_at: object, id_: str = "m1") -> str:
    message = {"id": id_, "role": "user", "content": [{"type": "text", "text": "hi"}], "created_at": created_at}
    record = {"format": "ravi.session/1", "agent_id": "a", "session_id": "s", "run_id": "r"}
    return json.dumps({**record, "message": message})


@pytest.mark.parametrize(
    ("created_at", "said"),
    [
        (0, "before 1970-01-02"),
        (-5, "before 1970-01-02"),
        (86_399, "before 1970-01-02"),
        ("1970-01-01T23:59:59Z", "before 1970-01-02"),
        ("0001-01-01T00:00:00Z", "before 1970-01-02"),
        ("1970-01-01T23:59:59", "before 1970-01-02"),
        ("0001-01-01T00:00:00", "before 1970-01-02"),
    ],
)
def test_import_refuses_a_timestamp_before_1970_naming_the_line(tmp_path: Path, created_at: object, said: str) -> None:
    """``"created_at": 0`` (a converter's placeholder) was imported as 1970-01-01, as if the message had been
    written then; a time without a time zone is held to the same day, read as written."""
    from ravi.kernel.errors import InvalidArgument

    good = _record("2026-01-05T09:00:00Z", "m0")
    with pytest.raises(InvalidArgument, match=f"line 2: created_at .*{said}"):
        parse_export([good, _record(created_at)])
    done = ravi(tmp_path, "import", "-", stdin=f"{good}\n{_record(created_at)}\n")
    assert done.returncode == 1 and "line 2" in done.stderr and said in done.stderr, done.stderr
    assert done.stdout == ""


@given(st.datetimes(min_value=datetime(1970, 1, 2), timezones=st.timezones()))
def test_import_takes_every_instant_from_1970_01_02_as_it_is_written(stamp: datetime) -> None:
    """An aware time from 1970-01-02 on is taken, and is the message's ``created_at`` as the message keeps it (the
    same instant, the same offset); the same time without its zone is taken as written, without one."""
    from ravi.kernel.errors import InvalidArgument

    assume(stamp.utcoffset() is not None and stamp >= datetime(1970, 1, 2, tzinfo=UTC))
    try:
        message = ChatMessage.user("hi", id="m1", created_at=stamp)
    except InvalidArgument:  # an offset of seconds (a zone's local mean time): the message model refuses it
        return
    [record] = parse_export([_record(json.loads(message.model_dump_json())["created_at"])])
    assert stored_body(record.message) == stored_body(message)
    assert record.message.created_at.utcoffset() == stamp.utcoffset()
    naive = stamp.replace(tzinfo=None)
    [record] = parse_export([_record(naive.isoformat())])
    assert record.message.created_at == naive and record.message.created_at.tzinfo is None


@given(st.datetimes(min_value=datetime(1970, 1, 2)))
def test_a_message_written_without_a_time_zone_comes_back_from_an_export_exactly(stamp: datetime) -> None:
    """A message may be written with a ``created_at`` without a time zone (``datetime.now()``), and every store
    keeps it so; its export carries it so, and the import refused the line: a session could not be moved, or
    restored from its own export. The import now stores it exactly as it was stored: the same time, no zone."""
    import asyncio

    async def round_trip() -> None:
        source, target = InMemoryHistoryProvider(), InMemoryHistoryProvider()
        written = [ChatMessage.user("hi", id="m1", created_at=stamp), ChatMessage.assistant("hello", id="m2")]
        await source.append_many("a", written, session_id="s", run_id="r")
        lines = await export_session(source, "a", "s")
        done = await import_records(target, parse_export(lines))
        assert done["a", "s"].stored == 2
        got = await target.get_stored("a", session_id="s")
        assert [(stored_body(x.message), x.run_id) for x in got] == [(stored_body(m), "r") for m in written]
        assert got[0].message.created_at == stamp and got[0].message.created_at.tzinfo is None
        assert await export_session(target, "a", "s") == lines

    asyncio.run(round_trip())


def test_ravi_import_takes_a_line_without_a_time_zone(tmp_path: Path) -> None:
    """Through the command: the line is taken and counted, not refused."""
    done = ravi(tmp_path, "import", "-", stdin=_record("2026-01-05T09:00:00") + "\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["agent 'a' session 's': 1 message, 1 new"]


class _Recording(InMemoryHistoryProvider):
    """The in-memory store, counting the messages of each ``append_many``."""

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[int] = []

    async def append_many(self, agent_id: str, messages: object, *, session_id: str, run_id: str = "") -> int:
        self.batches.append(len(messages))  # type: ignore[arg-type]
        return await super().append_many(agent_id, messages, session_id=session_id, run_id=run_id)  # type: ignore[arg-type]


@pytest.mark.parametrize("source", ["file", "-"])
def test_an_import_larger_than_a_batch_is_stored_a_batch_at_a_time_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str
) -> None:
    """``ravi import`` read the whole file into memory, then every record of it, and appended each run of a
    session in one call: a large export needed memory for all of it at once. It now reads the lines twice, one at
    a time (a copy of standard input kept on disk), holding a batch of messages at a time."""
    import asyncio

    from typer.testing import CliRunner

    from ravi.agents.cli import app, imports

    exported = InMemoryHistoryProvider()

    async def write() -> list[str]:
        for session, runs in (("s1", [("r1", 20), ("r2", 15), ("r1", 3)]), ("s2", [("r1", 10)])):
            for k, (run, n) in enumerate(runs):
                batch = [ChatMessage.user(f"{session} {run} {i}", id=f"{session}-{k}-{i}") for i in range(n)]
                await exported.append_many("a", batch, session_id=session, run_id=run)
        return await export_session(exported, "a", "s1") + ["", "  "] + await export_session(exported, "a", "s2")

    lines = asyncio.run(write())
    (tmp_path / "a.jsonl").write_text("\r\n".join(lines) + "\n")
    history = _Recording()
    monkeypatch.setattr(imports, "build_store", lambda kind, *args, **kwargs: history)
    monkeypatch.setattr(imports, "BATCH_MESSAGES", 7, raising=False)
    monkeypatch.chdir(tmp_path)
    given = ["import", "a.jsonl"] if source == "file" else ["import", "-"]
    for attempt in range(2):
        stdin = (tmp_path / "a.jsonl").read_bytes() if source == "-" else None
        result = CliRunner().invoke(app, given, input=stdin)
        assert result.exit_code == 0, result.output
        new = (38, 10) if attempt == 0 else (0, 0)
        assert result.stdout.splitlines() == [
            f"agent 'a' session 's1': 38 messages, {new[0]} new",
            f"agent 'a' session 's2': 10 messages, {new[1]} new",
        ]
    assert max(history.batches) == 7 and len(history.batches) == 2 * (3 + 3 + 1 + 2)

    async def both(store: InMemoryHistoryProvider, session: str) -> list[tuple[str, str]]:
        return [(stored_body(s.message), s.run_id) for s in await store.get_stored("a", session_id=session)]

    for session in ("s1", "s2"):
        assert asyncio.run(both(history, session)) == asyncio.run(both(exported, session))


async def test_an_import_refuses_lines_that_changed_after_they_were_checked() -> None:
    """The second reading of an import's lines is checked against the first: a file changed in between is an
    error naming the line, not a message stored unchecked."""
    from ravi.kernel.errors import InvalidArgument
    from ravi.kernel.storage.transfer import Imported, check_export, store_export

    source, target = InMemoryHistoryProvider(), InMemoryHistoryProvider()
    await source.append_many("a", [ChatMessage.user(str(i), id=f"m{i}") for i in range(3)], session_id="s")
    lines = await export_session(source, "a", "s")
    checked = await check_export(target, lines)
    changed = [*lines[:2], lines[2].replace('"text": "2"', '"text": "two"')]
    with pytest.raises(InvalidArgument, match="line 3 is not what it was"):
        await store_export(target, changed, checked, batch_messages=2)
    with pytest.raises(InvalidArgument, match="line 4 is not what it was"):
        await store_export(target, [*lines, lines[0]], await check_export(target, lines))
    with pytest.raises(InvalidArgument, match="holds 2 records where it held 3"):
        await store_export(target, lines[:2], await check_export(target, lines))
    # the first call stored m0 and m1 before it met the changed line
    assert await store_export(target, lines, await check_export(target, lines)) == {("a", "s"): Imported(3, 1)}


@pytest.mark.parametrize("order", [(0, 0, 2), (1, 0, 2), (0, 2, 1), (0, 1, 1)])
async def test_an_import_refuses_lines_moved_or_repeated_after_they_were_checked(order: tuple[int, ...]) -> None:
    """A second reading that gives a checked line in another place (twice, or in another order) is a file that
    changed: a line repeated in place of another one was taken, so that other message was never stored while the
    import said it was."""
    from ravi.kernel.errors import InvalidArgument
    from ravi.kernel.storage.transfer import check_export, store_export

    source, target = InMemoryHistoryProvider(), InMemoryHistoryProvider()
    await source.append_many("a", [ChatMessage.user(str(i), id=f"m{i}") for i in range(3)], session_id="s")
    lines = await export_session(source, "a", "s")
    checked = await check_export(target, lines)
    first = next(n for n, i in enumerate(order, 1) if i != n - 1)
    with pytest.raises(InvalidArgument, match=f"line {first} is not what it was"):
        await store_export(target, [lines[i] for i in order], checked)
    again = [*lines[:2], "", lines[1], lines[2]]  # a line given twice is taken where it was given twice
    assert (await store_export(target, again, await check_export(target, again)))["a", "s"].records == 4
    assert [m.id for m in await target.get_messages("a", session_id="s")] == ["m0", "m1", "m2"]


def test_an_import_from_standard_input_without_room_for_its_copy_says_so(tmp_path: Path) -> None:
    """Standard input is read twice through a copy in TMPDIR: a copy that cannot be written (here, files are
    limited to 64 KiB) is one line saying so and how to give it room, and nothing is stored."""
    import resource
    import signal

    def limited() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG) instead of killing
        resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 16, 1 << 16))

    lines = [_record("2026-01-05T09:00:00Z", f"m{i}") for i in range(2_000)]
    (tmp_path / "ravi.toml").write_text('[history]\nbackend = "memory"\n')
    done = subprocess.run(
        [RAVI, "import", "-"],
        cwd=tmp_path,
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
        preexec_fn=limited,
        env={**os.environ, "TMPDIR": str(tmp_path)},
    )
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert "cannot keep a copy of standard input" in done.stderr and "TMPDIR" in done.stderr, done.stderr
    assert done.stdout == "" and sorted(p.name for p in tmp_path.iterdir()) == ["ravi.toml"]


def test_an_import_from_standard_input_redirected_from_a_file_reads_from_where_it_was_given(tmp_path: Path) -> None:
    """``ravi import - < file`` reads the file twice from where standard input stood when it began (a script may
    have read a header line first), not from the file's start."""
    (tmp_path / "ravi.toml").write_text('[history]\nbackend = "memory"\n')
    header = "a header the caller read\n"
    (tmp_path / "a.jsonl").write_text(header + _record("2026-01-05T09:00:00Z") + "\n")
    with (tmp_path / "a.jsonl").open("rb") as given:
        given.seek(len(header))
        done = subprocess.run(
            [RAVI, "import", "-"], cwd=tmp_path, stdin=given, capture_output=True, text=True, check=False, timeout=60
        )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "agent 'a' session 's': 1 message, 1 new\n"


@pytest.mark.parametrize("size", [0, -1, 1.5, True, None])
async def test_the_readings_of_an_import_refuse_a_page_or_batch_size_that_is_not_a_count(size: object) -> None:
    """A ``page`` of 0 read no stored message, so the check of held ids passed without looking."""
    from ravi.kernel.errors import InvalidArgument
    from ravi.kernel.storage.transfer import check_export, store_export

    history = InMemoryHistoryProvider()
    with pytest.raises(InvalidArgument, match="page"):
        await check_export(history, [], page=size)  # type: ignore[arg-type]
    checked = await check_export(history, [])
    for name in ("batch_messages", "batch_chars"):
        with pytest.raises(InvalidArgument, match=name):
            await store_export(history, [], checked, **{name: size})  # type: ignore[arg-type]


def test_an_import_from_a_closed_standard_input_says_so(tmp_path: Path) -> None:
    """``ravi import -`` run with standard input closed (``<&-``) printed a traceback (``AttributeError``: Python
    has no ``sys.stdin`` then)."""
    (tmp_path / "ravi.toml").write_text('[history]\nbackend = "memory"\n')
    done = subprocess.run(
        [RAVI, "import", "-"],
        cwd=tmp_path,
        stdin=None,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
        preexec_fn=lambda: os.close(0),
    )
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert "standard input is closed" in done.stderr, done.stderr
    assert done.stdout == ""


@pytest.mark.parametrize("given", ["file", "stdin"])
def test_an_export_saved_with_a_byte_order_mark_is_imported(tmp_path: Path, given: str) -> None:
    """An editor, or PowerShell's UTF-8, writes a byte-order mark (U+FEFF) first: the first line was refused as
    not JSON, with Python's advice to decode it as ``utf-8-sig``. It marks the encoding, not the data; a mark
    anywhere else is still refused."""
    (tmp_path / "ravi.toml").write_text('[history]\nbackend = "memory"\n')
    text = "\ufeff" + _record("2026-01-05T09:00:00Z") + "\r\n" + _record("2026-01-05T09:00:01Z", "m2") + "\r\n"
    (tmp_path / "a.jsonl").write_text(text, encoding="utf-8", newline="")
    done = ravi(tmp_path, "import", "a.jsonl") if given == "file" else ravi(tmp_path, "import", "-", stdin=text)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "agent 'a' session 's': 2 messages, 2 new\n"
    inside = _record("2026-01-05T09:00:00Z") + "\n\ufeff" + _record("2026-01-05T09:00:01Z", "m2") + "\n"
    refused = ravi(tmp_path, "import", "-", stdin=inside)
    assert refused.returncode == 1 and "line 2 is not JSON" in refused.stderr, refused.stderr


@pytest.mark.parametrize("source", ["file", "-"])
def test_a_line_longer_than_any_message_is_refused_naming_it_without_holding_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str
) -> None:
    """``ravi import /dev/zero`` (no newline, ever) held the line as it grew, until memory ran out: a line is
    read at most ``MAX_LINE_BYTES`` at a time, and a longer one is refused naming it; nothing is stored."""
    from typer.testing import CliRunner

    from ravi.agents.cli import app, imports

    monkeypatch.setattr(imports, "MAX_LINE_BYTES", 1_000, raising=False)
    first = _record("2026-01-05T09:00:00Z")
    assert len(first.encode()) < 1_000
    text = first + "\n" + '{"x": "' + "y" * 5_000 + '"}\n'
    (tmp_path / "a.jsonl").write_text(text)
    history = _Recording()
    monkeypatch.setattr(imports, "build_store", lambda kind, *args, **kwargs: history)
    monkeypatch.chdir(tmp_path)
    given = ["import", "a.jsonl"] if source == "file" else ["import", "-"]
    result = CliRunner().invoke(app, given, input=text.encode() if source == "-" else None)
    assert isinstance(result.exception, InvalidArgument), result.output
    assert "line 2 is longer than 1,000 bytes" in str(result.exception)
    assert not history.batches


class _Gate:
    """Holds each import's first ``append_many`` until every import has reached its own, so both have read the
    sessions (checked them, counted them) before either stores anything: two imports overlapping in time, every
    run, without waiting on a clock."""

    def __init__(self, imports: int) -> None:
        self.imports = imports
        self.arrived: set[object] = set()
        self.open = asyncio.Event()

    def around(self, append: Callable[..., Awaitable[int | None]]) -> Callable[..., Awaitable[int | None]]:
        async def gated(*args: object, **kwargs: object) -> int | None:
            task = asyncio.current_task()
            if task not in self.arrived:
                self.arrived.add(task)
                if len(self.arrived) == self.imports:
                    self.open.set()
                await self.open.wait()
            return await append(*args, **kwargs)

        return gated


def overlapping_exports() -> tuple[list[str], list[str]]:
    """Two exports of one session, the second holding the last 5 of the first's 10 messages and 5 of its own."""
    when = datetime(2026, 1, 5, tzinfo=UTC)
    messages = [ChatMessage.user(f"turn {i}", id=f"m{i}", created_at=when) for i in range(15)]
    first = [export_line("a", "s", StoredMessage(m, "r1")) for m in messages[:10]]
    second = [export_line("a", "s", StoredMessage(m, "r1")) for m in messages[5:]]
    return first, second


async def test_two_imports_of_overlapping_exports_at_once_each_report_what_they_stored(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``ravi import`` reported as new the growth of each session between its check and its end: two imports at
    once each counted the other's messages too (both said 15 new where 15 were stored in all). Each now reports
    what the store said its own appends stored: 10 and 5, whichever stored first."""
    from ravi.agents.cli import imports

    history = InMemoryHistoryProvider()
    gate = _Gate(2)
    monkeypatch.setattr(history, "append_many", gate.around(history.append_many))
    monkeypatch.setattr(imports, "build_store", lambda kind, *args, **kwargs: history)
    first, second = overlapping_exports()
    done = await asyncio.gather(imports._import(lambda: iter(first), None), imports._import(lambda: iter(second), None))
    assert [d["a", "s"][0] for d in done] == [10, 10]  # the records each export held
    assert sorted(d["a", "s"][1] for d in done) == [5, 10], done
    stored = [m.id for m in await history.get_messages("a", session_id="s")]
    assert sorted(stored) == sorted(f"m{i}" for i in range(15))
