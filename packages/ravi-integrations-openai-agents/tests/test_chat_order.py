"""The window's items as the SDK's Chat Completions models send them (``Converter.items_to_messages``, used by
``OpenAIChatCompletionsModel`` and the LiteLLM models): a tool message must come right after the assistant message
that holds its call. A function call stored by one writer, followed by the final answers of other runs, then the
call's output, is one Ravi turn whose items put the answers between the call and its output (decision 117)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
from agents import Agent, ModelSettings, OpenAIChatCompletionsModel, RunConfig, Runner
from agents.models.chatcmpl_converter import Converter
from agents.run_config import CallModelData, ModelInputData
from hypothesis import given, settings
from hypothesis import strategies as st
from openai import AsyncOpenAI

from ravi.agents.context import ContextConfig, InMemoryHistoryProvider, TokenBudgetComposedStrategy
from ravi.integrations.openai_agents import RaviSession, ravi_input_filter


def chat_refusals(messages: list[dict[str, Any]]) -> list[str]:
    """What the Chat Completions API refuses: an assistant message with ``tool_calls`` not followed at once by one
    tool message for each call, and a tool message that answers no call of the assistant message before its run."""
    found: list[str] = []
    open_calls: list[str] = []  # the calls of the assistant message whose tool messages are being read
    for k, m in enumerate(messages):
        if m.get("role") == "tool":
            call_id = m.get("tool_call_id")
            if call_id in open_calls:
                open_calls.remove(call_id)
            else:
                found.append(f"message {k}: a tool message for {call_id} not right after its call")
            continue
        if open_calls:
            found.append(f"message {k}: {m.get('role')} before the tool messages of {open_calls}")
        open_calls = [c["id"] for c in m.get("tool_calls") or []]
    if open_calls:
        found.append(f"the end: no tool message for {open_calls}")
    return found


def fc(call_id: str) -> dict[str, Any]:
    return {"type": "function_call", "call_id": call_id, "name": "fetch_logs", "arguments": '{"service": "api"}'}


def output(call_id: str) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": f"logs for {call_id}"}


def said(text: str) -> dict[str, Any]:
    return {
        "type": "message", "role": "assistant", "id": f"msg-{abs(hash(text))}", "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }  # fmt: skip


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


CROSSED = [
    user("is the api up?"),
    fc("c1"),  # this run's call, stored by its writer
    said("the db is fine"),  # the final answers of two other runs of the session, stored meanwhile
    said("the cache is fine"),
    output("c1"),  # the call's output, stored once the tool returned
    user("and now?"),
]


def filtered(items: list[dict[str, Any]]) -> list[Any]:
    input_filter = ravi_input_filter([TokenBudgetComposedStrategy([], 4_000)], session_id="s")
    data = CallModelData(model_data=ModelInputData(input=items, instructions=None), agent=None, context=None)
    return asyncio.run(input_filter(data)).input  # type: ignore[arg-type]


def test_a_call_followed_by_other_runs_answers_converts_to_a_valid_chat() -> None:
    """The SDK's converter made the call's assistant message, then another assistant message, then the tool
    message: a Chat Completions request the API refuses. The output now comes right after its call; the answers
    follow it, in their order, and nothing is lost."""
    sent = filtered(CROSSED)
    assert not chat_refusals(Converter.items_to_messages(sent)), Converter.items_to_messages(sent)
    assert sent == [CROSSED[0], CROSSED[1], CROSSED[4], CROSSED[2], CROSSED[3], CROSSED[5]]


@st.composite
def sessions(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Items of a session written by several runs at once: each call's output stored after any number of other
    runs' answers and user turns, parallel calls now and then, a reasoning item before a call now and then."""
    items: list[dict[str, Any]] = []
    pending: list[str] = []
    for k in range(draw(st.integers(1, 14))):
        step = draw(st.sampled_from(["user", "said", "call", "calls", "reason", "output", "output"]))
        if step == "user":
            items.append(user(f"question {k}"))
        elif step == "said":
            items.append(said(f"answer {k}"))
        elif step in ("call", "calls", "reason"):
            if step == "reason":
                items.append({"type": "reasoning", "id": f"rs-{k}", "summary": []})
            ids = [f"c{k}"] if step != "calls" else [f"c{k}a", f"c{k}b"]
            items += [fc(i) for i in ids]
            pending += ids
        elif pending:
            items.append(output(pending.pop(draw(st.integers(0, len(pending) - 1)))))
    items += [output(i) for i in pending]
    return items


@settings(max_examples=150, deadline=None)
@given(items=sessions())
def test_every_window_converts_to_a_valid_chat(items: list[dict[str, Any]]) -> None:
    """Whatever order the outputs were stored in, the filter's items convert to a chat the API takes; each
    output moves only up to its call, so every item is sent once and the others keep their order."""
    sent = filtered(items)
    messages = Converter.items_to_messages(sent)
    assert not chat_refusals(messages), (sent, messages)
    key = [json.dumps(i, sort_keys=True) for i in items]
    got = [json.dumps(i, sort_keys=True) for i in sent]
    assert sorted(got) == sorted(key), "an item lost or sent twice"
    outputs = {json.dumps(i, sort_keys=True) for i in items if i.get("type") == "function_call_output"}
    assert [i for i in got if i not in outputs] == [i for i in key if i not in outputs]


def test_the_agent_loop_sends_a_chat_completions_model_a_valid_request() -> None:
    """The SDK's own loop with its real ``OpenAIChatCompletionsModel`` and OpenAI client (answered offline by an
    HTTP transport that records each request): the session holds a call followed by other runs' answers, then its
    output; the request the model sends holds the tool message right after its call."""
    requests: list[dict[str, Any]] = []

    def answer(request: httpx.Request) -> httpx.Response:
        requests.append(json.loads(request.content))
        return httpx.Response(
            200,
            json={
                "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "gpt-4o",
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": "The api is up."}}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            },
        )  # fmt: skip

    async def main() -> Any:
        history = InMemoryHistoryProvider()
        session = RaviSession("s1", history)
        for batch in ([CROSSED[0], CROSSED[1]], [CROSSED[2]], [CROSSED[3]], [CROSSED[4]]):  # four writers
            await session.add_items(batch)
        client = AsyncOpenAI(
            api_key="offline",
            base_url="http://chat.invalid/v1",
            http_client=httpx.AsyncClient(transport=httpx.MockTransport(answer)),
        )
        model = OpenAIChatCompletionsModel(model="gpt-4o", openai_client=client)
        agent = Agent(name="ops", instructions="Be brief.", model=model, model_settings=ModelSettings())
        config = ContextConfig(history, [TokenBudgetComposedStrategy([], 4_000)])
        run_config = RunConfig(
            call_model_input_filter=ravi_input_filter(config, session_id="s1"), tracing_disabled=True
        )
        result = await Runner.run(agent, "and now?", session=session, run_config=run_config)
        return result.final_output, await session.get_items()

    final, stored = asyncio.run(main())
    assert final == "The api is up."
    assert len(requests) == 1
    messages = requests[0]["messages"]
    assert not chat_refusals(messages), messages
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "assistant", "assistant", "user"]
    assert stored[:5] == CROSSED[:5]  # the session keeps the order the items were stored in
