"""AutoGen's real agent loop (AssistantAgent.run) with Ravi as its model context."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
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
from ravi.agents.tokens import DEFAULT_COUNTER
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


def test_state_loads_into_another_context_as_its_transcript() -> None:
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


def test_clear_then_load_state_restores_the_conversation() -> None:
    """AutoGen's snapshot contract: ``save_state()``, ``clear()``, ``load_state(state)`` gives the conversation
    back (the state used to name the session only, so after ``clear()`` it restored nothing)."""

    async def main() -> None:
        history = InMemoryHistoryProvider()
        context = RaviChatCompletionContext(ContextConfig(history), session_id="s1")
        said = [UserMessage(content="Hello!", source="user"), AssistantMessage(content="Hi.", source="assistant")]
        for message in said:
            await context.add_message(message)
        state = await context.save_state()
        await context.clear()
        assert await context.get_messages() == []
        await context.load_state(state)
        assert await context.get_messages() == said
        assert [m.text for m in await history.get_messages("agent", session_id="s1")] == ["Hello!", "Hi."]

    asyncio.run(main())


def test_load_state_replaces_turns_never_stored_under_retention_none() -> None:
    """Under ``HistoryRetention.NONE`` turns are held in memory, not stored; ``load_state`` replaces them (it
    used to clear the store and add the saved messages after the held turns, so the window showed both)."""
    from ravi.kernel.agent import HistoryRetention

    async def main() -> None:
        history = InMemoryHistoryProvider()
        config = ContextConfig(history, retention=HistoryRetention.NONE)
        context = RaviChatCompletionContext(config, session_id="s1")
        await context.add_message(UserMessage(content="held in memory", source="user"))
        saved = [UserMessage(content="Hello!", source="user"), AssistantMessage(content="Hi.", source="assistant")]
        await context.load_state({"messages": [m.model_dump() for m in saved]})
        assert await context.get_messages() == saved
        assert await history.get_messages("agent", session_id="s1") == []
        await context.load_state({"messages": []})
        assert await context.get_messages() == []

    asyncio.run(main())


def test_load_state_with_malformed_messages_is_a_ravi_error_and_changes_nothing() -> None:
    """It leaked pydantic's ``ValidationError``; now it is ``InvalidMessage``, raised before anything stored is
    removed."""
    from ravi.kernel.errors import InvalidArgument, InvalidMessage

    async def main() -> None:
        context = RaviChatCompletionContext(ContextConfig(InMemoryHistoryProvider()), session_id="s1")
        await context.add_message(UserMessage(content="kept", source="user"))
        for bad in ({"messages": [{"type": "UserMessage"}]}, {"messages": "not a list"}, {"messages": [42]}):
            with pytest.raises(InvalidMessage, match=r"state\.messages"):
                await context.load_state(bad)
        with pytest.raises(InvalidArgument):
            await context.load_state({"something": "else"})
        assert [m.content for m in await context.get_messages()] == ["kept"]

    asyncio.run(main())


def test_a_function_result_message_without_results_is_kept_exactly() -> None:
    """``FunctionExecutionResultMessage(content=[])`` was dropped silently; it is stored and read back, and,
    as in AutoGen's own bounded contexts, a window does not start with it."""

    async def main() -> None:
        context = RaviChatCompletionContext(ContextConfig(InMemoryHistoryProvider()), session_id="s1")
        said = [FunctionExecutionResultMessage(content=[]), UserMessage(content="Hello!", source="user")]
        for message in said:
            await context.add_message(message)
        assert (await context.save_state())["messages"] == [m.model_dump() for m in said]
        assert await context.get_messages() == said[1:]

    asyncio.run(main())


def test_an_applications_own_autogen_metadata_key_is_read_as_a_plain_message() -> None:
    from ravi.kernel.messages import ChatMessage

    own = [
        ChatMessage.user("hello", metadata={"autogen": {"trace": "t-1"}}),
        ChatMessage.assistant("hi", metadata={"autogen": "tagged", "autogen_part": "x"}),
    ]
    assert from_ravi(own) == [
        UserMessage(content="hello", source="user"),
        AssistantMessage(content="hi", source="assistant"),
    ]


def test_the_context_serialises_as_an_autogen_component_by_its_settings() -> None:
    """``dump_component()``/``load_component()``: the session and the settings its store and pipeline are built
    from; an ``AssistantAgent`` with Ravi as its context serialises whole (it failed in ``dump_component``)."""
    from autogen_core.model_context import ChatCompletionContext

    from ravi.kernel.errors import ConfigurationError

    async def main() -> None:
        settings = {"context": {"agent_id": "ops", "pipeline": [{"strategy": "sliding_window", "max_messages": 2}]}}
        context = RaviChatCompletionContext(
            session_id="s1", settings=settings, initial_messages=[SystemMessage(content="Be brief.")]
        )
        dumped = context.dump_component()
        assert dumped.provider == "ravi.integrations.autogen.RaviChatCompletionContext"
        loaded = ChatCompletionContext.load_component(dumped.model_dump())
        assert isinstance(loaded, RaviChatCompletionContext)
        assert (loaded.session_id, loaded.context.agent_id) == ("s1", "ops")
        for text in ("one", "two", "three"):
            await loaded.add_message(UserMessage(content=text, source="user"))
        assert [m.content for m in await loaded.get_messages()] == ["Be brief.", "two", "three"]  # its pipeline

        client = ReplayChatCompletionClient(["ok"], model_info=INFO)  # type: ignore[arg-type]
        agent = AssistantAgent("ops", model_client=client, model_context=context)
        again = AssistantAgent.load_component(agent.dump_component())
        assert isinstance(again._model_context, RaviChatCompletionContext)

        on_objects = RaviChatCompletionContext(ContextConfig(InMemoryHistoryProvider()), session_id="s1")
        with pytest.raises(ConfigurationError, match="settings"):
            on_objects.dump_component()

    asyncio.run(main())


def test_function_call_arguments_cut_off_mid_call_are_stored_counted_and_given_back_as_written() -> None:
    """A model cut off mid-call (or a sloppy one) writes ``FunctionCall.arguments`` that are not a JSON object.
    The agent loop answers each call with an error; the turn is stored, counted with what the model wrote (Ravi's
    view of such a call is ``{"arguments": the string}``), and given back and sent exactly as written."""

    async def main() -> None:
        raw = '{"service": "' + "a" * 400
        written = [raw, "", "[1]", '"x"', "plain text"]
        calls = [FunctionCall(id=f"c{i}", name="fetch_logs", arguments=a) for i, a in enumerate(written)]
        client = Recording(
            [
                CreateResult(finish_reason="function_calls", content=calls, usage=USAGE, cached=False),
                CreateResult(finish_reason="stop", content="Sorry.", usage=USAGE, cached=False),
            ],
            model_info=INFO,  # type: ignore[arg-type]
        )
        history = InMemoryHistoryProvider()
        context = RaviChatCompletionContext(ContextConfig(history), session_id="s1")
        agent = AssistantAgent(
            "ops", model_client=client, tools=[fetch_logs], model_context=context, reflect_on_tool_use=True
        )
        await agent.run(task="logs of the api?")
        given = await context.get_messages()
        assert [type(m).__name__ for m in given] == [
            "UserMessage", "AssistantMessage", "FunctionExecutionResultMessage", "AssistantMessage"
        ]  # fmt: skip
        assert given[1].content == calls  # as the model wrote them
        results = given[2].content
        assert [(r.call_id, r.is_error) for r in results] == [(f"c{i}", True) for i in range(5)]  # type: ignore[union-attr]
        assert client.sent[-1][1:] == given[:3]  # sent exactly (after the agent's system message)
        assert from_ravi(await history.get_messages("agent", session_id="s1")) == given
        stored = await history.get_messages("agent", session_id="s1")
        assert [dict(c.arguments) for c in stored[1].tool_calls] == [{"arguments": a} for a in written]
        assert DEFAULT_COUNTER.count_message(stored[1]) > len(raw) // 4  # counted with what the model wrote
        state = await context.save_state()
        await context.clear()
        await context.load_state(state)
        assert await context.get_messages() == given

    asyncio.run(main())


def test_function_call_arguments_that_are_an_object_no_store_keeps_are_stored_as_written() -> None:
    """Arguments read as a JSON object that no store keeps (NaN, negative zero, nesting too deep) made the message
    unstorable, or raised the parser's RecursionError."""
    for raw in ('{"x": NaN}', '{"x": -0.0}', '{"x": ' + "[" * 100_000 + "]" * 100_000 + "}"):
        (message,) = to_ravi(AssistantMessage(source="a", content=[FunctionCall(id="c1", name="f", arguments=raw)]))
        assert message.tool_calls[0].arguments == {"arguments": raw}


class _DownOnce(InMemoryHistoryProvider):
    """A store whose first append fails as a server that is down does."""

    def __init__(self) -> None:
        super().__init__()
        self.down = True

    async def append_many(self, *args: Any, **kwargs: Any) -> Any:
        if self.down:
            self.down = False
            from ravi.kernel.errors import BackendUnavailable

            raise BackendUnavailable("the store is down")
        return await super().append_many(*args, **kwargs)


def test_initial_messages_are_kept_when_the_first_store_fails() -> None:
    async def scenario() -> list[str]:
        history = _DownOnce()
        context = RaviChatCompletionContext(
            ContextConfig(history), session_id="s1", initial_messages=[SystemMessage(content="Be brief.")]
        )
        from ravi.kernel.errors import BackendUnavailable

        with pytest.raises(BackendUnavailable):
            await context.add_message(UserMessage(content="hi", source="user"))
        await context.add_message(UserMessage(content="hi", source="user"))
        return [type(m).__name__ for m in await context.get_messages()]

    assert asyncio.run(scenario()) == ["SystemMessage", "UserMessage"]


def test_initial_messages_are_stored_once_by_concurrent_first_calls() -> None:
    async def scenario() -> list[str]:
        context = RaviChatCompletionContext(
            ContextConfig(InMemoryHistoryProvider()),
            session_id="s1",
            initial_messages=[SystemMessage(content="Be brief.")],
        )
        await asyncio.gather(*(context.add_message(UserMessage(content=str(i), source="user")) for i in range(5)))
        return [type(m).__name__ for m in await context.get_messages()]

    assert asyncio.run(scenario()) == ["SystemMessage"] + ["UserMessage"] * 5


def test_settings_that_are_not_a_mapping_are_a_configuration_error() -> None:
    from ravi.kernel.errors import ConfigurationError

    for settings in (5, ["history"]):
        with pytest.raises(ConfigurationError, match="settings"):
            RaviChatCompletionContext(session_id="s1", settings=settings)  # type: ignore[arg-type]


def test_initial_messages_that_are_not_autogen_messages_are_refused_when_built() -> None:
    from ravi.kernel.errors import InvalidMessage

    with pytest.raises(InvalidMessage):
        RaviChatCompletionContext(
            ContextConfig(InMemoryHistoryProvider()),
            session_id="s1",
            initial_messages=["hi"],  # type: ignore[list-item]
        )


def test_initial_messages_start_a_new_session_and_are_not_added_again_to_one_that_holds_messages() -> None:
    """A context built again on a stored session (a new process, or a component loaded from its dump, which
    keeps ``initial_messages``) continues the conversation: its initial messages are not appended a second
    time, in the middle of it."""

    async def scenario() -> list[str]:
        history = InMemoryHistoryProvider()
        initial = [SystemMessage(content="Be brief.")]
        first = RaviChatCompletionContext(ContextConfig(history), session_id="s1", initial_messages=initial)
        await first.add_message(UserMessage(content="one", source="user"))
        again = RaviChatCompletionContext(ContextConfig(history), session_id="s1", initial_messages=initial)
        await again.add_message(UserMessage(content="two", source="user"))
        return [str(m.content) for m in await again.get_messages()]

    assert asyncio.run(scenario()) == ["Be brief.", "one", "two"]
