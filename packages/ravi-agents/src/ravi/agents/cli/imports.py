"""``ravi import``: read a ``ravi export`` into the configured history backend."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from ravi.agents.cli._common import ConfigOption, JsonOption, close_store, count_of
from ravi.agents.settings import build_store, load_settings
from ravi.kernel.errors import InvalidArgument, NotFound
from ravi.kernel.storage.transfer import SessionRecord, import_records, parse_export, split_lines


async def _import(records: list[SessionRecord], config: Path | None) -> dict[tuple[str, str], tuple[int, int]]:
    history = build_store("history", load_settings(config))
    try:
        sessions = {(r.agent_id, r.session_id) for r in records}
        before = {key: await history.count_messages(key[0], session_id=key[1]) for key in sessions}
        given = await import_records(history, records)
        after = {key: await history.count_messages(key[0], session_id=key[1]) for key in sessions}
        return {key: (given[key], after[key] - before[key]) for key in sorted(given)}
    finally:
        await close_store(history)


def import_(
    source: Annotated[str, typer.Argument(metavar="FILE", help="A file written by ravi export, or - for stdin.")],
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Read a ravi export into the configured history backend, keeping every message, its run id and the order.
    Every line is checked before anything is stored; importing the same file again stores nothing; a message id
    the session holds for another message is an error naming it."""
    if source == "-":
        data = sys.stdin.buffer.read()
    else:
        try:  # a regular file, or what a shell substitutes (a pipe, /dev/stdin)
            data = Path(source).read_bytes()
        except FileNotFoundError:
            raise NotFound(
                f"no file {source!r} to import", hint="give the path of a ravi export, or - for stdin"
            ) from None
        except OSError as error:
            raise InvalidArgument(f"cannot read {source!r}: {error.strerror}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InvalidArgument(
            f"{'standard input' if source == '-' else repr(source)} is not UTF-8 text (byte {error.start})",
            hint="ravi export writes UTF-8; give the file it wrote",
        ) from None
    records = parse_export(split_lines(text))
    done = asyncio.run(_import(records, config))
    if as_json:
        rows = [{"agent_id": a, "session_id": s, "messages": n, "added": added} for (a, s), (n, added) in done.items()]
        typer.echo(json.dumps(rows, indent=2, ensure_ascii=False))
        return
    for (agent, session), (count, added) in done.items():
        typer.echo(f"agent {agent!r} session {session!r}: {count_of(count, 'message')}, {added} new")


__all__ = ["import_"]
