"""The model-context family (003): ready-made ``ContextConfig``s named for what they do.

Each is a :class:`ModelContext`: a thin face over the strategies, not a second implementation. The classes
only choose a pipeline, and :meth:`ModelContext.build` returns the window of a session through the same
engine as ``AgentContext``.

Example:
    >>> import asyncio
    >>> from ravi.agents.context import AgentContext, ChatMessage
    >>> context = SlidingWindowContext(max_messages=2)
    >>> asyncio.run(AgentContext(context).add_messages("s", [ChatMessage.user(str(i)) for i in range(5)]))
    >>> [m.text for m in asyncio.run(context.build("s"))]
    ['3', '4']
"""

from __future__ import annotations

import abc
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

from ravi.agents.context.compaction.sliding_window import SlidingWindowCompaction
from ravi.agents.context.compaction.summarization import SummarizationCompaction, check_llm
from ravi.agents.context.compaction.token_budget import TokenBudgetComposedStrategy
from ravi.agents.context.config import ContextConfig, check_history, check_retention, check_state
from ravi.agents.context.history import InMemoryHistoryProvider
from ravi.agents.context.hybrid import HybridHistoryProvider
from ravi.agents.context.models import input_budget, model_info
from ravi.agents.tokens import ClientTokenCounter, check_counter, counter_for_model
from ravi.kernel.agent import HistoryRetention
from ravi.kernel.errors import ConfigurationError, InvalidArgument
from ravi.kernel.llm import LLMClient, ModelInfo, TokenCounter
from ravi.kernel.messages import ChatMessage
from ravi.kernel.storage import HistoryProvider, ShortTermMemory
from ravi.kernel.values import check_share

if TYPE_CHECKING:
    from ravi.agents.settings import RaviSettings

_PERMANENT = HistoryRetention.PERMANENT


class ModelContext(ContextConfig, abc.ABC):
    """What the model sees of a session on each turn (003: ``ModelContext.build()``)."""

    @classmethod
    def default(cls) -> Self:
        """This context with its own defaults, over in-memory history (``SlidingWindowContext.default()``: the
        newest 100 messages).

        Raises:
            ConfigurationError: the context has no default for something it needs (``TokenBudgetContext``: its
                ``max_tokens``; ``HybridContext``: its two stores; ``SummarizingContext``: its budget).
        """
        return cls()  # type: ignore[call-arg]  # a context whose constructor needs an argument overrides this

    @classmethod
    def from_settings(cls, settings: RaviSettings | None = None, *, path: str | Path | None = None) -> Self:
        """Not for a model context: the settings' ``[context]`` section names a pipeline, and a model context's
        pipeline is its own.

        Raises:
            ConfigurationError: always, saying what to do instead.
        """
        raise ConfigurationError(
            f"{cls.__name__}.from_settings() is not available: the settings name a pipeline, and "
            f"{cls.__name__} chooses its own",
            hint="use ContextConfig.from_settings(), or build the context with a store the settings name: "
            "ravi.agents.settings.build_store('history')",
        )

    @abc.abstractmethod
    async def build(
        self, session_id: str, *, agent_id: str | None = None, model_client: Any = None
    ) -> list[ChatMessage]:
        """The window of ``session_id`` for the next model call; ``model_client`` is the agent's model, for
        contexts that count with it."""

    def counter_for(self, model_client: Any) -> TokenCounter | None:
        """The counter a window for ``model_client`` is measured with, if this context counts with the model (an
        agent passes it with each window, as :meth:`build` does); ``None`` keeps the configured counter."""
        return None

    async def _window(
        self, session_id: str, agent_id: str | None, counter: TokenCounter | None = None
    ) -> list[ChatMessage]:
        from ravi.agents.context.agent_context import AgentContext

        return await AgentContext(self, agent_id=agent_id).get_prompt_window(session_id, counter=counter)


class UnboundedContext(ModelContext):
    """The whole transcript, every time (for short conversations and tests)."""

    def __init__(self, history: HistoryProvider | None = None, *, retention: HistoryRetention = _PERMANENT) -> None:
        super().__init__(history or InMemoryHistoryProvider(), [], retention=retention)

    async def build(
        self, session_id: str, *, agent_id: str | None = None, model_client: Any = None
    ) -> list[ChatMessage]:
        """Every stored message of the session."""
        return await self._window(session_id, agent_id)


class SlidingWindowContext(ModelContext):
    """System messages plus the newest ``max_messages`` others (``SlidingWindowCompaction``).

    Raises:
        InvalidArgument: ``max_messages`` is not an integer > 0.
    """

    def __init__(
        self,
        max_messages: int = 100,
        history: HistoryProvider | None = None,
        *,
        retention: HistoryRetention = _PERMANENT,
    ) -> None:
        _check_positive(max_messages, "max_messages")
        super().__init__(
            history or InMemoryHistoryProvider(), [SlidingWindowCompaction(max_messages)], retention=retention
        )

    async def build(
        self, session_id: str, *, agent_id: str | None = None, model_client: Any = None
    ) -> list[ChatMessage]:
        """System messages and the newest ``max_messages`` others."""
        return await self._window(session_id, agent_id)


class TokenBudgetContext(ModelContext):
    """The newest whole units within ``max_tokens`` tokens, system messages always kept.

    Tokens are counted with ``counter``, else with the model client's ``count_tokens()`` when one is given
    (here or to :meth:`build`), else with the 4-characters-per-token heuristic (003). ``model`` (a name or a
    ``ModelInfo``, else the one ``model_client`` names) is the model the windows are sent to, so
    ``AgentContext.record_usage`` can correct their count from the provider's reports; ``state`` shares those
    corrections between processes.

    Raises:
        InvalidArgument: ``max_tokens`` is not an integer > 0.
        ConfigurationError: a store, the retention, the counter, ``model_client`` (neither counting, naming its
            model, nor an ``LLMClient``) or ``model`` is of the wrong kind (the first of them, in the order given).
    """

    def __init__(
        self,
        max_tokens: int,
        history: HistoryProvider | None = None,
        *,
        retention: HistoryRetention = _PERMANENT,
        counter: TokenCounter | None = None,
        model_client: Any = None,
        model: str | ModelInfo | None = None,
        state: ShortTermMemory | None = None,
    ) -> None:
        _check_positive(max_tokens, "max_tokens")
        _check_parts(history, retention, counter)
        _check_client(model_client)
        _check_model(model)
        check_state(state)
        named = model or _model_of(model_client)
        counts = callable(getattr(model_client, "count_tokens", None))
        if counter is None and model_client is not None and (counts or named is None):
            counter = ClientTokenCounter(model_client)
        elif counter is None and named is not None:  # measured as the model counts (conservatively when unknown)
            counter = counter_for_model(_name_of(named) or "")
        self.max_tokens = max_tokens
        strategy = TokenBudgetComposedStrategy([], max_tokens)
        super().__init__(
            history or InMemoryHistoryProvider(),
            [strategy],
            retention=retention,
            counter=counter,
            model=_name_of(named),
            state=state,
        )

    @classmethod
    def default(cls) -> Self:
        """Not for a token budget: it has no default size.

        Raises:
            ConfigurationError: always, naming what it needs.
        """
        raise ConfigurationError(
            f"{cls.__name__} has no default: it needs max_tokens",
            hint=f"build it with its budget, for example {cls.__name__}(max_tokens=8_000)",
        )

    def counter_for(self, model_client: Any) -> TokenCounter | None:
        """The model client's own count (003: "model_client is passed in at build() time by the agent"), when
        it has ``count_tokens(text)``."""
        if model_client is not None and callable(getattr(model_client, "count_tokens", None)):
            return ClientTokenCounter(model_client)
        return None

    async def build(
        self, session_id: str, *, agent_id: str | None = None, model_client: Any = None
    ) -> list[ChatMessage]:
        """The newest whole units within ``max_tokens``, counted with ``model_client`` when it can count."""
        return await self._window(session_id, agent_id, self.counter_for(model_client))


class HybridContext(ModelContext):
    """Recent turns from a fast ``hot`` store, older ones back-filled from a durable ``cold`` store, at most
    ``max_total`` messages besides the system messages, which are always kept (as ``SlidingWindowContext`` keeps
    them); writes go to both (:class:`HybridHistoryProvider`).

    Give the two stores, or (003) a ``session_manager`` that holds them as ``hot`` and ``cold`` (or ``redis``
    and ``postgres``).
    """

    def __init__(
        self,
        hot: HistoryProvider | None = None,
        cold: HistoryProvider | None = None,
        recent_n: int = 20,
        max_total: int = 100,
        *,
        session_manager: Any = None,
        retention: HistoryRetention = _PERMANENT,
    ) -> None:
        if session_manager is not None:
            hot = hot or getattr(session_manager, "hot", None) or getattr(session_manager, "redis", None)
            cold = cold or getattr(session_manager, "cold", None) or getattr(session_manager, "postgres", None)
        if hot is None or cold is None:
            raise ConfigurationError(
                "HybridContext needs a hot and a cold history store",
                hint="pass hot=..., cold=..., or a session_manager with .hot and .cold (or .redis and .postgres)",
            )
        for tier, store in (("hot", hot), ("cold", cold)):
            if not isinstance(store, HistoryProvider):
                raise ConfigurationError(f"the {tier} store must be a HistoryProvider, got {type(store).__name__}")
        for name, value in (("recent_n", recent_n), ("max_total", max_total)):
            if not isinstance(value, int) or isinstance(value, bool):
                raise InvalidArgument(f"{name} must be an integer >= 1, got {value!r}", field=name)
        if recent_n < 1 or max_total < 1:
            raise ConfigurationError(f"recent_n and max_total must be >= 1, got {recent_n} and {max_total}")
        if recent_n > max_total:
            raise ConfigurationError(f"recent_n ({recent_n}) must not exceed max_total ({max_total})")
        self.recent_n, self.max_total = recent_n, max_total
        # the provider reads the transcript (hot when it holds the session); the bound is the pipeline's: the
        # newest max_total messages, which always include the newest recent_n
        super().__init__(HybridHistoryProvider(hot, cold), [SlidingWindowCompaction(max_total)], retention=retention)

    async def build(
        self, session_id: str, *, agent_id: str | None = None, model_client: Any = None
    ) -> list[ChatMessage]:
        """The newest ``recent_n`` from the hot store, back-filled from the cold one up to ``max_total``."""
        return await self._window(session_id, agent_id)


class SummarizingContext(ModelContext):
    """Once the window passes ``threshold`` of the budget, the older part becomes one summary.

    The budget is ``max_tokens``, or the input budget of ``model`` (a name from the model table or a
    ``ModelInfo``). The newest half of the threshold budget stays verbatim and the summary gets at most a
    quarter; the summary moves forward an eighth of the budget at a time (see ``SummarizationCompaction``). The
    transcript is never changed: the summary is a derived record, kept in the summary store by session and
    checkpoint. ``state`` shares the corrections ``AgentContext.record_usage`` makes to the model's windows between
    processes.

    Every argument is checked, in the order given, before the budget is worked out from them.

    Raises:
        InvalidArgument: ``threshold`` is not in (0, 1], ``max_tokens`` is not an integer > 0, or the threshold
            leaves no token of the budget.
        ConfigurationError: a model client, a store, the retention, the counter or ``model`` is of the wrong kind;
            both ``llm`` and ``model_client`` are given; no budget can be found (no ``max_tokens``, no model).
    """

    def __init__(
        self,
        llm: LLMClient | None = None,
        threshold: float = 0.8,
        *,
        model_client: LLMClient | None = None,
        max_tokens: int | None = None,
        model: str | ModelInfo | None = None,
        history: HistoryProvider | None = None,
        retention: HistoryRetention = _PERMANENT,
        counter: TokenCounter | None = None,
        state: ShortTermMemory | None = None,
    ) -> None:
        # every argument checked, in the order given, before the budget is worked out from them
        check_llm(llm)
        check_share(threshold, "threshold")
        check_llm(model_client, "model_client")
        if llm is not None and model_client is not None and llm is not model_client:
            raise ConfigurationError(
                "SummarizingContext was given both llm and model_client: they name the same model",
                hint="pass the model once, as llm (model_client is 003's name for it)",
            )
        llm = llm or model_client  # 003 names it model_client
        if max_tokens is not None:
            _check_positive(max_tokens, "max_tokens")
        _check_model(model)
        _check_parts(history, retention, counter)
        check_state(state)
        if max_tokens is None:
            model = model or _model_of(llm)
            if model is None:
                raise ConfigurationError(
                    "SummarizingContext needs max_tokens, model, or a model_client that names its model",
                    hint="for example SummarizingContext(model_client=client, threshold=0.8, model='gpt-4o')",
                )
            info = model if isinstance(model, ModelInfo) else model_info(model)
            max_tokens = input_budget(info)
        budget = int(max_tokens * threshold)
        if budget < 1:
            raise InvalidArgument(
                f"a budget of {max_tokens} tokens at a threshold of {threshold!r} leaves no token for a window",
                field="max_tokens",
            )
        summarizer = SummarizationCompaction(
            llm,
            recent_token_budget=budget // 2,
            min_old_tokens=0,
            max_summary_tokens=max(64, budget // 4),
            counter=counter,
        )
        strategy = TokenBudgetComposedStrategy([summarizer], budget, counter=counter)
        # the model the windows are sent to, named here or by the client: AgentContext.record_usage calibrates it
        super().__init__(
            history or InMemoryHistoryProvider(),
            [strategy],
            retention=retention,
            counter=counter,
            model=_name_of(model or _model_of(llm)),
            state=state,
        )

    async def build(
        self, session_id: str, *, agent_id: str | None = None, model_client: Any = None
    ) -> list[ChatMessage]:
        """The window, its older part summarised once it passes ``threshold`` of the budget."""
        return await self._window(session_id, agent_id)


def _check_positive(value: object, what: str) -> None:
    """``InvalidArgument`` naming ``what`` unless ``value`` is an integer > 0 (a bool is refused)."""
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise InvalidArgument(f"must be an integer > 0, got {value!r}", field=what)


def _check_parts(history: object, retention: object, counter: object) -> None:
    """The stores and policy a context is built with, checked before any of them is used: ``history`` (``None``
    for one in memory), ``retention`` and ``counter``, in that order."""
    if history is not None:
        check_history(history)
    check_retention(retention)
    check_counter(counter)


def _check_client(client: object) -> None:
    """``ConfigurationError`` unless ``client`` is ``None`` or a model client a token budget can use, whatever
    else the context is given: one that counts (a synchronous ``count_tokens(text)``), one that names its model
    (``.model``, ``.model_name`` or ``.model_info``), or an :class:`~ravi.kernel.llm.LLMClient`."""
    if client is None:
        return
    if callable(getattr(client, "count_tokens", None)):
        ClientTokenCounter(client)  # refuses an async count, which a window cannot await
    elif _model_of(client) is None and not isinstance(client, LLMClient):
        raise ConfigurationError(
            f"model_client must be a model client: one with count_tokens(text), one that names its model "
            f"(.model) or an LLMClient, got {type(client).__name__}",
            hint="pass counter=... to count, and model=... to name the model the windows are sent to",
        )


def _check_model(model: object) -> None:
    """``ConfigurationError`` unless ``model`` is ``None``, a model's name (not empty) or a ``ModelInfo``."""
    if model is not None and not isinstance(model, ModelInfo) and (not isinstance(model, str) or not model):
        raise ConfigurationError(
            f"model must be a model's name, a ModelInfo or None, got {model!r}", hint="for example model='gpt-4o'"
        )


def _name_of(model: str | ModelInfo | None) -> str | None:
    """The name of a model given by name or as a ``ModelInfo``."""
    return model.name if isinstance(model, ModelInfo) else model


def _model_of(client: Any) -> str | ModelInfo | None:
    """The model a client says it runs (``.model`` or ``.model_name``), if it says."""
    for name in ("model_info", "model", "model_name"):
        value = getattr(client, name, None)
        if isinstance(value, str | ModelInfo):
            return value
    return None


__all__ = [
    "HybridContext",
    "ModelContext",
    "SlidingWindowContext",
    "SummarizingContext",
    "TokenBudgetContext",
    "UnboundedContext",
]
