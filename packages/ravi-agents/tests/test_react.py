"""The ReAct loop of 000 (``ReActAgent("bot", model=client, context=ctx)``) on a scripted model."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest

from ravi.agents.context import (
    ContextConfig,
    InMemoryHistoryProvider,
    SlidingWindowCompaction,
    ToolResultCompactionStrategy,
)
from ravi.agents.react import ReActAgent, ScriptedModel, TaskManagerTool, Tool
from ravi.agents.storage import InMemoryTaskStore, TaskStore
from ravi.kernel.agent import HistoryRetention
from ravi.kernel.errors import InvalidArgument
from ravi.kernel.messages import ChatMessage, ToolCallBlock, ToolResultBlock


def call(call_id: str, name: str, **arguments: object) -> ChatMessage:
    return ChatMessage.assistant(tool_calls=[ToolCallBlock(id=call_id, name=name, arguments=arguments)])


def lookup(invoice: str) -> str:
    if invoice == "broken":
        raise ValueError("no such invoice")
    return f"{invoice}: 120.00 EUR " + "line item " * 200


async def test_the_documented_agent_runs_tools_and_records_every_turn() -> None:
    history = InMemoryHistoryProvider()
    ctx = ContextConfig(history, [ToolResultCompactionStrategy(max_chars=100), SlidingWindowCompaction(40)])
    model = ScriptedModel(
        [
            call("c1", "lookup", invoice="broken"),
            call("c2", "lookup", invoice="INV-2291"),
            ChatMessage.assistant("INV-2291 is 120.00 EUR."),
        ]
    )
    agent = ReActAgent("bot", model=model, context=ctx, tools=[Tool("lookup", "Find an invoice.", lookup)])
    answer = await agent.run("s", "How much is INV-2291?")
    assert answer.text == "INV-2291 is 120.00 EUR."
    stored = await history.get_messages("bot", session_id="s")
    assert [m.role for m in stored] == ["user", "assistant", "tool", "assistant", "tool", "assistant"]
    assert stored[2].tool_result is not None and stored[2].tool_result.is_error  # the failure, for the model
    assert len(stored[4].tool_result.content) > 1_000  # type: ignore[union-attr]  # stored whole
    sent = model.seen[-1][-1]
    assert sent.tool_result is not None and len(sent.tool_result.content) < 200  # the model saw the window


async def test_retention_applies_when_the_run_ends() -> None:
    history = InMemoryHistoryProvider()
    model = ScriptedModel([ChatMessage.assistant("done")])
    agent = ReActAgent("bot", model=model, context=ContextConfig(history, retention=HistoryRetention.RUN))
    await agent.run("s", "hello")
    assert await history.count_messages("bot", session_id="s") == 0


async def test_an_unknown_tool_is_an_error_result_and_steps_are_bounded() -> None:
    model = ScriptedModel([call("c1", "nope"), *[call(f"c{i}", "nope") for i in range(2, 10)]])
    agent = ReActAgent("bot", model=model, max_steps=3)
    with pytest.raises(InvalidArgument, match="after 3 steps"):
        await agent.run("s", "loop")
    stored = await agent.context.config.history.get_messages("bot", session_id="s")
    assert all(m.tool_result.is_error for m in stored if m.tool_result is not None)


async def test_async_tools_and_windowed_model_calls() -> None:
    async def weather(city: str) -> dict[str, object]:
        return {"city": city, "celsius": 21}

    def answer(window: Sequence[ChatMessage]) -> ChatMessage:
        return ChatMessage.assistant(f"saw {len(window)} messages")

    model = ScriptedModel([call("c1", "weather", city="Oslo"), answer])
    agent = ReActAgent("bot", model=model, tools=[Tool("weather", "Weather now.", weather)])
    reply = await agent.run("s", "Weather in Oslo?")
    assert reply.text == "saw 3 messages"
    assert '"celsius": 21' in model.seen[-1][-1].text or "21" in str(model.seen[-1][-1].tool_result)
    result = model.seen[-1][-1].tool_result
    assert result is not None and json.loads(result.content) == {"city": "Oslo", "celsius": 21}


async def test_the_task_manager_tool_keeps_the_running_agents_board() -> None:
    """000: "A tool like TaskManagerTool needs to know which agent's board it is writing to"; the agent's run sets
    the context variables, so the board is the session's and the agent's, though the model never names it."""
    store = TaskStore()
    ids: list[str] = []

    def move_first(messages: Sequence[ChatMessage]) -> ChatMessage:
        board = json.loads(messages[-1].content[0].content)  # type: ignore[union-attr]
        ids.extend(t["id"] for t in board["tasks"])
        return call("c2", "task_manager", action="move", task_id=ids[0], status="in_progress")

    model = ScriptedModel(
        [
            call("c1", "task_manager", action="plan", tasks=["read the log", "fix the deploy"]),
            move_first,
            call("c3", "task_manager", action="move", task_id="no-such-task", status="succeeded"),
            ChatMessage.assistant("working on it"),
        ]
    )
    agent = ReActAgent("planner", model=model, tools=[TaskManagerTool(store)])
    await agent.run("conv-1", "fix the deploy")
    board = await store.get_task_list("conv-1", "planner")
    assert board is not None
    assert [(t.title, t.status.value) for t in board.tasks] == [
        ("read the log", "in_progress"),
        ("fix the deploy", "planned"),
    ]
    assert await store.get_task_list("default", "default") is None  # nothing landed outside the run's board
    transcript = await agent.context.config.history.get_messages("planner", session_id="conv-1")
    refused = [m for m in transcript if m.role == "tool"][-1].content[0]
    assert isinstance(refused, ToolResultBlock)
    assert refused.is_error and "NotFound" in refused.content  # the model is told; the board is as it was


async def test_the_task_manager_tool_outside_an_agent_uses_the_default_board() -> None:
    """Called with no agent running, the variables hold "default" (000: boards "land on the default thread")."""
    store = TaskStore()
    tool = TaskManagerTool(store)
    shown = await tool.function(action="plan", tasks=["one"])
    assert (shown["conversation_id"], shown["agent_id"]) == ("default", "default")
    assert await store.get_task_list("default", "default") is not None


@pytest.mark.parametrize(
    "arguments",
    [
        {"action": "dance"},
        {"action": "plan", "tasks": "one task"},
        {"action": "plan", "tasks": []},
        {"action": "add", "tasks": [""]},
        {"action": "move", "status": "succeeded"},
        {"action": "move", "task_id": "x", "status": "done"},
        {},
        {"tasks": ["no action"]},
        {"action": "show", "reason": "a model's own argument"},
        {"action": "plan", "tasks": ["a"], "priority": "high", "owner": None},
    ],
)
async def test_the_task_manager_tool_refuses_bad_arguments(arguments: dict[str, object]) -> None:
    with pytest.raises(InvalidArgument):
        await TaskManagerTool(TaskStore()).function(**arguments)


async def test_the_task_manager_tools_schema_lists_every_argument_it_takes() -> None:
    """An argument the schema does not list, or a call without ``action``, was a ``TypeError`` of the tool's
    function; it is refused as any bad argument is, naming what the tool takes, and the schema says so."""
    tool = TaskManagerTool(TaskStore())
    parameters = tool.schema()["function"]["parameters"]
    assert parameters["additionalProperties"] is False
    with pytest.raises(InvalidArgument, match=r"unexpected argument 'reason'.*takes action, tasks, task_id"):
        await tool.function(action="show", reason="checking")
    for name in parameters["properties"]:
        with pytest.raises(InvalidArgument) as refused:
            await tool.function(**{name: 5})
        assert "unexpected" not in str(refused.value)


@pytest.mark.parametrize(
    "call",
    [
        {"action": "plan", "tasks": "one title"},
        {"action": "plan", "tasks": [" "]},
        {"action": "move", "task_id": ""},
        {"action": "move", "task_id": "t", "status": "done"},
        {"action": "explode"},
        {"action": "move", "task_id": "FIRST", "status": "in_progress", "result": {"a": 1}},
    ],
)
async def test_each_error_of_the_task_tool_names_its_field_once(call: dict[str, object]) -> None:
    """The model reads the message: ``result: result must be ...`` named the field twice."""
    tool = TaskManagerTool(InMemoryTaskStore())
    board = await tool.function(action="plan", tasks=["first"])
    arguments = {k: board["tasks"][0]["id"] if v == "FIRST" else v for k, v in call.items()}
    with pytest.raises(InvalidArgument) as raised:
        await tool.function(**arguments)
    field = raised.value.field
    assert field and str(raised.value).count(field) == 1, str(raised.value)
