"""Assembly contracts (000: ``kernel/agent/context.py``): ``CompactionStrategy``, ``AgentContextProtocol``, and the
``SessionContext`` that travels with every window."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, runtime_checkable

from ravi.kernel.llm import TokenCounter
from ravi.kernel.messages import ChatMessage
from ravi.kernel.scope import Scope
from ravi.kernel.storage import HistoryProvider
from ravi.kernel.tokens import stored_tokens

T = TypeVar("T")


@dataclass(eq=False)
class SessionContext:
    """The session a window is assembled for; it travels with every window through the pipeline.

    Strategies that accept it (``compact(history, session=None)``) keep what they learn about a session, such
    as a watermark's anchor or a recall index, in ``state``, never in themselves: state belongs to its session,
    identified by ``(agent_id, session_id)``, never inferred from the messages (two sessions may share a message).

    Attributes:
        agent_id, session_id: Whose session it is.
        generation: The session's generation the engine read (:mod:`ravi.kernel.scope`), when the store tracks
            generations; records derived from the window are kept under :attr:`scope`.
        counter: How the pipeline counts tokens; a strategy that names no counter of its own counts with it.
        history: The ``HistoryProvider`` the session lives in, when known.
        state: The session's own state, by owner (a strategy, an index). The engine keeps one per session,
            bounded, and drops the least recently used.
        calibration: How many times more tokens the model's provider reported for this session's windows than
            were counted (at least 1); budget strategies divide their budget by it.
        partial: Whether the history being compacted is only the newest part of the session (with every system
            message), read through ``WindowReader``. A strategy that cuts the window there calls
            :meth:`cut_made`; one whose window would depend on older messages calls :meth:`need_older`. The
            engine keeps a window only when it was cut and nothing needed older messages; otherwise it reads
            further back.

    The engine also says what the window is assembled from (:meth:`read_from`): the messages read, and where
    they sit in the session. :meth:`offset` gives a message's offset, the stored tokens before it in the
    session, which every read of the session agrees on, whatever its size.
    """

    agent_id: str
    session_id: str
    counter: TokenCounter | None = None
    generation: str | None = None
    history: HistoryProvider | None = None
    state: dict[object, Any] = field(default_factory=dict)
    calibration: float = 1.0
    partial: bool = False
    bounded: bool = False
    older_needed: bool = False
    source: Sequence[ChatMessage] = ()
    source_head: int = 0
    source_before: int | None = 0
    _offsets: dict[str, int] | None = field(default=None, repr=False)

    def read_from(self, messages: Sequence[ChatMessage], *, head: int = 0, before: int | None = 0) -> None:
        """Say what this window is assembled from: ``messages``, of which the first ``head`` are system messages
        from before the rest, and ``before``, the stored tokens of the session before ``messages[head]``
        (``None`` when unknown). A whole session is ``read_from(messages)``."""
        self.source, self.source_head, self.source_before, self._offsets = messages, head, before, None

    def offset(self, message_id: str) -> int | None:
        """The stored tokens (:func:`~ravi.kernel.tokens.stored_tokens`) before the message in the session, or
        ``None`` for a message that is not among those read after the head (or when the read's place is
        unknown)."""
        offsets = self._offsets
        if offsets is None:
            offsets = self._offsets = {}
            running = self.source_before
            if running is not None:
                source = self.source
                for i in range(self.source_head, len(source)):
                    message = source[i]
                    offsets[message.id] = running
                    running += stored_tokens(message)
        return offsets.get(message_id)

    def cut_made(self) -> None:
        """Say that a strategy cut the window inside the part read (dropping a non-system message of its input,
        or keeping a start it remembered), so older messages could not change it."""
        self.bounded = True

    def need_older(self) -> None:
        """Say that this window needs messages older than the part read (a remembered start that is not in it,
        say); ignored once the window was cut inside the part read."""
        if not self.bounded:
            self.older_needed = True

    @property
    def scope(self) -> Scope | None:
        """The :class:`~ravi.kernel.scope.Scope` records derived from this session are kept under (its ids and
        the generation the engine read), or ``None`` for a window assembled outside any session."""
        if not self.agent_id or not self.session_id:
            return None
        return Scope(self.agent_id, self.session_id, self.generation)

    @property
    def key(self) -> tuple[str, str]:
        """``(agent_id, session_id)``."""
        return (self.agent_id, self.session_id)

    def state_for(self, owner: object, factory: Callable[[], T]) -> T:
        """``owner``'s state for this session, made by ``factory()`` the first time it is asked for."""
        try:
            value: T = self.state[owner]
        except KeyError:
            value = self.state[owner] = factory()
        return value


@runtime_checkable
class CompactionStrategy(Protocol):
    """Turns a history into a smaller window.

    A strategy is a view: it never mutates ``history`` or its messages, keeps every system message, keeps the
    order, keeps each tool call together with its results, and gives the same output for the same input.

    A strategy may also accept the session (``compact(history, session=None)``, a :class:`SessionContext`); the
    pipeline passes it to those that do, and calls plain ``compact(history)`` on the others.
    """

    async def compact(self, history: Sequence[ChatMessage]) -> list[ChatMessage]:
        """The window to send, derived from ``history``."""
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


__all__ = ["AgentContextProtocol", "CompactionStrategy", "SessionContext"]
