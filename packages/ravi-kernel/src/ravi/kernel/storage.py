"""The storage Protocols and their value types.

Every method is ``async``. Scope keys follow the design: history by ``(agent_id, session_id)`` with each message
tagged by ``run_id``; session state by ``session_id``; long-term memory by ``(agent_id, namespace)``; vectors by
``(collection, id)``; task boards by ``(conversation_id, agent_id)``.

The Protocols are runtime-checkable, so ``isinstance(store, HistoryProvider)`` tells whether an object has the
methods (not whether it keeps the contract: ``ravi-conformance`` tells that).
"""

from __future__ import annotations

import enum
import re
import uuid
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol, runtime_checkable

from pydantic import AliasChoices, ConfigDict, Field

from ravi.kernel.errors import InvalidArgument, InvalidTransition
from ravi.kernel.messages import ChatMessage, FrozenDict, ReadOnlyDict
from ravi.kernel.values import Value, ttl_seconds

_FROZEN = ConfigDict(frozen=True, allow_inf_nan=False)

JSON = Any
"""A JSON-compatible value: dict, list, str, int, float, bool or None."""

Filter = Mapping[str, JSON]
"""A metadata filter: every key must equal the given value (a list value means "any of these")."""


def _new_id() -> str:
    return uuid.uuid4().hex


def _now() -> datetime:
    return datetime.now(UTC)


# -- history ------------------------------------------------------------------------------------------


@runtime_checkable
class HistoryProvider(Protocol):
    """The full transcript of every session: append-only, ordered, never compacted.

    Messages are kept per ``(agent_id, session_id)`` in the order they were appended, each tagged with the
    ``run_id`` that wrote it. Appending a message whose ``id`` the session already holds does nothing, so a
    retried append is stored once.
    """

    async def append(self, agent_id: str, message: ChatMessage, *, session_id: str, run_id: str = "") -> None:
        """Add one message at the end of the session."""
        ...

    async def append_many(
        self, agent_id: str, messages: Sequence[ChatMessage], *, session_id: str, run_id: str = ""
    ) -> None:
        """Add messages at the end of the session, all or none, keeping their order."""
        ...

    async def get_messages(
        self, agent_id: str, *, session_id: str, limit: int | None = None, offset: int = 0
    ) -> list[ChatMessage]:
        """The session's messages, oldest first, skipping the first ``offset`` and at most ``limit`` of them."""
        ...

    async def clear(self, agent_id: str, *, session_id: str) -> int:
        """Remove the whole session; returns how many messages were removed."""
        ...

    async def clear_run(self, agent_id: str, *, session_id: str, run_id: str) -> int:
        """Remove exactly the messages one run wrote to the session; returns how many."""
        ...

    async def count_messages(self, agent_id: str, *, session_id: str) -> int:
        """How many messages the session holds."""
        ...


# -- session state ------------------------------------------------------------------------------------


@runtime_checkable
class ShortTermMemory(Protocol):
    """A JSON object of state per session (scratchpad, flags, counters)."""

    async def get_state(self, session_id: str) -> dict[str, JSON]:
        """The session's state; ``{}`` when none was set."""
        ...

    async def set_state(self, session_id: str, state: Mapping[str, JSON]) -> None:
        """Replace the session's state."""
        ...

    async def update_state(self, session_id: str, updates: Mapping[str, JSON]) -> dict[str, JSON]:
        """Merge ``updates`` into the state atomically (top-level keys); returns the merged state.

        Concurrent updaters never lose each other's keys.
        """
        ...

    async def clear(self, session_id: str) -> None:
        """Forget the session's state."""
        ...


# -- long-term memory ---------------------------------------------------------------------------------


class Memory(Value):
    """A fact an agent keeps across sessions. ``score`` is set on search results (higher is closer)."""

    model_config = _FROZEN

    id: str
    agent_id: str
    namespace: str
    content: str
    metadata: ReadOnlyDict = Field(default_factory=FrozenDict)
    created_at: datetime = Field(default_factory=_now)
    expires_at: datetime | None = None
    score: float | None = None


@runtime_checkable
class LongTermMemory(Protocol):
    """Facts kept per ``(agent_id, namespace)``, found again by meaning."""

    async def save(
        self,
        agent_id: str,
        content: str,
        *,
        namespace: str = "default",
        ttl: timedelta | float | None = None,
        metadata: Mapping[str, JSON] | None = None,
    ) -> str:
        """Store a memory; returns its id. With ``ttl`` (seconds or a timedelta) it is gone after that time."""
        ...

    async def search(self, agent_id: str, query: str, *, namespace: str = "default", limit: int = 5) -> list[Memory]:
        """The memories closest in meaning to ``query``, closest first, each with its ``score``."""
        ...

    async def get(self, agent_id: str, memory_id: str, *, namespace: str = "default") -> Memory | None:
        """One memory by id, or ``None`` (also when expired)."""
        ...

    async def delete(self, agent_id: str, memory_id: str, *, namespace: str = "default") -> bool:
        """Remove one memory; ``False`` if it was not there."""
        ...

    async def clear(self, agent_id: str, *, namespace: str | None = None) -> int:
        """Remove the agent's memories in ``namespace`` (all namespaces when ``None``); returns how many."""
        ...


# -- vectors ------------------------------------------------------------------------------------------


class Document(Value):
    """A piece of content with its embedding and metadata, stored by ``(collection, id)``."""

    model_config = _FROZEN

    id: str = Field(default_factory=_new_id, min_length=1)
    content: str = ""
    embedding: tuple[float, ...] | None = None
    metadata: ReadOnlyDict = Field(default_factory=FrozenDict)


class SearchResult(Value):
    """A search hit. ``score`` is a similarity: higher is closer (cosine similarity, in [-1, 1]).

    004 names its fields ``id``, ``content``, ``score`` and ``metadata``: the first, second and last are the
    matched document's.
    """

    model_config = _FROZEN

    document: Document
    score: float

    @property
    def id(self) -> str:
        """The matched document's id."""
        return self.document.id

    @property
    def content(self) -> str:
        """The matched document's content."""
        return self.document.content

    @property
    def metadata(self) -> ReadOnlyDict:
        """The matched document's metadata."""
        return self.document.metadata


@runtime_checkable
class VectorStore(Protocol):
    """Documents with embeddings, searched by cosine similarity within a collection."""

    async def add(self, documents: Sequence[Document], *, collection: str) -> list[str]:
        """Insert documents whose id is not yet in the collection (others are left as they are); returns ids."""
        ...

    async def upsert(self, documents: Sequence[Document], *, collection: str) -> list[str]:
        """Insert or replace documents by id; returns ids."""
        ...

    async def search(
        self,
        query_embedding: Sequence[float],
        *,
        collection: str = "default",
        limit: int = 5,
        filter: Filter | None = None,
    ) -> list[SearchResult]:
        """The ``limit`` documents most similar to ``query_embedding``, best first, matching ``filter``."""
        ...

    async def get(self, ids: Sequence[str], *, collection: str) -> list[Document]:
        """The documents with these ids that exist, in the order asked."""
        ...

    async def delete(self, ids: Sequence[str], *, collection: str) -> int:
        """Remove documents by id; returns how many existed."""
        ...

    async def list_collections(self) -> list[str]:
        """The names of the collections, sorted."""
        ...

    async def delete_collection(self, collection: str) -> bool:
        """Remove a collection and its documents; ``False`` if it did not exist."""
        ...


# -- graph --------------------------------------------------------------------------------------------


class Entity(Value):
    """A node of the knowledge graph."""

    model_config = _FROZEN

    id: str = Field(min_length=1)
    label: str = Field(default="Entity", min_length=1)
    properties: ReadOnlyDict = Field(default_factory=FrozenDict)


class Relationship(Value):
    """A directed, typed edge between two entities."""

    model_config = _FROZEN

    id: str = Field(default_factory=_new_id, min_length=1)
    source_id: str = Field(min_length=1)
    target_id: str = Field(min_length=1)
    type: str = Field(min_length=1)
    properties: ReadOnlyDict = Field(default_factory=FrozenDict)


class SubGraph(Value):
    """A part of the graph: entities and the relationships among them."""

    model_config = _FROZEN

    entities: tuple[Entity, ...] = ()
    relationships: tuple[Relationship, ...] = ()

    def entity_ids(self) -> set[str]:
        """The ids of the entities."""
        return {e.id for e in self.entities}


@runtime_checkable
class GraphStore(Protocol):
    """Entities and relationships, explored by neighbourhood."""

    async def add_entities(self, entities: Sequence[Entity]) -> None:
        """Insert or replace entities by id."""
        ...

    async def add_relationships(self, relationships: Sequence[Relationship]) -> None:
        """Insert or replace relationships by id; both ends must exist (``NotFound`` otherwise)."""
        ...

    async def get_entity(self, entity_id: str) -> Entity | None:
        """One entity by id, or ``None``."""
        ...

    async def get_neighbors(
        self, entity_id: str, *, depth: int = 1, relationship_types: Sequence[str] | None = None
    ) -> SubGraph:
        """The entities within ``depth`` hops of ``entity_id`` (either direction), itself included, and the
        relationships walked to reach them; only relationships of ``relationship_types`` when given."""
        ...

    async def delete_entity(self, entity_id: str) -> bool:
        """Remove an entity and every relationship touching it; ``False`` if it did not exist."""
        ...

    async def delete_relationship(self, relationship_id: str) -> bool:
        """Remove one relationship; ``False`` if it did not exist."""
        ...


@runtime_checkable
class CypherCapable(Protocol):
    """A graph store that also runs openCypher queries."""

    async def query_cypher(self, query: str, params: Mapping[str, JSON] | None = None) -> list[dict[str, Any]]:
        """Run ``query`` with ``params`` bound (never pasted into the text); rows as plain Python values."""
        ...


# -- derived records -----------------------------------------------------------------------------------


@runtime_checkable
class SummaryStore(Protocol):
    """Summaries kept as derived records, keyed by the span of message ids they cover.

    The transcript is never changed; a summary is a record beside it, so the same span is summarised once
    across calls and processes. The first text stored for a span is kept.
    """

    async def get_summary(self, span_id: str) -> str | None:
        """The summary of the span, or ``None``."""
        ...

    async def put_summary(self, span_id: str, text: str) -> None:
        """Keep ``text`` as the span's summary (a span already summarised keeps its first text)."""
        ...


# -- blobs --------------------------------------------------------------------------------------------


class Blob(Value):
    """Bytes downloaded from a blob store, with their content type and user metadata."""

    model_config = _FROZEN

    key: str
    data: bytes
    content_type: str = "application/octet-stream"
    metadata: ReadOnlyDict = Field(default_factory=FrozenDict)


@runtime_checkable
class BlobStore(Protocol):
    """Bytes by key (tool outputs, files, images), with optional expiry and shareable URLs."""

    async def connect(self) -> None:
        """Open connections; stores are also async context managers that connect and disconnect."""
        ...

    async def disconnect(self) -> None:
        """Close connections."""
        ...

    async def upload(
        self,
        key: str,
        data: bytes,
        *,
        content_type: str = "application/octet-stream",
        ttl: timedelta | float | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> str:
        """Store ``data`` under ``key`` (replacing it); returns the key. After ``ttl`` it is gone."""
        ...

    async def download(self, key: str) -> Blob:
        """The blob under ``key``; ``NotFound`` if it is missing or expired."""
        ...

    async def delete(self, key: str) -> bool:
        """Remove the blob; ``False`` if it was not there."""
        ...

    async def presign_url(self, key: str, *, expires_in: timedelta | float = 3600) -> str:
        """A URL that fetches the blob without credentials until ``expires_in`` passes."""
        ...


# -- tasks --------------------------------------------------------------------------------------------


class TaskStatus(enum.StrEnum):
    """The six states of a task. ``succeeded`` and ``abandoned`` are final."""

    PLANNED = "planned"
    IN_PROGRESS = "in_progress"
    SUCCEEDED = "succeeded"
    BLOCKED = "blocked"
    FAILED = "failed"
    ABANDONED = "abandoned"

    @property
    def is_final(self) -> bool:
        """Whether no ordinary transition leaves this state."""
        return self in (TaskStatus.SUCCEEDED, TaskStatus.ABANDONED)

    def can_move_to(self, target: TaskStatus) -> bool:
        """Whether ``update_status`` may move a task from this state to ``target``."""
        return target in TRANSITIONS[self]


TRANSITIONS: Mapping[TaskStatus, frozenset[TaskStatus]] = {
    TaskStatus.PLANNED: frozenset({TaskStatus.IN_PROGRESS, TaskStatus.BLOCKED, TaskStatus.ABANDONED}),
    TaskStatus.IN_PROGRESS: frozenset(
        {TaskStatus.SUCCEEDED, TaskStatus.FAILED, TaskStatus.BLOCKED, TaskStatus.PLANNED, TaskStatus.ABANDONED}
    ),
    TaskStatus.BLOCKED: frozenset({TaskStatus.PLANNED, TaskStatus.IN_PROGRESS, TaskStatus.ABANDONED}),
    TaskStatus.FAILED: frozenset({TaskStatus.ABANDONED}),
    TaskStatus.SUCCEEDED: frozenset(),
    TaskStatus.ABANDONED: frozenset(),
}
"""The lifecycle. A failed task runs again only through ``increment_retry`` or ``force_retry``."""


class Task(Value):
    """One step of an agent's plan. Frozen: change it with ``model_copy(update=...)``.

    ``retry_count`` counts the retries so far (``retries`` is accepted as its older name).
    """

    model_config = _FROZEN

    id: str = Field(default_factory=_new_id, min_length=1)
    title: str
    description: str = ""
    status: TaskStatus = TaskStatus.PLANNED
    retry_count: int = Field(default=0, ge=0, validation_alias=AliasChoices("retry_count", "retries"))
    max_retries: int = Field(default=3, ge=0)
    result: str | None = None
    metadata: ReadOnlyDict = Field(default_factory=FrozenDict)
    updated_at: datetime = Field(default_factory=_now)

    def moved_to(self, status: TaskStatus, *, result: str | None = None) -> Task:
        """This task in ``status``; ``InvalidTransition`` if the lifecycle forbids the move (staying put included,
        so two workers racing to claim a task cannot both succeed)."""
        if status == self.status:
            raise InvalidTransition(f"task {self.id!r} is already {status.value}")
        if not self.status.can_move_to(status):
            raise InvalidTransition(
                f"task {self.id!r} cannot move from {self.status.value} to {status.value}",
                hint=_transition_hint(self.status),
            )
        update: dict[str, Any] = {"status": status, "updated_at": _now()}
        if result is not None:
            update["result"] = result
        return self.model_copy(update=update)

    @property
    def retries(self) -> int:
        """The older name of :attr:`retry_count`."""
        return self.retry_count

    def retried(self) -> Task:
        """A failed task retried: back ``in_progress`` with one more retry while ``retry_count < max_retries``,
        else ``abandoned`` (004: ``failed --> in_progress : increment_retry()``)."""
        if self.status is not TaskStatus.FAILED:
            raise InvalidTransition(f"only a failed task can be retried; {self.id!r} is {self.status.value}")
        if self.retry_count >= self.max_retries:
            return self.model_copy(update={"status": TaskStatus.ABANDONED, "updated_at": _now()})
        return self.model_copy(
            update={"status": TaskStatus.IN_PROGRESS, "retry_count": self.retry_count + 1, "updated_at": _now()}
        )

    def force_retried(self) -> Task:
        """A human override: any task not yet succeeded (a failed or abandoned one, typically) goes back
        ``in_progress`` with its retry count reset (004: ``force_retry() user override``)."""
        if self.status is TaskStatus.SUCCEEDED:
            raise InvalidTransition(f"task {self.id!r} already succeeded; there is nothing to retry")
        return self.model_copy(update={"status": TaskStatus.IN_PROGRESS, "retry_count": 0, "updated_at": _now()})

    def settled(self) -> Task:
        """The task when its run ends normally: ``in_progress`` becomes ``succeeded``, anything else stays."""
        if self.status is not TaskStatus.IN_PROGRESS:
            return self
        return self.model_copy(update={"status": TaskStatus.SUCCEEDED, "updated_at": _now()})


def _transition_hint(status: TaskStatus) -> str:
    allowed = sorted(s.value for s in TRANSITIONS[status])
    if status is TaskStatus.FAILED:
        return "use increment_retry or force_retry to plan a failed task again"
    return f"from {status.value} it may move to: {', '.join(allowed) or 'nothing (final)'}"


class TaskList(Value):
    """The task board of one agent in one conversation. Frozen."""

    model_config = _FROZEN

    conversation_id: str
    agent_id: str
    tasks: tuple[Task, ...] = ()

    def task(self, task_id: str) -> Task | None:
        """The task with ``task_id``, or ``None``."""
        return next((t for t in self.tasks if t.id == task_id), None)

    @property
    def settled(self) -> bool:
        """Whether every task is final."""
        return all(t.status.is_final for t in self.tasks)


@runtime_checkable
class TaskStore(Protocol):
    """Task boards keyed by ``(conversation_id, agent_id)``, with the lifecycle of :class:`TaskStatus`."""

    async def create_task_list(self, conversation_id: str, agent_id: str, tasks: Sequence[Task | str]) -> TaskList:
        """Start a board (replacing any existing one) with ``tasks`` (titles become planned tasks)."""
        ...

    async def get_task_list(self, conversation_id: str, agent_id: str) -> TaskList | None:
        """The board, or ``None``."""
        ...

    async def add_tasks(self, conversation_id: str, agent_id: str, tasks: Sequence[Task | str]) -> TaskList:
        """Append tasks to the board (created if missing)."""
        ...

    async def update_status(
        self, conversation_id: str, agent_id: str, task_id: str, status: TaskStatus, *, result: str | None = None
    ) -> Task:
        """Move a task; ``InvalidTransition`` if not allowed, ``NotFound`` if there is no such task."""
        ...

    async def increment_retry(self, conversation_id: str, agent_id: str, task_id: str) -> Task:
        """Retry a failed task: ``in_progress`` again while ``retry_count < max_retries``, else ``abandoned``."""
        ...

    async def force_retry(self, conversation_id: str, agent_id: str, task_id: str) -> Task:
        """Human override: the task goes ``in_progress`` again with its retry count reset."""
        ...

    async def settle_conversation(self, conversation_id: str) -> list[TaskList]:
        """The run ended normally: every ``in_progress`` task of the conversation becomes ``succeeded`` (so a
        board stops spinning); returns the conversation's boards."""
        ...


def as_tasks(items: Sequence[Task | str]) -> list[Task]:
    """Tasks from a mix of ``Task`` objects and titles; a bare string (not a list of titles) is refused."""
    if isinstance(items, str | bytes) or not isinstance(items, Sequence):
        raise InvalidArgument(
            f"tasks must be a list of Task objects or titles, got {type(items).__name__}",
            hint=f"pass [{items!r}] for one task" if isinstance(items, str) else None,
        )
    out = []
    for i, item in enumerate(items):
        if isinstance(item, Task):
            out.append(item)
        elif isinstance(item, str):
            out.append(Task(title=item))
        else:
            raise InvalidArgument(f"tasks[{i}] must be a Task or a title, got {type(item).__name__}")
    return out


def check_relationship_types(types: Sequence[str] | None) -> list[str] | None:
    """``relationship_types`` as a list (``None`` stays ``None``); a bare string is refused, not split."""
    if types is None:
        return None
    if isinstance(types, str | bytes) or not isinstance(types, Sequence | set | frozenset):
        raise InvalidArgument(
            f"relationship_types must be a list of type names, got {type(types).__name__}",
            hint=f"pass [{types!r}]" if isinstance(types, str) else None,
        )
    out = list(types)
    for i, item in enumerate(out):
        if not isinstance(item, str) or not item:
            raise InvalidArgument(f"relationship_types[{i}] must be a non-empty string, got {item!r}")
    return out


__all__ = [
    "JSON",
    "TRANSITIONS",
    "Blob",
    "BlobStore",
    "ChatMessage",
    "CypherCapable",
    "Document",
    "Entity",
    "Filter",
    "GraphStore",
    "HistoryProvider",
    "LongTermMemory",
    "Memory",
    "Relationship",
    "SearchResult",
    "ShortTermMemory",
    "SubGraph",
    "SummaryStore",
    "Task",
    "TaskList",
    "TaskStatus",
    "TaskStore",
    "VectorStore",
    "MAX_KEY_BYTES",
    "as_tasks",
    "check_relationship_types",
    "MAX_METADATA_BYTES",
    "MAX_METADATA_ENTRIES",
    "check_blob_key",
    "check_blob_metadata",
    "check_content_type",
    "matches",
    "ttl_seconds",
]


MAX_KEY_BYTES = 1024
"""The longest blob key, in UTF-8 bytes (S3's limit)."""


def check_blob_key(key: object) -> str:
    """``key`` if it is a valid blob key, else ``InvalidArgument``.

    A key is a non-empty string of at most :data:`MAX_KEY_BYTES` UTF-8 bytes without control characters
    (unicode is welcome), made of ``/``-separated segments: no leading or trailing ``/``, no empty segment
    (``a//b``) and no ``.`` or ``..`` segment. Object stores and their gateways normalise such keys, so ``/x``
    or ``a/./b`` would alias ``x`` and ``a/b``; refusing them keeps one key, one blob, on every backend.
    """
    if not isinstance(key, str):
        raise InvalidArgument(f"a blob key must be a string, got {type(key).__name__}")
    if not key:
        raise InvalidArgument("a blob key must not be empty")
    size = len(key.encode("utf-8", "surrogatepass"))
    if size > MAX_KEY_BYTES:
        raise InvalidArgument(f"a blob key may hold at most {MAX_KEY_BYTES} UTF-8 bytes, this one has {size}")
    bad = next((c for c in key if ord(c) < 32 or ord(c) == 127 or 0xD800 <= ord(c) <= 0xDFFF), None)
    if bad is not None:
        raise InvalidArgument(f"a blob key must not contain control characters or lone surrogates ({bad!r})")
    if any(segment in ("", ".", "..") for segment in key.split("/")):
        raise InvalidArgument(
            f"blob key {key!r} has an empty, '.' or '..' segment, or a leading or trailing '/'",
            hint="use segments separated by single slashes, such as 'reports/2024/q1.pdf'",
        )
    return key


MAX_METADATA_BYTES = 2048
"""The most user metadata a blob may carry, keys and values in UTF-8 bytes together (S3's limit)."""

MAX_METADATA_ENTRIES = 64
"""The most user metadata entries a blob may carry (each is an HTTP header on S3)."""

_METADATA_KEY = re.compile(r"^[a-z0-9][a-z0-9_-]{0,127}$")


def check_blob_metadata(metadata: Mapping[str, str] | None) -> dict[str, str]:
    """Blob metadata that every store keeps exactly, else ``InvalidArgument``.

    S3 sends metadata as HTTP headers: it lower-cases keys, drops empty values and re-encodes anything beyond
    printable ASCII. So keys are lower-case letters, digits, ``-`` and ``_``; values are non-empty printable
    ASCII (percent-encode anything else); keys starting with ``ravi-`` are Ravi's own; and the whole fits in
    :data:`MAX_METADATA_ENTRIES` entries and :data:`MAX_METADATA_BYTES` bytes.
    """
    if metadata is None:
        return {}
    if not isinstance(metadata, Mapping):
        raise InvalidArgument(f"metadata must be a mapping of strings, got {type(metadata).__name__}")
    if len(metadata) > MAX_METADATA_ENTRIES:
        raise InvalidArgument(f"a blob may carry at most {MAX_METADATA_ENTRIES} metadata entries, got {len(metadata)}")
    size = 0
    for key, value in metadata.items():
        if not isinstance(key, str) or not _METADATA_KEY.match(key):
            raise InvalidArgument(
                f"metadata key {key!r} is not valid",
                hint="use lower-case ASCII letters, digits, '-' and '_' (S3 lower-cases keys)",
            )
        if key.startswith("ravi-"):
            raise InvalidArgument(f"metadata key {key!r} is reserved: keys starting with 'ravi-' are Ravi's own")
        if not isinstance(value, str) or not value or not value.isascii() or not value.isprintable():
            raise InvalidArgument(
                f"metadata value of {key!r} must be a non-empty string of printable ASCII, got {value!r:.60}",
                hint="percent-encode other text (urllib.parse.quote)",
            )
        size += len(key) + len(value)
    if size > MAX_METADATA_BYTES:
        raise InvalidArgument(f"blob metadata may hold at most {MAX_METADATA_BYTES} bytes, this has {size}")
    return dict(metadata)


def check_content_type(content_type: object) -> str:
    """``content_type`` if it is a non-empty string of printable ASCII (an HTTP header value), else
    ``InvalidArgument``."""
    if (
        not isinstance(content_type, str)
        or not content_type
        or not content_type.isascii()
        or not content_type.isprintable()
    ):
        raise InvalidArgument(f"content_type must be a non-empty printable ASCII string, got {content_type!r:.60}")
    return content_type


def matches(metadata: Mapping[str, JSON], filter: Filter | None) -> bool:
    """Whether ``metadata`` satisfies ``filter``: each key equal to the value, or to one of a list's values."""
    if not filter:
        return True
    for key, wanted in filter.items():
        if key not in metadata:
            return False
        value = metadata[key]
        if isinstance(wanted, list):
            if value not in wanted:
                return False
        elif value != wanted:
            return False
    return True
