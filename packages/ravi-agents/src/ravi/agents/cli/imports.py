"""``ravi import``: read a ``ravi export`` into the configured history backend."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import stat
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Annotated

import typer

from ravi.agents.cli._common import ConfigOption, JsonOption, close_store, count_of, shown
from ravi.agents.settings import build_store, load_settings
from ravi.kernel.errors import InvalidArgument, NotFound
from ravi.kernel.storage.transfer import check_export, store_export

BATCH_MESSAGES = 500
"""The most messages an import holds and appends at once."""
BATCH_CHARS = 8_000_000
"""The most characters of lines an import holds and appends at once (a longer line is a batch of its own)."""
MAX_LINE_BYTES = 256 * 2**20
"""The longest line an import reads (256 MiB): far more than any message a model's window can take, so that a
file that is no export (``/dev/zero``, a line that never ends) is refused instead of held until memory runs out."""

Reader = Callable[[], Iterator[str]]


IN_MEMORY = (
    "the history is in memory, so what was imported is gone when this command exits; point --config (or"
    " RAVI_HISTORY__*) at the store to import into"
)


async def _import(read: Reader, config: Path | None) -> dict[tuple[str, str], tuple[int, int]]:
    from ravi.agents.context import InMemoryHistoryProvider

    history = build_store("history", load_settings(config))
    try:
        checked = await check_export(history, read())
        before = {key: await history.count_messages(key[0], session_id=key[1]) for key in checked.sessions}
        given = await store_export(history, read(), checked, batch_messages=BATCH_MESSAGES, batch_chars=BATCH_CHARS)
        after = {key: await history.count_messages(key[0], session_id=key[1]) for key in checked.sessions}
    finally:
        await close_store(history)
    if given and isinstance(history, InMemoryHistoryProvider):  # the default with no configuration
        typer.echo(f"note: {IN_MEMORY}", err=True)
    # what the store counted as it stored them: the session's growth would count another import's messages too,
    # and is used only for a store whose append_many does not say
    return {
        key: (done.records, after[key] - before[key] if done.stored is None else done.stored)
        for key, done in sorted(given.items())
    }


def _lines(stream: IO[bytes], where: str, copy: IO[bytes] | None = None) -> Iterator[str]:
    """The lines of ``stream``, one at a time: split at ``\\n`` only (a ``\\r`` before it dropped), as
    :func:`~ravi.kernel.storage.transfer.split_lines` does, each decoded from UTF-8, and written to ``copy``. A
    byte-order mark that starts the stream (an editor's, PowerShell's) is dropped: it marks the encoding."""
    offset = 0
    number = 0
    try:
        while raw := stream.readline(MAX_LINE_BYTES + 1):
            number += 1
            if len(raw) > MAX_LINE_BYTES and not (len(raw) == MAX_LINE_BYTES + 1 and raw.endswith(b"\n")):
                raise InvalidArgument(
                    f"{where}: line {number:,} is longer than {MAX_LINE_BYTES:,} bytes, more than any message",
                    hint="give a file ravi export wrote: one message per line",
                )
            if copy is not None:
                try:
                    copy.write(raw)
                except OSError as error:
                    raise InvalidArgument(
                        f"cannot keep a copy of {where} for the import's second reading: {error.strerror}",
                        hint="point TMPDIR at a folder with room for the export, or give the export as a file",
                    ) from None
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as error:
                raise InvalidArgument(
                    f"{where} is not UTF-8 text (byte {offset + error.start})",
                    hint="ravi export writes UTF-8; give the file it wrote",
                ) from None
            if not offset:
                line = line.removeprefix("\ufeff")
            offset += len(raw)
            yield line.removesuffix("\n").removesuffix("\r")
    except OSError as error:
        raise InvalidArgument(f"cannot read {where}: {error.strerror}") from None


def _regular(stream: IO[bytes]) -> bool:
    """Whether ``stream`` is a regular file, which can be read a second time from its start."""
    try:
        return stat.S_ISREG(os.fstat(stream.fileno()).st_mode)
    except (OSError, ValueError, io.UnsupportedOperation):
        return False


@contextlib.contextmanager
def _reader(source: str) -> Iterator[Reader]:
    """What reads the lines of ``source`` afresh at each call: a regular file from its start; standard input,
    a pipe or a device from a private copy made during the first reading (they cannot be read twice)."""
    where = "standard input" if source == "-" else repr(source)
    with contextlib.ExitStack() as stack:
        if source == "-":
            if sys.stdin is None:  # Python has none when the process began with it closed (<&-)
                raise InvalidArgument("standard input is closed", hint="give the export on standard input, or its path")
            stream: IO[bytes] = sys.stdin.buffer
        else:
            try:  # a regular file, or what a shell substitutes (a pipe, /dev/stdin)
                stream = stack.enter_context(open(source, "rb"))
            except FileNotFoundError:
                raise NotFound(
                    f"no file {source!r} to import", hint="give the path of a ravi export, or - for stdin"
                ) from None
            except OSError as error:
                raise InvalidArgument(f"cannot read {source!r}: {error.strerror}") from None
        if _regular(stream):
            start = stream.tell()  # standard input redirected from a file may start past the file's start

            def again() -> Iterator[str]:
                stream.seek(start)
                return _lines(stream, where)

            yield again
            return
        handle, name = tempfile.mkstemp(prefix="ravi-import.", suffix=".jsonl")  # readable by its owner only
        stack.callback(os.unlink, name)
        copy = os.fdopen(handle, "w+b")
        stack.callback(_close_quietly, copy)  # a temporary copy: what it could not write is already an error
        readings = 0

        def spooled() -> Iterator[str]:
            nonlocal readings
            readings += 1
            if readings == 1:
                return _lines(stream, where, copy)
            try:
                copy.flush()
                copy.seek(0)
            except OSError as error:
                raise InvalidArgument(
                    f"cannot keep a copy of {where} for the import's second reading: {error.strerror}",
                    hint="point TMPDIR at a folder with room for the export, or give the export as a file",
                ) from None
            return _lines(copy, where)

        yield spooled


def _close_quietly(copy: IO[bytes]) -> None:
    with contextlib.suppress(OSError):
        copy.close()


def import_(
    source: Annotated[str, typer.Argument(metavar="FILE", help="A file written by ravi export, or - for stdin.")],
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Read a ravi export into the configured history backend, keeping every message, its run id and the order.
    Every line is checked before anything is stored; importing the same file again stores nothing; a message id
    the session holds for another message is an error naming it."""
    with _reader(source) as read:
        done = asyncio.run(_import(read, config))
    if not done:  # an empty export, or a pipe from an export that failed
        where = "standard input" if source == "-" else repr(source)
        typer.echo(shown(f"nothing to import: {where} holds no messages"), err=True)
    if as_json:
        rows = [{"agent_id": a, "session_id": s, "messages": n, "added": added} for (a, s), (n, added) in done.items()]
        typer.echo(shown(json.dumps(rows, indent=2, ensure_ascii=False), keep="\n", as_json=True))
        return
    for (agent, session), (count, added) in done.items():
        typer.echo(shown(f"agent {agent!r} session {session!r}: {count_of(count, 'message')}, {added} new"))


__all__ = ["BATCH_CHARS", "BATCH_MESSAGES", "import_"]
