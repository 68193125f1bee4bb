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
from ravi.agents.tokens import DEFAULT_COUNTER
from ravi.integrations.langchain import RaviChatMessageHistory, RaviContextMiddleware, to_langchain, to_ravi
from ravi.kernel.errors import ConfigurationError, InvalidArgument, InvalidMessage
from ravi.kernel.messages import ChatMessage, TextBlock, ToolCallBlock


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
    assert [to_langchain(m).id for m in stored] == [m.id for m in state]  # every message, once, in order
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
    assert [message_to_dict(m) for m in history.messages] == [message_to_dict(m) for m in EVERY_KIND]
    assert history.messages == EVERY_KIND
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


def test_a_message_added_without_an_id_reads_back_equal_to_what_was_added() -> None:
    """LangChain's own histories give back what was added: ``id=None`` stays ``None`` (Ravi's own message id is
    kept where LangChain does not see it)."""
    history = RaviChatMessageHistory(InMemoryHistoryProvider(), session_id="s")
    added = [SystemMessage("Meow"), AIMessage("woof"), HumanMessage("bark")]
    history.add_messages(added)
    assert history.messages == added
    assert [m.id for m in history.messages] == [None, None, None]


def test_every_add_appends_even_a_message_whose_id_is_stored() -> None:
    """A second message with an id already stored is stored too, as LangChain's own histories do, above all when
    its content differs (it used to be dropped silently)."""
    history = RaviChatMessageHistory(InMemoryHistoryProvider(), session_id="s")
    history.add_messages([HumanMessage("first", id="m1")])
    history.add_messages([HumanMessage("second, same id", id="m1"), HumanMessage("first", id="m1")])
    assert [(m.id, m.content) for m in history.messages] == [
        ("m1", "first"),
        ("m1", "second, same id"),
        ("m1", "first"),
    ]


def test_an_applications_own_langchain_metadata_key_is_read_as_a_plain_message() -> None:
    """A message written through Ravi by an application that keeps its own ``"langchain"`` key in metadata reads
    back rebuilt from its blocks (it raised ``KeyError``)."""
    from ravi.kernel.messages import ChatMessage

    store = InMemoryHistoryProvider()
    own = [
        ChatMessage.user("hello", id="u1", metadata={"langchain": {"run": "r-7"}}),
        ChatMessage.assistant("hi", id="a1", metadata={"langchain": "tagged"}),
        ChatMessage.user("again", id="u2", metadata={"langchain": {"type": "human", "data": {"nope": 1}}}),
    ]
    asyncio.run(store.append_many("agent", own, session_id="s"))
    messages = RaviChatMessageHistory(store, session_id="s").messages
    assert [(type(m).__name__, m.content, m.id) for m in messages] == [
        ("HumanMessage", "hello", "u1"),
        ("AIMessage", "hi", "a1"),
        ("HumanMessage", "again", "u2"),
    ]


def test_the_error_for_a_malformed_tool_call_reaches_the_model() -> None:
    """LangChain answers a tool call whose arguments were malformed, on the next turn, with an error message that
    has no id yet; the model must see it, after its call, to learn the call failed (the middleware used to send
    only stored messages)."""
    broken = AIMessage(
        "",
        invalid_tool_calls=[
            {"name": "fetch_logs", "args": "{bad", "id": "call-9", "error": "bad json", "type": "invalid_tool_call"}
        ],
    )
    model = ScriptedModel(messages=iter([broken, AIMessage("I will retry with valid arguments.")]))
    agent = create_agent(
        model,
        [fetch_logs],
        middleware=[RaviContextMiddleware(ContextConfig(InMemoryHistoryProvider()))],
        checkpointer=InMemorySaver(),
    )
    thread = {"configurable": {"thread_id": "t"}}
    agent.invoke({"messages": [HumanMessage("logs of the api?")]}, config=thread)
    agent.invoke({"messages": [HumanMessage("try again")]}, config=thread)
    seen = model.seen[-1]
    assert [type(m).__name__ for m in seen] == ["HumanMessage", "AIMessage", "ToolMessage", "HumanMessage"]
    assert (seen[2].tool_call_id, seen[2].status) == ("call-9", "error")  # type: ignore[attr-defined]
    assert "malformed" in str(seen[2].content)


@pytest.mark.parametrize("run_async", [False, True])
def test_the_error_for_a_malformed_tool_call_is_stored_where_the_state_has_it(run_async: bool) -> None:
    """LangChain answers a tool call it could not parse inside the next model call, and puts the answer right
    after the AI message in the graph's state; the middleware stored it after the next human turn instead."""
    broken = AIMessage(
        "",
        invalid_tool_calls=[
            {"name": "fetch_logs", "args": "{bad", "id": "call-9", "error": "bad json", "type": "invalid_tool_call"}
        ],
    )
    model = ScriptedModel(messages=iter([broken, AIMessage("I will retry with valid arguments.")]))
    store = InMemoryHistoryProvider()
    agent = create_agent(
        model, [fetch_logs], middleware=[RaviContextMiddleware(ContextConfig(store))], checkpointer=InMemorySaver()
    )
    thread = {"configurable": {"thread_id": "t"}}

    def invoke(text: str) -> list[BaseMessage]:
        turn = {"messages": [HumanMessage(text)]}
        if run_async:
            return asyncio.run(agent.ainvoke(turn, config=thread))["messages"]  # type: ignore[no-any-return]
        return agent.invoke(turn, config=thread)["messages"]  # type: ignore[no-any-return]

    invoke("logs of the api?")
    state = invoke("try again")
    kept = asyncio.run(store.get_messages("agent", session_id="t"))
    assert [type(m).__name__ for m in state] == [
        "HumanMessage",
        "AIMessage",
        "ToolMessage",
        "HumanMessage",
        "AIMessage",
    ]
    assert [message_to_dict(to_langchain(m)) for m in kept] == [message_to_dict(m) for m in state]
    assert (state[2].tool_call_id, state[2].status) == ("call-9", "error")  # type: ignore[attr-defined]
    assert [type(m).__name__ for m in model.seen[-1]] == ["HumanMessage", "AIMessage", "ToolMessage", "HumanMessage"]


def test_what_another_middleware_does_to_the_request_reaches_the_model() -> None:
    """Ravi's window keeps the request as the outer middleware left it: a message it added (with or without an
    id) is sent where it put it, a message it changed is sent changed, one it took out is not sent back."""
    from langchain.agents.middleware import wrap_model_call

    @wrap_model_call
    def redact_and_remind(request: Any, handler: Any) -> Any:
        messages = [
            HumanMessage("[redacted]", id=m.id) if isinstance(m, HumanMessage) and "secret" in str(m.content) else m
            for m in request.messages
            if "drop me" not in str(m.content)
        ]
        messages.append(HumanMessage("Reminder: answer in one line."))  # no id
        messages.append(HumanMessage("Reminder with an id.", id="reminder-1"))
        return handler(request.override(messages=messages))

    history = InMemoryHistoryProvider()
    model = ScriptedModel(messages=iter([AIMessage("fine")]))
    middleware = RaviContextMiddleware(ContextConfig(history), session_id="s1")
    agent = create_agent(model, [fetch_logs], middleware=[redact_and_remind, middleware])
    agent.invoke({"messages": [HumanMessage("drop me"), HumanMessage("my secret is 42"), HumanMessage("status?")]})
    assert [m.content for m in model.seen[-1]] == [
        "[redacted]",
        "status?",
        "Reminder: answer in one line.",
        "Reminder with an id.",
    ]
    stored = asyncio.run(history.get_messages("agent", session_id="s1"))
    assert [m.text for m in stored] == [
        "drop me",
        "my secret is 42",
        "status?",
        "fine",
    ]  # the transcript is the state's


def test_a_message_replaced_under_its_id_is_stored_as_the_new_message() -> None:
    """LangGraph replaces a state message that is added again under its id; Ravi keeps both versions (nothing
    stored is dropped or changed) and the model is sent the new one."""
    history = InMemoryHistoryProvider()
    model = ScriptedModel(messages=iter([AIMessage("one", id="a1"), AIMessage("two", id="a2")]))
    agent = create_agent(
        model, [], middleware=[RaviContextMiddleware(ContextConfig(history))], checkpointer=InMemorySaver()
    )
    thread = {"configurable": {"thread_id": "t"}}
    agent.invoke({"messages": [HumanMessage("draft", id="h1")]}, config=thread)
    agent.invoke({"messages": [HumanMessage("final", id="h1"), HumanMessage("next", id="h2")]}, config=thread)
    assert [m.content for m in model.seen[-1]] == ["final", "one", "next"]
    stored = asyncio.run(history.get_messages("agent", session_id="t"))
    assert [m.text for m in stored] == ["draft", "one", "final", "next", "two"]


def test_the_session_can_be_named_by_a_function_of_the_runs_config() -> None:
    """``session_id`` may be a function of the run's config (a user id, say), checked like a name."""
    history = InMemoryHistoryProvider()
    model = ScriptedModel(messages=iter([AIMessage("hello Ada"), AIMessage("hello Bob")]))
    middleware = RaviContextMiddleware(ContextConfig(history), session_id=lambda config: config["configurable"]["user"])
    agent = create_agent(model, [], middleware=[middleware])
    agent.invoke({"messages": [HumanMessage("hi, I am Ada")]}, config={"configurable": {"user": "ada"}})
    agent.invoke({"messages": [HumanMessage("hi, I am Bob")]}, config={"configurable": {"user": "bob"}})
    stored = asyncio.run(history.get_messages("agent", session_id="bob"))
    assert [m.text for m in stored] == ["hi, I am Bob", "hello Bob"]
    with pytest.raises(InvalidArgument):
        agent.invoke({"messages": [HumanMessage("hi")]}, config={"configurable": {"user": ""}})


def test_a_new_middleware_over_a_stored_thread_stores_only_the_new_turns() -> None:
    """A new process (here a new middleware, on the same store and checkpointer) converts the restored state
    again: what the session holds stays as it was stored, and only the new turns are added (the store refuses
    the same ids with other content, so nothing may be re-sent as a new message)."""
    history = InMemoryHistoryProvider()
    saver = InMemorySaver()
    thread = {"configurable": {"thread_id": "t"}}
    first = create_agent(
        ScriptedModel(messages=iter([AIMessage("one")])),
        [],
        middleware=[RaviContextMiddleware(ContextConfig(history))],
        checkpointer=saver,
    )
    first.invoke({"messages": [HumanMessage("hi")]}, config=thread)
    kept = asyncio.run(history.get_messages("agent", session_id="t"))
    second = create_agent(
        ScriptedModel(messages=iter([AIMessage("two")])),
        [],
        middleware=[RaviContextMiddleware(ContextConfig(history))],
        checkpointer=saver,
    )
    second.invoke({"messages": [HumanMessage("again")]}, config=thread)
    stored = asyncio.run(history.get_messages("agent", session_id="t"))
    assert [m.text for m in stored] == ["hi", "one", "again", "two"]
    assert stored[:2] == kept  # as stored, created_at included


def test_tool_calls_langchain_could_not_parse_are_stored_counted_and_given_back_as_written() -> None:
    """A model cut off mid-call writes arguments that are not a JSON object; LangChain keeps such a call in
    ``invalid_tool_calls`` with the string as written. Ravi had no tool call for it: its tokens were not counted
    (the turn weighed 4 tokens in every window) and the error answering it was a result without a call."""
    raw = '{"service": "' + "a" * 400
    cut = AIMessage(  # as a provider's raw answer reaches LangChain: it parses the arguments, and cannot
        "",
        additional_kwargs={
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "fetch_logs", "arguments": raw}}]
        },
        id="a1",
    )
    assert cut.invalid_tool_calls[0]["args"] == raw
    listed = AIMessage(
        "calling",
        invalid_tool_calls=[
            {"name": "fetch_logs", "args": "[1]", "id": "c2", "error": None, "type": "invalid_tool_call"},
            {"name": None, "args": "", "id": "c3", "error": "no name", "type": "invalid_tool_call"},
        ],
        id="a2",
    )
    said: list[BaseMessage] = [
        HumanMessage("logs of the api?", id="h1"),
        cut,
        ToolMessage("Error: malformed arguments", tool_call_id="c1", status="error", id="t1"),
        listed,
        ToolMessage("Error: malformed arguments", tool_call_id="c2", status="error", id="t2"),
        ToolMessage("Error: no tool named", tool_call_id="c3", status="error", id="t3"),
    ]
    history = RaviChatMessageHistory(InMemoryHistoryProvider(), session_id="s")
    history.add_messages(said)
    assert history.messages == said
    assert [message_to_dict(m) for m in history.messages] == [message_to_dict(m) for m in said]
    stored = asyncio.run(history.history.get_messages("agent", session_id="s"))
    assert [(c.id, dict(c.arguments)) for c in stored[1].tool_calls] == [("c1", {"unparsed": raw})]
    assert [(c.id, dict(c.arguments)) for c in stored[3].tool_calls] == [("c2", {"unparsed": "[1]"}), ("c3", {})]
    assert DEFAULT_COUNTER.count_message(stored[1]) > len(raw) // 4  # counted with what the model wrote
    # a changed turn (its text shortened, say) is rebuilt with the calls LangChain could not parse as they were
    rebuilt = to_langchain(stored[3].model_copy(update={"content": (TextBlock(text="call"), *stored[3].tool_calls)}))
    assert isinstance(rebuilt, AIMessage) and (rebuilt.tool_calls, rebuilt.invalid_tool_calls) == (
        [],
        listed.invalid_tool_calls,
    )

    # the agent loop: the turn is stored as the model wrote it, counted, and sent with the error answering it
    store = InMemoryHistoryProvider()
    model = ScriptedModel(messages=iter([cut.model_copy(update={"id": None}), AIMessage("I will retry.")]))
    config = ContextConfig(store, [TokenBudgetComposedStrategy([], token_budget=4_000)])
    agent = create_agent(model, [fetch_logs], middleware=[RaviContextMiddleware(config)], checkpointer=InMemorySaver())
    thread = {"configurable": {"thread_id": "t"}}
    agent.invoke({"messages": [HumanMessage("logs of the api?")]}, config=thread)
    state = agent.invoke({"messages": [HumanMessage("try again")]}, config=thread)["messages"]
    kept = asyncio.run(store.get_messages("agent", session_id="t"))
    assert message_to_dict(to_langchain(kept[1])) == message_to_dict(state[1])
    assert state[1].invalid_tool_calls[0]["args"] == raw
    assert DEFAULT_COUNTER.count_message(kept[1]) > len(raw) // 4
    sent = model.seen[-1]
    assert [type(m).__name__ for m in sent] == ["HumanMessage", "AIMessage", "ToolMessage", "HumanMessage"]
    assert sent[1] == state[1] and sent[2].tool_call_id == "c1"  # type: ignore[attr-defined]


def test_a_rebuilt_tool_calls_arguments_are_the_frameworks_own_to_change() -> None:
    # Ravi's arguments are read-only all the way down; LangChain's tools and middleware may change what they get
    call = ToolCallBlock(id="c1", name="search", arguments={"tags": ["a", {"deep": ["b"]}]})
    message = to_langchain(ChatMessage.assistant(tool_calls=[call]))
    args = message.tool_calls[0]["args"]
    args["tags"].append("c")
    args["tags"][1]["deep"].append("d")
    assert args == {"tags": ["a", {"deep": ["b", "d"]}, "c"]}
    assert call.arguments == {"tags": ["a", {"deep": ["b"]}]}


def test_invalid_tool_call_arguments_that_are_an_object_no_store_keeps_are_stored_as_written() -> None:
    """Arguments read as a JSON object that no store keeps (NaN, negative zero, nesting too deep) made the message
    unstorable, or raised the parser's RecursionError."""
    for raw in ('{"x": NaN}', '{"x": -0.0}', '{"x": ' + "[" * 100_000 + "]" * 100_000 + "}"):
        call = {"id": "c1", "name": "f", "args": raw, "error": "bad", "type": "invalid_tool_call"}
        (block,) = to_ravi(AIMessage(content="", invalid_tool_calls=[call])).content
        assert isinstance(block, ToolCallBlock) and block.arguments == {"unparsed": raw}


def test_a_run_replayed_from_before_the_answer_to_a_malformed_call_stores_the_answer_once() -> None:
    """The error answering a tool call LangChain could not parse got a new id each time it was made, so a run
    replayed from a checkpoint before it (beside a good call, with two bad ones) stored each error twice."""

    def bad(n: int) -> Any:
        return {"name": "fetch_logs", "args": "{bad", "id": f"bad-{n}", "error": "x", "type": "invalid_tool_call"}

    mixed = AIMessage(
        "",
        tool_calls=[{"name": "fetch_logs", "args": {"service": "api"}, "id": "good-1"}],
        invalid_tool_calls=[bad(1), bad(2)],
    )
    model = ScriptedModel(messages=iter([mixed, AIMessage("done"), AIMessage("done again")]))
    store = InMemoryHistoryProvider()
    agent = create_agent(
        model, [fetch_logs], middleware=[RaviContextMiddleware(ContextConfig(store))], checkpointer=InMemorySaver()
    )
    thread = {"configurable": {"thread_id": "t"}}
    state = agent.invoke({"messages": [HumanMessage("go")]}, config=thread)["messages"]
    assert [getattr(m, "tool_call_id", None) for m in state] == [None, None, "bad-1", "bad-2", "good-1", None]
    before = next(
        h
        for h in agent.get_state_history(thread)
        if h.next == ("RaviContextMiddleware.before_model",) and len(h.values["messages"]) == 3
    )
    agent.invoke(None, config=before.config)
    kept = asyncio.run(store.get_messages("agent", session_id="t"))
    answers = [m.tool_call_id for m in map(to_langchain, kept) if isinstance(m, ToolMessage)]
    assert answers == ["bad-1", "bad-2", "good-1"]


def test_the_chat_history_refuses_a_store_that_is_not_a_history_store() -> None:
    with pytest.raises(ConfigurationError, match="HistoryProvider"):
        RaviChatMessageHistory(None, session_id="s1")  # type: ignore[arg-type]


@pytest.mark.filterwarnings("ignore:RunnableWithMessageHistory is deprecated")
def test_a_streamed_reply_is_kept_by_runnable_with_message_history() -> None:
    """Streaming through ``RunnableWithMessageHistory`` hands the history the reply as an ``AIMessageChunk``, which
    LangChain's own histories keep; so does Ravi's, and every other chunk kind reads back as it was added."""
    from langchain_core.messages import (
        AIMessageChunk,
        ChatMessageChunk,
        FunctionMessageChunk,
        HumanMessageChunk,
        SystemMessageChunk,
        ToolMessageChunk,
    )
    from langchain_core.runnables.history import RunnableWithMessageHistory

    history = RaviChatMessageHistory(InMemoryHistoryProvider(), session_id="s1")
    model = GenericFakeChatModel(messages=iter([AIMessage("hello there friend")]))
    chain = RunnableWithMessageHistory(model, lambda session_id: history)
    streamed = "".join(str(c.content) for c in chain.stream("hi", config={"configurable": {"session_id": "s1"}}))
    assert streamed == "hello there friend"
    assert [(type(m).__name__, m.content) for m in history.messages] == [
        ("HumanMessage", "hi"),
        ("AIMessageChunk", "hello there friend"),
    ]
    chunks = [
        AIMessageChunk(content="par", tool_call_chunks=[{"name": "f", "args": '{"a": 1}', "id": "c1", "index": 0}]),
        HumanMessageChunk(content="q"),
        SystemMessageChunk(content="be brief"),
        ToolMessageChunk(content="r", tool_call_id="c1"),
        ChatMessageChunk(content="c", role="critic"),
        FunctionMessageChunk(content="f", name="f"),
    ]
    again = RaviChatMessageHistory(InMemoryHistoryProvider(), session_id="s2")
    again.add_messages(chunks)
    assert again.messages == chunks
