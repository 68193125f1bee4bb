"""``CompactionPipeline``: strategies in order, each feeding the next, with events around the run."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from ravi.agents.context.events import CompactionEvent, EventBus, Listener
from ravi.agents.context.session import SessionStates, run_strategy
from ravi.agents.tokens import DEFAULT_COUNTER
from ravi.kernel.agent import CompactionStrategy, SessionContext
from ravi.kernel.llm import TokenCounter
from ravi.kernel.messages import ChatMessage
from ravi.kernel.storage import HistoryProvider

if TYPE_CHECKING:
    from ravi.agents.context.manifest import Window


class CompactionPipeline:
    """Run ``strategies`` in order on a history; an empty pipeline returns the history as it is.

    Subscribers get a ``pre_compact`` event before, a ``strategy_applied`` event after each strategy (with
    ``changed`` telling whether it altered the window), a ``post_compact`` event after, and the events of the
    strategies themselves (``summarization_failed``, ``budget_unmet``).

    Each window is assembled for a session (:meth:`session`); the pipeline keeps the state of the last
    ``max_sessions`` sessions it served, and ``counter`` is the counter of every strategy that names none of
    its own. Called without a session, the pipeline treats all such calls as one anonymous session.

    Example:
        >>> from ravi.agents.context import SlidingWindowCompaction, ToolResultCompactionStrategy
        >>> pipeline = CompactionPipeline([ToolResultCompactionStrategy(), SlidingWindowCompaction(50)])
        >>> dispose = pipeline.subscribe(lambda event: print(event.kind, event.message_count))
    """

    def __init__(
        self,
        strategies: Sequence[CompactionStrategy] = (),
        *,
        counter: TokenCounter | None = None,
        max_sessions: int = 1_024,
    ) -> None:
        self.strategies = list(strategies)
        self.counter = counter or DEFAULT_COUNTER
        self.sessions = SessionStates(max_sessions)
        self.events = EventBus()
        for strategy in self.strategies:
            child_events = getattr(strategy, "events", None)
            if isinstance(child_events, EventBus):
                child_events.subscribe(self.events.emit)

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener(event)`` for every event; returns a function that unsubscribes it."""
        return self.events.subscribe(listener)

    def session(
        self, agent_id: str = "", session_id: str = "", *, history: HistoryProvider | None = None
    ) -> SessionContext:
        """The context of a session this pipeline assembles windows for, with the session's kept state."""
        return SessionContext(
            agent_id, session_id, counter=self.counter, history=history, state=self.sessions.get(agent_id, session_id)
        )

    async def compact(self, history: Sequence[ChatMessage], session: SessionContext | None = None) -> list[ChatMessage]:
        """The window: ``history`` passed through every strategy in turn. ``history`` itself is never changed."""
        events = self.events
        session = session or self.session()
        window = list(history)
        if events:
            events.emit(CompactionEvent("pre_compact", window, counter=self.counter))
        for strategy in self.strategies:
            out = await run_strategy(strategy, window, session)
            if events:
                changed = len(out) != len(window) or out != window
                events.emit(
                    CompactionEvent(
                        "strategy_applied", out, strategy=type(strategy).__name__, changed=changed, counter=self.counter
                    )
                )
            window = out
        if events:
            events.emit(CompactionEvent("post_compact", window, counter=self.counter))
        return window

    async def explain(self, history: Sequence[ChatMessage], session: SessionContext | None = None) -> Window:
        """The window and its manifest: for each source message, kept, truncated (how much), summarised (into
        which summary), recalled or dropped, and by which strategy. Costs a pass per strategy: ask only when
        you need the explanation."""
        from ravi.agents.context.manifest import ManifestBuilder

        builder = ManifestBuilder(history)
        session = session or self.session()
        window = list(history)
        for strategy in self.strategies:
            out = await run_strategy(strategy, window, session)
            builder.stage(strategy, window, out, session)
            window = out
        return builder.build(window)

    def __repr__(self) -> str:
        return f"CompactionPipeline({self.strategies!r})"


def as_pipeline(
    pipeline: CompactionPipeline | CompactionStrategy | Sequence[CompactionStrategy] | None,
    *,
    default: Callable[[], CompactionPipeline],
) -> CompactionPipeline:
    """A pipeline from a pipeline, a single strategy, a list of strategies, or ``None`` (``default()``)."""
    if pipeline is None:
        return default()
    if isinstance(pipeline, CompactionPipeline):
        return pipeline
    if isinstance(pipeline, Sequence):
        return CompactionPipeline(pipeline)
    return CompactionPipeline([pipeline])


__all__ = ["CompactionPipeline", "as_pipeline"]
