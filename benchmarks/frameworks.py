"""Ravi inside each framework's real agent loop, beside the framework's own memory.

For each framework a session of 1,000 turns (a question, a tool call, its output, an answer) is held twice: in
the framework's default memory with no trimming, and in Ravi (in-memory store) with Ravi's window in front of
the model (a 16,000-token budget). The first 980 turns are loaded into each memory directly; the last 20 run
through the framework's agent loop with a scripted model, so every figure is taken on a 1,000-turn session.

Per turn it prints the time the framework and its memory take (the scripted model's own bookkeeping excluded),
the tokens sent to the model (two calls a turn, counted with gpt-4o's encoding), and an estimated total: that
time plus the time a hosted model takes to read those tokens, at ``PREFILL`` tokens per second (set
``RAVI_BENCH_PREFILL`` to change it). The target: Ravi's total per turn is lower than the framework's own memory
with no trimming.

* OpenAI Agents SDK: ``SQLiteSession`` (in memory) against ``RaviSession`` plus ``ravi_input_filter``.
* PydanticAI: ``message_history=result.all_messages()`` kept by the caller, without and with ``RaviHistory``
  (a worker that resumes from the store each turn, ``message_history=await ravi.messages()``, also pays for
  converting the stored session back).
* LangChain: ``create_agent`` with LangGraph's ``InMemorySaver`` checkpointer against ``RaviContextMiddleware``.
* AutoGen: ``AssistantAgent``'s default ``UnboundedChatCompletionContext`` against ``RaviChatCompletionContext``.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from _table import console, table, verdict

from ravi.agents.context import ContextConfig, InMemoryHistoryProvider, TokenBudgetComposedStrategy
from ravi.agents.tokens import counter_for_model

TURNS = 1_000
MEASURED = 20
BUDGET = 16_000
PREFILL = float(os.environ.get("RAVI_BENCH_PREFILL", "20000"))  # tokens a hosted model reads per second
PER_MESSAGE = 4  # tokens of framing each message costs

_counter = counter_for_model("gpt-4o")


@cache
def tokens(text: str) -> int:
    return _counter.count_text(text)


def question(t: int) -> str:
    return f"Turn {t}: is service s{t % 7} healthy after deploy {t}?"


def logs(service: str, t: int) -> str:
    return "\n".join(f"{service} {t}.{i} GET /v1/items 200 {(t * 31 + i * 17) % 900} ms" for i in range(4))


def answer(t: int) -> str:
    return f"Service s{t % 7} is healthy at turn {t}: every request answered 200, the slowest under a second."


def config() -> ContextConfig:
    return ContextConfig(
        InMemoryHistoryProvider(), [TokenBudgetComposedStrategy([], token_budget=BUDGET)], counter=_counter
    )


@dataclass
class Meter:
    """What the scripted model saw: tokens per call, and the time it spent counting them (not the framework's)."""

    sent: list[int] = field(default_factory=list)
    counting: float = 0.0

    def count(self, texts: list[str]) -> None:
        start = time.perf_counter()
        self.sent.append(sum(tokens(t) + PER_MESSAGE for t in texts))
        self.counting += time.perf_counter() - start


@dataclass
class Result:
    ms_per_turn: float
    tokens_per_turn: float

    @property
    def total_s(self) -> float:
        return self.ms_per_turn / 1000 + self.tokens_per_turn / PREFILL


async def measure(meter: Meter, turn: Callable[[int], Awaitable[None]]) -> Result:
    start = time.perf_counter()
    for t in range(TURNS - MEASURED, TURNS):
        await turn(t)
    elapsed = time.perf_counter() - start - meter.counting
    return Result(elapsed * 1000 / MEASURED, sum(meter.sent) / MEASURED)


# --- OpenAI Agents SDK ---------------------------------------------------------------------------------------


async def openai_agents(ravi: bool) -> Result:
    from agents import Agent, RunConfig, Runner, SQLiteSession, function_tool
    from agents.items import ModelResponse
    from agents.models.interface import Model
    from agents.usage import Usage
    from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

    from ravi.integrations.openai_agents import RaviSession, ravi_input_filter

    def text_of(item: Any) -> str:
        item = item if isinstance(item, dict) else item.model_dump()
        content = item.get("content")
        if isinstance(content, list):
            return " ".join(str(p.get("text", "")) for p in content)
        return str(content or item.get("output") or item.get("arguments") or "")

    def items(t: int) -> list[dict[str, Any]]:
        service = f"s{t % 7}"
        return [
            {"role": "user", "content": question(t)},
            {"type": "function_call", "call_id": f"c{t}", "name": "fetch_logs",
             "arguments": json.dumps({"service": service, "t": t})},
            {"type": "function_call_output", "call_id": f"c{t}", "output": logs(service, t)},
            {"type": "message", "role": "assistant", "id": f"m{t}", "status": "completed",
             "content": [{"type": "output_text", "text": answer(t), "annotations": []}]},
        ]  # fmt: skip

    meter = Meter()

    class Scripted(Model):
        def __init__(self) -> None:
            self.t = 0

        async def get_response(self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any) -> Any:
            meter.count([text_of(i) for i in input])
            if isinstance(input[-1], dict) and input[-1].get("type") == "function_call_output":
                text = ResponseOutputText(text=answer(self.t), type="output_text", annotations=[])
                out: Any = ResponseOutputMessage(id=f"m{self.t}", role="assistant", status="completed",
                                                 type="message", content=[text])  # fmt: skip
            else:
                args = json.dumps({"service": f"s{self.t % 7}", "t": self.t})
                out = ResponseFunctionToolCall(call_id=f"c{self.t}", name="fetch_logs", arguments=args,
                                               type="function_call")  # fmt: skip
            return ModelResponse(output=[out], usage=Usage(), response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError

    @function_tool
    def fetch_logs(service: str, t: int) -> str:
        """Fetch the recent logs of a service."""
        return logs(service, t)

    model = Scripted()
    agent = Agent(name="ops", tools=[fetch_logs], model=model)
    seed = [i for t in range(TURNS - MEASURED) for i in items(t)]
    if ravi:
        context = config()
        session: Any = RaviSession("bench", context.history)
        run_config = RunConfig(
            tracing_disabled=True, call_model_input_filter=ravi_input_filter(context, session_id="bench")
        )
    else:
        session = SQLiteSession("bench")
        run_config = RunConfig(tracing_disabled=True)
    await session.add_items(seed)

    async def turn(t: int) -> None:
        model.t = t
        await Runner.run(agent, question(t), session=session, run_config=run_config)

    return await measure(meter, turn)


# --- PydanticAI ----------------------------------------------------------------------------------------------


async def pydantic_ai(ravi: bool) -> Result:
    from pydantic_ai import Agent
    from pydantic_ai.messages import (
        ModelMessage,
        ModelRequest,
        ModelResponse,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )
    from pydantic_ai.models.function import FunctionModel

    from ravi.integrations.pydantic_ai import RaviHistory

    meter = Meter()
    current = [0]

    def text_of(message: ModelMessage) -> str:
        parts = []
        for part in message.parts:
            if isinstance(part, ToolCallPart):
                parts.append(part.args_as_json_str())
            elif isinstance(getattr(part, "content", None), str):
                parts.append(part.content)  # type: ignore[union-attr]
        return " ".join(parts)

    def model(messages: list[ModelMessage], info: Any) -> ModelResponse:
        meter.count([text_of(m) for m in messages])
        t = current[0]
        if isinstance(messages[-1].parts[-1], ToolReturnPart):
            return ModelResponse(parts=[TextPart(answer(t))])
        return ModelResponse(parts=[ToolCallPart("fetch_logs", {"service": f"s{t % 7}", "t": t}, tool_call_id=f"c{t}")])

    def fetch_logs(service: str, t: int) -> str:
        """Fetch the recent logs of a service."""
        return logs(service, t)

    def seed() -> list[ModelMessage]:
        out: list[ModelMessage] = []
        for t in range(TURNS - MEASURED):
            service, call = f"s{t % 7}", f"c{t}"
            out += [
                ModelRequest(parts=[UserPromptPart(question(t))]),
                ModelResponse(parts=[ToolCallPart("fetch_logs", {"service": service, "t": t}, tool_call_id=call)]),
                ModelRequest(parts=[ToolReturnPart("fetch_logs", logs(service, t), tool_call_id=call)]),
                ModelResponse(parts=[TextPart(answer(t))]),
            ]
        return out

    capabilities: list[Any] = []
    history = [seed()]
    if ravi:
        capability = RaviHistory(config(), session_id="bench")
        await capability.store(history[0])
        capabilities.append(capability)
    agent = Agent(FunctionModel(model), tools=[fetch_logs], capabilities=capabilities)

    async def turn(t: int) -> None:  # the conversation continues as PydanticAI's habit is: all_messages()
        current[0] = t
        result = await agent.run(question(t), message_history=history[0])
        history[0] = result.all_messages()

    return await measure(meter, turn)


# --- LangChain -----------------------------------------------------------------------------------------------


async def langchain(ravi: bool) -> Result:
    from langchain.agents import create_agent
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
    from langchain_core.tools import tool
    from langgraph.checkpoint.memory import InMemorySaver

    from ravi.integrations.langchain import RaviContextMiddleware
    from ravi.integrations.langchain.convert import to_ravi

    meter = Meter()
    current = [0]

    def text_of(m: BaseMessage) -> str:
        calls = " ".join(json.dumps(c["args"]) for c in getattr(m, "tool_calls", []) or [])
        return f"{m.content if isinstance(m.content, str) else json.dumps(m.content)} {calls}".strip()

    class Scripted(GenericFakeChatModel):
        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

        def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
            meter.count([text_of(m) for m in messages])
            return super()._generate(messages, *args, **kwargs)

    def script() -> Any:
        t = current[0]
        call = {"name": "fetch_logs", "args": {"service": f"s{t % 7}", "t": t}, "id": f"c{t}"}
        yield AIMessage("", tool_calls=[call])
        yield AIMessage(answer(t))

    @tool
    def fetch_logs(service: str, t: int) -> str:
        """Fetch the recent logs of a service."""
        return logs(service, t)

    def seed() -> list[BaseMessage]:
        out: list[BaseMessage] = []
        for t in range(TURNS - MEASURED):
            call = {"name": "fetch_logs", "args": {"service": f"s{t % 7}", "t": t}, "id": f"c{t}"}
            out += [
                HumanMessage(question(t), id=f"h{t}"),
                AIMessage("", tool_calls=[call], id=f"a{t}"),
                ToolMessage(logs(f"s{t % 7}", t), tool_call_id=f"c{t}", id=f"r{t}"),
                AIMessage(answer(t), id=f"f{t}"),
            ]
        return out

    thread = {"configurable": {"thread_id": "bench"}}
    if ravi:
        context = config()
        await context.history.append_many("agent", [to_ravi(m) for m in seed()], session_id="bench")
        model = Scripted(messages=iter(()))
        agent = create_agent(model, [fetch_logs], middleware=[RaviContextMiddleware(context)])
    else:
        model = Scripted(messages=iter(()))
        agent = create_agent(model, [fetch_logs], checkpointer=InMemorySaver())
        await agent.aupdate_state(thread, {"messages": seed()})

    async def turn(t: int) -> None:
        current[0] = t
        model.messages = script()
        await agent.ainvoke({"messages": [HumanMessage(question(t))]}, config=thread)

    return await measure(meter, turn)


# --- AutoGen -------------------------------------------------------------------------------------------------


async def autogen(ravi: bool) -> Result:
    from autogen_agentchat.agents import AssistantAgent
    from autogen_core import FunctionCall
    from autogen_core.model_context import UnboundedChatCompletionContext
    from autogen_core.models import (
        AssistantMessage,
        CreateResult,
        FunctionExecutionResult,
        FunctionExecutionResultMessage,
        LLMMessage,
        RequestUsage,
        UserMessage,
    )
    from autogen_ext.models.replay import ReplayChatCompletionClient

    from ravi.integrations.autogen import RaviChatCompletionContext

    meter = Meter()
    usage = RequestUsage(prompt_tokens=0, completion_tokens=0)

    def text_of(m: LLMMessage) -> str:
        content = m.content
        if isinstance(content, list):
            return " ".join(getattr(c, "arguments", None) or str(getattr(c, "content", c)) for c in content)
        return str(content)

    class Scripted(ReplayChatCompletionClient):
        """The replay client without its own per-call tokenising of the whole input."""

        script: list[CreateResult]

        async def create(self, messages: Any, *args: Any, **kwargs: Any) -> CreateResult:
            meter.count([text_of(m) for m in messages])
            return self.script.pop(0)

    def script(t: int) -> list[CreateResult]:
        call = FunctionCall(id=f"c{t}", name="fetch_logs", arguments=json.dumps({"service": f"s{t % 7}", "t": t}))
        return [
            CreateResult(finish_reason="function_calls", content=[call], usage=usage, cached=False),
            CreateResult(finish_reason="stop", content=answer(t), usage=usage, cached=False),
        ]

    def fetch_logs(service: str, t: int) -> str:
        """Fetch the recent logs of a service."""
        return logs(service, t)

    def seed() -> list[LLMMessage]:
        out: list[LLMMessage] = []
        for t in range(TURNS - MEASURED):
            args = json.dumps({"service": f"s{t % 7}", "t": t})
            result = FunctionExecutionResult(content=logs(f"s{t % 7}", t), call_id=f"c{t}", name="fetch_logs")
            out += [
                UserMessage(content=question(t), source="user"),
                AssistantMessage(content=[FunctionCall(id=f"c{t}", name="fetch_logs", arguments=args)], source="ops"),
                FunctionExecutionResultMessage(content=[result]),
                AssistantMessage(content=answer(t), source="ops"),
            ]
        return out

    context: Any = RaviChatCompletionContext(config(), session_id="bench") if ravi else UnboundedChatCompletionContext()
    for message in seed():
        await context.add_message(message)
    info = {"vision": False, "function_calling": True, "json_output": False, "family": "unknown",
            "structured_output": False}  # fmt: skip
    client = Scripted([], model_info=info)  # type: ignore[arg-type]
    agent = AssistantAgent("ops", model_client=client, tools=[fetch_logs], model_context=context,
                           reflect_on_tool_use=True)  # fmt: skip

    async def turn(t: int) -> None:
        client.script = script(t)
        await agent.run(task=question(t))

    return await measure(meter, turn)


FRAMEWORKS: dict[str, Callable[[bool], Awaitable[Result]]] = {
    "OpenAI Agents SDK, SQLiteSession": openai_agents,
    "PydanticAI, all_messages()": pydantic_ai,
    "LangChain, InMemorySaver": langchain,
    "AutoGen, unbounded context": autogen,
}


def main() -> None:
    rows = []
    for name, run in FRAMEWORKS.items():
        try:
            own, ravi = asyncio.run(run(False)), asyncio.run(run(True))
        except ImportError as error:
            console.print(f"{name}: skipped ({error})")
            continue
        rows.append([
            name, f"{own.ms_per_turn:.0f} ms", f"{ravi.ms_per_turn:.0f} ms",
            f"{ravi.ms_per_turn - own.ms_per_turn:+.0f} ms",
            f"{own.tokens_per_turn:,.0f}", f"{ravi.tokens_per_turn:,.0f}",
            f"{own.total_s:.2f} s", f"{ravi.total_s:.2f} s", verdict(ravi.total_s < own.total_s),
        ])  # fmt: skip
    table(
        f"Per turn of a {TURNS:,}-turn session (two model calls a turn): the framework's own memory, then Ravi",
        ["framework, own memory", "own", "Ravi", "added", "own tokens", "Ravi tokens", "own total", "Ravi total",
         "target"],
        rows,
        note=f"own/Ravi: time in the framework's loop and its memory. total: that time plus reading the tokens at "
        f"{PREFILL:,.0f} tokens/s (RAVI_BENCH_PREFILL).\nRavi: in-memory store, a {BUDGET:,}-token window. Own "
        "memory: no trimming. Target: Ravi's total per turn is lower.",
    )  # fmt: skip


if __name__ == "__main__":
    main()
