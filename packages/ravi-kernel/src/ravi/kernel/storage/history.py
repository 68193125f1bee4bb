"""The history Protocol (004): the full transcript of every session, append-only."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from ravi.kernel.llm import EmbeddingClient
from ravi.kernel.messages import ChatMessage
from ravi.kernel.search import UnitMatch
from ravi.kernel.tokens import stored_tokens


@runtime_checkable
class HistoryProvider(Protocol):
    """The full transcript of every session: append-only, ordered, never compacted.

    Messages are kept per ``(agent_id, session_id)`` in the order they were appended, each tagged with the
    ``run_id`` that wrote it. A message id is a promise: appending a message the session already holds (the same
    id and the same content, :func:`stored_body`) does nothing, so a retried append is stored once; appending a
    different message under a stored id refuses the whole batch with ``MessageConflict``.

    Every method refuses a bad argument with ``InvalidArgument`` before the store sees it (an id that is not a
    non-empty string of valid text, :func:`~ravi.kernel.values.check_scope`; ``run_id`` may be empty), and
    raises ``BackendUnavailable`` when the store does not answer; no driver or builtin exception leaks out.
    """

    async def append(self, agent_id: str, message: ChatMessage, *, session_id: str, run_id: str = "") -> None:
        """Add one message at the end of the session.

        Raises:
            InvalidArgument: a bad scope, or ``message`` is not a ``ChatMessage``.
            MessageConflict: the session holds a different message under its id.
        """
        ...

    async def append_many(
        self, agent_id: str, messages: Sequence[ChatMessage], *, session_id: str, run_id: str = ""
    ) -> int | None:
        """Add messages at the end of the session, all or none, keeping their order; returns how many of them
        this call stored (those whose id the session did not hold), or ``None`` from a store that does not say.

        The count is this call's own: another writer's append of the same messages at the same moment is not
        counted here (every store Ravi ships counts in the step that inserts).

        Raises:
            InvalidArgument: a bad scope, or an item that is not a ``ChatMessage``.
            MessageConflict: an id the session (or the batch) already holds for a different message.
        """
        ...

    async def get_messages(
        self, agent_id: str, *, session_id: str, limit: int | None = None, offset: int = 0
    ) -> list[ChatMessage]:
        """The session's messages, oldest first, skipping the first ``offset`` and at most ``limit`` of them.

        Raises:
            InvalidArgument: a bad scope, or a ``limit`` or ``offset`` that is not an integer >= 0
                (:func:`~ravi.kernel.values.check_page`; ``limit=None`` is no limit).
        """
        ...

    async def clear(self, agent_id: str, *, session_id: str) -> int:
        """Remove the whole session; returns how many messages were removed (0 for an unknown session).

        Raises:
            InvalidArgument: a bad scope.
        """
        ...

    async def clear_run(self, agent_id: str, *, session_id: str, run_id: str) -> int:
        """Remove exactly the messages one run wrote to the session; returns how many.

        Raises:
            InvalidArgument: a bad scope.
        """
        ...

    async def count_messages(self, agent_id: str, *, session_id: str) -> int:
        """How many messages the session holds (0 for an unknown session).

        Raises:
            InvalidArgument: a bad scope.
        """
        ...


def check_append(agent_id: str, session_id: str, run_id: str, messages: Sequence[ChatMessage]) -> None:
    """What every ``append_many`` checks first: the scope, that ``messages`` is a sequence of ``ChatMessage``
    (``InvalidArgument`` naming the first item that is not, or whose id is longer than
    :data:`~ravi.kernel.values.MAX_ID_BYTES`), and that no id stands for two different messages in the batch
    (``MessageConflict``), so nothing of a bad batch is stored."""
    from ravi.kernel.errors import InvalidArgument, MessageConflict
    from ravi.kernel.values import check_id, check_scope

    check_scope(agent_id=agent_id, session_id=session_id, run_id=run_id)
    if isinstance(messages, str | bytes) or not isinstance(messages, Sequence):
        raise InvalidArgument(
            f"messages must be a sequence of ChatMessage, got {type(messages).__name__}",
            hint="pass a list, for example [ChatMessage.user('hi')]",
        )
    seen: dict[str, ChatMessage] = {}
    for i, message in enumerate(messages):
        if not isinstance(message, ChatMessage):
            raise InvalidArgument(
                f"messages[{i}] is a {type(message).__name__}, not a ChatMessage",
                hint="build it with ChatMessage(...) or ChatMessage.from_openai(...)",
            )
        check_id(message.id, f"messages[{i}].id")
        first = seen.setdefault(message.id, message)
        if first is not message and first.model_dump_json() != message.model_dump_json():
            raise MessageConflict(message.id, hint="the batch holds two different messages under this id")


def check_replace(
    agent_id: str, session_id: str, message_id: object, messages: Sequence[ChatMessage], run_id: str
) -> None:
    """What every ``replace_last`` checks first: what ``append_many`` checks of the replacement, and a message id
    to compare with (a non-empty string)."""
    from ravi.kernel.errors import InvalidArgument
    from ravi.kernel.values import check_id, check_text

    check_append(agent_id, session_id, run_id, messages)
    if not isinstance(message_id, str) or not message_id:
        raise InvalidArgument(f"message_id must be a non-empty string, got {message_id!r}")
    check_text(message_id, "message_id")
    check_id(message_id, "message_id")


def stored_body(message: ChatMessage) -> str:
    """The JSON body a store keeps for ``message``: two messages are the same message exactly when their bodies
    are equal (what ``append_many`` compares when an id is already stored)."""
    return message.model_dump_json()


@runtime_checkable
class SessionLister(Protocol):
    """An optional ability of a history provider: say which sessions an agent has (for tools and the CLI)."""

    async def list_sessions(self, agent_id: str, *, limit: int = 100) -> list[str]:
        """Up to ``limit`` of the agent's session ids that hold messages, sorted.

        Raises:
            InvalidArgument: a bad ``agent_id``, or a ``limit`` that is not an integer >= 0
                (:func:`~ravi.kernel.values.check_count`, which caps a larger one at ``MAX_COUNT``).
        """
        ...


@dataclass(frozen=True)
class StoredMessage:
    """A stored message with the run that wrote it (what :class:`RunReader` returns).

    Attributes:
        message: The message, exactly as stored.
        run_id: The ``run_id`` it was appended with (``""`` for none).
    """

    message: ChatMessage
    run_id: str


@runtime_checkable
class RunReader(Protocol):
    """An optional ability of a history provider: read a session's messages with the run id of each, so a
    session can be copied whole (``ravi export``) and ``clear_run`` keeps meaning the same after the copy."""

    async def get_stored(
        self, agent_id: str, *, session_id: str, limit: int | None = None, offset: int = 0
    ) -> list[StoredMessage]:
        """The session's messages with their run ids, oldest first, from ``offset``, at most ``limit``, read
        as one consistent snapshot."""
        ...


@dataclass(frozen=True)
class HistoryWindow:
    """What a windowed read returns: the newest part of a session, with every system message before it.

    Attributes:
        messages: The system messages from before the tail (``head`` of them), then the tail: every message from
            its first on, in order.
        head: How many of ``messages`` are the system messages from before the tail.
        complete: Whether nothing but system messages comes before the tail, so ``messages`` is the whole
            session.
        before: The stored tokens (:func:`~ravi.kernel.tokens.stored_tokens`) of every message before the tail,
            when the store knows them (``None`` when it does not). It places the tail in the session: a
            message's offset, the stored tokens before it, is the same in every read, so strategies can choose
            boundaries that a read of any size agrees on (where a summary ends, say).
        generation: The session's generation (:mod:`ravi.kernel.scope`) that this read saw, read in the same
            round trip as the messages, when the store tracks generations (``None`` when it does not).
    """

    messages: list[ChatMessage]
    head: int
    complete: bool
    before: int | None = None
    generation: str | None = None

    @property
    def tail(self) -> list[ChatMessage]:
        """The newest messages of the session, from the tail's first on."""
        return self.messages[self.head :]


@runtime_checkable
class WindowReader(Protocol):
    """An optional ability of a history provider: read only the newest part of a session, in one round trip.

    Stores keep each message's :func:`~ravi.kernel.tokens.stored_tokens` beside it. ``read_window(tokens=N)``
    returns a tail that holds at least :func:`window_start`'s: the newest messages until their stored counts
    pass ``N`` (the message that passes it included), moved back so the tail starts with neither a tool result
    nor a system message (unless it starts the session),
    together with every system message before it, and the stored tokens before the tail (``before``). A store
    may return more (the whole session, say, for data
    written before it kept counts) and says so with ``complete``. The assembly engine reads with it when its
    pipeline allows, and reads further back when the window needs more.
    """

    async def read_window(self, agent_id: str, *, session_id: str, tokens: int) -> HistoryWindow:
        """The session's newest messages past ``tokens`` stored tokens, and the system messages before them."""
        ...


@runtime_checkable
class HistorySearcher(Protocol):
    """An optional ability of a history provider: find the units of a session that best match a query, in the
    store, so that relevant recall never reads the whole session.

    ``search_units`` ranks the session's messages against ``query`` by the store's own measure (BM25 in
    memory, full-text search on a server) with the terms of :func:`ravi.kernel.search.terms`, and returns the
    whole units (:func:`ravi.kernel.search.unit_at`) of the best ones that lie before offset ``before`` (the
    stored tokens before a message; only units whose messages all start before it), best first, at most
    ``limit``, each with its offset and the system message it follows. System messages are never matches
    (a window keeps them all anyway).
    """

    async def search_units(
        self, agent_id: str, *, session_id: str, query: str, before: int, limit: int
    ) -> list[UnitMatch]:
        """The best units before ``before`` for ``query``, best first."""
        ...


@dataclass(frozen=True)
class HybridMatches:
    """What a hybrid search returns: the units that best match a query by its words and by its meaning, each
    list best first. The caller fuses the two (by rank: the scores of the two are on different scales).

    Attributes:
        lexical: The units whose messages share the query's terms (:func:`ravi.kernel.search.terms`), ranked
            by BM25 or the store's full-text rank, with the neighbours of each match scored
            (:func:`ravi.kernel.search.spread`).
        meaning: The units whose messages are closest to the query's embedding (cosine similarity), empty when
            no embedding client was given.
    """

    lexical: list[UnitMatch]
    meaning: list[UnitMatch]


@runtime_checkable
class HybridSearcher(Protocol):
    """An optional ability of a history provider: find a session's best units for a query by its words and by
    its meaning, in the store, in one call, so that relevant recall never reads the whole session.

    ``search_hybrid`` ranks as :class:`HistorySearcher` does, and also scores each match's neighbours with
    ``spread`` times its score (:func:`ravi.kernel.search.spread`). With an ``embedder``, it also keeps an
    embedding of every message of the session under ``model`` (a name for the embedder's model: a store computes
    each embedding once, and again only for another model), embeds ``query``, and returns the units whose
    messages are closest. Units are whole (:func:`ravi.kernel.search.unit_at`), lie before offset ``before``,
    at most ``limit`` in each list, system messages never matches.
    """

    async def search_hybrid(
        self,
        agent_id: str,
        *,
        session_id: str,
        query: str,
        before: int,
        limit: int,
        spread: float = 0.0,
        embedder: EmbeddingClient | None = None,
        model: str = "",
    ) -> HybridMatches:
        """The best units before ``before`` for ``query``, by its words and by its meaning."""
        ...


@runtime_checkable
class SessionGeneration(Protocol):
    """An optional ability of a history provider: the session's generation (:mod:`ravi.kernel.scope`), an opaque
    token kept with the session that every removal replaces (every ``clear``, a ``clear_run`` that removed a
    message, ``replace_last``, ``replace_session``) and appends keep, never repeated for the same session.
    Records derived from the transcript are kept under it, so none of a removed conversation is read again. A
    store with this ability also returns the generation with every windowed read (``HistoryWindow.generation``).
    """

    async def generation(self, agent_id: str, *, session_id: str) -> str:
        """The session's current generation (``""`` for a session that was never written)."""
        ...


@runtime_checkable
class TailEditor(Protocol):
    """An optional ability of a history provider: change the newest message of a session atomically (a
    framework's "pop the last item"), so concurrent editors and writers never lose or reorder each other's
    messages."""

    async def replace_last(
        self,
        agent_id: str,
        *,
        session_id: str,
        message_id: str,
        messages: Sequence[ChatMessage] = (),
        run_id: str = "",
    ) -> bool:
        """If the session's newest message has id ``message_id``, remove it and append ``messages`` (tagged
        ``run_id``) in its place, in one atomic step that gives the session a new generation; returns whether it
        did. ``False`` (nothing changed) when the newest message is another one, or the session is empty."""
        ...


@runtime_checkable
class SessionReplacer(Protocol):
    """An optional ability of a history provider: replace a session's whole transcript in one atomic step (a
    framework's "load this saved conversation"), so a concurrent reader sees the old transcript or the new one,
    never an empty session between them, and a failure leaves the old one stored."""

    async def replace_session(
        self, agent_id: str, messages: Sequence[ChatMessage], *, session_id: str, run_id: str = ""
    ) -> int:
        """Remove the session's messages and summaries and store ``messages`` (tagged ``run_id``) in their place,
        all or nothing, in a new generation of the session; returns how many messages it held. With no
        ``messages`` it is ``clear``.

        Raises:
            InvalidArgument: what ``append_many`` refuses (:func:`check_append`); nothing is changed.
            MessageConflict: the batch holds two different messages under one id; nothing is changed.
        """
        ...


async def replace_session(
    history: HistoryProvider, agent_id: str, messages: Sequence[ChatMessage], *, session_id: str, run_id: str = ""
) -> int:
    """Make ``messages`` the session's transcript; returns how many messages it held before.

    Atomic on a store with :class:`SessionReplacer` (every store Ravi ships). On any other store it is ``clear``
    and then ``append_many``: the batch is checked first, so a bad batch changes nothing, but a reader between
    the two steps sees the session empty, and a failure of the store between them loses the old transcript.
    """
    if isinstance(history, SessionReplacer):
        return await history.replace_session(agent_id, messages, session_id=session_id, run_id=run_id)
    check_append(agent_id, session_id, run_id, messages)
    removed = await history.clear(agent_id, session_id=session_id)
    await history.append_many(agent_id, messages, session_id=session_id, run_id=run_id)
    return removed


def check_search(query: object, before: object, limit: object) -> tuple[int, int]:
    """What every ``search_units`` checks first: a text query and non-negative integers (``InvalidArgument``);
    returns ``(before, limit)`` capped at :data:`~ravi.kernel.values.MAX_COUNT`."""
    from ravi.kernel.errors import InvalidArgument
    from ravi.kernel.values import MAX_COUNT

    if not isinstance(query, str):
        raise InvalidArgument(f"query must be a str, got {type(query).__name__}")
    checked = []
    for name, value in (("before", before), ("limit", limit)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise InvalidArgument(f"{name} must be an integer >= 0, got {value!r}")
        checked.append(min(value, MAX_COUNT))
    return checked[0], checked[1]


def check_hybrid(spread: object, embedder: object, model: object) -> None:
    """What every ``search_hybrid`` checks besides :func:`check_search`: a spread in [0, 1], an embedding client
    or ``None``, and a model name (non-empty with an embedder, at most :data:`~ravi.kernel.values.MAX_ID_BYTES`
    UTF-8 bytes, as stores key embeddings by it) (``InvalidArgument``)."""
    from ravi.kernel.embeddings import check_embedding_client
    from ravi.kernel.errors import InvalidArgument
    from ravi.kernel.values import check_id

    if isinstance(spread, bool) or not isinstance(spread, int | float) or not 0 <= spread <= 1:
        raise InvalidArgument(f"spread must be a number in [0, 1], got {spread!r}")
    if embedder is not None:
        check_embedding_client(embedder, "embedder")
    if not isinstance(model, str) or (embedder is not None and not model):
        raise InvalidArgument(f"model must name the embedder's model, got {model!r}")
    check_id(model, "model")


def window_start(messages: Sequence[ChatMessage], tokens: int) -> int:
    """Where the tail of a windowed read of ``messages`` starts at the latest (the reference rule of
    :class:`WindowReader`): the newest messages until their stored counts pass ``tokens``, moved back past tool
    results and system messages."""
    total = 0
    start = 0
    for i in range(len(messages) - 1, -1, -1):
        total += stored_tokens(messages[i])
        if total > tokens:
            start = i
            break
    while start > 0 and messages[start].role in ("tool", "system"):
        start -= 1
    return start


def window_of(messages: Sequence[ChatMessage], tokens: int, generation: str | None = None) -> HistoryWindow:
    """The windowed read of a whole transcript, by the reference rule (for stores that hold it in memory)."""
    start = window_start(messages, tokens)
    head = [m for m in messages[:start] if m.role == "system"]
    before = sum(map(stored_tokens, messages[:start]))
    return HistoryWindow([*head, *messages[start:]], len(head), len(head) == start, before, generation)


__all__ = [
    "HistoryProvider",
    "HistorySearcher",
    "HistoryWindow",
    "HybridMatches",
    "HybridSearcher",
    "RunReader",
    "SessionGeneration",
    "SessionLister",
    "SessionReplacer",
    "StoredMessage",
    "TailEditor",
    "WindowReader",
    "check_append",
    "check_hybrid",
    "check_replace",
    "check_search",
    "replace_session",
    "stored_body",
    "window_of",
    "window_start",
]
