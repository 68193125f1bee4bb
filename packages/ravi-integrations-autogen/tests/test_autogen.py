"""AutoGen's real agent loop (AssistantAgent.run) with Ravi as its model context."""

from __future__ import annotations

import asyncio
from typing import Any

from autogen_agentchat.agents import AssistantAgent
from autogen_core import FunctionCall
from autogen_core.models import (
    AssistantMessage,
    CreateResult,
    FunctionExecutionResult,
    FunctionExecutionResultMessage,
    RequestUsage,
    SystemMessage,
    UserMessage,
)
from autogen_ext.models.replay import ReplayChatCompletionClient

from ravi.agents.context import (
    ContextConfig,
    InMemoryHistoryProvider,
    TokenBudgetComposedStrategy,
    ToolResultCompactionStrategy,
)
from ravi.integrations.autogen import RaviChatCompletionContext, from_ravi, to_ravi


class Recording(ReplayChatCompletionClient):
    """The replay client, recording the messages of every call."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.sent: list[list[Any]] = []

    async def create(self, messages, *args, **kwargs):  # type: ignore[no-untyped-def]
        self.sent.append(list(messages))
        return await super().create(messages, *args, **kwargs)


def fetch_logs(service: str) -> str:
    """Fetch the recent logs of a service."""
    return f"{service}: " + "line of log output\n" * 200


USAGE = RequestUsage(prompt_tokens=0, completion_tokens=0)
INFO = {
    "vision": False,
    "function_calling": True,
    "json_output": False,
    "family": "unknown",
    "structured_output": False,
}


def test_the_agent_loop_keeps_its_messages_in_ravi_and_reads_the_window() -> None:
    async def main() -> None:
        calls = [FunctionCall(id="c1", name="fetch_logs", arguments='{"service": "api"}'),
                 FunctionCall(id="c2", name="fetch_logs", arguments='{"service": "db"}')]  # fmt: skip
        client = Recording(
            [
                CreateResult(finish_reason="function_calls", content=calls, usage=USAGE, cached=False),
                CreateResult(finish_reason="stop", content="Both are healthy.", usage=USAGE, cached=False),
            ],
            model_info=INFO,  # type: ignore[arg-type]
        )
        history = InMemoryHistoryProvider()
        pipeline = [ToolResultCompactionStrategy(100), TokenBudgetComposedStrategy([], token_budget=4_000)]
        context = RaviChatCompletionContext(ContextConfig(history, pipeline), session_id="s1")
        agent = AssistantAgent(
            "ops", model_client=client, tools=[fetch_logs], model_context=context, reflect_on_tool_use=True
        )
        result = await agent.run(task="Are the api and the db healthy?")
        assert result.messages[-1].content == "Both are healthy."
        stored = await history.get_messages("agent", session_id="s1")
        assert [m.role for m in stored] == ["user", "assistant", "tool", "tool", "assistant"]
        assert all(len(m.content[0].content) > 3_000 for m in stored if m.role == "tool")  # type: ignore[union-attr]
        last = client.sent[-1]
        results = [r for m in last if isinstance(m, FunctionExecutionResultMessage) for r in m.content]
        assert [r.call_id for r in results] == ["c1", "c2"]  # joined again, in one message
        assert all(len(r.content) < 200 for r in results)  # the model got the window

    asyncio.run(main())


def test_messages_round_trip_exactly() -> None:
    messages = [
        SystemMessage(content="rules"),
        UserMessage(content="hi ✓ 漢字", source="user"),
        AssistantMessage(content=[FunctionCall(id="c1", name="f", arguments="{not json")], thought="hmm", source="a"),
        FunctionExecutionResultMessage(
            content=[
                FunctionExecutionResult(content="bad", name="f", call_id="c1", is_error=True),
                FunctionExecutionResult(content="ok", name="g", call_id="c2", is_error=False),
            ]
        ),
        AssistantMessage(content="done", source="a"),
    ]
    ravi = [r for i, m in enumerate(messages) for r in to_ravi(m, salt=str(i))]
    assert [m.role for m in ravi] == ["system", "user", "assistant", "tool", "tool", "assistant"]
    assert from_ravi(ravi) == messages


def test_state_names_the_session_and_loads_another_contexts_messages() -> None:
    async def main() -> None:
        history = InMemoryHistoryProvider()
        context = RaviChatCompletionContext(ContextConfig(history), session_id="s1")
        await context.add_message(UserMessage(content="one", source="user"))
        state = await context.save_state()
        other = RaviChatCompletionContext(ContextConfig(history), session_id="elsewhere")
        await other.load_state(state)
        assert [m.content for m in await other.get_messages()] == ["one"]
        await other.load_state({"messages": [UserMessage(content="two", source="user").model_dump()]})
        assert [m.content for m in await other.get_messages()] == ["two"]
        await other.clear()
        assert await other.get_messages() == []

    asyncio.run(main())
