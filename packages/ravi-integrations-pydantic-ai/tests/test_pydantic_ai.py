"""PydanticAI's real agent loop (Agent.run) with Ravi as a capability."""

from __future__ import annotations

import asyncio

from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from ravi.agents.context import (
    ContextConfig,
    InMemoryHistoryProvider,
    TokenBudgetComposedStrategy,
    ToolResultCompactionStrategy,
)
from ravi.agents.tokens import DEFAULT_COUNTER
from ravi.integrations.pydantic_ai import RaviHistory, from_ravi, to_ravi
from ravi.kernel.messages import ChatMessage, ToolCallBlock


def fetch_logs(service: str) -> str:
    """Fetch the recent logs of a service."""
    return f"{service}: " + "line of log output\n" * 200


class Scripted:
    """The model: parallel tool calls, then an answer; it records what it was sent."""

    def __init__(self) -> None:
        self.sent: list[list[ModelMessage]] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.sent.append(list(messages))
        if len(self.sent) == 1:
            return ModelResponse(
                parts=[
                    ThinkingPart(content="check both", signature="sig"),
                    ToolCallPart("fetch_logs", {"service": "api"}, tool_call_id="c1"),
                    ToolCallPart("fetch_logs", {"service": "db"}, tool_call_id="c2"),
                ]
            )
        return ModelResponse(parts=[TextPart("Both are healthy.")])


class Counting(InMemoryHistoryProvider):
    """An in-memory store that records the size of every append."""

    def __init__(self) -> None:
        super().__init__()
        self.sizes: list[int] = []

    async def append_many(self, agent_id, messages, *, session_id, run_id=""):  # type: ignore[no-untyped-def]
        self.sizes.append(len(messages))
        await super().append_many(agent_id, messages, session_id=session_id, run_id=run_id)


def test_the_agent_loop_keeps_every_message_and_the_run_keeps_them_whole() -> None:
    async def main() -> None:
        history = InMemoryHistoryProvider()
        pipeline = [ToolResultCompactionStrategy(100), TokenBudgetComposedStrategy([], token_budget=4_000)]
        ravi = RaviHistory(ContextConfig(history, pipeline), session_id="s1")
        model = Scripted()
        agent = Agent(FunctionModel(model), tools=[fetch_logs], system_prompt="Be brief.", capabilities=[ravi])
        result = await agent.run("Are the api and the db healthy?")
        assert result.output == "Both are healthy."
        # the window went to the model: the tool returns it saw were shortened
        returns = [p for m in model.sent[-1] if isinstance(m, ModelRequest) for p in m.parts]
        returns = [p for p in returns if isinstance(p, ToolReturnPart)]
        assert len(returns) == 2 and all(len(p.model_response_str()) < 200 for p in returns)
        # the run's own messages were not rewritten (ProcessHistory writes its window back)
        run_returns = [
            p for m in result.all_messages() for p in getattr(m, "parts", []) if isinstance(p, ToolReturnPart)
        ]
        assert all(len(p.model_response_str()) > 3_000 for p in run_returns)
        # Ravi holds the whole transcript, and gives it back exactly
        assert await ravi.messages() == result.all_messages()
        stored = await history.get_messages("agent", session_id="s1")
        assert [m.role for m in stored] == ["system", "user", "assistant", "tool", "tool", "assistant"]

    asyncio.run(main())


def test_a_conversation_continues_from_ravi() -> None:
    async def main() -> None:
        ravi = RaviHistory(ContextConfig(InMemoryHistoryProvider()), session_id="s2")
        replies = iter(["first", "second"])

        def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            return ModelResponse(parts=[TextPart(next(replies))])

        agent = Agent(FunctionModel(model), capabilities=[ravi])
        await agent.run("one")
        second = await agent.run("two", message_history=await ravi.messages())
        assert [p.content for m in second.all_messages() for p in m.parts] == ["one", "first", "two", "second"]
        assert await ravi.messages() == second.all_messages()

    asyncio.run(main())


def test_every_part_kind_round_trips() -> None:
    messages: list[ModelMessage] = [
        ModelRequest(parts=[SystemPromptPart("rules"), UserPromptPart("hi ✓ 漢字")], instructions="be kind"),
        ModelResponse(
            parts=[
                ThinkingPart(content="hmm", signature="sig"),
                TextPart("calling"),
                ToolCallPart("f", '{"x": 1}', tool_call_id="c1"),
                ToolCallPart("g", {"y": [1, None]}, tool_call_id="c2"),
            ],
            model_name="m",
        ),
        ModelRequest(
            parts=[
                ToolReturnPart("f", {"rows": [1, 2]}, tool_call_id="c1"),
                ToolReturnPart("g", "bad args", tool_call_id="c2", outcome="retried"),
            ]
        ),
        ModelResponse(parts=[TextPart("done")]),
    ]
    ravi = [r for i, m in enumerate(messages) for r in to_ravi(m, salt=str(i))]
    assert [m.role for m in ravi] == ["system", "user", "assistant", "tool", "tool", "assistant"]
    assert ravi[4].content[0].is_error  # type: ignore[union-attr]
    assert from_ravi(ravi) == messages


def test_each_request_appends_only_what_the_run_added() -> None:
    """A long run does not re-send its whole history to the store before every model request."""

    async def main() -> list[int]:
        history = Counting()
        ravi = RaviHistory(ContextConfig(history), session_id="s")
        model = Scripted()
        await Agent(FunctionModel(model), tools=[fetch_logs], capabilities=[ravi]).run("check")
        return history.sizes

    # the prompt; the response with two calls and the two returns; the answer: five messages, each sent once
    assert asyncio.run(main()) == [1, 3, 1]


def test_a_run_continued_from_ravi_appends_only_its_own_messages() -> None:
    """``message_history=await ravi.messages()`` is the store's own transcript: the next run sends the store only
    what it adds, not the whole conversation again."""

    async def main() -> None:
        history = Counting()
        ravi = RaviHistory(ContextConfig(history), session_id="s")
        agent = Agent(FunctionModel(lambda messages, info: ModelResponse(parts=[TextPart("ok")])), capabilities=[ravi])
        for i in range(5):
            await agent.run(f"question {i}", message_history=await ravi.messages())
        assert history.sizes == [1, 1] * 5  # the question before the model request, the answer after the run
        stored = await history.get_messages("agent", session_id="s")
        assert [m.role for m in stored] == ["user", "assistant"] * 5

    asyncio.run(main())


def test_a_request_without_parts_is_kept_exactly() -> None:
    """``ModelRequest(parts=[])`` was dropped silently (it became no Ravi message at all); it is stored and read
    back in its place."""
    messages: list[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart("hi")]),
        ModelRequest(parts=[]),
        ModelResponse(parts=[TextPart("hello")]),
        ModelRequest(parts=[], instructions="be kind"),
    ]
    ravi = [r for i, m in enumerate(messages) for r in to_ravi(m, salt=str(i))]
    assert [m.role for m in ravi] == ["user", "user", "assistant", "user"]
    assert from_ravi(ravi) == messages

    async def main() -> None:
        history = RaviHistory(ContextConfig(InMemoryHistoryProvider()), session_id="s1")
        await history.store(messages)
        assert await history.messages() == messages

    asyncio.run(main())


def test_an_applications_own_pydantic_ai_metadata_key_is_read_as_a_plain_message() -> None:
    from ravi.kernel.messages import ChatMessage

    own = [
        ChatMessage.user("hello", metadata={"pydantic_ai": {"message": {"kind": "nope"}}}),
        ChatMessage.assistant("hi", metadata={"pydantic_ai": ["tagged"]}),
    ]
    got = from_ravi(own)
    assert [type(m).__name__ for m in got] == ["ModelRequest", "ModelResponse"]
    assert got[0].parts[0].content == "hello"  # type: ignore[union-attr]
    assert got[1].parts[0].content == "hi"  # type: ignore[union-attr]


def test_tool_call_arguments_cut_off_mid_call_are_stored_counted_and_given_back_as_written() -> None:
    """A model cut off mid-call (or a sloppy one) gives a ``ToolCallPart`` whose ``args`` string is not a JSON
    object. The agent loop answers each with a retry prompt; the response is stored and given back as written,
    sent exactly, and counted with the string (Ravi's view is PydanticAI's own ``{"INVALID_JSON": the string}``)."""
    raw = '{"service": "' + "a" * 400
    written: list[str | dict[str, object]] = [raw, "", "[1]", '"x"', "plain text", {"service": "db"}]
    sent: list[list[ModelMessage]] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        sent.append(list(messages))
        if len(sent) == 1:
            return ModelResponse(
                parts=[ToolCallPart("fetch_logs", a, tool_call_id=f"c{i}") for i, a in enumerate(written)]
            )
        return ModelResponse(parts=[TextPart("Sorry.")])

    async def main() -> None:
        history = InMemoryHistoryProvider()
        ravi = RaviHistory(ContextConfig(history), session_id="s1")
        agent = Agent(FunctionModel(model), tools=[fetch_logs], capabilities=[ravi], retries=3)
        result = await agent.run("logs of the api?")
        transcript = result.all_messages()
        assert [p.args for p in transcript[1].parts] == written  # type: ignore[union-attr]
        assert await ravi.messages() == transcript  # given back as written
        assert sent[-1] == transcript[:-1]  # sent exactly
        stored = await history.get_messages("agent", session_id="s1")
        assert [m.role for m in stored] == ["user", "assistant"] + ["tool"] * 6 + ["assistant"]
        assert [r.content[0].tool_call_id for r in stored[2:7]] == [f"c{i}" for i in range(5)]  # type: ignore[union-attr]
        assert [dict(c.arguments) for c in stored[1].tool_calls] == [
            {"INVALID_JSON": raw}, {}, {"INVALID_JSON": "[1]"}, {"INVALID_JSON": '"x"'},
            {"INVALID_JSON": "plain text"}, {"service": "db"},
        ]  # fmt: skip
        assert DEFAULT_COUNTER.count_message(stored[1]) > len(raw) // 4  # counted with what the model wrote

    asyncio.run(main())


def test_a_rebuilt_tool_calls_arguments_are_the_frameworks_own_to_change() -> None:
    # Ravi's arguments are read-only all the way down; PydanticAI's code may change the args it is given
    call = ToolCallBlock(id="c1", name="search", arguments={"tags": ["a", {"deep": ["b"]}]})
    (response,) = from_ravi([ChatMessage.assistant(tool_calls=[call])])
    assert isinstance(response, ModelResponse)
    (part,) = response.parts
    assert isinstance(part, ToolCallPart) and isinstance(part.args, dict)
    part.args["tags"].append("c")
    part.args["tags"][1]["deep"].append("d")
    assert part.args == {"tags": ["a", {"deep": ["b", "d"]}, "c"]}
    assert call.arguments == {"tags": ["a", {"deep": ["b"]}]}


def test_tool_call_args_that_are_an_object_no_store_keeps_are_stored_as_written() -> None:
    """Args read as a JSON object that no store keeps (NaN, negative zero, nesting too deep) made the message
    unstorable."""
    for raw in ('{"x": NaN}', '{"x": -0.0}', '{"x": ' + "[" * 100_000 + "]" * 100_000 + "}"):
        (message,) = to_ravi(ModelResponse(parts=[ToolCallPart(tool_name="f", args=raw, tool_call_id="c1")]))
        assert message.tool_calls[0].arguments == {"INVALID_JSON": raw}


def test_a_tool_result_stored_without_a_pydantic_ai_message_reads_back_as_a_tool_return() -> None:
    from ravi.kernel.messages import ToolResultBlock

    stored = [
        ChatMessage.user("look it up"),
        ChatMessage(role="assistant", content=(ToolCallBlock(id="c1", name="lookup", arguments={"q": "x"}),)),
        ChatMessage(role="tool", content=(ToolResultBlock(tool_call_id="c1", content="found it"),)),
        ChatMessage(role="tool", content=(ToolResultBlock(tool_call_id="c2", content="no such", is_error=True),)),
    ]
    got = from_ravi(stored)
    assert [type(m).__name__ for m in got] == ["ModelRequest", "ModelResponse", "ModelRequest"]
    returns = got[2].parts
    assert [type(p).__name__ for p in returns] == ["ToolReturnPart", "ToolReturnPart"]
    first, second = returns
    assert isinstance(first, ToolReturnPart) and isinstance(second, ToolReturnPart)
    assert (first.tool_name, first.tool_call_id, first.content, first.outcome) == (
        "lookup",
        "c1",
        "found it",
        "success",
    )
    assert (second.tool_call_id, second.content, second.outcome) == ("c2", "no such", "failed")


def test_storing_something_that_is_not_a_list_of_messages_is_an_invalid_message() -> None:
    import pytest

    from ravi.kernel.errors import InvalidMessage

    ravi = RaviHistory(ContextConfig(InMemoryHistoryProvider()), session_id="s1")
    for value in (None, 5):
        with pytest.raises(InvalidMessage, match="messages"):
            asyncio.run(ravi.store(value))  # type: ignore[arg-type]
