"""The contract between the assembly engine and the strategies it runs.

Everything the engine asks of a strategy is declared here: what :meth:`Strategy.compact` receives, what it may
report on its ``events`` bus, which messages it :meth:`~Strategy.recalled`, and the :class:`StrategyTraits` that
let the engine read only the newest part of a session. The engine reads these declarations; it never probes a
strategy for attributes. A plain object with ``compact(history)`` (000's strategy) still works: :func:`as_strategy`
wraps it, and the engine then reads the whole session for it.

Example:
    >>> import asyncio
    >>> from ravi.kernel.messages import ChatMessage
    >>> class LastTwo(Strategy):
    ...     traits = StrategyTraits(suffix_determined=True, cuts=True)
    ...     async def compact(self, raw_history, session=None):
    ...         session = session or SessionContext.standalone()
    ...         cut = max(0, len(raw_history) - 2)
    ...         if session.partial and cut:
    ...             session.cut_made()
    ...         return [m for m in raw_history[:cut] if m.role == "system"] + list(raw_history[cut:])
    >>> [m.text for m in asyncio.run(LastTwo().compact([ChatMessage.user(str(i)) for i in range(4)]))]
    ['2', '3']
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from dataclasses import dataclass

from ravi.kernel.agent.context import CompactionStrategy, SessionContext
from ravi.kernel.agent.events import EventBus
from ravi.kernel.errors import InvalidArgument
from ravi.kernel.llm import TokenCounter
from ravi.kernel.messages import ChatMessage


@dataclass(frozen=True)
class StrategyTraits:
    """What a strategy tells the engine about itself. The defaults are the safe choice: a strategy that declares
    nothing gets the whole session.

    Attributes:
        suffix_determined: What the strategy makes of a message depends only on that message, the messages after
            it and the system messages, never on older ones (or, when it does, the strategy says so on a partial
            read with :meth:`SessionContext.need_older`). A pipeline of such strategies in which one
            :attr:`cuts` is assembled from the newest part of a session.
        cuts: The strategy drops the oldest messages (it bounds the window), telling a partial read so with
            :meth:`SessionContext.cut_made`.
        searches: The strategy is suffix-determined only when the session's history provider can search it
            (``HistorySearcher``); on any other provider the engine reads the whole session for it.
        read_hint: How many stored tokens of the newest messages a windowed read should fetch first (its token
            budget, typically); the engine starts from the largest hint of the pipeline.
        counter: The counter the strategy measures the window with, when it names one of its own; the window's
            size is judged by the last strategy that names one, else by the pipeline's counter.
        derives_records: The strategy keeps records derived from the session (summaries, embedding units) under
            :attr:`SessionContext.scope`; the engine then reads the session's generation with the messages, so
            those records always match the transcript they came from.
        prompt_overhead: Tokens every request carries beside the window that the strategy's budget leaves room
            for (the tool definitions of ``TokenBudgetComposedStrategy.from_model``, counted with its counter): a
            provider's reported prompt size is compared with the window's count plus these, so a correction
            measures the counter, not what the window does not hold.
    """

    suffix_determined: bool = False
    cuts: bool = False
    searches: bool = False
    read_hint: int | None = None
    counter: TokenCounter | None = None
    derives_records: bool = False
    prompt_overhead: int = 0

    def __post_init__(self) -> None:
        if (
            not isinstance(self.prompt_overhead, int)
            or isinstance(self.prompt_overhead, bool)
            or self.prompt_overhead < 0
        ):
            raise InvalidArgument(f"prompt_overhead must be an integer >= 0, got {self.prompt_overhead!r}")
        if self.read_hint is not None and (
            not isinstance(self.read_hint, int) or isinstance(self.read_hint, bool) or self.read_hint < 0
        ):
            raise InvalidArgument(f"read_hint must be None or an integer >= 0, got {self.read_hint!r}")


class Strategy(abc.ABC):
    """Base of every strategy the engine runs (Ravi's own, and yours).

    Implement :meth:`compact`; declare :attr:`traits` when the strategy can work from the newest part of a
    session; emit on :attr:`events` what a subscriber should know (the engine forwards it to the pipeline's
    subscribers); override :meth:`recalled` when the strategy brings back older messages (the manifest marks
    them "recalled"). Keep per-session state in ``session.state`` under a :class:`~ravi.kernel.agent.Slot`
    declared by your module, never in the strategy object.

    Every strategy keeps the invariants whatever its settings: the source is untouched, every system message is
    kept, the order is kept, a tool call travels with its results, no message appears twice, and the output is
    the same for the same input.
    """

    traits: StrategyTraits = StrategyTraits()
    """What the engine may rely on (see :class:`StrategyTraits`); a class attribute, or a property when it
    depends on the strategy's settings."""

    events: EventBus | None = None
    """Where the strategy reports what went wrong (``summarization_failed``, ``budget_unmet``); ``None`` for a
    strategy that reports nothing."""

    @abc.abstractmethod
    async def compact(
        self, raw_history: Sequence[ChatMessage], session: SessionContext | None = None
    ) -> list[ChatMessage]:
        """The window derived from ``raw_history``, for ``session`` (a standalone one when ``None``)."""

    def recalled(self, session: SessionContext) -> frozenset[str]:
        """The ids of the older messages this strategy brought back into its last window of ``session``."""
        return frozenset()

    @property
    def name(self) -> str:
        """What events and manifests call the strategy (its class name)."""
        return type(self).__name__

    def children(self) -> Sequence[Strategy]:
        """The strategies this one runs inside itself (a composite's), whose events it forwards."""
        return ()

    async def clear_records(self, agent_id: str, session_id: str) -> int:
        """Erase what this strategy derived from the session ``(agent_id, session_id)`` into a store other than
        the session's history provider (summaries in a summary store of its own, recall units in a vector
        store), so nothing of a cleared session stays readable there; returns how many records (or collections) it
        removed. The engine calls it when the session is cleared or replaced (``AgentContext.clear``), for this
        strategy and its :meth:`children`. What the history provider keeps goes with the provider's ``clear``;
        a strategy that keeps nothing elsewhere keeps this default, which removes nothing.

        A window may be assembled while the session is cleared: a strategy that writes such records asks
        :meth:`SessionContext.still_current` after writing them and erases what it wrote when the session's
        generation changed meanwhile (the clear has run past its records already)."""
        return 0


class PlainStrategy(Strategy):
    """A plain ``compact(history)`` object as a :class:`Strategy`: called without the session, with no traits, so
    the engine reads the whole session for it."""

    def __init__(self, strategy: CompactionStrategy) -> None:
        self.strategy = strategy

    async def compact(
        self, raw_history: Sequence[ChatMessage], session: SessionContext | None = None
    ) -> list[ChatMessage]:
        """``strategy.compact(raw_history)``."""
        return await self.strategy.compact(raw_history)

    @property
    def name(self) -> str:
        """The wrapped object's class name."""
        return type(self.strategy).__name__

    def __repr__(self) -> str:
        return repr(self.strategy)


def as_strategy(strategy: Strategy | CompactionStrategy) -> Strategy:
    """``strategy`` itself when it is a :class:`Strategy`, else wrapped in a :class:`PlainStrategy`.

    Raises:
        InvalidArgument: ``strategy`` has no ``compact`` method, or is a class rather than an instance of one.
    """
    if isinstance(strategy, Strategy):
        return strategy
    if isinstance(strategy, type):  # a class has its instances' compact: it passed the protocol's check
        raise InvalidArgument(
            f"a strategy must be an instance, got the class {strategy.__name__}",
            hint=f"pass {strategy.__name__}(...)",
        )
    if not isinstance(strategy, CompactionStrategy):
        raise InvalidArgument(
            f"a strategy needs an async compact(history) method; {type(strategy).__name__} has none",
            hint="subclass ravi.kernel.agent.Strategy",
        )
    return PlainStrategy(strategy)


def as_strategies(strategies: object) -> list[Strategy]:
    """The strategies of a pipeline or a budget strategy: a list of them, or a single one (000: "A single strategy
    can be passed without wrapping it"), each through :func:`as_strategy`.

    Raises:
        InvalidArgument: ``strategies`` is neither a strategy nor a sequence of strategies.
    """
    if isinstance(strategies, Strategy | CompactionStrategy):
        return [as_strategy(strategies)]
    if isinstance(strategies, str | bytes) or not isinstance(strategies, Sequence):
        raise InvalidArgument(
            f"strategies must be a strategy or a list of them, got {type(strategies).__name__}",
            hint="pass [SlidingWindowCompaction(), ...]",
        )
    return [as_strategy(s) for s in strategies]


__all__ = ["PlainStrategy", "Strategy", "StrategyTraits", "as_strategies", "as_strategy"]
