"""``ravi_input_filter``: Ravi's window as the input of every model call of an OpenAI Agents SDK run."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from agents.run_config import CallModelData, ModelInputData

from ravi.agents.context import AgentContext, CompactionPipeline, ContextConfig
from ravi.agents.context.pipeline import as_pipeline
from ravi.integrations.openai_agents.convert import group, items_of, to_ravi
from ravi.kernel.agent import CompactionStrategy
from ravi.kernel.values import check_scope


def ravi_input_filter(
    pipeline: AgentContext | ContextConfig | CompactionPipeline | CompactionStrategy | Sequence[CompactionStrategy],
    *,
    session_id: str,
    agent_id: str = "agent",
) -> Callable[[CallModelData[Any]], Awaitable[ModelInputData]]:
    """A ``RunConfig(call_model_input_filter=...)`` that sends the model Ravi's window of its input.

    The input the SDK built (the session's items and this turn's) is grouped into Ravi turns, passed through the
    pipeline (within its budget, calls with their results, every system message kept), and turned back into
    items: unchanged turns as their original items, changed ones (a shortened output, folded calls) rebuilt.
    The session itself is not changed: the window goes to the model only. ``session_id`` names the session whose
    window state (a watermark's start, say) the pipeline keeps: use one filter per session.

    Example:
        >>> from ravi.agents.context import TokenBudgetComposedStrategy
        >>> input_filter = ravi_input_filter([TokenBudgetComposedStrategy.from_model("gpt-4o")], session_id="s1")
    """
    check_scope(agent_id=agent_id, session_id=session_id)
    if isinstance(pipeline, AgentContext):
        pipeline = pipeline.config
    engine = (
        pipeline.pipeline if isinstance(pipeline, ContextConfig) else as_pipeline(pipeline, default=CompactionPipeline)
    )

    async def input_filter(data: CallModelData[Any]) -> ModelInputData:
        turns = group(data.model_data.input)
        messages = [to_ravi(t, salt=str(i)) for i, t in enumerate(turns)]  # ids stable as the input grows
        window = await engine.compact(messages, engine.session(agent_id, session_id))
        items: list[Any] = [item for m in window for item in items_of(m)]
        return ModelInputData(input=items, instructions=data.model_data.instructions)

    return input_filter


__all__ = ["ravi_input_filter"]
