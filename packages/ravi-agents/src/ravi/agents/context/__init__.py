"""Context assembly: keep the whole transcript, send the model a window that fits.

Example:
    >>> import asyncio
    >>> context = AgentContext(ContextConfig(InMemoryHistoryProvider(), [SlidingWindowCompaction(max_messages=50)]))
"""

from ravi.agents.context.agent_context import AgentContext, Run
from ravi.agents.context.compaction import (
    RelevantRecallStrategy,
    SelectiveToolCallCompactionStrategy,
    SlidingWindowCompaction,
    SummarizationCompaction,
    TokenBudgetComposedStrategy,
    ToolResultCompactionStrategy,
    TruncationStrategy,
)
from ravi.agents.context.config import ContextConfig
from ravi.agents.context.functional import (
    CHARS_PER_TOKEN,
    DEFAULT_POLICY,
    TURN_OVERHEAD_TOKENS,
    CompactionPolicy,
    compact,
    estimate_context_tokens,
    find_cut_point,
    should_compact,
    summarize,
)
from ravi.agents.context.history import InMemoryHistoryProvider
from ravi.agents.context.hybrid import HybridHistoryProvider
from ravi.agents.context.manager import ContextManager, mount
from ravi.agents.context.manifest import ManifestEntry, Window
from ravi.agents.context.model_context import (
    HybridContext,
    ModelContext,
    SlidingWindowContext,
    SummarizingContext,
    TokenBudgetContext,
    UnboundedContext,
)
from ravi.agents.context.models import MODELS, model_info
from ravi.agents.context.pipeline import CompactionPipeline, WindowRequest
from ravi.kernel.agent import CompactionEvent, EventBus, HistoryRetention, SessionContext, Strategy, StrategyTraits
from ravi.kernel.messages import ChatMessage

__all__ = [
    "AgentContext",
    "CHARS_PER_TOKEN",
    "ChatMessage",
    "compact",
    "CompactionEvent",
    "CompactionPipeline",
    "CompactionPolicy",
    "ContextConfig",
    "ContextManager",
    "DEFAULT_POLICY",
    "estimate_context_tokens",
    "EventBus",
    "find_cut_point",
    "HistoryRetention",
    "HybridContext",
    "HybridHistoryProvider",
    "InMemoryHistoryProvider",
    "ManifestEntry",
    "model_info",
    "ModelContext",
    "MODELS",
    "mount",
    "RelevantRecallStrategy",
    "Run",
    "SelectiveToolCallCompactionStrategy",
    "SessionContext",
    "should_compact",
    "SlidingWindowCompaction",
    "SlidingWindowContext",
    "Strategy",
    "StrategyTraits",
    "SummarizationCompaction",
    "summarize",
    "SummarizingContext",
    "TokenBudgetComposedStrategy",
    "TokenBudgetContext",
    "ToolResultCompactionStrategy",
    "TruncationStrategy",
    "TURN_OVERHEAD_TOKENS",
    "UnboundedContext",
    "Window",
    "WindowRequest",
]
