"""``ravi_input_filter``: Ravi's window as the input of every model call of an OpenAI Agents SDK run."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from agents.run_config import CallModelData, ModelInputData

from ravi.agents.adapters import as_context, epoch_of, window_of
from ravi.agents.context import AgentContext, CompactionPipeline, ContextConfig, InMemoryHistoryProvider
from ravi.integrations.openai_agents.convert import group, items_of, outputs_after_calls, to_ravi
from ravi.kernel.agent import CompactionStrategy
from ravi.kernel.messages import ChatMessage
from ravi.kernel.values import check_scope


class _Converted:
    """The input's turns as Ravi messages. The SDK sends the whole session on every call, so each call converts
    only the turns past the prefix its input shares with the previous call's; the rest are reused (with their
    cached token counts). Message ids come from a turn's items and place, so they are stable as the input grows.
    """

    def __init__(self) -> None:
        self._last: tuple[list[list[dict[str, Any]]], list[ChatMessage]] = ([], [])

    def __call__(self, turns: list[list[dict[str, Any]]]) -> list[ChatMessage]:
        last_turns, last_messages = self._last  # one read: another thread may swap it meanwhile
        shared, limit = 0, min(len(turns), len(last_turns))
        while shared < limit and turns[shared] == last_turns[shared]:
            shared += 1
        messages = last_messages[:shared] + [to_ravi(t, salt=str(i)) for i, t in enumerate(turns[shared:], shared)]
        self._last = (turns, messages)
        return messages


def ravi_input_filter(
    pipeline: AgentContext | ContextConfig | CompactionPipeline | CompactionStrategy | Sequence[CompactionStrategy],
    *,
    session_id: str,
    agent_id: str | None = None,
) -> Callable[[CallModelData[Any]], Awaitable[ModelInputData]]:
    """A ``RunConfig(call_model_input_filter=...)`` that sends the model Ravi's window of its input.

    The input the SDK built (the session's items and this turn's) is grouped into Ravi turns, passed through the
    pipeline (within its budget, calls with their results, every system message kept), and turned back into
    items: unchanged turns as their original items, changed ones (a shortened output, folded calls) rebuilt.
    The session itself is not changed: the window goes to the model only. ``session_id`` names the session whose
    window state (a watermark's start, say) the pipeline keeps: use one filter per session. ``agent_id`` is the
    context's (``"agent"`` unless it names another) unless given. A call whose session is cleared (through the
    context, ``AgentContext.clear``) while its input is read gets its window, and the pipeline keeps nothing of it.

    Example:
        >>> from ravi.agents.context import TokenBudgetComposedStrategy
        >>> input_filter = ravi_input_filter([TokenBudgetComposedStrategy.from_model("gpt-4o")], session_id="s1")
    """
    if isinstance(pipeline, (AgentContext, ContextConfig)):
        context = as_context(pipeline)
    else:  # strategies alone: the window is built from the input, so no store is read
        context = AgentContext(ContextConfig(InMemoryHistoryProvider(), pipeline))
    if agent_id is not None and agent_id != context.agent_id:
        context = AgentContext(context.config, agent_id=agent_id)  # the same pipeline, so the same session states
    check_scope(agent_id=context.agent_id, session_id=session_id)

    converted = _Converted()

    async def input_filter(data: CallModelData[Any]) -> ModelInputData:
        # the session's epoch before its input is read: a clear landing meanwhile keeps nothing of this window
        epoch = epoch_of(context, session_id)
        turns = group(data.model_data.input)
        messages = converted(turns)
        window = await window_of(context, session_id, messages, epoch=epoch)
        unchanged = {id(m): turn for m, turn in zip(messages, turns, strict=True)}  # the pipeline kept these as given
        # a call's output right after it: a turn of assistant items may hold other runs' answers after a call
        items = outputs_after_calls([item for m in window for item in unchanged.get(id(m)) or items_of(m)])
        return ModelInputData(input=items, instructions=data.model_data.instructions)

    return input_filter


__all__ = ["ravi_input_filter"]
