"""Export and import of sessions as JSON Lines, losslessly, between any two history stores.

One line per message, in the session's order::

    {"format": "ravi.session/1", "agent_id": "alice", "session_id": "s1", "run_id": "r1", "message": {...}}

``message`` is the message as stores keep it (:func:`~ravi.kernel.storage.history.stored_body`): every content
block, the name, the metadata and the timestamp. Importing appends each run of consecutive lines of one session
and run with ``append_many``, so the order and the run ids are kept, and importing the same file twice stores
nothing the second time (message ids are a promise; a different message under a held id is ``MessageConflict``
naming it, and nothing of that batch is stored).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import groupby
from typing import Any

from ravi.kernel.errors import InvalidArgument, MessageConflict, RaviError
from ravi.kernel.messages import ChatMessage
from ravi.kernel.storage.history import HistoryProvider, RunReader, StoredMessage, stored_body
from ravi.kernel.values import check_scope

FORMAT = "ravi.session/1"
"""The format of each line (its ``format`` key)."""

_GIVEN = ("id", "created_at")
"""The keys of a line's message that have no default on import (an export writes them on every line)."""

EARLIEST = datetime(1970, 1, 2, tzinfo=UTC)
"""The earliest ``created_at`` an import takes: an earlier one (``0``, a negative number) is a placeholder, not the
time a message was written."""


@dataclass(frozen=True)
class SessionRecord:
    """One line of an export: a message of a session, with the run that wrote it."""

    agent_id: str
    session_id: str
    run_id: str
    message: ChatMessage


def export_line(agent_id: str, session_id: str, stored: StoredMessage) -> str:
    """One line of an export (no newline)."""
    record = {
        "format": FORMAT,
        "agent_id": agent_id,
        "session_id": session_id,
        "run_id": stored.run_id,
        "message": json.loads(stored.message.model_dump_json()),
    }
    # U+0085, U+2028 and U+2029 are valid in JSON strings but end a line for many readers (Python's splitlines
    # among them): written escaped, every line holds exactly one record for any reader.
    line = json.dumps(record, ensure_ascii=False)
    return line.replace("\x85", "\\u0085").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def split_lines(text: str) -> list[str]:
    """The lines of an export: split at ``\\n`` only (a ``\\r`` before it dropped), never at the other
    characters ``str.splitlines`` takes for line ends (U+2028, form feeds), which a message may hold."""
    return [line.removesuffix("\r") for line in text.split("\n")]


async def export_session(history: HistoryProvider, agent_id: str, session_id: str) -> list[str]:
    """The session as lines of an export, oldest message first, read in one consistent read.

    Raises:
        InvalidArgument: the store cannot read run ids (it is not a ``RunReader``).
    """
    if not isinstance(history, RunReader):
        raise InvalidArgument(
            f"{type(history).__name__} cannot read the run ids of its messages, so it cannot export losslessly",
            hint="a history store with get_stored (RunReader): memory, Postgres, Redis, hybrid",
        )
    stored = await history.get_stored(agent_id, session_id=session_id)
    return [export_line(agent_id, session_id, s) for s in stored]


class _KeyTwice(Exception):
    def __init__(self, key: str) -> None:
        self.key = key


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """The object of ``pairs``, refusing a key given twice (``json.loads`` keeps the last, silently)."""
    data = dict(pairs)
    if len(data) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _KeyTwice(key)
            seen.add(key)
    return data


def parse_line(line: str, number: int = 1) -> SessionRecord:
    """The record of one line of an export.

    Raises:
        InvalidArgument: naming the line, when it is not a record of this format (a key given twice in one object,
            a nesting too deep to read, and a message without its ``id`` or ``created_at`` included), or its
            ``created_at`` has no UTC offset or is before :data:`EARLIEST` (``0``).
    """
    where = f"line {number}"
    try:
        data: Any = json.loads(line, object_pairs_hook=_unique_keys)
    except _KeyTwice as twice:
        raise InvalidArgument(
            f"{where} holds the key {twice.key!r} twice in one object", hint="readers disagree on which value counts"
        ) from None
    except RecursionError:
        raise InvalidArgument(f"{where} is nested too deeply to read") from None
    except ValueError as error:
        raise InvalidArgument(f"{where} is not JSON: {error}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise InvalidArgument(
            f"{where} is not a record of a Ravi export (format {FORMAT!r})", hint="write it with ravi export"
        )
    agent_id, session_id, run_id = data.get("agent_id"), data.get("session_id"), data.get("run_id")
    try:
        check_scope(agent_id=agent_id, session_id=session_id, run_id=run_id)
        assert isinstance(agent_id, str) and isinstance(session_id, str) and isinstance(run_id, str)
        message = ChatMessage.model_validate(data.get("message"))
        for key in _GIVEN:  # a default would be new at each import: importing the file again would store it again
            if key not in data["message"]:
                raise InvalidArgument(f"message has no {key!r}", hint="ravi export writes it on every line")
        _check_written_at(message.created_at, data["message"]["created_at"])
    except RaviError as error:
        raise InvalidArgument(f"{where}: {error.message}", hint=error.hint) from None
    return SessionRecord(agent_id, session_id, run_id, message)


def _check_written_at(stamp: datetime, given: object) -> None:
    """Refuse a ``created_at`` that names no instant (no UTC offset) or one before :data:`EARLIEST`."""
    if stamp.utcoffset() is None:
        raise InvalidArgument(
            f"created_at {given!r} has no time zone, so it names no instant",
            hint="give its UTC offset (2026-01-05T09:00:00Z, or +01:00)",
        )
    if stamp < EARLIEST:
        raise InvalidArgument(
            f"created_at {given!r} is before {EARLIEST:%Y-%m-%d}: a placeholder, not when the message was written",
            hint="give the time the message was written, with its UTC offset",
        )


def parse_export(lines: Iterable[str]) -> list[SessionRecord]:
    """Every record of an export (blank lines skipped), all checked before any is stored.

    Raises:
        InvalidArgument: naming the first line that is not a record, or the first that gives a message id of a
            session another message (or the same message under another run) than an earlier line: importing it
            would stop halfway with ``MessageConflict``, or keep one of the runs silently.
    """
    records: list[SessionRecord] = []
    seen: dict[tuple[str, str, str], tuple[int, str, str]] = {}
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        record = parse_line(line, n)
        key, body = (record.agent_id, record.session_id, record.message.id), stored_body(record.message)
        earlier = seen.setdefault(key, (n, body, record.run_id))
        if earlier[1:] != (body, record.run_id):
            what = "another message" if earlier[1] != body else f"another run ({record.run_id!r})"
            raise InvalidArgument(
                f"line {n} gives message id {record.message.id!r} of session {record.session_id!r} {what} than"
                f" line {earlier[0]}",
                hint="a message id names one message of a session; nothing was stored",
            )
        records.append(record)
    return records


async def import_records(history: HistoryProvider, records: Iterable[SessionRecord]) -> dict[tuple[str, str], int]:
    """Append the records to ``history``, each run of consecutive records of one session and run in one
    ``append_many``; returns how many records each ``(agent_id, session_id)`` had.

    Where the store is a ``RunReader``, every session the records name is read first, and a record whose id the
    session holds for another message is refused before anything is stored.

    Raises:
        MessageConflict: a record's id is held by the session for another message (nothing is stored when the
            store is a ``RunReader``; otherwise the batch is not stored, the batches before it are, and importing
            again after fixing the file skips them).
    """
    records = list(records)
    if isinstance(history, RunReader):
        sessions: dict[tuple[str, str], list[ChatMessage]] = {}
        for record in records:
            sessions.setdefault((record.agent_id, record.session_id), []).append(record.message)
        for (agent_id, session_id), messages in sessions.items():
            stored = await history.get_stored(agent_id, session_id=session_id)
            held = {s.message.id: stored_body(s.message) for s in stored}
            for message in messages:
                if held.get(message.id, stored_body(message)) != stored_body(message):
                    raise MessageConflict(
                        message.id, hint="the session holds another message under this id; nothing was stored"
                    )
    given: dict[tuple[str, str], int] = {}
    for (agent_id, session_id, run_id), group in groupby(records, lambda r: (r.agent_id, r.session_id, r.run_id)):
        batch = [r.message for r in group]
        await history.append_many(agent_id, batch, session_id=session_id, run_id=run_id)
        given[agent_id, session_id] = given.get((agent_id, session_id), 0) + len(batch)
    return given


__all__ = [
    "EARLIEST",
    "FORMAT",
    "SessionRecord",
    "export_line",
    "export_session",
    "import_records",
    "parse_export",
    "parse_line",
    "split_lines",
]
