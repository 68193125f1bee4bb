"""003 imports the model contexts from ``ravi.core.context.implementations``; they live in
:mod:`ravi.agents.context.model_context`."""

from ravi.agents.context.model_context import (
    HybridContext,
    SlidingWindowContext,
    SummarizingContext,
    TokenBudgetContext,
    UnboundedContext,
)

__all__ = ["HybridContext", "SlidingWindowContext", "SummarizingContext", "TokenBudgetContext", "UnboundedContext"]
