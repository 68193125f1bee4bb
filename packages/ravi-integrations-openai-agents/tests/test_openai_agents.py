"""The OpenAI Agents SDK's real agent loop (Runner.run) with a RaviSession and Ravi's window."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

from agents import Agent, ModelSettings, RunConfig, Runner, function_tool
from agents.items import ModelResponse
from agents.models.interface import Model
from agents.usage import Usage
from hypothesis import given, settings
from hypothesis import strategies as st
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

from ravi.agents.context import (
    ContextConfig,
    InMemoryHistoryProvider,
    TokenBudgetComposedStrategy,
    ToolResultCompactionStrategy,
)
from ravi.agents.tokens import DEFAULT_COUNTER
from ravi.integrations.openai_agents import RaviSession, ravi_input_filter


def call(call_id: str, service: str) -> ResponseFunctionToolCall:
    return ResponseFunctionToolCall(
        id=f"fc-{call_id}", call_id=call_id, name="fetch_logs", arguments=json.dumps({"service": service}),
        type="function_call", status="completed",
    )  # fmt: skip


def answer(text: str) -> ResponseOutputMessage:
    return ResponseOutputMessage(
        id=f"msg-{abs(hash(text))}", role="assistant", status="completed", type="message",
        content=[ResponseOutputText(text=text, type="output_text", annotations=[])],
    )  # fmt: skip


class ScriptedModel(Model):
    """A model answering from a script; it records the input of every call."""

    def __init__(self, script: list[list[Any]]) -> None:
        self.script = list(script)
        self.inputs: list[list[Any]] = []

    async def get_response(self, system_instructions, input, *args, **kwargs):  # type: ignore[no-untyped-def]
        self.inputs.append(list(input) if isinstance(input, list) else [input])
        return ModelResponse(output=self.script.pop(0), usage=Usage(), response_id=None)

    def stream_response(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        raise NotImplementedError


@function_tool
def fetch_logs(service: str) -> str:
    """Fetch the recent logs of a service."""
    return f"{service}: " + "line of log output\n" * 200


def run(model: ScriptedModel, session: RaviSession, question: str, **config: Any) -> Any:
    agent = Agent(name="ops", instructions="Be brief.", tools=[fetch_logs], model=model, model_settings=ModelSettings())
    return asyncio.run(
        Runner.run(agent, question, session=session, run_config=RunConfig(tracing_disabled=True, **config))
    )


def test_the_runner_keeps_every_item_in_ravi_and_sends_the_window() -> None:
    history = InMemoryHistoryProvider()
    session = RaviSession("s1", history)
    model = ScriptedModel([[call("c1", "api"), call("c2", "db")], [answer("Both are healthy.")]])
    config = ContextConfig(history, [ToolResultCompactionStrategy(100), TokenBudgetComposedStrategy([], 4_000)])
    result = run(
        model,
        session,
        "Are the api and the db healthy?",
        call_model_input_filter=ravi_input_filter(config, session_id="s1"),
    )
    assert result.final_output == "Both are healthy."
    items = asyncio.run(session.get_items())
    kinds = [i.get("type", i.get("role")) for i in items]
    assert kinds == ["user", "function_call", "function_call", "function_call_output", "function_call_output",
                     "message"]  # fmt: skip
    outputs = [i["output"] for i in items if i.get("type") == "function_call_output"]
    assert all(len(o) > 3_000 for o in outputs)  # stored whole
    sent = [i for i in model.inputs[-1] if isinstance(i, dict) and i.get("type") == "function_call_output"]
    assert len(sent) == 2 and all(len(i["output"]) < 200 for i in sent)  # the model got the window
    stored = asyncio.run(history.get_messages("agent", session_id="s1"))
    assert [m.role for m in stored] == ["user", "assistant", "tool", "tool", "assistant"]
    assert len(stored[1].tool_calls) == 2  # parallel calls are one assistant turn


def test_a_second_run_continues_the_session() -> None:
    session = RaviSession("s2")
    model = ScriptedModel([[answer("first")], [answer("second")]])
    run(model, session, "one")
    run(model, session, "two")
    texts = [i.get("content") for i in asyncio.run(session.get_items()) if i.get("role") == "user"]
    assert texts == ["one", "two"]
    first_input = [i.get("content") for i in model.inputs[-1] if isinstance(i, dict) and i.get("role") == "user"]
    assert first_input == ["one", "two"]


def test_session_protocol_pop_limit_clear_and_odd_items() -> None:
    async def main() -> None:
        session = RaviSession("s3")
        odd = [
            {"role": "developer", "content": "rules"},
            {"role": "user", "content": [{"type": "input_text", "text": "look"},
                                         {"type": "input_image", "image_url": "data:image/png;base64,AA"}]},
            {"type": "reasoning", "id": "r1", "summary": [{"type": "summary_text", "text": "hmm"}],
             "encrypted_content": "gAAA..."},
            {"type": "function_call", "call_id": "c9", "name": "f", "arguments": "{not json", "id": "fc9"},
            {"type": "web_search_call", "id": "ws1", "status": "completed", "action": {"type": "search", "query": "q"}},
            {"type": "function_call_output", "call_id": "c9", "output": "bad arguments"},
        ]  # fmt: skip
        await session.add_items(odd)
        assert await session.get_items() == odd  # exactly as given
        assert await session.get_items(limit=2) == odd[-2:]
        assert await session.get_items(limit=0) == []
        assert await session.pop_item() == odd[-1]
        assert await session.get_items() == odd[:-1]
        await session.add_items([{"role": "user", "content": "later"}])
        assert await session.pop_item() == {"role": "user", "content": "later"}
        assert await session.pop_item() == odd[-2]
        assert await session.get_items() == odd[:-2]
        await session.clear_session()
        assert await session.get_items() == [] and await session.pop_item() is None

    asyncio.run(main())


def test_a_malformed_item_is_refused_and_nothing_of_its_batch_is_stored() -> None:
    import pytest

    from ravi.kernel.errors import InvalidMessage

    async def main() -> None:
        session = RaviSession("s4")
        await session.add_items([{"role": "user", "content": "kept"}])
        with pytest.raises(InvalidMessage):
            await session.add_items([{"role": "user", "content": "lost"}, {"type": "function_call", "call_id": "c"}])
        assert await session.get_items() == [{"role": "user", "content": "kept"}]

    asyncio.run(main())


def test_an_item_with_a_key_that_is_not_text_is_refused_not_renamed() -> None:
    """``{1: "a"}`` came back as ``{"1": "a"}``, and ``{1: "a", "1": "b"}`` as ``{"1": "b"}``: an item is stored
    exactly or refused, and nothing of its batch is stored."""
    import pytest

    from ravi.kernel.errors import InvalidMessage

    async def main() -> None:
        session = RaviSession("s5")
        await session.add_items([{"role": "user", "content": "kept"}])
        for bad in ({1: "a"}, {"type": "custom", "data": {1: "a", "1": "b"}}):
            with pytest.raises(InvalidMessage):
                await session.add_items([{"role": "user", "content": "lost"}, bad])
        assert await session.get_items() == [{"role": "user", "content": "kept"}]

    asyncio.run(main())


def test_unknown_or_malformed_session_settings_are_a_configuration_error() -> None:
    """``session_settings`` as the SDK takes them (an object or a dict); a bad one is Ravi's typed error, and an
    unknown field is also the ``TypeError`` the SDK's own sessions raise."""
    import pytest
    from agents import SessionSettings

    from ravi.kernel.errors import ConfigurationError

    assert RaviSession("s", session_settings={"limit": 2}).session_settings == SessionSettings(limit=2)
    assert RaviSession("s", session_settings=SessionSettings(limit=3)).session_settings.limit == 3
    with pytest.raises(ConfigurationError, match="limitt"):
        RaviSession("s", session_settings={"limitt": 1})
    with pytest.raises(TypeError, match="Unknown session settings: limitt"):
        RaviSession("s", session_settings={"limitt": 1})
    with pytest.raises(ConfigurationError, match="limit"):
        RaviSession("s", session_settings={"limit": "many"})


def _item(i: int, kind: int) -> dict[str, Any]:
    if kind == 0:
        return {"role": "user", "content": f"question {i}"}
    if kind == 1:
        return {"type": "function_call", "call_id": f"c{i}", "name": "fetch_logs", "arguments": '{"service": "api"}'}
    if kind == 2:
        return {"type": "function_call_output", "call_id": f"c{i - 1}", "output": "log line\n" * (i % 40)}
    return {"role": "assistant", "content": f"answer {i}"}


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.integers(0, 3), min_size=1, max_size=40), min_size=1, max_size=5))
def test_a_filter_reused_across_calls_sends_what_a_fresh_filter_sends(inputs: list[list[int]]) -> None:
    """The filter converts only what a call's input adds to the previous call's; for any sequence of inputs,
    growing or not, each window equals the one a fresh filter builds from that input alone."""
    from agents.run_config import CallModelData, ModelInputData

    def pipeline() -> list[Any]:
        return [ToolResultCompactionStrategy(60), TokenBudgetComposedStrategy([], 300)]

    reused = ravi_input_filter(pipeline(), session_id="s")
    for kinds in inputs:
        items = [_item(i, k) for i, k in enumerate(kinds)]
        data = CallModelData(model_data=ModelInputData(input=items, instructions="Be brief."), agent=None, context=None)
        fresh = ravi_input_filter(pipeline(), session_id="s")
        assert asyncio.run(reused(data)).input == asyncio.run(fresh(data)).input  # type: ignore[arg-type]


def test_function_call_arguments_cut_off_mid_call_are_stored_counted_and_sent_as_written() -> None:
    """A model cut off mid-call (or a sloppy one) writes a ``function_call`` whose ``arguments`` are not a JSON
    object. The Runner answers each with an error output; the items are stored and given back as the SDK gave
    them, the window counts the string (Ravi's view is ``{"arguments": the string}``) and sends it as written."""
    raw = '{"service": "' + "a" * 400
    written = [raw, "", "[1]", '"x"', "plain text"]
    calls = [
        ResponseFunctionToolCall(
            id=f"fc-{i}", call_id=f"c{i}", name="fetch_logs", arguments=a, type="function_call", status="completed"
        )
        for i, a in enumerate(written)
    ]
    history = InMemoryHistoryProvider()
    session = RaviSession("s1", history)
    model = ScriptedModel([calls, [answer("Sorry.")]])
    config = ContextConfig(history, [TokenBudgetComposedStrategy([], 4_000)])
    result = run(model, session, "logs of the api?", call_model_input_filter=ravi_input_filter(config, session_id="s1"))
    assert result.final_output == "Sorry."
    items = asyncio.run(session.get_items())
    assert items[1:6] == [c.model_dump(exclude_unset=True) for c in calls]  # as written
    assert [i["call_id"] for i in items[6:11]] == [f"c{i}" for i in range(5)]  # each answered (an error)
    assert model.inputs[-1] == items[:11]  # sent exactly
    stored = asyncio.run(history.get_messages("agent", session_id="s1"))
    assert [dict(c.arguments) for c in stored[1].tool_calls] == [{"arguments": a} for a in written]
    assert DEFAULT_COUNTER.count_message(stored[1]) > len(raw) // 4  # counted with what the model wrote
    assert asyncio.run(RaviSession("s1", history).get_items()) == items  # another process reads the same


def test_function_call_arguments_that_are_an_object_no_store_keeps_are_stored_as_written() -> None:
    """Arguments read as a JSON object that no store keeps (NaN, negative zero, nesting too deep) made the item
    unstorable, or raised the parser's RecursionError."""
    from ravi.integrations.openai_agents.convert import items_of, to_ravi

    for raw in ('{"x": NaN}', '{"x": -0.0}', '{"x": ' + "[" * 100_000 + "]" * 100_000 + "}"):
        item = {"type": "function_call", "call_id": "c1", "name": "f", "arguments": raw}
        message = to_ravi([item])
        assert message.tool_calls[0].arguments == {"arguments": raw} and items_of(message) == [item]


def test_a_store_that_is_not_a_history_store_is_refused_when_the_session_is_built() -> None:
    import pytest

    from ravi.kernel.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match="HistoryProvider"):
        RaviSession("s", "postgres://localhost/db")  # type: ignore[arg-type]


def test_a_limit_that_is_not_an_integer_is_an_invalid_argument() -> None:
    import pytest

    from ravi.kernel.errors import InvalidArgument

    session = RaviSession("s", InMemoryHistoryProvider())
    asyncio.run(session.add_items([{"role": "user", "content": "hi"}]))
    for limit in ("3", 1.5, True):
        with pytest.raises(InvalidArgument, match="limit"):
            asyncio.run(session.get_items(limit))  # type: ignore[arg-type]
    assert asyncio.run(session.get_items(1)) == [{"role": "user", "content": "hi"}]


def test_a_clear_while_the_filter_reads_its_input_keeps_nothing_of_that_window(monkeypatch: Any) -> None:
    """Another thread clears the session while the filter reads the SDK's input into Ravi turns (the input holds
    the removed turns): the model still gets the window of what it was given, but the pipeline keeps no state and
    no last window of it (decision 118). The next input, read after the clear, is kept as before."""
    from agents.run_config import CallModelData, ModelInputData

    from ravi.agents.context import AgentContext, CompactionPipeline
    from ravi.integrations.openai_agents import window as window_module

    history = InMemoryHistoryProvider()
    pipeline = CompactionPipeline([TokenBudgetComposedStrategy([], 4_000)])
    context = AgentContext(ContextConfig(history, pipeline))
    input_filter = ravi_input_filter(context, session_id="s1")
    agent = Agent(name="ops")

    def data(*texts: str) -> CallModelData[Any]:
        items: list[Any] = [{"role": "user", "content": t} for t in texts]
        return CallModelData(model_data=ModelInputData(input=items, instructions=None), agent=agent, context=None)

    def kept() -> tuple[object, list[str] | None]:
        last, _ = pipeline.sessions.last_window("agent", "s1")
        return pipeline.sessions.find("agent", "s1"), None if last is None else [m.text for m in last]

    async def main() -> None:
        await input_filter(data("old question"))
        assert kept()[1] == ["old question"]
        real = window_module.to_ravi

        def clearing(*args: Any, **kwargs: Any) -> Any:
            # the clear runs to its end in another thread, with its own event loop, while the input is read
            clearer = threading.Thread(target=asyncio.run, args=(context.clear("s1"),))
            clearer.start()
            clearer.join()
            return real(*args, **kwargs)

        monkeypatch.setattr(window_module, "to_ravi", clearing)
        sent = await input_filter(data("old question", "old follow-up"))
        monkeypatch.setattr(window_module, "to_ravi", real)
        assert [i["content"] for i in sent.input] == ["old question", "old follow-up"]
        assert kept() == (None, None), "the window of the removed turns is kept"
        await input_filter(data("new question"))
        state, last = kept()
        assert state is not None and last == ["new question"]

    asyncio.run(main())
