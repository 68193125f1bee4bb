"""What every framework integration (a *face* of Ravi inside another framework) needs, in one public place.

A face converts the framework's messages to Ravi's, stores them, and hands the framework Ravi's window. Three
things are the same for every framework, and live here:

* :func:`as_context`: the ``AgentContext`` a face works with, from what a user passes it (an ``AgentContext``,
  a ``ContextConfig``, or nothing: then ``ContextConfig.from_settings()``, the one default, which is in memory
  with the default sliding window unless ``ravi.toml`` or ``RAVI_*`` name a store).
* :class:`StoredPrefix`: how much of a framework's growing list of messages (its run state) is stored already, by
  ``(agent_id, session_id)``, so each call converts and appends only what is new; :func:`append_new` appends
  it, keeping what the session holds as it was stored.
* :class:`Originals`: the framework's own message kept in a Ravi message's metadata, so it reads back exactly,
  and read back only when it is one (an application's own metadata key of the same name is not).

And one call into the engine (``CompactionPipeline.window``) with the messages given rather than read from the
store, :func:`window_of`, for faces whose framework hands over the whole input on every call, with the session's
epoch (:func:`epoch_of`) read before that input, so a window of turns a clear removed keeps nothing. Everything else a
face needs is the public ``AgentContext`` API: ``add_messages``, ``get_prompt_window`` and ``session``.

Example:
    >>> import asyncio
    >>> from ravi.kernel.messages import ChatMessage
    >>> context = as_context(None)  # ravi.toml, RAVI_* variables, else in memory
    >>> stored = StoredPrefix()
    >>> run = [ChatMessage.user("hi")]
    >>> async def turn() -> list[str]:
    ...     new = run[stored.start(context.agent_id, "s1", run) :]
    ...     await context.add_messages("s1", new)
    ...     stored.mark(context.agent_id, "s1", run)
    ...     return [m.text for m in await context.get_prompt_window("s1")]
    >>> asyncio.run(turn())
    ['hi']
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

from ravi.agents.context.agent_context import AgentContext
from ravi.agents.context.config import ContextConfig
from ravi.agents.context.pipeline import WindowRequest
from ravi.kernel.errors import ConfigurationError, InvalidArgument, MessageConflict
from ravi.kernel.messages import ChatMessage, ContentBlock
from ravi.kernel.values import check_scope, thaw

T = TypeVar("T")


def as_context(context: AgentContext | ContextConfig | None) -> AgentContext:
    """The ``AgentContext`` a face works with: ``context`` itself, one built on a ``ContextConfig``, or, for
    ``None``, one built from settings (``ContextConfig.from_settings()``: ``ravi.toml`` and ``RAVI_*``
    variables; in memory with the default sliding window when they name nothing).

    Raises:
        ConfigurationError: ``context`` is none of these, or the settings are malformed.
    """
    if context is None:
        return AgentContext(ContextConfig.from_settings())
    if isinstance(context, ContextConfig):
        return AgentContext(context)
    if isinstance(context, AgentContext):
        return context
    raise ConfigurationError(
        f"context must be an AgentContext, a ContextConfig or None, got {type(context).__name__}",
        hint="pass ContextConfig(history, [strategies...]), or nothing to use ravi.toml",
    )


async def window_of(
    context: AgentContext, session_id: str, messages: Sequence[ChatMessage], *, epoch: int | None = None
) -> list[ChatMessage]:
    """Ravi's window of ``messages`` (given whole, not read from the store) for ``session_id``: the context's
    pipeline with the session's state (a watermark's anchor, say), its counter and budget. Nothing is stored.

    ``epoch`` is the session's epoch (:func:`epoch_of`) read before ``messages`` were read: when the session was
    cleared since, the window is still assembled, but nothing of it is kept (no state, no last window), since it
    may hold the removed turns (decision 118). A face reads it first, then its messages.

    Raises:
        InvalidArgument: a bad ``session_id``, ``messages`` that are not ``ChatMessage`` objects, or a bad
            ``epoch``.
    """
    check_scope(session_id=session_id)
    request = WindowRequest(context.agent_id, session_id, messages=messages, epoch=epoch)
    return (await context.config.pipeline.window(request)).messages


def epoch_of(context: AgentContext, session_id: str) -> int:
    """The session's epoch in ``context``'s pipeline (``SessionStates.epoch``): a number that changes at every clear
    of the session in this process. Read it before the messages given to :func:`window_of`, and give it as its
    ``epoch``."""
    check_scope(session_id=session_id)
    return context.config.pipeline.sessions.epoch(context.agent_id, session_id)


async def append_new(
    context: AgentContext, session_id: str, messages: Sequence[ChatMessage], *, run_id: str = ""
) -> None:
    """Store the ``messages`` the session does not hold yet, for a face whose message ids are derived from the
    framework's messages and which may convert the same message again (in a new process, or from a state
    restored from a checkpoint).

    A message id is a promise: the store refuses a message under a held id with other content, and a message
    converted again differs from the stored one at least in its ``created_at``. So the batch is appended as it
    is, and only if the store refuses it (``MessageConflict``) is the session read, once, to append just the
    messages whose ids it does not hold: the stored ones stay as they were stored. Two messages under one id in
    ``messages`` are one (the first).
    """
    unique = list({m.id: m for m in reversed(messages)}.values())[::-1]
    if not unique:
        return
    try:
        await context.add_messages(session_id, unique, run_id=run_id)
    except MessageConflict:
        held = {m.id for m in await context.config.history.get_messages(context.agent_id, session_id=session_id)}
        new = [m for m in unique if m.id not in held]
        if new:
            await context.add_messages(session_id, new, run_id=run_id)


class StoredPrefix:
    """Which of each session's growing list of messages (a framework's run state) are stored already, so a face
    converts and appends only what is new.

    Kept per ``(agent_id, session_id)``: two agents' sessions of the same name never share it. A message counts
    as stored when the list holds, at its place, the message marked there (the same object, or an equal one: a
    state restored from a checkpoint is a copy); one the framework replaced in place (LangGraph does, by id) is
    new, and so is every message past the marked ones. A list shorter than the marked one starts again from 0.
    The face appends what is new with :func:`append_new`, by message ids that the same message always gets. At
    most ``max_sessions`` sessions are kept, the least recently used dropped first; dropping one only costs its
    next call a conversion of the whole list.

    Example:
        >>> stored = StoredPrefix()
        >>> run = ["a", "b"]
        >>> stored.start("agent", "s1", run)
        0
        >>> stored.mark("agent", "s1", run)
        >>> run.append("c")
        >>> stored.start("agent", "s1", run)
        2
        >>> stored.unstored("agent", "s1", ["A", "b", "c"])  # "a" replaced in place, "c" new
        [0, 2]
    """

    def __init__(self, max_sessions: int = 4_096) -> None:
        if not isinstance(max_sessions, int) or isinstance(max_sessions, bool) or max_sessions < 1:
            raise InvalidArgument(f"max_sessions must be an integer >= 1, got {max_sessions!r}")
        self.max_sessions = max_sessions
        self._seen: OrderedDict[tuple[str, str], tuple[object, ...]] = OrderedDict()

    def unstored(self, agent_id: str, session_id: str, messages: Sequence[object]) -> list[int]:
        """The places in ``messages`` of the messages of ``(agent_id, session_id)`` not stored yet."""
        seen = self._seen.get((agent_id, session_id))
        if seen is None or len(messages) < len(seen):
            return list(range(len(messages)))
        changed = [
            i for i, (now, then) in enumerate(zip(messages[: len(seen)], seen, strict=True)) if not _same(now, then)
        ]
        return changed + list(range(len(seen), len(messages)))

    def start(self, agent_id: str, session_id: str, messages: Sequence[object]) -> int:
        """Where the messages of ``(agent_id, session_id)`` not stored yet begin in ``messages`` (the first of
        :meth:`unstored`, else the end)."""
        places = self.unstored(agent_id, session_id, messages)
        return places[0] if places else len(messages)

    def mark(self, agent_id: str, session_id: str, messages: Sequence[object]) -> None:
        """Record that every one of ``messages`` is stored in ``(agent_id, session_id)``."""
        key = (agent_id, session_id)
        self._seen[key] = tuple(messages)
        self._seen.move_to_end(key)
        while len(self._seen) > self.max_sessions:
            self._seen.popitem(last=False)

    def forget(self, agent_id: str, session_id: str) -> None:
        """Start ``(agent_id, session_id)`` from 0 next time (after the session was cleared, say)."""
        self._seen.pop((agent_id, session_id), None)

    def __len__(self) -> int:
        return len(self._seen)


def _same(now: object, then: object) -> bool:
    if now is then:
        return True
    try:
        return bool(now == then)
    except Exception:  # a framework's equality that cannot compare these: not the same
        return False


class Originals(Generic[T]):
    """A framework's own messages, kept in the metadata of the Ravi messages that stand for them.

    ``keep`` gives the metadata that holds one (its JSON form, under ``key``); ``of`` reads it back with
    ``load``, and gives ``None`` when a message holds none, or holds under ``key`` something ``load`` refuses
    (an application's own metadata of that name): the face then rebuilds the framework's message from the Ravi
    message's blocks. ``unchanged`` gives it only when the pipeline left the message as stored.

    Example:
        >>> import json
        >>> originals = Originals("myframework", load=lambda data: dict(data["message"]))
        >>> message = ChatMessage.user("hi", metadata=originals.keep({"message": {"text": "hi"}}))
        >>> originals.of(message)
        {'text': 'hi'}
        >>> originals.of(ChatMessage.user("hi", metadata={"myframework": "an application's own"})) is None
        True
    """

    def __init__(self, key: str, *, load: Callable[[Any], T]) -> None:
        check_scope(key=key)
        self.key = key
        self.load = load

    def keep(self, data: Any) -> dict[str, Any]:
        """The metadata that keeps ``data`` (a framework message's JSON form) under this key."""
        return {self.key: data}

    def data(self, message: ChatMessage) -> Any:
        """What ``message`` keeps under this key, as plain JSON data (``None`` when nothing)."""
        kept = message.metadata.get(self.key)
        return None if kept is None else thaw(kept)

    def of(self, message: ChatMessage) -> T | None:
        """The framework's message that ``message`` keeps, or ``None`` (none kept, or not one ``load`` accepts)."""
        data = self.data(message)
        if data is None:
            return None
        try:
            return self.load(data)
        except (ValueError, TypeError, KeyError, IndexError, AttributeError):  # pydantic's errors are ValueErrors
            return None

    def unchanged(self, message: ChatMessage, blocks: Callable[[T], Sequence[ContentBlock]]) -> T | None:
        """The framework's message that ``message`` keeps, if the pipeline left ``message`` as it was stored
        (``blocks(original)`` is what it holds), else ``None``."""
        original = self.of(message)
        if original is None:
            return None
        try:
            same = tuple(blocks(original)) == message.content
        except (ValueError, TypeError, KeyError, IndexError, AttributeError):
            return None
        return original if same else None


__all__ = ["Originals", "StoredPrefix", "append_new", "as_context", "epoch_of", "window_of"]
