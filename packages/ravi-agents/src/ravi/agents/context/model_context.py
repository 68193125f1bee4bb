"""The model-context family: ready-made ``ContextConfig``s named for what they do.

Each is a thin face over the strategies, not a second implementation: the classes only choose a pipeline.

Example:
    >>> from ravi.agents.context import AgentContext
    >>> context = AgentContext(SlidingWindowContext(20))
"""

from __future__ import annotations

from ravi.agents.context.compaction.sliding_window import SlidingWindowCompaction
from ravi.agents.context.compaction.summarization import SummarizationCompaction
from ravi.agents.context.compaction.token_budget import TokenBudgetComposedStrategy
from ravi.agents.context.config import ContextConfig
from ravi.agents.context.history import InMemoryHistoryProvider
from ravi.agents.context.hybrid import HybridHistoryProvider
from ravi.agents.context.models import input_budget, model_info
from ravi.kernel.agent import HistoryRetention
from ravi.kernel.errors import ConfigurationError
from ravi.kernel.llm import LLMClient, ModelInfo, TokenCounter
from ravi.kernel.storage import HistoryProvider

_PERMANENT = HistoryRetention.PERMANENT


class UnboundedContext(ContextConfig):
    """The whole transcript, every time (for short conversations and tests)."""

    def __init__(self, history: HistoryProvider | None = None, *, retention: HistoryRetention = _PERMANENT) -> None:
        super().__init__(history or InMemoryHistoryProvider(), [], retention=retention)


class SlidingWindowContext(ContextConfig):
    """System messages plus the newest ``max_messages`` others (``SlidingWindowCompaction``)."""

    def __init__(
        self,
        max_messages: int = 100,
        history: HistoryProvider | None = None,
        *,
        retention: HistoryRetention = _PERMANENT,
    ) -> None:
        super().__init__(
            history or InMemoryHistoryProvider(), [SlidingWindowCompaction(max_messages)], retention=retention
        )


class TokenBudgetContext(ContextConfig):
    """The newest whole units within ``max_tokens`` tokens, system messages always kept."""

    def __init__(
        self,
        max_tokens: int,
        history: HistoryProvider | None = None,
        *,
        retention: HistoryRetention = _PERMANENT,
        counter: TokenCounter | None = None,
    ) -> None:
        strategy = TokenBudgetComposedStrategy([], max_tokens, counter=counter)
        super().__init__(history or InMemoryHistoryProvider(), [strategy], retention=retention, counter=counter)


class HybridContext(ContextConfig):
    """Recent turns from a fast ``hot`` store, older ones back-filled from a durable ``cold`` store, at most
    ``max_total`` messages; writes go to both (:class:`HybridHistoryProvider`)."""

    def __init__(
        self,
        hot: HistoryProvider,
        cold: HistoryProvider,
        recent_n: int = 20,
        max_total: int = 100,
        *,
        retention: HistoryRetention = _PERMANENT,
    ) -> None:
        history = HybridHistoryProvider(hot, cold, recent_n=recent_n, max_total=max_total)
        super().__init__(history, [SlidingWindowCompaction(max_total)], retention=retention)


class SummarizingContext(ContextConfig):
    """Once the window passes ``threshold`` of the budget, the older part becomes one summary.

    The budget is ``max_tokens``, or the input budget of ``model`` (a name from the model table or a
    ``ModelInfo``). The newest half of the threshold budget stays verbatim and the summary gets at most a
    quarter. The transcript is never changed: the summary is a derived record, cached by the span of messages
    it covers.
    """

    def __init__(
        self,
        llm: LLMClient | None = None,
        threshold: float = 0.8,
        *,
        max_tokens: int | None = None,
        model: str | ModelInfo | None = None,
        history: HistoryProvider | None = None,
        retention: HistoryRetention = _PERMANENT,
        counter: TokenCounter | None = None,
    ) -> None:
        if not 0 < threshold <= 1:
            raise ConfigurationError(f"threshold must be in (0, 1], got {threshold}")
        if max_tokens is None:
            if model is None:
                raise ConfigurationError("SummarizingContext needs max_tokens or model")
            info = model if isinstance(model, ModelInfo) else model_info(model)
            max_tokens = input_budget(info)
        budget = int(max_tokens * threshold)
        summarizer = SummarizationCompaction(
            llm,
            recent_token_budget=budget // 2,
            min_old_tokens=0,
            max_summary_tokens=max(64, budget // 4),
            counter=counter,
        )
        strategy = TokenBudgetComposedStrategy([summarizer], budget, counter=counter)
        super().__init__(history or InMemoryHistoryProvider(), [strategy], retention=retention, counter=counter)


__all__ = ["HybridContext", "SlidingWindowContext", "SummarizingContext", "TokenBudgetContext", "UnboundedContext"]
