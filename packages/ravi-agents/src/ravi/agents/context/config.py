"""``ContextConfig``: which history store, which pipeline, which retention policy."""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Self

from ravi.agents.context.calibration import Calibration
from ravi.agents.context.compaction.sliding_window import SlidingWindowCompaction
from ravi.agents.context.history import InMemoryHistoryProvider
from ravi.agents.context.pipeline import CompactionPipeline, as_pipeline
from ravi.agents.tokens import check_counter
from ravi.kernel.agent import CompactionStrategy, HistoryRetention
from ravi.kernel.errors import ConfigurationError
from ravi.kernel.llm import TokenCounter
from ravi.kernel.storage import HistoryProvider, ShortTermMemory
from ravi.kernel.values import check_instance, check_scope, check_text

if TYPE_CHECKING:
    from ravi.agents.settings import RaviSettings


def check_history(history: object) -> None:
    """``ConfigurationError`` unless ``history`` is a :class:`~ravi.kernel.storage.HistoryProvider`."""
    if not isinstance(history, HistoryProvider):
        raise ConfigurationError(
            f"history must implement HistoryProvider, got {type(history).__name__}",
            hint="use InMemoryHistoryProvider() or ravi.kernel.registry.load_backend('history', NAME, ...)",
        )


def check_retention(retention: object) -> None:
    """``ConfigurationError`` unless ``retention`` is a :class:`~ravi.kernel.agent.HistoryRetention`."""
    if not isinstance(retention, HistoryRetention):
        raise ConfigurationError(f"retention must be a HistoryRetention, got {retention!r}")


def check_state(state: object) -> None:
    """``ConfigurationError`` unless ``state`` is ``None`` or a session-state store (an instance of
    :class:`~ravi.kernel.storage.ShortTermMemory`: a class passes the protocol's check)."""
    check_instance(
        state,
        ShortTermMemory,
        "state must be a session-state store (ShortTermMemory) or None",
        "load_backend('state', NAME, ...) or InMemoryStateStore()",
    )


def default_pipeline() -> CompactionPipeline:
    """One ``SlidingWindowCompaction`` with its default of 100 messages."""
    return CompactionPipeline([SlidingWindowCompaction()])


class ContextConfig:
    """Everything :class:`~ravi.agents.context.AgentContext` needs to keep and assemble a conversation.

    Args:
        history: Where the full transcript lives.
        pipeline: A ``CompactionPipeline``, one strategy or a list of them; ``None`` means one default sliding
            window (``SlidingWindowCompaction(max_messages=100)``).
        retention: What happens to a run's turns when it ends (``PERMANENT`` keeps them).
        counter: How tokens are counted: in events, and by every strategy that names no counter of its own.
        agent_id: The agent whose sessions these are (``[context] agent_id``), unless ``AgentContext`` names one.
        model: The model the windows are sent to (``[context] model``): the provider's reported prompt sizes
            (``AgentContext.record_usage``) calibrate its windows.
        state: A session-state store to keep the calibration in, shared by every process using it (else it is
            kept in this process), in the store's place of Ravi's own records (``state.reserved()``), which no
            session id reaches.

    A configuration built :meth:`from_settings` owns the stores it built: close it with :meth:`aclose` (or use it
    as an async context manager) when the agent is done.

    Example:
        >>> from ravi.agents.context import InMemoryHistoryProvider, ToolResultCompactionStrategy
        >>> config = ContextConfig(InMemoryHistoryProvider(), [ToolResultCompactionStrategy()])
    """

    def __init__(
        self,
        history: HistoryProvider,
        pipeline: CompactionPipeline | CompactionStrategy | Sequence[CompactionStrategy] | None = None,
        *,
        retention: HistoryRetention = HistoryRetention.PERMANENT,
        counter: TokenCounter | None = None,
        agent_id: str = "agent",
        model: str | None = None,
        state: ShortTermMemory | None = None,
    ) -> None:
        check_history(history)
        check_retention(retention)
        check_scope(agent_id=agent_id)
        check_counter(counter)
        if model is not None:
            if not isinstance(model, str) or not model:
                raise ConfigurationError(f"model must be a model's name or None, got {model!r}")
            check_text(model, "model")
        check_state(state)
        self.agent_id = agent_id
        self.history = history
        self.pipeline = as_pipeline(pipeline, default=default_pipeline)
        if counter is not None:  # the counter of every strategy that names none of its own
            self.pipeline.counter = counter
        self.retention = retention
        self.counter = self.pipeline.counter
        self.model = model
        self.calibration = Calibration(state)
        self._owned: list[object] = []

    @classmethod
    def from_settings(cls, settings: RaviSettings | None = None, *, path: str | Path | None = None) -> ContextConfig:
        """A configuration built from settings: ``ravi.toml`` (or ``path``) and ``RAVI_*`` variables.

        The ``[history]`` section names the backend and its options, ``[context]`` the pipeline and the
        retention policy. With no configuration at all, history is in memory with the default sliding window.

        Raises:
            ConfigurationError: unknown backend, missing or malformed option; the message names the key.
            InvalidArgument: a strategy of the pipeline refused a value; the message starts with its place
                (``context.pipeline[1]``).
        """
        from ravi.agents.context.build import build_pipeline, retention_of, uses_strategy
        from ravi.agents.settings import build_store, build_summaries, load_settings

        settings = settings or load_settings(path)
        history = build_store("history", settings)
        summaries = build_summaries(settings, history) if uses_strategy(settings.context, "summarization") else None
        config = cls(
            history,
            build_pipeline(settings.context, summaries=summaries, vectors=lambda: build_store("vector", settings)),
            retention=retention_of(settings.context),
            agent_id=settings.context.agent_id,
            model=settings.context.model,
            state=build_store("state", settings) if settings.state.backend != "memory" else None,
        )
        owned = [s for s in (config.history, summaries, config.calibration.state) if s is not None]
        config._owned = [s for i, s in enumerate(owned) if all(s is not t for t in owned[:i])]  # each closed once
        return config

    async def aclose(self) -> None:
        """Close the stores :meth:`from_settings` opened (their connection pools); stores passed in are the
        caller's to close. Safe to call again."""
        owned, self._owned = self._owned, []
        for store in owned:
            closer = getattr(store, "aclose", None) or getattr(store, "close", None)
            if closer is not None:
                result = closer()
                if inspect.isawaitable(result):
                    await result

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    @classmethod
    def default(cls) -> ContextConfig:
        """In-memory history, the default sliding window, permanent retention."""
        return cls(InMemoryHistoryProvider())

    def __repr__(self) -> str:
        return (
            f"ContextConfig(history={type(self.history).__name__}, pipeline={self.pipeline!r}, "
            f"retention={self.retention.name}, agent_id={self.agent_id!r})"
        )


__all__ = ["ContextConfig", "default_pipeline"]
