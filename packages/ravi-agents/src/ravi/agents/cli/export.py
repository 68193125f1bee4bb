"""``ravi export``: write an agent's sessions (or one) as JSON Lines, losslessly, for ``ravi import``."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, TextIO

import typer

from ravi.agents.cli._common import ConfigOption, close_store, count_of, known_sessions, shown
from ravi.agents.forget import ALL_SESSIONS
from ravi.agents.settings import build_store, load_settings
from ravi.kernel.errors import InvalidArgument, NotFound
from ravi.kernel.storage import SessionLister
from ravi.kernel.storage.transfer import export_session


async def _export(agent: str, session: str | None, config: Path | None, out: TextIO) -> tuple[int, str | None]:
    """The number of messages written, and when there were none, what to say of the agent's sessions."""
    history = build_store("history", load_settings(config))
    try:
        if session is not None:
            sessions = [session]
        elif isinstance(history, SessionLister):
            sessions = await history.list_sessions(agent, limit=ALL_SESSIONS)
        else:
            raise InvalidArgument(
                f"{type(history).__name__} cannot list an agent's sessions", hint="name one with --session"
            )
        written = 0
        for name in sessions:
            lines = await export_session(history, agent, name)
            if not lines and session is not None:
                raise NotFound(f"agent {agent!r} has no session {name!r}", hint=await known_sessions(history, agent))
            for line in lines:  # JSON escapes for what a terminal would act on: the same value, safe to print
                out.write(shown(line, as_json=True) + "\n")
            written += len(lines)
        return written, (await known_sessions(history, agent) if written == 0 else None)
    finally:
        await close_store(history)


def export(
    agent: Annotated[str, typer.Argument(help="The agent whose sessions are written.")],
    session: Annotated[
        str | None, typer.Option("--session", help="Write only this session (default: every one of the agent).")
    ] = None,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write to this file (default: standard output).")
    ] = None,
    config: ConfigOption = None,
) -> None:
    """Write the agent's sessions (or one) as JSON Lines, one message a line with its session and run id, in
    order, losslessly: every content block, name, metadata and timestamp. Read it back into any configured
    backend with ravi import, for example: ravi export alice --config redis.toml | ravi import - --config
    postgres.toml. When nothing is stored for the agent it says so on standard error, with the agent's sessions,
    and exits 0."""
    if output is None:
        written, nothing = asyncio.run(_export(agent, session, config, sys.stdout))
    elif _is_stream(output):  # a device or a pipe (/dev/stdout): written as it goes
        with _appending(output) as out:
            written, nothing = asyncio.run(_export(agent, session, config, out))
    elif output.is_symlink():  # a link planted in a shared folder would have the export replace a file elsewhere
        raise InvalidArgument(
            f"{str(output)!r} is a symbolic link: ravi export does not write through one",
            hint=f"name the file itself ({os.path.realpath(output)}) or a new one",
        )
    else:
        written, nothing = _export_to_file(agent, session, config, output)
    if nothing is not None:
        typer.echo(f"nothing was stored for every session of agent {agent!r} ({nothing})", err=True)
    typer.echo(f"exported {count_of(written, 'message')}", err=True)


def _is_stream(path: Path) -> bool:
    """Whether ``path`` is written as it goes rather than replaced: a device or a pipe, or a link under /dev or
    /proc (/dev/stdout and /dev/fd/1 name whatever standard output is, a file included). A plain file there
    (/dev/shm/out.jsonl) is replaced as any other."""
    if path.exists() and not path.is_file():
        return True
    return path.is_symlink() and path.absolute().parts[1:2] in (("dev",), ("proc",))


def _appending(path: Path) -> TextIO:
    try:
        return path.open("a", encoding="utf-8")
    except OSError as error:
        raise InvalidArgument(f"cannot write {str(path)!r}: {error.strerror}") from None


def _export_to_file(agent: str, session: str | None, config: Path | None, output: Path) -> tuple[int, str | None]:
    """The export written to a new file beside ``output`` that takes its place once the export is whole: a failed
    export leaves a file already there as it was, and makes none. A new file is readable by its owner only (0600);
    one already there keeps its permissions, and its owner where this user may give it."""
    # a transcript is private data: a new file is its owner's only; a file already there keeps its permissions
    there = output.stat() if output.exists() else None
    if there is not None and not there.st_mode & 0o222:  # its owner made it read-only: a shell's > refuses it too
        raise InvalidArgument(
            f"{str(output)!r} is read-only: ravi export does not replace it", hint="remove it, or name another file"
        )
    mode = there.st_mode & 0o777 if there is not None else 0o600
    partial: Path | None = None

    def ended(signum: int, frame: object) -> None:
        # a kill (or the terminal closing) ends the export here and now: the partial file is removed and the
        # process exits, without unwinding through a store that may wait on an unanswering server
        if partial is not None:
            with contextlib.suppress(OSError):
                partial.unlink()
        os._exit(128 + signum)

    # the handlers are set before the partial file is made, and the signals held while it is made and named, so
    # no signal finds a file the handler does not know (a handler is set in the main thread only)
    main = threading.current_thread() is threading.main_thread()
    previous = {sig: signal.signal(sig, ended) for sig in _ENDING} if main else {}
    try:
        with _held(_ENDING if main else ()):
            # the hidden name stays within the 255 bytes a name may have, however long the output's is
            stem = os.fsdecode(os.fsencode(output.name)[:200])
            handle, name = tempfile.mkstemp(dir=output.parent, prefix=f".{stem}.", suffix=".partial")
            partial = Path(name)
    except OSError as error:
        _restore(previous)
        raise InvalidArgument(f"cannot write {str(output)!r}: {error.strerror}") from None
    try:
        print(shown(f"exporting to {str(output)!r} ..."), file=sys.stderr, flush=True)
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            result = asyncio.run(_export(agent, session, config, out))
        if there is not None and (there.st_uid, there.st_gid) != (os.getuid(), os.getgid()):
            with contextlib.suppress(PermissionError):  # the file keeps its owner where this user may give it
                os.chown(partial, there.st_uid, there.st_gid)
        partial.chmod(mode)
        partial.replace(output)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    finally:
        _restore(previous)
    return result


@contextlib.contextmanager
def _held(signals: tuple[int, ...]) -> Iterator[None]:
    """Hold ``signals`` (delivered when the block ends) where the system can."""
    if not signals or not hasattr(signal, "pthread_sigmask"):
        yield
        return
    before = signal.pthread_sigmask(signal.SIG_BLOCK, signals)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


def _restore(previous: dict[int, Any]) -> None:
    for sig, handler in previous.items():
        signal.signal(sig, handler)


_ENDING = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name))
"""The signals that end an export to a file, removing what it wrote (SIGHUP: the terminal closed)."""


__all__ = ["export"]
