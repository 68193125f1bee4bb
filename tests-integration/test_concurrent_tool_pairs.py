"""Writers of one session at once, in one event loop, on real Redis and Postgres: several tasks store tool calls
and their results while the others store theirs (the servers' awaits interleave them, so results land apart from
their calls), and windows are assembled meanwhile, through ``AgentContext`` and through a framework's real agent
loop. No window holds a tool result whose call is not before it, and every window keeps its budget."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest
from servers import Server
from tool_pairs import filler, orphans, refusals

from ravi.agents.context import (
    AgentContext,
    ContextConfig,
    RelevantRecallStrategy,
    TokenBudgetComposedStrategy,
)
from ravi.agents.tokens import DEFAULT_COUNTER
from ravi.kernel.messages import ChatMessage, ToolCallBlock

WRITERS = 4
ROUNDS = 12
READS = 12
BUDGET = 600


def apart(history: list[ChatMessage]) -> int:
    """How many tool results in ``history`` do not come right after their call (only results between)."""
    found = 0
    for i, m in enumerate(history):
        result = m.tool_result
        if m.role != "tool" or result is None:
            continue
        j = i - 1
        while j >= 0 and history[j].role == "tool":
            j -= 1
        found += not (j >= 0 and any(c.id == result.tool_call_id for c in history[j].tool_calls))
    return found


def stores(request: pytest.FixtureRequest, backend: str) -> Callable[[], Any]:
    """A function making a new store object of ``backend`` on the test's server (each writer gets its own)."""
    if backend == "redis":
        from ravi.capabilities.redis import RedisHistoryProvider

        server: Server = request.getfixturevalue("redis_server")
        prefix: str = request.getfixturevalue("redis_prefix")
        return lambda: RedisHistoryProvider(server.address, prefix=prefix)
    from ravi.capabilities.postgres import PostgresHistoryProvider

    server = request.getfixturevalue("postgres_server")
    schema: str = request.getfixturevalue("pg_schema")
    return lambda: PostgresHistoryProvider(server.address, schema=schema)


async def close(store: Any) -> None:
    await (getattr(store, "aclose", None) or store.close)()


@pytest.mark.parametrize("backend", ["redis", "postgres"])
def test_windows_assembled_while_writers_store_calls_and_results_hold_no_orphan(
    request: pytest.FixtureRequest, backend: str
) -> None:
    """``WRITERS`` tasks each store a user turn, a tool call, then its result (and now and then a reply), each
    message by its own await, while windows of the session are assembled by readers of their own and by readers
    sharing one engine, under a plain budget and under relevant recall (both preferences)."""
    make = stores(request, backend)

    async def main() -> None:
        writers = [make() for _ in range(WRITERS)]
        reading = make()
        contexts = {
            "budget": AgentContext(ContextConfig(reading, [TokenBudgetComposedStrategy([], token_budget=BUDGET)])),
            "small": AgentContext(ContextConfig(reading, [TokenBudgetComposedStrategy([], token_budget=BUDGET // 3)])),
            "recall": AgentContext(ContextConfig(reading, [RelevantRecallStrategy(BUDGET, meaning=None)])),
            "cache": AgentContext(
                ContextConfig(reading, [RelevantRecallStrategy(BUDGET, meaning=None, prefer="cache")])
            ),
        }

        async def write(k: int) -> None:
            store = writers[k]
            for r in range(ROUNDS):
                cid = f"w{k}-{r}"
                await store.append("agent", ChatMessage.user(f"writer {k} asks about deploy {r}"), session_id="s")
                call = ToolCallBlock(id=cid, name="lookup", arguments={"q": f"deploy {r}"})
                await store.append(
                    "agent", ChatMessage.assistant(None, tool_calls=[call], id=f"{cid}-a"), session_id="s"
                )
                output = f"deploy {r} log of writer {k} " * (3 + 20 * (r % 3))
                await store.append("agent", ChatMessage.tool(cid, output, id=f"{cid}-r"), session_id="s")
                if r % 4 == 3:
                    await store.append("agent", ChatMessage.assistant(f"writer {k}: deploy {r} done"), session_id="s")

        seen: list[tuple[str, list[ChatMessage]]] = []

        async def read(name: str, context: AgentContext) -> None:
            for _ in range(READS):
                seen.append((name, await context.get_prompt_window("s")))

        jobs = [write(k) for k in range(WRITERS)]
        jobs += [read(name, context) for name, context in contexts.items()]
        jobs += [read(f"{name} again", context) for name, context in contexts.items()]  # one engine, two readers
        await asyncio.gather(*jobs)
        for name, context in contexts.items():  # once the writers are done
            seen.append((name, await context.get_prompt_window("s")))

        stored = await reading.get_messages("agent", session_id="s")
        assert len(stored) == WRITERS * ROUNDS * 3 + WRITERS * (ROUNDS // 4)
        assert apart(stored) > 0, "the writers' awaits did not interleave: no result was stored apart"
        assert len(seen) == 2 * READS * len(contexts) + len(contexts)
        for name, window in seen:
            assert not orphans(window), (name, orphans(window))
            limit = BUDGET // 3 if name.startswith("small") else BUDGET
            assert sum(DEFAULT_COUNTER.count_message(m) for m in window) <= limit, name
            where = {m.id: i for i, m in enumerate(stored)}
            ids = [m.id for m in window]
            assert len(ids) == len(set(ids)), (name, "a message twice")
            order = [where[m.id] for m in window if m.role != "tool"]  # only results move, up to their calls
            assert order == sorted(order), (name, "not in conversation order")
        for store in [*writers, reading]:
            await close(store)

    asyncio.run(main())


def refused(items: list[Any]) -> list[str]:
    """What the Responses API refuses in an input: an output whose call is not before it, a second output for one
    call, a call without its output."""
    found: list[str] = []
    called: set[str] = set()
    answered: set[str] = set()
    for item in items:
        kind = item.get("type") if isinstance(item, dict) else getattr(item, "type", None)
        call_id = item.get("call_id") if isinstance(item, dict) else getattr(item, "call_id", None)
        if kind == "function_call":
            called.add(call_id)
        elif kind == "function_call_output":
            if call_id not in called:
                found.append(f"an output without its call before it: {call_id}")
            if call_id in answered:
                found.append(f"a second output: {call_id}")
            answered.add(call_id)
    return found + [f"a call without its output: {c}" for c in called - answered]


@pytest.mark.parametrize("backend", ["redis", "postgres"])
def test_openai_agents_runs_sharing_one_session_send_no_orphaned_output(
    request: pytest.FixtureRequest, backend: str
) -> None:
    """Several runs of the OpenAI Agents SDK's real loop at once on one ``RaviSession``, each calling tools, while
    another worker's ``RaviSession`` of the session stores a function call, a user turn, then the call's output,
    each by its own ``add_items``; later runs read them back. (The SDK stores a turn's call and output together, so
    its own runs never part them.) One of that worker's tools crashes (its output is never stored) and one is
    retried (two outputs for one call). Every input the model gets, through ``ravi_input_filter``'s window, has
    each function call followed by one output (the SDK itself drops, from what it gives the filter, a call without
    output and a second output), and the engine's windows of the stored session, which every other face reads, are
    ones a provider takes: under the budget, and whole."""
    from agents import Agent, RunConfig, Runner, function_tool
    from agents.items import ModelResponse
    from agents.models.interface import Model
    from agents.usage import Usage
    from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

    from ravi.integrations.openai_agents import RaviSession, ravi_input_filter

    make = stores(request, backend)
    inputs: list[list[Any]] = []

    def fetch_logs(service: str) -> str:
        """Fetch the recent logs of a service."""
        return f"{service}: " + "line of log output\n" * 8

    class Scripted(Model):
        def __init__(self, run: str) -> None:
            calls = [
                ResponseFunctionToolCall(
                    call_id=f"c-{run}-{k}",
                    name="fetch_logs",
                    type="function_call",
                    arguments=json.dumps({"service": f"{run}-{k}"}),
                )
                for k in range(2)
            ]
            text = ResponseOutputText(text=f"{run} is fine", type="output_text", annotations=[])
            done = ResponseOutputMessage(id=f"m-{run}", role="assistant", status="completed", type="message",
                                         content=[text])  # fmt: skip
            self.script = [[calls[0]], [calls[1]], [done]]

        async def get_response(self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any) -> Any:
            inputs.append(list(input) if isinstance(input, list) else [])
            return ModelResponse(output=self.script.pop(0), usage=Usage(), response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError

    async def main() -> None:
        history = make()
        config = ContextConfig(history, [TokenBudgetComposedStrategy([], token_budget=BUDGET)])
        session = RaviSession("shared", history)

        window_of_input = ravi_input_filter(config, session_id="shared")
        given: list[Any] = []  # what the SDK gave the filter: the session's items and the run's

        async def input_filter(data: Any) -> Any:
            given.extend(data.model_data.input)
            return await window_of_input(data)

        async def one(run: str) -> None:
            agent = Agent(name="ops", tools=[function_tool(fetch_logs)], model=Scripted(run))
            run_config = RunConfig(call_model_input_filter=input_filter, tracing_disabled=True)
            result = await Runner.run(agent, f"is {run} fine?", session=session, run_config=run_config)
            assert result.final_output == f"{run} is fine"

        other = make()
        worker = RaviSession("shared", other)  # another worker of the session, storing each item as it comes

        async def elsewhere(wave: int) -> None:
            for r in range(4):
                cid = f"x{wave}-{r}"
                args = json.dumps({"service": cid})
                await worker.add_items(
                    [{"type": "function_call", "call_id": cid, "name": "fetch_logs", "arguments": args}]
                )
                await worker.add_items([{"role": "user", "content": f"and {cid}? " + "w " * 80}])
                if r == 1:
                    continue  # the tool crashed: its output is never stored
                output = f"{cid}: " + "log line " * 60
                await worker.add_items([{"type": "function_call_output", "call_id": cid, "output": output}])
                if r == 2:  # retried: a second output for the same call
                    again = {"type": "function_call_output", "call_id": cid, "output": f"{cid}: retried, fine"}
                    await worker.add_items([again])

        for wave in range(3):
            await asyncio.gather(elsewhere(wave), *(one(f"r{wave}-{k}") for k in range(4)))
        assert len(inputs) == 3 * 4 * 3
        stored = await history.get_messages("agent", session_id="shared")
        assert apart(stored) >= 12
        assert any(str(dict(i).get("call_id", "")).startswith("x") for i in given), "no other worker's call was read"
        for sent in inputs:
            assert not refused(sent), refused(sent)
        window = await AgentContext(config).get_prompt_window("shared")
        assert not refusals(window)
        whole = await AgentContext(ContextConfig(history, [])).get_prompt_window("shared")  # the crash and the retry
        assert {"x0-1", "x0-2"} <= {c.id for m in stored for c in m.tool_calls}
        assert not refusals(whole), refusals(whole)
        assert sum(DEFAULT_COUNTER.count_message(m) for m in window) <= BUDGET
        await close(history)
        await close(other)

    asyncio.run(main())


@pytest.mark.parametrize("prefer", ["relevance", "cache"])
@pytest.mark.parametrize("backend", ["redis", "postgres"])
def test_recall_from_the_store_never_brings_back_a_result_apart_from_its_call(
    request: pytest.FixtureRequest, backend: str, prefer: str
) -> None:
    """Old turns where two writers' calls crossed (call B, call A, B's result, A's: A's unit holds B's result) and
    where a user spoke while a tool ran (the result a unit of its own), far behind the turns a window reads:
    recall, ranked by the store's own search, brings neither result back without its call."""
    make = stores(request, backend)

    async def main() -> None:
        store = make()
        old = [
            ChatMessage.user("start the zebra migration", id="u0"),
            ChatMessage.assistant(tool_calls=[ToolCallBlock(id="cB", name="migrate", arguments={})], id="aB"),
            ChatMessage.assistant(tool_calls=[ToolCallBlock(id="cA", name="count", arguments={})], id="aA"),
            ChatMessage.tool("cB", "zebra migration finished: 41 zebra rows moved", id="tB"),
            ChatMessage.tool("cA", "zebra count 41", id="tA"),
            ChatMessage.assistant(tool_calls=[ToolCallBlock(id="cC", name="verify", arguments={})], id="aC"),
            ChatMessage.user("meanwhile: lunch?", id="xC"),
            ChatMessage.tool("cC", "zebra migration verified", id="tC"),
        ]
        ask = ChatMessage.user("how did the zebra migration go?", id="ask")
        await store.append_many("agent", [*old, *filler(), ask], session_id="s")
        strategy = RelevantRecallStrategy(600, meaning=None, spread=0.0, prefer=prefer)  # type: ignore[arg-type]
        window = await AgentContext(ContextConfig(store, [strategy])).get_prompt_window("s")
        assert "u0" in [m.id for m in window]  # recall reached the oldest turns
        assert not orphans(window), [m.id for m in window]
        await close(store)

    asyncio.run(main())


@pytest.mark.parametrize("backend", ["redis", "postgres"])
def test_windows_while_tools_run_crash_and_retry_send_each_call_with_one_result(
    request: pytest.FixtureRequest, backend: str
) -> None:
    """Writers of one session at once, each message by its own await: now and then a tool crashes (its call
    stored, its result never) or is retried (two results for one call, the second right after the first or after
    another turn), and one writer's tool is still running while windows are asked for (its call stored, its
    result not yet). Every window, under a budget, recall (both preferences) or no strategy at all, is one a
    provider takes: each call followed by one result for each of its ids, no second result. The running call is
    left out (its text kept) until its result is stored, then sent with it; the store keeps every call."""
    make = stores(request, backend)

    async def main() -> None:
        writers = [make() for _ in range(WRITERS)]
        reading = make()
        contexts = {
            "budget": AgentContext(ContextConfig(reading, [TokenBudgetComposedStrategy([], token_budget=BUDGET)])),
            "recall": AgentContext(ContextConfig(reading, [RelevantRecallStrategy(BUDGET, meaning=None)])),
            "cache": AgentContext(
                ContextConfig(reading, [RelevantRecallStrategy(BUDGET, meaning=None, prefer="cache")])
            ),
            "whole": AgentContext(ContextConfig(reading, [])),
        }
        crashed, retried = 0, 0

        async def write(k: int) -> None:
            nonlocal crashed, retried
            store = writers[k]
            for r in range(ROUNDS):
                cid = f"w{k}-{r}"
                await store.append("agent", ChatMessage.user(f"writer {k} asks about deploy {r}"), session_id="s")
                call = ToolCallBlock(id=cid, name="lookup", arguments={"q": f"deploy {r}"})
                said = f"looking up deploy {r}" if r % 2 else None
                await store.append(
                    "agent", ChatMessage.assistant(said, tool_calls=[call], id=f"{cid}-a"), session_id="s"
                )
                shape = (k + r) % 4
                if shape == 1:  # the tool crashed: no result is ever stored
                    crashed += 1
                    continue
                output = f"deploy {r} log of writer {k} " * (3 + 10 * (r % 3))
                await store.append("agent", ChatMessage.tool(cid, output, id=f"{cid}-r"), session_id="s")
                if shape in (2, 3):  # retried: a second result, right after the first or after another turn
                    retried += 1
                    if shape == 3:
                        await store.append("agent", ChatMessage.user(f"writer {k}: still there?"), session_id="s")
                    again = ChatMessage.tool(cid, f"retried: deploy {r} fine", id=f"{cid}-r2")
                    await store.append("agent", again, session_id="s")

        seen: list[tuple[str, list[ChatMessage]]] = []

        async def read(name: str, context: AgentContext) -> None:
            for _ in range(READS):
                seen.append((name, await context.get_prompt_window("s")))

        call_stored, looked = asyncio.Event(), asyncio.Event()

        async def slow_tool() -> None:  # a writer whose tool runs while the others read
            store = make()
            await store.append("agent", ChatMessage.user("is the api up?", id="run-u"), session_id="s")
            call = ToolCallBlock(id="run", name="probe", arguments={"service": "api"})
            await store.append(
                "agent", ChatMessage.assistant("probing the api", tool_calls=[call], id="run-a"), session_id="s"
            )
            call_stored.set()
            await looked.wait()
            await store.append("agent", ChatMessage.tool("run", "api is up", id="run-r"), session_id="s")
            await close(store)

        async def while_it_runs() -> None:
            await call_stored.wait()
            window = await contexts["whole"].get_prompt_window("s")
            seen.append(("whole, tool running", window))
            sent = {m.id: m for m in window}
            assert "run-a" in sent and sent["run-a"].text == "probing the api" and not sent["run-a"].tool_calls
            looked.set()

        jobs = [write(k) for k in range(WRITERS)] + [slow_tool(), while_it_runs()]
        jobs += [read(name, context) for name, context in contexts.items()]
        await asyncio.gather(*jobs)
        for name, context in contexts.items():  # once the writers are done
            seen.append((name, await context.get_prompt_window("s")))

        stored = await reading.get_messages("agent", session_id="s")
        assert crashed and retried and apart(stored) > 0
        assert {m.id for m in stored if m.tool_calls} == {
            f"w{k}-{r}-a" for k in range(WRITERS) for r in range(ROUNDS)
        } | {"run-a"}
        last = {m.id: m for m in seen[-1][1]}  # the whole session, no strategy: the running call with its result
        assert last["run-a"].tool_calls and "run-r" in last
        for name, window in seen:
            assert not refusals(window), (name, refusals(window))
            if name in ("budget", "recall", "cache"):
                assert sum(DEFAULT_COUNTER.count_message(m) for m in window) <= BUDGET, name
            ids = [m.id for m in window]
            assert len(ids) == len(set(ids)), (name, "a message twice")
        for store in [*writers, reading]:
            await close(store)

    asyncio.run(main())
