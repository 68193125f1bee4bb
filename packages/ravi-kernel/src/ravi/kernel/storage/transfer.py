"""Export and import of sessions as JSON Lines, losslessly, between any two history stores.

One line per message, in the session's order::

    {"format": "ravi.session/1", "agent_id": "alice", "session_id": "s1", "run_id": "r1", "message": {...}}

``message`` is the message as stores keep it (:func:`~ravi.kernel.storage.history.stored_body`): every content
block, the name, the metadata and the timestamp. Importing appends each run of consecutive lines of one session
and run with ``append_many``, so the order and the run ids are kept, and importing the same file twice stores
nothing the second time (message ids are a promise; a different message under a held id is ``MessageConflict``
naming it, and nothing of that batch is stored).

An export of any size is imported in two readings of its lines, holding a batch of messages at a time:
:func:`check_export` reads every line and the sessions it names, keeping only each message's id, run and a
digest, and :func:`store_export` reads the lines again and appends them in batches.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ravi.kernel.errors import InvalidArgument, MessageConflict, RaviError
from ravi.kernel.messages import ChatMessage
from ravi.kernel.storage.history import HistoryProvider, RunReader, StoredMessage, stored_body
from ravi.kernel.values import check_count, check_scope

FORMAT = "ravi.session/1"
"""The format of each line (its ``format`` key)."""

_GIVEN = ("id", "created_at")
"""The keys of a line's message that have no default on import (an export writes them on every line)."""

_BATCH_MESSAGES, _BATCH_CHARS = 500, 8_000_000
"""The most messages, and characters of lines, an import appends at once, unless told otherwise."""

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
            ``created_at`` is before :data:`EARLIEST` (``0``; a time without a time zone is read as written and
            kept so).
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
    """Refuse a ``created_at`` before :data:`EARLIEST`. A time without a time zone is taken as it is written (the
    message model and every store keep it so, and an export writes it so): it is held to the same day, read as
    written, and stored with no zone, none assumed."""
    if stamp.utcoffset() is None:
        stamp = stamp.replace(tzinfo=UTC)  # compared only: the message keeps its time as written
    if stamp < EARLIEST:
        raise InvalidArgument(
            f"created_at {given!r} is before {EARLIEST:%Y-%m-%d}: a placeholder, not when the message was written",
            hint="give the time the message was written, with its UTC offset",
        )


class _Ids:
    """Every message id of the lines read so far, per session, with the line that first gave it, a digest of its
    message and its run: what refuses a line giving an id of a session another message (or another run)."""

    def __init__(self) -> None:
        self.first: dict[tuple[str, str, str], tuple[int, bytes, str]] = {}
        self.again: dict[int, tuple[str, str, str]] = {}
        """The lines that give a message again (its id, body and run) after its first line, to the message's key."""

    def add(self, record: SessionRecord, number: int) -> None:
        key = (record.agent_id, record.session_id, record.message.id)
        earlier = self.first.setdefault(key, (number, _digest(record.message), record.run_id))
        if earlier[0] == number:
            return
        same_body = earlier[1] == _digest(record.message)
        if not same_body or earlier[2] != record.run_id:
            what = "another message" if not same_body else f"another run ({record.run_id!r})"
            raise InvalidArgument(
                f"line {number} gives message id {record.message.id!r} of session {record.session_id!r} {what}"
                f" than line {earlier[0]}",
                hint="a message id names one message of a session; nothing was stored",
            )
        self.again[number] = key

    def gave(self, record: SessionRecord, number: int) -> bool:
        """Whether line ``number`` gave ``record`` when the lines were read: its message (id, body and run) at
        that place, as its first line or one giving it again."""
        key = (record.agent_id, record.session_id, record.message.id)
        known = self.first.get(key)
        if known is None or known[1:] != (_digest(record.message), record.run_id):
            return False
        return known[0] == number or self.again.get(number) == key


def _digest(message: ChatMessage) -> bytes:
    """A digest of the message's stored body: equal exactly when the bodies are (to 2**-128)."""
    return hashlib.blake2b(stored_body(message).encode("utf-8", "surrogatepass"), digest_size=16).digest()


def _records(lines: Iterable[str]) -> Iterable[tuple[int, SessionRecord]]:
    """The records of ``lines`` with their line numbers, blank lines skipped."""
    for n, line in enumerate(lines, 1):
        if line.strip():
            yield n, parse_line(line, n)


def parse_export(lines: Iterable[str]) -> list[SessionRecord]:
    """Every record of an export (blank lines skipped), all checked before any is stored.

    Raises:
        InvalidArgument: naming the first line that is not a record, or the first that gives a message id of a
            session another message (or the same message under another run) than an earlier line: importing it
            would stop halfway with ``MessageConflict``, or keep one of the runs silently.
    """
    records: list[SessionRecord] = []
    ids = _Ids()
    for n, record in _records(lines):
        ids.add(record, n)
        records.append(record)
    return records


@dataclass
class CheckedExport:
    """What :func:`check_export` read of an export: per message id of each session, its first line, a digest of
    its message and its run (a few dozen bytes a message, however large the messages are)."""

    records: int = 0
    """How many records the lines hold."""
    sessions: list[tuple[str, str]] = field(default_factory=list)
    """The ``(agent_id, session_id)`` the lines name, in the order of their first line."""
    ids: _Ids = field(default_factory=_Ids, repr=False)


@dataclass(frozen=True)
class Imported:
    """What an import did to one session.

    Attributes:
        records: How many records of the export the session had.
        stored: How many of them this import stored (the others the session held already: an earlier import, or
            another import of the same records at the same moment), as the store's ``append_many`` counted them;
            ``None`` when the store does not say.
    """

    records: int
    stored: int | None


def _at_least_one(**sizes: object) -> None:
    for name, size in sizes.items():
        if check_count(size, name) < 1:  # type: ignore[arg-type]  # check_count refuses what is not an int
            raise InvalidArgument(f"must be at least 1, got {size!r}", field=name)


async def check_export(history: HistoryProvider, lines: Iterable[str], *, page: int = 1_000) -> CheckedExport:
    """Read every line of an export, checking what :func:`parse_export` checks, and, where the store is a
    ``RunReader``, the sessions the lines name (``page`` messages at a time) for a message id held for another
    message: the first reading of an import that holds no more than one line at a time.

    Raises:
        InvalidArgument: what :func:`parse_export` raises, or a ``page`` that is not an integer >= 1.
        MessageConflict: a session holds another message under an id of the lines; nothing was stored.
    """
    _at_least_one(page=page)
    return await _check(history, _records(lines), page)


async def _check(history: HistoryProvider, numbered: Iterable[tuple[int, SessionRecord]], page: int) -> CheckedExport:
    """:func:`check_export` of records already read, each with its line number."""
    checked = CheckedExport()
    seen: set[tuple[str, str]] = set()
    for n, record in numbered:
        checked.ids.add(record, n)
        checked.records += 1
        if (record.agent_id, record.session_id) not in seen:
            seen.add((record.agent_id, record.session_id))
            checked.sessions.append((record.agent_id, record.session_id))
    if isinstance(history, RunReader):
        for agent_id, session_id in checked.sessions:
            offset = 0
            while stored := await history.get_stored(agent_id, session_id=session_id, limit=page, offset=offset):
                for s in stored:
                    given = checked.ids.first.get((agent_id, session_id, s.message.id))
                    if given is not None and given[1] != _digest(s.message):
                        raise MessageConflict(
                            s.message.id, hint="the session holds another message under this id; nothing was stored"
                        )
                offset += len(stored)
    return checked


async def store_export(
    history: HistoryProvider,
    lines: Iterable[str],
    checked: CheckedExport,
    *,
    batch_messages: int = _BATCH_MESSAGES,
    batch_chars: int = _BATCH_CHARS,
) -> dict[tuple[str, str], Imported]:
    """Append the records of ``lines``, read a second time after :func:`check_export` read them, each run of
    consecutive lines of one session and run in ``append_many`` batches of at most ``batch_messages`` messages
    and ``batch_chars`` characters of lines (a longer line is a batch of its own); returns, for each
    ``(agent_id, session_id)``, how many records it had and how many of them this import stored
    (:class:`Imported`). The store refuses an id it holds for another message (``MessageConflict``,
    that batch not stored), so what another writer appended since the check is never stored twice.

    Raises:
        InvalidArgument: a batch size that is not an integer >= 1, or a line differs from what
            :func:`check_export` read (the file changed in between; the batches before it are stored).
        MessageConflict: the store holds another message under an id of a batch (appended since the check).
    """
    _at_least_one(batch_messages=batch_messages, batch_chars=batch_chars)

    def sized() -> Iterable[tuple[int, SessionRecord, int]]:
        for n, line in enumerate(lines, 1):
            if line.strip():
                yield n, parse_line(line, n), len(line)

    return await _store(history, sized(), checked, batch_messages, batch_chars)


async def _store(
    history: HistoryProvider,
    sized: Iterable[tuple[int, SessionRecord, int]],
    checked: CheckedExport,
    batch_messages: int,
    batch_chars: int,
) -> dict[tuple[str, str], Imported]:
    """:func:`store_export` of records with their line numbers and the characters of their lines."""
    given: dict[tuple[str, str], int] = {}
    stored: dict[tuple[str, str], int | None] = {}
    batch: list[ChatMessage] = []
    scope: tuple[str, str, str] | None = None
    size = 0
    read = 0

    async def flush() -> None:
        if batch and scope is not None:
            # the store's own count: the session's size before and after would count another writer's messages
            added = await history.append_many(scope[0], list(batch), session_id=scope[1], run_id=scope[2])
            key = (scope[0], scope[1])
            given[key] = given.get(key, 0) + len(batch)
            so_far = stored.get(key, 0)
            stored[key] = None if so_far is None or not isinstance(added, int) else so_far + added
        batch.clear()

    for n, record, chars in sized:
        read += 1
        if not checked.ids.gave(record, n) or read > checked.records:
            raise InvalidArgument(
                f"line {n} is not what it was when the lines were checked: the file changed during the import",
                hint="import it again once nothing writes to it (what was stored is skipped)",
            )
        here = (record.agent_id, record.session_id, record.run_id)
        if here != scope or len(batch) >= batch_messages or (batch and size + chars > batch_chars):
            await flush()
            scope, size = here, 0
        batch.append(record.message)
        size += chars
    await flush()
    if read != checked.records:
        raise InvalidArgument(
            f"the file holds {read} records where it held {checked.records} when it was checked: it changed"
            " during the import",
            hint="import it again once nothing writes to it (what was stored is skipped)",
        )
    return {key: Imported(count, stored[key]) for key, count in given.items()}


async def import_records(history: HistoryProvider, records: Iterable[SessionRecord]) -> dict[tuple[str, str], Imported]:
    """Append the records to ``history`` as an import of the lines they came from does (:func:`check_export`,
    then :func:`store_export`): each run of consecutive records of one session and run in ``append_many`` batches
    of at most 500 messages; returns, for each ``(agent_id, session_id)``, how many records it had and how many
    of them this import stored (:class:`Imported`).

    Raises:
        InvalidArgument: two records give one message id of a session different messages (or runs); nothing
            is stored.
        MessageConflict: a record's id is held by the session for another message (nothing is stored when the
            store is a ``RunReader``; otherwise the batch is not stored, the batches before it are, and importing
            again after fixing the file skips them).
    """
    numbered = list(enumerate(records, 1))
    checked = await _check(history, numbered, 1_000)
    return await _store(history, ((n, r, 0) for n, r in numbered), checked, _BATCH_MESSAGES, _BATCH_CHARS)


__all__ = [
    "EARLIEST",
    "FORMAT",
    "CheckedExport",
    "Imported",
    "SessionRecord",
    "check_export",
    "export_line",
    "export_session",
    "import_records",
    "parse_export",
    "parse_line",
    "split_lines",
    "store_export",
]
