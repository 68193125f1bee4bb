"""One engine, many faces: AgentContext, ContextManager and the model contexts give the same window for the
same transcript and settings, with the pipeline's events and manifest."""

from __future__ import annotations

import asyncio

from ravi.agents.context import (
    AgentContext,
    ContextConfig,
    ContextManager,
    InMemoryHistoryProvider,
    TokenBudgetComposedStrategy,
    TokenBudgetContext,
)
from ravi.agents.context.functional import CompactionPolicy, PolicyCompactionStrategy
from ravi.agents.context.manager import provider_budget
from ravi.agents.tokens import DEFAULT_COUNTER, tool_tokens
from ravi.kernel.messages import ChatMessage, ToolCallBlock


def transcript() -> list[ChatMessage]:
    out = [ChatMessage.system("be brief")]
    for i in range(40):
        out.append(ChatMessage.user(f"question {i} " + "q" * 120))
        if i % 4 == 0:
            call = ToolCallBlock(id=f"c{i}", name="search", arguments={"q": i})
            out += [ChatMessage.assistant(None, tool_calls=[call]), ChatMessage.tool(f"c{i}", "r" * 600)]
        out.append(ChatMessage.assistant(f"answer {i} " + "a" * 200))
    return out


def test_context_manager_and_agent_context_give_the_same_window() -> None:
    async def main() -> None:
        messages = transcript()
        budget, policy = 1_500, CompactionPolicy(keep_recent=6)
        manager = ContextManager(
            max_tokens=budget, compaction_threshold=policy.trigger_ratio, keep_recent=policy.keep_recent
        )
        events = []
        manager.subscribe(events.append)
        for m in messages:
            await manager.add_message(m)
        sent = await manager.get_messages_for_request()

        history = InMemoryHistoryProvider()
        await history.append_many("agent", messages, session_id="s")
        pipeline = [PolicyCompactionStrategy(budget, policy), TokenBudgetComposedStrategy([], budget)]
        window = await AgentContext(ContextConfig(history, pipeline)).get_prompt_window("s")
        assert sent == [m.to_openai(extras=False) for m in window]
        assert DEFAULT_COUNTER.count_messages(window) <= budget
        kinds = [e.kind for e in events]
        assert kinds[0] == "pre_compact" and kinds[-1] == "post_compact" and "strategy_applied" in kinds
        explained = await manager.explain_request()
        assert [m.to_openai(extras=False) for m in explained.messages] == sent
        assert len(explained.manifest) == len(messages)
        assert {e.status for e in explained.manifest} >= {"kept", "summarised"}

    asyncio.run(main())


def test_model_context_and_agent_context_agree() -> None:
    async def main() -> None:
        messages = transcript()
        model_context = TokenBudgetContext(max_tokens=2_000)
        await model_context.history.append_many("agent", messages, session_id="s")
        built = await model_context.build("s")
        history = InMemoryHistoryProvider()
        await history.append_many("agent", messages, session_id="s")
        config = ContextConfig(history, [TokenBudgetComposedStrategy([], 2_000)])
        assert built == await AgentContext(config).get_prompt_window("s")

    asyncio.run(main())


def test_a_provider_budget_reserves_the_tools() -> None:
    class Provider:
        context_window = 32_000
        max_output_tokens = 2_000

    tools = [{"type": "function", "function": {"name": "search", "description": "x" * 2_000}}]
    assert (
        provider_budget(Provider(), tools=tools, reserve=100)
        == 32_000 - 2_000 - tool_tokens(tools, DEFAULT_COUNTER) - 100 - 1_000
    )
    manager = ContextManager(tools=tools)
    assert manager._budget(None, Provider()) == provider_budget(Provider(), tools=tools)
