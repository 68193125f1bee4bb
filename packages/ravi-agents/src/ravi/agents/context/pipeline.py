"""``CompactionPipeline``: strategies in order, each feeding the next, with events around the run."""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from ravi.agents.context.events import CompactionEvent, EventBus, Listener, held_events
from ravi.agents.context.session import SessionStates, run_strategy
from ravi.agents.telemetry import window_assembly
from ravi.agents.tokens import DEFAULT_COUNTER
from ravi.kernel.agent import CompactionStrategy, SessionContext
from ravi.kernel.llm import TokenCounter
from ravi.kernel.messages import ChatMessage
from ravi.kernel.storage import HistoryProvider, HistorySearcher, WindowReader
from ravi.kernel.tokens import stored_tokens

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

    @window_assembly
    async def compact(self, history: Sequence[ChatMessage], session: SessionContext | None = None) -> list[ChatMessage]:
        """The window: ``history`` passed through every strategy in turn. ``history`` itself is never changed."""
        session = session or self.session()
        session.read_from(history)
        return await self._run(history, session)

    async def _run(self, history: Sequence[ChatMessage], session: SessionContext) -> list[ChatMessage]:
        events = self.events
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
        session.read_from(history)
        window = list(history)
        for strategy in self.strategies:
            out = await run_strategy(strategy, window, session)
            builder.stage(strategy, window, out, session)
            window = out
        return builder.build(window)

    @property
    def suffix_determined(self) -> bool:
        """Whether every strategy is suffix-determined: what it makes of a message depends only on that message,
        the messages after it and the system messages, never on older ones, and one of them cuts the window
        (``cuts``). Such a pipeline's window can be assembled from the newest part of a session
        (:meth:`assemble`)."""
        strategies = self.strategies
        return all(getattr(s, "suffix_determined", False) for s in strategies) and any(
            getattr(s, "cuts", False) for s in strategies
        )

    def reads_windows(self, history: HistoryProvider) -> bool:
        """Whether :meth:`assemble` reads only the newest part of a session stored in ``history``: the provider
        can read windows (``WindowReader``), the pipeline is :attr:`suffix_determined`, and, when a strategy
        ranks older messages by a search (``searches``), the provider can search (``HistorySearcher``)."""
        if not (isinstance(history, WindowReader) and self.suffix_determined):
            return False
        return isinstance(history, HistorySearcher) or not any(getattr(s, "searches", False) for s in self.strategies)

    def window_counter(self) -> TokenCounter:
        """The counter the window's size is judged by: that of the last strategy naming its own, else the
        pipeline's."""
        for strategy in reversed(self.strategies):
            own = getattr(strategy, "own_counter", None)
            if own is not None:
                return own  # type: ignore[no-any-return]
        return self.counter

    def read_hint(self) -> int:
        """How many stored tokens a windowed read starts with: the largest budget a strategy names (with room for
        a counter that counts more than the stored heuristic), else 8,192."""
        hints = [getattr(strategy, "read_hint", None) for strategy in self.strategies]
        known = [h for h in hints if isinstance(h, int) and h > 0]
        return max(known) * 3 // 2 if known else 8_192

    @window_assembly
    async def assemble(
        self, history: HistoryProvider, session: SessionContext, *, unsaved: Sequence[ChatMessage] = ()
    ) -> list[ChatMessage]:
        """The window of ``session`` as stored in ``history`` (plus ``unsaved`` turns at its end).

        When the pipeline :meth:`reads_windows` of the provider, only the newest part of the session is read: as
        many stored tokens as the session's last window needed (at first, the pipeline's budget), then four times
        more, until a strategy cuts the window inside the part read (or the part is the whole session). The window
        is the one the whole transcript gives; its events are delivered once. Otherwise the session is read whole.
        """
        if not self.reads_windows(history):
            messages = await history.get_messages(session.agent_id, session_id=session.session_id)
            messages.extend(unsaved)
            session.read_from(messages)
            return await self._run(messages, session)
        # start from what this session's last window needed: the pipeline may shrink messages a lot (folded tool
        # groups, shortened results), so its window can hold many more stored tokens than its budget
        tokens = max(self.read_hint(), session.state.get(_READ_TOKENS, 0))
        served = session.state.get(_SERVED, 0)
        session.state[_SERVED] = served + 1
        first_try = True
        while True:
            assert isinstance(history, WindowReader)
            view = await history.read_window(session.agent_id, session_id=session.session_id, tokens=tokens)
            messages = [*view.messages, *unsaved]
            if view.complete:
                session.read_from(messages)
                window = await self._run(messages, session)
                # a read that had to reach the session's start (to write a first summary, say) need not be
                # repeated: the next one is sized by what this window kept
                session.state[_READ_TOKENS] = tokens if first_try else _needed(view.tail, window)
                return window
            session.read_from(messages, head=view.head, before=view.before)
            kept = {owner: copy.copy(value) for owner, value in session.state.items()}
            session.partial, session.bounded, session.older_needed = True, False, False
            try:
                with held_events() as deliver:
                    window = await self._run(messages, session)
                    # cut inside the part read: older messages could not have changed the window
                    if session.bounded and not session.older_needed:
                        deliver()
                        if not first_try or _READ_TOKENS not in session.state or served % _RESIZE_EVERY == 0:
                            # size the next read; a read that sufficed at once is kept, since a growing session's
                            # window slides forward inside it (re-measured now and then, to shrink it too)
                            session.state[_READ_TOKENS] = _needed(view.tail, window)
                        return window
            finally:
                session.partial = session.bounded = session.older_needed = False
            session.state.clear()
            session.state.update(kept)  # the attempt's state changes are undone: it is redone on more history
            tokens *= 4
            first_try = False

    def __repr__(self) -> str:
        return f"CompactionPipeline({self.strategies!r})"


_READ_TOKENS = "ravi.pipeline:read_tokens"
_SERVED = "ravi.pipeline:served"
_RESIZE_EVERY = 64


def _needed(tail: Sequence[ChatMessage], window: Sequence[ChatMessage]) -> int:
    """The stored tokens a read needs for ``window`` next time: those from its oldest source message in
    ``tail`` to the end, with a quarter more for the window's growth."""
    kept = {m.id for m in window}
    first = next((i for i, m in enumerate(tail) if m.id in kept and m.role != "system"), 0)
    total = sum(stored_tokens(m) for m in tail[first:])
    return total + total // 4 + 1


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
