"""Events that assembly emits, and a minimal bus to subscribe to them (part of the strategy contract: a strategy
reports what went wrong, a summary that failed or a budget it could not meet, on its ``events`` bus)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal

from ravi.kernel.llm import TokenCounter
from ravi.kernel.messages import ChatMessage
from ravi.kernel.tokens import STORED_COUNTER

_log = logging.getLogger(__name__)

EventKind = Literal["pre_compact", "post_compact", "strategy_applied", "summarization_failed", "budget_unmet"]


@dataclass(frozen=True)
class CompactionEvent:
    """Something that happened while assembling a window.

    ``messages`` is the window at that point; ``tokens`` is counted on first access only, so subscribers that
    do not read it cost nothing.
    """

    kind: EventKind
    messages: Sequence[ChatMessage]
    strategy: str | None = None
    changed: bool = False
    error: BaseException | None = None
    detail: dict[str, Any] = field(default_factory=dict)
    counter: TokenCounter = field(default=STORED_COUNTER, repr=False)

    @property
    def message_count(self) -> int:
        """How many messages the window holds at this point."""
        return len(self.messages)

    @cached_property
    def tokens(self) -> int:
        """How many tokens the window holds at this point."""
        return self.counter.count_messages(self.messages)


Listener = Callable[[CompactionEvent], object]


class EventBus:
    """Subscribers called in order for each event; a failing subscriber is logged and skipped."""

    def __init__(self) -> None:
        self._listeners: list[Listener] = []

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener(event)`` for every event; returns a function that unsubscribes it."""
        self._listeners.append(listener)

        def dispose() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return dispose

    def __bool__(self) -> bool:
        return bool(self._listeners)

    def emit(self, event: CompactionEvent) -> None:
        """Deliver ``event`` to every subscriber (or hold it back, inside :func:`held_events`)."""
        held = _HELD.get()
        if held is not None:
            held.append((self, event))
            return
        for listener in list(self._listeners):
            try:
                listener(event)
            except Exception:
                _log.exception("a compaction event listener failed")


_HELD: ContextVar[list[tuple[EventBus, CompactionEvent]] | None] = ContextVar("ravi_held_events", default=None)


@contextmanager
def held_events() -> Iterator[Callable[[], None]]:
    """Hold back every event emitted in this task while the block runs; the block gets a function that delivers
    them (in order) when it exits, and without a call they are dropped. The engine holds the events of an
    assembly attempt it may redo, so subscribers see each window's events once."""
    held: list[tuple[EventBus, CompactionEvent]] = []
    deliver = False

    def release() -> None:
        nonlocal deliver
        deliver = True

    token = _HELD.set(held)
    try:
        yield release
    finally:
        _HELD.reset(token)
    if deliver:
        for bus, event in held:
            bus.emit(event)


__all__ = ["CompactionEvent", "EventBus", "EventKind", "Listener", "held_events"]
