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
from ravi.agents.context.events import CompactionEvent, EventBus
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
from ravi.agents.context.pipeline import CompactionPipeline
from ravi.kernel.agent import HistoryRetention
from ravi.kernel.messages import ChatMessage

__all__ = [
    "CHARS_PER_TOKEN",
    "DEFAULT_POLICY",
    "TURN_OVERHEAD_TOKENS",
    "MODELS",
    "AgentContext",
    "ChatMessage",
    "CompactionEvent",
    "CompactionPipeline",
    "CompactionPolicy",
    "ContextConfig",
    "ContextManager",
    "EventBus",
    "HistoryRetention",
    "HybridContext",
    "HybridHistoryProvider",
    "InMemoryHistoryProvider",
    "ManifestEntry",
    "ModelContext",
    "RelevantRecallStrategy",
    "Run",
    "SelectiveToolCallCompactionStrategy",
    "SlidingWindowCompaction",
    "SlidingWindowContext",
    "SummarizationCompaction",
    "SummarizingContext",
    "TokenBudgetComposedStrategy",
    "TokenBudgetContext",
    "ToolResultCompactionStrategy",
    "TruncationStrategy",
    "UnboundedContext",
    "Window",
    "compact",
    "estimate_context_tokens",
    "find_cut_point",
    "model_info",
    "mount",
    "should_compact",
    "summarize",
]
