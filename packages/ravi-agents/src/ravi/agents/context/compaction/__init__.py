"""The compaction strategies. Each keeps the invariants: source untouched, system messages kept, order kept,
tool calls and results together, same input same output."""

from ravi.agents.context.compaction.relevant_recall import RelevantRecallStrategy
from ravi.agents.context.compaction.selective_tool_call import SelectiveToolCallCompactionStrategy
from ravi.agents.context.compaction.sliding_window import SlidingWindowCompaction
from ravi.agents.context.compaction.summarization import SummarizationCompaction
from ravi.agents.context.compaction.token_budget import TokenBudgetComposedStrategy
from ravi.agents.context.compaction.tool_result import ToolResultCompactionStrategy
from ravi.agents.context.compaction.truncation import TruncationStrategy


def __getattr__(name: str) -> object:
    """000 places ``CompactionPipeline`` in ``agents/context/compaction/``; it lives in
    :mod:`ravi.agents.context.pipeline` (imported on first use: the engine imports the strategies)."""
    if name == "CompactionPipeline":
        from ravi.agents.context.pipeline import CompactionPipeline

        return CompactionPipeline
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "CompactionPipeline",
    "RelevantRecallStrategy",
    "SelectiveToolCallCompactionStrategy",
    "SlidingWindowCompaction",
    "SummarizationCompaction",
    "TokenBudgetComposedStrategy",
    "ToolResultCompactionStrategy",
    "TruncationStrategy",
]
