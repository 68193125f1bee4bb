"""LangChain v1's real agent loop (create_agent, on LangGraph) with Ravi's middleware and chat history."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage, message_to_dict
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import Field

from ravi.agents.context import (
    ContextConfig,
    InMemoryHistoryProvider,
    TokenBudgetComposedStrategy,
    ToolResultCompactionStrategy,
)
from ravi.integrations.langchain import RaviChatMessageHistory, RaviContextMiddleware, to_langchain, to_ravi
from ravi.kernel.errors import ConfigurationError, InvalidMessage


class ScriptedModel(GenericFakeChatModel):
    """A chat model that answers from a script and records every list of messages it was sent."""

    seen: list[list[BaseMessage]] = Field(default_factory=list)

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedModel:
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.seen.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


@tool
def fetch_logs(service: str) -> str:
    """Fetch the recent logs of a service."""
    return f"{service}: " + "line of log output\n" * 200


def script() -> Iterator[AIMessage]:
    yield AIMessage("", tool_calls=[{"name": "fetch_logs", "args": {"service": "api"}, "id": "call-1"}])
    yield AIMessage("", tool_calls=[{"name": "fetch_logs", "args": {"service": "db"}, "id": "call-2"}])
    yield AIMessage("Both services are healthy.")


def agent_with(history: InMemoryHistoryProvider, model: ScriptedModel, **options: Any) -> Any:
    config = ContextConfig(
        history, [ToolResultCompactionStrategy(max_chars=100), TokenBudgetComposedStrategy([], token_budget=4_000)]
    )
    return create_agent(model, [fetch_logs], middleware=[RaviContextMiddleware(config, **options)], **{})


def test_the_agent_loop_keeps_the_whole_transcript_in_ravi_and_sends_the_window() -> None:
    history = InMemoryHistoryProvider()
    model = ScriptedModel(messages=script())
    agent = agent_with(history, model, session_id="s1")
    result = agent.invoke({"messages": [HumanMessage("Are the api and the db healthy?")]})
    state = result["messages"]
    assert [m.type for m in state] == ["human", "ai", "tool", "ai", "tool", "ai"]
    stored = asyncio.run(history.get_messages("agent", session_id="s1"))
    assert [m.id for m in stored] == [m.id for m in state]  # every message, once, in order
    assert [message_to_dict(to_langchain(m)) for m in stored] == [message_to_dict(m) for m in state]
    # the model saw the window: long tool output shortened; the graph's state kept it whole
    last_call = model.seen[-1]
    tool_seen = [m for m in last_call if isinstance(m, ToolMessage)]
    assert tool_seen and all(len(m.content) < 200 for m in tool_seen)
    assert all(len(m.content) > 3_000 for m in state if isinstance(m, ToolMessage))


def test_the_session_is_the_thread_and_a_second_turn_sees_the_first() -> None:
    async def main() -> None:
        history = InMemoryHistoryProvider()
        model = ScriptedModel(messages=iter([AIMessage("first answer"), AIMessage("second answer")]))
        agent = create_agent(
            model,
            [fetch_logs],
            middleware=[RaviContextMiddleware(ContextConfig(history))],
            checkpointer=InMemorySaver(),
        )
        thread = {"configurable": {"thread_id": "thread-7"}}
        await agent.ainvoke({"messages": [HumanMessage("one")]}, config=thread)
        await agent.ainvoke({"messages": [HumanMessage("two")]}, config=thread)
        stored = await history.get_messages("agent", session_id="thread-7")
        assert [m.text for m in stored] == ["one", "first answer", "two", "second answer"]
        assert [m.content for m in model.seen[-1]] == ["one", "first answer", "two"]

    asyncio.run(main())


def test_without_a_session_the_middleware_says_what_to_pass() -> None:
    agent = agent_with(InMemoryHistoryProvider(), ScriptedModel(messages=script()))
    with pytest.raises(ConfigurationError, match="thread_id"):
        agent.invoke({"messages": [HumanMessage("hi")]})


EVERY_KIND: list[BaseMessage] = [
    SystemMessage("rules", id="m0"),
    HumanMessage(
        content=[
            {"type": "text", "text": "look"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}},
        ],
        id="m1",
    ),
    AIMessage(
        content=[{"type": "reasoning", "reasoning": "think", "signature": "sig"}, {"type": "text", "text": "calling"}],
        tool_calls=[
            {"name": "a", "args": {"x": 1}, "id": "c1", "type": "tool_call"},
            {"name": "b", "args": {"y": [1, None]}, "id": "c2", "type": "tool_call"},
        ],
        additional_kwargs={"refusal": None},
        response_metadata={"model_name": "m", "finish_reason": "tool_calls"},
        usage_metadata={"input_tokens": 10, "output_tokens": 3, "total_tokens": 13},
        id="m2",
    ),
    ToolMessage("ok", tool_call_id="c1", id="m3"),
    ToolMessage("boom", tool_call_id="c2", status="error", id="m4"),
    AIMessage("done ✓ 漢字", id="m5"),
]


def test_every_message_kind_round_trips_through_the_chat_history() -> None:
    history = RaviChatMessageHistory(InMemoryHistoryProvider(), session_id="s")
    history.add_messages(EVERY_KIND)
    history.add_messages(EVERY_KIND[:2])  # a retried append stores nothing twice
    assert [message_to_dict(m) for m in history.messages] == [message_to_dict(m) for m in EVERY_KIND]
    errors = [to_ravi(m).content[0] for m in EVERY_KIND if isinstance(m, ToolMessage)]
    assert [e.is_error for e in errors] == [False, True]  # type: ignore[union-attr]
    history.clear()
    assert history.messages == []


def test_the_async_history_and_bad_input() -> None:
    async def main() -> None:
        history = RaviChatMessageHistory(InMemoryHistoryProvider(), session_id="s")
        await history.aadd_messages(EVERY_KIND)
        assert [message_to_dict(m) for m in await history.aget_messages()] == [message_to_dict(m) for m in EVERY_KIND]
        with pytest.raises(InvalidMessage):
            await history.aadd_messages(["not a message"])  # type: ignore[list-item]
        assert len(await history.aget_messages()) == len(EVERY_KIND)  # nothing of the bad batch stored

    asyncio.run(main())


def test_a_message_the_pipeline_changed_is_rebuilt_from_its_blocks() -> None:
    tool_message = ToolMessage("x" * 1_000, tool_call_id="c1", id="t1")
    short = asyncio.run(ToolResultCompactionStrategy(max_chars=10).compact([to_ravi(tool_message)]))[0]
    rebuilt = to_langchain(short)
    assert isinstance(rebuilt, ToolMessage) and rebuilt.id == "t1" and rebuilt.content.startswith("x" * 10)
    assert len(rebuilt.content) < 100


def test_the_sync_methods_work_from_inside_a_running_event_loop() -> None:
    """A sync caller inside async code (a sync tool called by an async agent, say): the work runs on the
    package's own loop, so it neither deadlocks nor needs the caller's loop."""

    async def main() -> list[str]:
        history = RaviChatMessageHistory(InMemoryHistoryProvider(), session_id="s")
        history.add_messages([HumanMessage("from inside a loop", id="x1")])
        return [str(m.content) for m in history.messages]

    assert asyncio.run(main()) == ["from inside a loop"]


def test_a_message_with_a_malformed_block_is_refused_with_a_ravi_error() -> None:
    broken = HumanMessage(content=[{"type": "image_url"}], id="b1")  # no image_url in the block
    with pytest.raises(InvalidMessage):
        to_ravi(broken)
