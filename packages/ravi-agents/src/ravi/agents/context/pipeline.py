"""``CompactionPipeline``: the assembly engine. Strategies run in order, each feeding the next, and one call,
:meth:`CompactionPipeline.window`, assembles every window every face asks for."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import cast

from ravi.agents import telemetry
from ravi.agents.context.manifest import ManifestBuilder, Window
from ravi.agents.context.session import SessionRewritten, SessionStates
from ravi.agents.context.units import pair_results
from ravi.agents.tokens import DEFAULT_COUNTER, check_counter
from ravi.kernel.agent import (
    CompactionEvent,
    CompactionStrategy,
    EventBus,
    Listener,
    SessionContext,
    SessionState,
    Slot,
    Strategy,
    as_strategies,
    held_events,
)
from ravi.kernel.errors import BackendUnavailable, CompactionError, InvalidArgument, RaviError
from ravi.kernel.llm import TokenCounter
from ravi.kernel.messages import ChatMessage, ToolCallBlock, ToolResultBlock
from ravi.kernel.protocols import conforms
from ravi.kernel.storage import HistoryProvider, HistorySearcher, SessionGeneration, WindowReader
from ravi.kernel.tokens import stored_tokens
from ravi.kernel.values import check_id, check_items, check_scope, check_text

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class WindowRequest:
    """One window to assemble: whose, from what, within what.

    Attributes:
        agent_id, session_id: The session the window is for. Its state (memos, anchors, recall indexes) is kept
            by the pipeline between requests; both empty for a one-off window of given ``messages`` (nothing is
            kept, no record is derived).
        history: The store the session lives in; the engine reads as little of it as the pipeline allows.
        messages: The transcript itself, when the caller already holds it (a framework's run state); the store
            is then not read.
        unsaved: Turns that are not stored (retention ``NONE``), after the stored ones.
        budget: This request's token budget, when the caller gives one (a provider's window); budget strategies
            use it instead of their own.
        counter: How to count tokens for this request, instead of the pipeline's counter (a model client's own
            ``count_tokens``).
        calibration: How many times more tokens the provider reported than were counted (see
            :class:`~ravi.agents.context.calibration.Calibration`); budget strategies divide by it.
        explain: Also say what happened to every stored message (:attr:`Window.manifest`); the whole session is
            read for it, since every message is accounted for.
        generation: With ``messages`` read from ``history``: the session's generation, read before them
            (``history.generation(...)``). Required when ``history`` keeps generations
            (:class:`~ravi.kernel.storage.SessionGeneration`): a generation read after the caller's read would
            pair the messages a clear landing between the two removed with the new generation, and the window's
            state would be kept under it.
        epoch: With ``agent_id``: the pipeline's epoch of the session (``pipeline.sessions.epoch(agent_id,
            session_id)``), read when the caller read what it gives (``unsaved`` turns, ``messages``). A session
            cleared in this process since then gets its window, but keeps nothing of it: no state, no last window.

    Raises:
        InvalidArgument: neither ``history`` nor ``messages``; only one of ``agent_id`` and ``session_id``;
            ``messages`` or ``unsaved`` that are not ``ChatMessage`` objects; a bad ``budget``, ``generation`` or
            ``epoch``; or ``messages`` with a ``history`` that keeps generations and no ``generation``.
    """

    agent_id: str = ""
    session_id: str = ""
    history: HistoryProvider | None = None
    messages: Sequence[ChatMessage] | None = None
    unsaved: Sequence[ChatMessage] = ()
    budget: int | None = None
    counter: TokenCounter | None = None
    calibration: float = 1.0
    explain: bool = False
    generation: str | None = None
    epoch: int | None = None

    def __post_init__(self) -> None:
        if self.history is None and self.messages is None:
            raise InvalidArgument("a window needs history= (the store) or messages= (the transcript)")
        if bool(self.agent_id) != bool(self.session_id):
            raise InvalidArgument("give both agent_id and session_id, or neither (a one-off window of messages=)")
        if not self.agent_id and self.messages is None:
            raise InvalidArgument("a window read from history= needs agent_id and session_id")
        if self.messages is not None:
            check_items(self.messages, ChatMessage, "messages")
        check_items(self.unsaved, ChatMessage, "unsaved")
        if self.budget is not None and (
            not isinstance(self.budget, int) or isinstance(self.budget, bool) or self.budget < 0
        ):
            raise InvalidArgument(f"budget must be None or an integer >= 0, got {self.budget!r}")
        check_counter(self.counter)
        if (
            self.generation is None
            and self.messages is not None
            and self.agent_id
            and isinstance(self.history, SessionGeneration)
        ):
            raise InvalidArgument(
                "messages= read from a history= that keeps generations needs generation=, the session's generation "
                "read before the messages (one read after them may already be a later conversation's)",
                hint="generation = await history.generation(agent_id, session_id=session_id) first, then "
                "messages = await history.get_messages(...), then WindowRequest(..., generation=generation); or "
                "leave messages= out and the pipeline reads both",
            )
        if self.generation is not None:
            if self.messages is None or self.history is None or not self.agent_id:
                raise InvalidArgument(
                    "generation= is the generation read before messages= from history=: give all three",
                    hint="without messages=, the pipeline reads the generation and the messages itself",
                )
            if not isinstance(self.generation, str):
                raise InvalidArgument(f"generation must be a string or None, got {type(self.generation).__name__}")
            check_text(self.generation, "generation")
            check_id(self.generation, "generation")
        if self.epoch is not None:
            if not self.agent_id:
                raise InvalidArgument("epoch= is the session's epoch in the pipeline: give agent_id and session_id")
            if not isinstance(self.epoch, int) or isinstance(self.epoch, bool) or self.epoch < 0:
                raise InvalidArgument(f"epoch must be None or an integer >= 0, got {self.epoch!r}")


_READ_TOKENS: Slot[list[int]] = Slot("pipeline.read_tokens", list)
"""How many stored tokens the session's next windowed read starts with (empty until a window was assembled)."""
_SERVED: Slot[list[int]] = Slot("pipeline.served", lambda: [0])
"""How many windows of the session this pipeline assembled."""
_RESIZE_EVERY = 64
_REREADS = 3
"""How many times a window is assembled from a fresh read when the session changes generation under it (see
``CompactionPipeline._assemble``) before it is refused."""


class _Pairing:
    """Whether the session holds a tool call and results a provider refuses as stored: a result that does not
    follow its call (another message came between them: a second writer, or a user who spoke while the tool ran),
    a second result for one call (a retried tool), or a call some of whose results were never stored (a crashed
    tool, an agent stopped mid-tool). Found by looking at each message once, as it is first read: a read that
    reaches newer messages, or older ones (a later window that reads further back). Until one is seen, every
    window keeps tool pairs by keeping whole units, and is not checked, but for the newest call while its tool
    runs. Only stored messages are looked at once: unsaved turns (retention ``NONE``) follow the stored ones in
    every read, so a message stored since, or a turn another run adds, lands before them, and they are looked at
    in every window."""

    __slots__ = ("irregular", "newest", "oldest", "span")

    def __init__(self) -> None:
        self.irregular = False  # such a call or result was seen
        self.newest: str | None = None  # the id of the newest message looked at
        self.oldest: str | None = None  # the id of the oldest one (a read's first message other than system)
        self.span = 0  # how many messages from the oldest looked at to the newest, both counted

    def check(self, history: Sequence[ChatMessage], unsaved: int = 0) -> bool:
        """Whether a window of ``history`` must be checked for tool pairs: the session has a call or result a
        provider refuses, ``history`` starts with a result whose call lies before it, or its newest call is not
        answered yet (its tool still runs, or never returned: judged again at the next window). The last
        ``unsaved`` messages of ``history`` are not stored."""
        n = len(history)
        start = 0
        while start < n and history[start].role == "system":
            start += 1
        first = start < n and history[start].role == "tool"
        if self.irregular or start == n:
            return self.irregular or first
        stored = n - unsaved  # the stored messages end there; the unsaved ones after them are looked at each time
        k = stored  # the messages after the newest one looked at start at k (all, when it is not in history)
        while k and history[k - 1].id != self.newest:
            k -= 1
        o = k - self.span  # where the oldest one looked at is, messages being only appended in a generation
        fresh: Sequence[int]
        if stored <= start:  # no stored message but system ones: nothing to remember
            fresh = []
        elif k and o < start:  # a read that starts after it: all before k was looked at
            fresh = range(max(k, start + 1), stored)
            self.span += stored - k
        else:
            if k and history[o].id == self.oldest:  # looked at already, but for the oldest one itself, which was
                fresh = [*range(start + 1, o + 1), *range(max(k, start + 1), stored)]  # judged without what came before
                c = o + 1  # and the end of its group, when it was a result: its group was judged without its call
                while c < k and history[c].role in ("tool", "system"):
                    c += 1
                if history[o].role == "tool" and c < k:
                    fresh.append(c)
            else:  # none of history looked at, or history not as it was: all of it is
                fresh = range(start + 1, stored)
            self.oldest, self.span = history[start].id, stored - start
        if stored > start:
            self.newest = history[stored - 1].id
        for i in chain(fresh, range(max(stored, start + 1), n)):
            role = history[i].role
            if role == "tool":
                if not _follows_its_call(history, i):
                    self.irregular = True
                    break
            elif role != "system" and not _answered(history, start, i):
                self.irregular = True
                break
        return self.irregular or first or not _answered(history, start, n)


def _follows_its_call(history: Sequence[ChatMessage], i: int) -> bool:
    """Whether the tool result ``history[i]`` comes right after its call (only results and system messages between
    them)."""
    result = history[i].tool_result
    j = i - 1
    while j >= 0 and history[j].role in ("tool", "system"):
        j -= 1
    return result is not None and j >= 0 and any(c.id == result.tool_call_id for c in history[j].tool_calls)


def _answered(history: Sequence[ChatMessage], start: int, i: int) -> bool:
    """Whether the tool group that ends before ``history[i]``, if one does, answers each of its calls once (its
    results that answer no call of it are :func:`_follows_its_call`'s). A group whose call lies before ``start``,
    where the read begins, is not judged."""
    j = i - 1
    if j < start:
        return True
    role = history[j].role
    if role == "user":  # most messages: no group ends before it
        return True
    if role == "assistant":  # a call right before it has no result
        # a plain loop on the discriminator: twice as fast as all() of a generator, thrice as isinstance()
        for block in history[j].content:  # noqa: SIM110
            if block.type == "tool_call":
                return False
        return True
    answers: list[str] = []
    while j >= start and (role := history[j].role) in ("tool", "system"):
        if role == "tool" and isinstance(result := history[j].content[0], ToolResultBlock):  # its one block
            answers.append(result.tool_call_id)
        j -= 1
    if j < start or history[j].role != "assistant":
        return True
    calls = [b.id for b in history[j].content if isinstance(b, ToolCallBlock)]
    if len(calls) == len(answers) == 1:
        return calls[0] == answers[0]
    return len(answers) == len(set(answers)) and set(calls) <= set(answers)


_PAIRING: Slot[_Pairing] = Slot("pipeline.pairing", _Pairing)
"""Whether the session holds a tool call or result a provider refuses as stored."""


class CompactionPipeline:
    """The assembly engine: ``strategies`` run in order on a session's history; no strategy at all returns the
    history as it is.

    :meth:`window` is the one entry point every face calls (``AgentContext``, ``ContextManager``, the model
    contexts, the functional API, the CLI, the framework integrations). It reads only the newest part of a
    session when the strategies declare they allow it (:class:`~ravi.kernel.agent.StrategyTraits`), keeps each
    session's state between requests (the last ``max_sessions`` sessions, and nothing of a session once its
    generation changed), and returns the window, with its manifest when asked.

    Subscribers get a ``pre_compact`` event before, a ``strategy_applied`` event after each strategy (with
    ``changed`` telling whether it altered the window), a ``post_compact`` event after, and the events of the
    strategies themselves (``summarization_failed``, ``budget_unmet``), once per window.

    ``counter`` counts for every strategy that names no counter of its own. Strategies are
    :class:`~ravi.kernel.agent.Strategy` objects; a plain ``compact(history)`` object is run as one that needs the
    whole session. A single strategy may be given without a list.

    Raises:
        InvalidArgument: ``strategies`` holds something without a ``compact`` method.
        ConfigurationError: ``counter`` is not a ``TokenCounter``.

    Example:
        >>> from ravi.agents.context import SlidingWindowCompaction, ToolResultCompactionStrategy
        >>> pipeline = CompactionPipeline([ToolResultCompactionStrategy(), SlidingWindowCompaction(50)])
        >>> dispose = pipeline.subscribe(lambda event: print(event.kind, event.message_count))
    """

    def __init__(
        self,
        strategies: Strategy | CompactionStrategy | Sequence[Strategy | CompactionStrategy] = (),
        *,
        counter: TokenCounter | None = None,
        max_sessions: int = 1_024,
    ) -> None:
        check_counter(counter)
        self.strategies: list[Strategy] = as_strategies(strategies)
        self.counter = counter or DEFAULT_COUNTER
        self.sessions = SessionStates(max_sessions)
        self.events = EventBus()
        for strategy in self.strategies:
            if strategy.events is not None:
                strategy.events.subscribe(self.events.emit)

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener(event)`` for every event; returns a function that unsubscribes it."""
        return self.events.subscribe(listener)

    # -- what the strategies declare ------------------------------------------------------------------------------

    @property
    def suffix_determined(self) -> bool:
        """Whether every strategy is suffix-determined and one of them cuts the window
        (:class:`~ravi.kernel.agent.StrategyTraits`): the window can then be assembled from the newest part of a
        session."""
        traits = [s.traits for s in self.strategies]
        return all(t.suffix_determined for t in traits) and any(t.cuts for t in traits)

    def reads_windows(self, history: HistoryProvider | None) -> bool:
        """Whether a window of a session stored in ``history`` is assembled from its newest part: the provider
        can read windows (``WindowReader``), the pipeline is :attr:`suffix_determined`, and, when a strategy
        ranks older messages by a search (``searches``), the provider can search (``HistorySearcher``)."""
        if not (conforms(history, WindowReader) and self.suffix_determined):
            return False
        return conforms(history, HistorySearcher) or not any(s.traits.searches for s in self.strategies)

    @property
    def derives_records(self) -> bool:
        """Whether a strategy keeps records derived from the session (then its generation is read with it)."""
        return any(s.traits.derives_records for s in self.strategies)

    @property
    def prompt_overhead(self) -> int:
        """Tokens every request carries beside the window, as the strategies' budgets left room for them
        (:attr:`~ravi.kernel.agent.StrategyTraits.prompt_overhead`): the largest they declare."""
        return max((s.traits.prompt_overhead for s in self.strategies), default=0)

    def window_counter(self, counter: TokenCounter | None = None) -> TokenCounter:
        """The counter the window's size is judged by: that of the last strategy naming its own, else
        ``counter`` (a request's), else the pipeline's."""
        for strategy in reversed(self.strategies):
            own = strategy.traits.counter
            if own is not None:
                return own
        return counter or self.counter

    def read_hint(self, budget: int | None = None) -> int:
        """How many stored tokens a windowed read starts with: the largest budget a strategy names (or the
        request's ``budget``), with room for a counter that counts more than the stored heuristic; else 8,192."""
        known = [h for s in self.strategies if (h := s.traits.read_hint)]
        if budget:
            known.append(budget)
        return max(known) * 3 // 2 if known else 8_192

    # -- the one entry point ----------------------------------------------------------------------------------------

    def session(self, agent_id: str, session_id: str, *, history: HistoryProvider | None = None) -> SessionContext:
        """The context ``(agent_id, session_id)``'s windows are assembled in, with the state the pipeline keeps
        for the session.

        Raises:
            InvalidArgument: ``agent_id`` or ``session_id`` is not a valid id.
        """
        check_scope(agent_id=agent_id, session_id=session_id)
        return SessionContext(
            agent_id, session_id, counter=self.counter, history=history, state=self.sessions.get(agent_id, session_id)
        )

    async def clear_records(self, agent_id: str, session_id: str) -> int:
        """Forget the session's state in this pipeline, and have every strategy (and every strategy inside one)
        erase what it derived from the session into a store other than the history provider
        (:meth:`~ravi.kernel.agent.Strategy.clear_records`); returns how many records they removed.

        Every strategy is asked, even after one failed, so one store that is down keeps no other store's records;
        clearing again finishes the job. What was erased stays erased.

        Raises:
            InvalidArgument: ``agent_id`` or ``session_id`` is not a valid id (nothing is erased).
            RaviError: a strategy failed to erase its records: its Ravi error as raised, or a ``CompactionError``
                naming the strategy for an error of another kind. When several failed, one error names each of
                them, the first as its ``__cause__``: a ``BackendUnavailable`` when every one was, else a
                ``CompactionError``.
        """
        check_scope(agent_id=agent_id, session_id=session_id)
        removed, failures = await self._erase(agent_id, session_id)
        if failures:
            raise clear_failure(session_id, failures)
        return removed

    async def _erase(self, agent_id: str, session_id: str) -> tuple[int, list[tuple[str, Exception]]]:
        """:meth:`clear_records`, its failures returned (what failed, and its error) instead of raised."""
        self.sessions.drop(agent_id, session_id)
        removed = 0
        failures: list[tuple[str, Exception]] = []
        todo = list(self.strategies)
        while todo:
            strategy = todo.pop(0)
            todo.extend(strategy.children())
            try:
                removed += await strategy.clear_records(agent_id, session_id)
            except Exception as error:  # the others still erase theirs
                failures.append((repr(strategy), error))
        return removed, failures

    async def last_window(
        self, agent_id: str, session_id: str, *, history: HistoryProvider | None
    ) -> list[ChatMessage] | None:
        """The last window this pipeline assembled for the session, if it remembers one of the session as
        ``history`` holds it now.

        ``history`` is the store the session is in. When it tracks generations (``SessionGeneration``), the
        session's generation is read first, and a window of another generation is not given: the session was
        cleared since (by this process or another), and the window holds removed messages. With ``None`` (windows
        of messages passed in, no store), only this process's clears are known.

        Raises:
            InvalidArgument: ``agent_id`` or ``session_id`` is not a valid id.
        """
        check_scope(agent_id=agent_id, session_id=session_id)
        generation = None
        if isinstance(history, SessionGeneration):
            generation = await history.generation(agent_id, session_id=session_id)
        window, _ = self.sessions.last_window(agent_id, session_id, generation)
        return window

    def _held_window(self, agent_id: str, session_id: str) -> tuple[list[ChatMessage] | None, str | None]:
        """The last window this process keeps for the session, and the generation it was assembled in (``None``
        when unknown), as kept: not checked against the store."""
        return self.sessions.last_window(agent_id, session_id)

    @telemetry.traced_window
    async def window(self, request: WindowRequest) -> Window:
        """The window ``request`` asks for (and its manifest, with ``explain``). The stored transcript is never
        changed.

        When the pipeline :meth:`reads_windows` of the provider, only the newest part of the session is read: as
        many stored tokens as the session's last window needed (at first, the largest budget), then four times
        more, until a strategy cuts the window inside the part read (or the part is the whole session). The
        window is the one the whole transcript gives; its events are delivered once. Otherwise the session is
        read whole (and always for ``explain``).

        Windows may be asked for at once, from tasks of one event loop or from threads each running its own: each
        window takes its session's state for itself while it is assembled (:meth:`SessionStates.take`), so no two
        share a memo; one that finds the state taken starts from an empty one, which costs it speed, never
        correctness.
        """
        if not request.agent_id:
            session = SessionContext.standalone()
            session.history = request.history
            return await self._assemble(request, session)
        check_scope(agent_id=request.agent_id, session_id=request.session_id)
        state, lease = self.sessions.take(request.agent_id, request.session_id, request.epoch)
        session = SessionContext(
            request.agent_id, request.session_id, counter=self.counter, history=request.history, state=state
        )
        kept: SessionState | None = None
        window: Window | None = None
        try:
            window = await self._assemble(request, session)
            kept = session.state
            return window
        finally:
            # kept only while the lease holds: a window whose session was cleared meanwhile is not the session's
            # last, even when a window taken after the clear is under way
            self.sessions.give_back(
                lease, kept, None if window is None else window.messages, None if kept is None else kept.generation
            )

    async def _assemble(self, request: WindowRequest, session: SessionContext) -> Window:
        """:meth:`window`, in ``session``, read again when the session changed generation between its read and a
        store search made for the window (:class:`~ravi.agents.context.session.SessionRewritten`): the next read
        is of the new generation, and its state starts afresh. Messages the caller read (``messages=``) cannot be
        read again: the window is refused.

        The events of an attempt that is redone (or refused) are not delivered: subscribers see the window's
        events once. Those of an attempt that fails otherwise are, as they were emitted."""
        for attempt in range(1, _REREADS + 1):
            failure: Exception | None = None
            with held_events() as deliver:
                try:
                    window = await self._assemble_once(request, session)
                except SessionRewritten:
                    rewritten = True
                except Exception as error:
                    failure, rewritten = error, False
                    deliver()
                else:
                    rewritten = False
                    deliver()
            if failure is not None:
                raise failure
            if not rewritten:
                return window
            if request.messages is not None or attempt == _REREADS:
                times = "" if request.messages is not None else f" {_REREADS} times"
                raise CompactionError(
                    f"session {session.session_id!r} changed{times} (a clear, clear_run, replace_last or forget) "
                    "while its window was assembled: a store search found another session than the one read"
                )
        raise AssertionError("unreachable")

    async def _assemble_once(self, request: WindowRequest, session: SessionContext) -> Window:
        """:meth:`window`, in ``session``, once."""
        session.counter = request.counter or self.counter
        session.budget, session.calibration = request.budget, request.calibration
        if request.messages is not None:
            messages = [*request.messages, *request.unsaved]
            if request.history is not None and request.agent_id:
                # the generation the caller read before the messages (a store without generations has none)
                self._adopt(session, request.generation)
            session.read_from(messages)
            return await self._run(messages, session, request.explain, len(request.unsaved))
        history = request.history
        assert history is not None
        if request.explain or not self.reads_windows(history):
            # read even when no strategy derives records: the state the session keeps here (a held recall, a
            # memo) came from the transcript, and must not outlive a clear made elsewhere
            generation = await _generation(history, session)
            messages = await history.get_messages(session.agent_id, session_id=session.session_id)
            messages.extend(request.unsaved)
            self._adopt(session, generation)
            session.read_from(messages)
            return await self._run(messages, session, request.explain, len(request.unsaved))
        return await self._windowed(cast(WindowReader, history), session, request)

    async def compact(
        self, raw_history: Sequence[ChatMessage], session: SessionContext | None = None
    ) -> list[ChatMessage]:
        """The window of ``raw_history`` (000's ``pipeline.compact(raw)``): every strategy in turn, on the given
        messages. With ``session`` (from :meth:`session`) the session's state is used and kept; without, nothing
        is kept between calls.

        Raises:
            InvalidArgument: ``raw_history`` is not a sequence of ``ChatMessage`` objects.
            CompactionError: ``session`` names a generation the session left before a store search made for the
                window (``SessionRewritten``): read the messages again.
        """
        check_items(raw_history, ChatMessage, "raw_history")
        if session is None:
            return (await self.window(WindowRequest(messages=raw_history))).messages
        session.read_from(raw_history)
        window = (await self._run(raw_history, session, explain=False)).messages
        if session.agent_id:
            self.sessions.note_window(session.agent_id, session.session_id, window, session.state.generation)
        return window

    # -- how ----------------------------------------------------------------------------------------------------------

    def _adopt(self, session: SessionContext, generation: str | None) -> None:
        """Assemble in ``generation`` of the session: state kept from another generation, or from reads that
        knew none, is dropped: the window goes on in a new, empty state (the one it held is the window's alone, see
        :meth:`SessionStates.take`)."""
        state = session.state
        if generation is not None and state.generation != generation:
            state = session.state = SessionState()
        if generation is not None:
            state.generation = generation
        session.generation = generation

    @telemetry.traced_pass
    async def _run(
        self, history: Sequence[ChatMessage], session: SessionContext, explain: bool, unsaved: int = 0
    ) -> Window:
        """The window of ``history``, whose last ``unsaved`` messages are not stored."""
        events = self.events
        counter = session.counter or self.counter
        window = list(history)
        builder = ManifestBuilder(history) if explain else None
        if events:
            events.emit(CompactionEvent("pre_compact", window, counter=counter))
        for strategy in self.strategies:
            out = await strategy.compact(window, session)
            if builder is not None:
                builder.stage(strategy, window, out, session)
            if events:
                changed = len(out) != len(window) or out != window
                events.emit(
                    CompactionEvent("strategy_applied", out, strategy=strategy.name, changed=changed, counter=counter)
                )
            window = out
        strategies_kept = window
        if session.state.get(self, _PAIRING).check(history, unsaved):
            # strategies keep whole units; a result stored apart from its call is a unit of its own: it is sent
            # right after its call, and left out when its call is not sent (a provider takes it nowhere else), as
            # is a second result for one call; a call without its results is taken out of its message
            paired = pair_results(window)
            if builder is not None:
                builder.left_out(paired, "tool pairs")
            window = paired
        if events:
            events.emit(CompactionEvent("post_compact", window, counter=counter))
        given_back = not session.partial or (session.bounded and not session.older_needed)
        if given_back and history and (not strategies_kept or strategies_kept[-1].id != history[-1].id):
            _left_out(history[-1], strategies_kept, counter)  # not a call left out while its tool runs
        return builder.build(window) if builder is not None else Window(window)

    async def _windowed(self, history: WindowReader, session: SessionContext, request: WindowRequest) -> Window:
        state = session.state
        # start from what this session's last window needed: the pipeline may shrink messages a lot (folded tool
        # groups, shortened results), so its window can hold many more stored tokens than its budget
        sized = state.get(self, _READ_TOKENS)
        tokens = max(self.read_hint(request.budget), sized[0] if sized else 0)
        served = state.get(self, _SERVED)
        served[0] += 1
        first_try = True
        while True:
            view = await history.read_window(session.agent_id, session_id=session.session_id, tokens=tokens)
            self._adopt(session, view.generation)
            if session.state is not state:  # a new generation: the session's state starts afresh
                state = session.state
                served = state.get(self, _SERVED)
                served[0] += 1
            sized = state.get(self, _READ_TOKENS)
            messages = [*view.messages, *request.unsaved]
            stored = len(view.messages)  # read with the generation: offsets found are kept for the next reads
            if view.complete:
                session.read_from(messages, stored=stored)
                window = await self._run(messages, session, False, len(request.unsaved))
                # a read that had to reach the session's start (to write a first summary, say) need not be
                # repeated: the next one is sized by what this window kept
                sized[:] = [tokens if first_try else _needed(view.tail, window.messages)]
                return window
            session.read_from(messages, head=view.head, before=view.before, stored=stored)
            kept = state.snapshot()
            session.partial, session.bounded, session.older_needed = True, False, False
            session.kept_from = []
            try:
                with held_events() as deliver:
                    window = await self._run(messages, session, False, len(request.unsaved))
                    # cut inside the part read: older messages could not have changed the window
                    if session.bounded and not session.older_needed:
                        deliver()
                        if not first_try or not sized or served[0] % _RESIZE_EVERY == 0:
                            # size the next read; a read that sufficed at once is kept, since a growing session's
                            # window slides forward inside it (re-measured now and then, to shrink it too)
                            sized[:] = [_needed(view.tail, window.messages, session.kept_from)]
                        return window
            finally:
                session.partial = session.bounded = session.older_needed = False
                session.kept_from = []
            state.restore(kept)  # the attempt's state changes are undone: it is redone on more history
            tokens *= 4
            first_try = False

    def __repr__(self) -> str:
        return f"CompactionPipeline({self.strategies!r})"


def _left_out(newest: ChatMessage, window: Sequence[ChatMessage], counter: TokenCounter) -> None:
    """Warn when ``window`` leaves out the session's newest message: a message larger than the budget on its own
    (a pasted document, a huge tool result) is left out like any other that does not fit, and the model would
    answer without it. The window still fits the budget; the warning says why the message is missing."""
    if any(m.id == newest.id for m in window):
        return
    log.warning(
        "the window leaves out the session's newest message (%s, id %r, %d tokens), so the model will not see it; "
        "a message larger than the budget on its own is left out like any other that does not fit",
        newest.role,
        newest.id,
        counter.count_message(newest),
    )


async def _generation(history: HistoryProvider, session: SessionContext) -> str | None:
    """The session's generation, read before its messages (so records derived from them are never filed under a
    later generation), when the store tracks generations."""
    if isinstance(history, SessionGeneration):
        return await history.generation(session.agent_id, session_id=session.session_id)
    return None


def _needed(tail: Sequence[ChatMessage], window: Sequence[ChatMessage], kept_from: Sequence[str] = ()) -> int:
    """The stored tokens a read needs for ``window`` next time: those from its oldest source message in
    ``tail`` (or the oldest message the strategies named as where what they keep of the read starts, when each
    is in ``tail``: a window's units recalled by a store search need not be read) to the end, with a quarter
    more for the window's growth."""
    named = set(kept_from)
    if named and named <= {m.id for m in tail}:
        first = next(i for i, m in enumerate(tail) if m.id in named)
    else:
        kept = {m.id for m in window}
        first = next((i for i, m in enumerate(tail) if m.id in kept and m.role != "system"), 0)
    total = sum(stored_tokens(m) for m in tail[first:])
    return total + total // 4 + 1


def as_pipeline(
    pipeline: CompactionPipeline | Strategy | CompactionStrategy | Sequence[Strategy | CompactionStrategy] | None,
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


_CLEAR_HINT = "clear the session again once the store is back; what was erased stays erased"


def clear_failure(session_id: str, failures: Sequence[tuple[str, Exception]]) -> RaviError:
    """The error a clear of ``session_id`` raises when the stores ``failures`` names (what failed, and its error)
    could not erase their records: one Ravi error as raised, one error of another kind as a ``CompactionError``
    naming what failed; several as one error naming each, the first as its ``__cause__``, a
    ``BackendUnavailable`` when every one was (a caller that waits for the stores to come back still can), else a
    ``CompactionError``."""
    if len(failures) == 1:
        what, error = failures[0]
        if isinstance(error, RaviError):
            return error
        failed: RaviError = CompactionError(
            f"{what} could not erase its records of session {session_id!r}: {error!r}", hint=_CLEAR_HINT
        )
    else:
        kind = BackendUnavailable if all(isinstance(e, BackendUnavailable) for _, e in failures) else CompactionError
        named = "; ".join(f"{what}: {type(error).__name__}: {error}" for what, error in failures)
        failed = kind(
            f"{len(failures)} stores could not erase their records of session {session_id!r}: {named}",
            hint="clear the session again once the stores are back; what was erased stays erased",
        )
    failed.__cause__ = failures[0][1]
    return failed


async def clear_session(history: HistoryProvider, pipeline: CompactionPipeline, agent_id: str, session_id: str) -> None:
    """Clear ``session_id`` in ``history`` (its ``clear``), then the records ``pipeline``'s strategies derived
    from it (:meth:`CompactionPipeline.clear_records`): every store is asked, even after one failed (the history's
    removal first, so a window writing records at the same moment erases its own, see the decisions page), and
    the failures are raised together (:func:`clear_failure`)."""
    failures: list[tuple[str, Exception]] = []
    try:
        await history.clear(agent_id, session_id=session_id)
    except Exception as error:  # the strategies' stores still erase theirs
        failures.append((f"the history store {type(history).__name__}", error))
    failures.extend((await pipeline._erase(agent_id, session_id))[1])
    if failures:
        raise clear_failure(session_id, failures)


__all__ = ["CompactionPipeline", "WindowRequest", "as_pipeline"]
