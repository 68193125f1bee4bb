"""Assembly contracts (000: ``kernel/agent/context.py``): ``CompactionStrategy``, ``AgentContextProtocol``, and the
``SessionContext`` that travels with every window, with its typed per-session state."""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import islice
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

from ravi.kernel.llm import TokenCounter
from ravi.kernel.messages import ChatMessage
from ravi.kernel.scope import Scope
from ravi.kernel.storage import HistoryProvider, SessionGeneration
from ravi.kernel.tokens import stored_tokens
from ravi.kernel.values import check_items

T = TypeVar("T")


class Slot(Generic[T]):
    """A typed place in a session's state: what one kind of owner keeps about a session.

    A slot is declared once, at module level, by the code that owns it, with the factory that makes its first
    value; every owner (a strategy object, an index, the engine) then gets its own value of the slot in each
    session. Nothing is keyed by the messages, so two sessions that share a message never share state.

    Example:
        >>> ANCHOR: Slot[list[str]] = Slot("anchor", list)
        >>> state = SessionState()
        >>> state.get("owner", ANCHOR).append("m1")
        >>> state.get("owner", ANCHOR), state.get("other owner", ANCHOR)
        (['m1'], [])
    """

    __slots__ = ("factory", "name")

    def __init__(self, name: str, factory: Callable[[], T]) -> None:
        self.name = name
        self.factory = factory

    def __repr__(self) -> str:
        return f"Slot({self.name!r})"


class SessionState:
    """Everything assembly keeps about one session: one value per ``(owner, slot)``.

    The engine keeps one per ``(agent_id, session_id)``, bounded, and empties it when the session's generation
    changes (after a ``clear`` in any process), so nothing learnt from a removed conversation is used again.
    """

    __slots__ = ("_values", "generation")

    def __init__(self) -> None:
        self._values: dict[tuple[object, Slot[Any]], Any] = {}
        self.generation: str | None = None

    def get(self, owner: object, slot: Slot[T]) -> T:
        """``owner``'s value of ``slot``, made by the slot's factory the first time it is asked for."""
        key = (owner, slot)
        try:
            value: T = self._values[key]
        except KeyError:
            value = self._values[key] = slot.factory()
        return value

    def find(self, owner: object, slot: Slot[T]) -> T | None:
        """``owner``'s value of ``slot``, or ``None`` when it has none yet."""
        value: T | None = self._values.get((owner, slot))
        return value

    def put(self, owner: object, slot: Slot[T], value: T) -> None:
        """Set ``owner``'s value of ``slot``."""
        self._values[(owner, slot)] = value

    def clear(self) -> None:
        """Forget everything."""
        self._values.clear()

    def snapshot(self) -> dict[tuple[object, Slot[Any]], Any]:
        """A copy of the state (each value copied one level deep), for :meth:`restore`."""
        return {key: copy.copy(value) for key, value in self._values.items()}

    def restore(self, snapshot: dict[tuple[object, Slot[Any]], Any]) -> None:
        """Go back to a :meth:`snapshot` (the engine undoes an assembly attempt it redoes on more history)."""
        self._values = dict(snapshot)

    def __len__(self) -> int:
        return len(self._values)


class _KnownOffsets:
    """The offsets of a session's stored messages that its reads of one generation found, by message id, at
    most ``LIMIT`` of them (the first found are dropped first).

    A stored message's offset never changes within a generation: messages are only appended after it, and every
    removal or renumbering makes a new generation. So a later read of the same generation places its messages
    from the newest one known here, instead of summing the stored counts of everything before them again.
    """

    LIMIT = 16_384

    __slots__ = ("generation", "offsets")

    def __init__(self, generation: str = "") -> None:
        self.generation = generation
        self.offsets: dict[str, int] = {}

    def trim(self) -> None:
        """Drop the first found beyond ``LIMIT``."""
        offsets = self.offsets
        excess = len(offsets) - self.LIMIT
        if excess > 0:
            for key in list(islice(offsets, excess)):
                del offsets[key]


_KNOWN: Slot[_KnownOffsets] = Slot("session.offsets", _KnownOffsets)
"""The offsets the session's reads of its current generation found."""
_OWNER = "ravi.kernel.agent.context"
"""The owner of the session's :data:`_KNOWN` offsets (the reads themselves, not any one strategy)."""


@dataclass(eq=False)
class SessionContext:
    """The session a window is assembled for; it travels with every window through the pipeline.

    Strategies keep what they learn about a session, such as a watermark's anchor or a recall index, in
    ``state`` (typed :class:`Slot` values), never in themselves: state belongs to its session, identified by
    ``(agent_id, session_id)``, never inferred from the messages (two sessions may share a message). A strategy
    called on its own, without a session, gets a standalone one (:meth:`standalone`) that keeps nothing between
    calls.

    Attributes:
        agent_id, session_id: Whose session it is (empty for a standalone call).
        counter: How the pipeline counts tokens; a strategy that names no counter of its own counts with it.
        history: The ``HistoryProvider`` the session lives in, when known.
        generation: The session's generation the engine read (:mod:`ravi.kernel.scope`), when the store tracks
            generations; records derived from the window are kept under :attr:`scope`.
        state: The session's own state (see :class:`SessionState`).
        budget: The token budget of this request, when the caller gives one (``ContextManager``'s
            ``token_budget``, a provider's window): budget strategies use it instead of their own.
        calibration: How many times more tokens the model's provider reported for this session's windows than
            were counted (at least 1); budget strategies divide their budget by it.
        partial: Whether the history being compacted is only the newest part of the session (with every system
            message), read through ``WindowReader``. A strategy that cuts the window there calls
            :meth:`cut_made`; one whose window would depend on older messages calls :meth:`need_older`. The
            engine keeps a window only when it was cut and nothing needed older messages; otherwise it reads
            further back.
        kept_from: The ids strategies named when they cut (:meth:`cut_made`): where the part of the read their
            windows keep starts. The engine sizes the session's next read to reach the oldest of them.

    The engine also says what the window is assembled from (:meth:`read_from`): the messages read, and where
    they sit in the session. :meth:`offset` gives a message's offset, the stored tokens before it in the
    session, which every read of the session agrees on, whatever its size. When the read is the store's own
    read of a known generation (``stored``), the offsets found are kept in :attr:`state` for the next reads of
    that generation, so a warm window sums the stored counts of the messages appended since the last one only.
    """

    agent_id: str
    session_id: str
    counter: TokenCounter | None = None
    history: HistoryProvider | None = None
    generation: str | None = None
    state: SessionState = field(default_factory=SessionState)
    budget: int | None = None
    calibration: float = 1.0
    partial: bool = False
    bounded: bool = False
    older_needed: bool = False
    kept_from: list[str] = field(default_factory=list)
    source: Sequence[ChatMessage] = ()
    source_head: int = 0
    source_before: int | None = 0
    source_stored: int | None = None
    _offsets: dict[str, int] | None = field(default=None, repr=False)
    _scanned: int = field(default=0, repr=False)  # where :meth:`offset` stopped walking the read
    _running: int = field(default=0, repr=False)  # the stored tokens before that message
    _stop: int = field(default=0, repr=False)  # where the walk from the head stops: the rest is placed already
    _kept: _KnownOffsets | None = field(default=None, repr=False)  # the generation's offsets kept in ``state``
    _end: int = field(default=0, repr=False)  # the offset past the last stored message read, once placed

    @classmethod
    def standalone(cls, counter: TokenCounter | None = None) -> SessionContext:
        """A session of its own for a strategy called without one: it keeps nothing between calls and derives
        no records (its :attr:`scope` is ``None``)."""
        return cls("", "", counter=counter)

    @classmethod
    def of(cls, session: SessionContext | None, history: Sequence[ChatMessage]) -> SessionContext:
        """``session``, or, for a strategy called directly without one, a :meth:`standalone` session once
        ``history`` is checked to be messages (a pipeline checks what it passes its strategies).

        Raises:
            InvalidArgument: a direct call's ``history`` is not a sequence of ``ChatMessage``.
        """
        if session is not None:
            return session
        check_items(history, ChatMessage, "history")
        return cls.standalone()

    def read_from(
        self,
        messages: Sequence[ChatMessage],
        *,
        head: int = 0,
        before: int | None = 0,
        stored: int | None = None,
    ) -> None:
        """Say what this window is assembled from: ``messages``, of which the first ``head`` are system messages
        from before the rest, and ``before``, the stored tokens of the session before ``messages[head]``
        (``None`` when unknown). A whole session is ``read_from(messages)``.

        ``stored`` says that the first ``stored`` of ``messages`` are what the history store returned, in the
        same round trip as :attr:`generation` (the rest are not stored yet); the offsets found in them are then
        kept in :attr:`state` for later reads of that generation. Leave it ``None`` for messages of any other
        origin (a caller's list, or a read whose generation was read in another round trip)."""
        self.source, self.source_head, self.source_before, self._offsets = messages, head, before, None
        self.source_stored = stored

    def offset(self, message_id: str) -> int | None:
        """The stored tokens (:func:`~ravi.kernel.tokens.stored_tokens`) before the message in the session, or
        ``None`` for a message that is not among those read after the head (or when the read's place is
        unknown)."""
        offsets = self._offsets
        if offsets is None:
            offsets = self._place()
        found = offsets.get(message_id)
        if found is not None:
            return found
        kept = self._kept
        if kept is not None:
            known = kept.offsets.get(message_id)
            # kept by a read of this generation, and inside this read: after its head, before its end (offsets
            # grow by at least 1 a message, so that offset is this read's message with this id)
            if known is not None and (self.source_before or 0) <= known < self._end:
                return known
        # walked as far as the message asked for only: a window asks of its newest part, never of all it read
        source, i, running, stop = self.source, self._scanned, self._running, self._stop
        keep, stored = (kept.offsets, self.source_stored or 0) if kept is not None else (None, 0)
        while i < stop:
            message = source[i]
            offsets.setdefault(message.id, running)
            if keep is not None and i < stored:
                keep[message.id] = running
            running += stored_tokens(message)
            i += 1
            if message.id == message_id:
                found = offsets[message_id]
                break
        self._scanned, self._running = i, running
        if kept is not None:
            kept.trim()
        return found

    def _place(self) -> dict[str, int]:
        """Start placing the read. From the newest stored message whose offset a read of this generation kept
        (walked back from the end), every message after it is placed at once, by its stored count; the older
        ones are walked from the head when asked for (and kept) unless a read kept them already."""
        offsets: dict[str, int] = {}
        self._offsets, self._kept, self._end = offsets, None, 0
        source, head, before = self.source, self.source_head, self.source_before
        self._scanned, self._running, self._stop = head, before or 0, len(source)
        if before is None:
            self._scanned = len(source)
            return offsets
        stored = self.source_stored
        if stored is None or not self.generation:
            return offsets  # no generation to keep offsets under: walked from the head, as before
        stored = min(stored, len(source))
        kept = self.state.get(_OWNER, _KNOWN)
        if kept.generation != self.generation:
            kept = _KnownOffsets(self.generation)
            self.state.put(_OWNER, _KNOWN, kept)
        self._kept = kept
        known = kept.offsets
        i = stored - 1
        while i >= head and source[i].id not in known:
            i -= 1
        if i < head:
            return offsets  # nothing kept of this read yet: walked from the head (and kept) as asked
        running = known[source[i].id]
        for k in range(i, len(source)):
            message = source[k]
            offsets.setdefault(message.id, running)
            if k < stored:
                known[message.id] = running
            running += stored_tokens(message)
            if k == stored - 1:
                self._end = running
        self._stop = i
        kept.trim()
        return offsets

    def cut_made(self, first: str | None = None) -> None:
        """Say that a strategy cut the window inside the part read (dropping a non-system message of its input,
        or keeping a start it remembered), so older messages could not change it.

        Args:
            first: The id of the oldest message of the part read that the window needs, when the strategy knows
                it better than the window shows: a window that also holds older units a store search found (which
                need not be read again) names the start of its newest turns. The engine's next read of the
                session then reaches that far back, not to the oldest message of the window.
        """
        self.bounded = True
        if first is not None:
            self.kept_from.append(first)

    def need_older(self) -> None:
        """Say that this window needs messages older than the part read (a remembered start that is not in it,
        say); ignored once the window was cut inside the part read."""
        if not self.bounded:
            self.older_needed = True

    def budget_for(self, own: int) -> int:
        """The token budget a budget strategy works to: the request's :attr:`budget` when given, else ``own``
        (the strategy's), divided by the session's :attr:`calibration` so a calibrated window still fits."""
        budget = own if self.budget is None else self.budget
        return budget if self.calibration <= 1.0 else int(budget / self.calibration)

    @property
    def scope(self) -> Scope | None:
        """The :class:`~ravi.kernel.scope.Scope` records derived from this session are kept under (its ids and
        the generation the engine read), or ``None`` for a standalone call."""
        if not self.agent_id or not self.session_id:
            return None
        return Scope(self.agent_id, self.session_id, self.generation)

    async def still_current(self) -> bool:
        """Whether the session still has the generation the engine read (``True`` when its store keeps none, or
        for a standalone call). A strategy that keeps derived records outside the history provider asks after
        writing them: a session cleared in between has had its records erased already, so what the strategy
        wrote under the old generation is its own to erase."""
        history, generation = self.history, self.generation
        if history is None or generation is None or not self.agent_id or not self.session_id:
            return True
        if not isinstance(history, SessionGeneration):
            return True
        return await history.generation(self.agent_id, session_id=self.session_id) == generation

    @property
    def key(self) -> tuple[str, str]:
        """``(agent_id, session_id)``."""
        return (self.agent_id, self.session_id)


@runtime_checkable
class CompactionStrategy(Protocol):
    """Turns a history into a smaller window (000: "every strategy is just an object with one method").

    A strategy is a view: it never mutates ``history`` or its messages, keeps every system message, keeps the
    order, keeps each tool call together with its results, and gives the same output for the same input.

    Any object with this method can sit in a pipeline; the engine then treats it as needing the whole session.
    Subclass :class:`~ravi.kernel.agent.strategy.Strategy` to receive the session and to declare what lets the
    engine read less (:class:`~ravi.kernel.agent.strategy.StrategyTraits`).
    """

    async def compact(self, raw_history: Sequence[ChatMessage]) -> list[ChatMessage]:
        """The window to send, derived from ``raw_history``."""
        ...


@runtime_checkable
class AgentContextProtocol(Protocol):
    """What an agent runtime calls around each model call."""

    async def get_prompt_window(self, session_id: str) -> list[ChatMessage]:
        """The compacted window for ``session_id``, ready for the model."""
        ...

    async def add_messages(self, session_id: str, messages: Sequence[ChatMessage], *, run_id: str = "") -> None:
        """Record new turns of a run."""
        ...

    async def end_run(self, session_id: str, run_id: str) -> None:
        """Finish a run, applying the retention policy to its turns."""
        ...


__all__ = ["AgentContextProtocol", "CompactionStrategy", "SessionContext", "SessionState", "Slot"]
