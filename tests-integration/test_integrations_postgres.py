"""Each framework's real agent loop on a real Postgres, two sessions at once: the stored transcript is what the
framework produced, item for item, and each session holds only its own."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from servers import Server

from ravi.agents.context import ContextConfig, TokenBudgetComposedStrategy, ToolResultCompactionStrategy
from ravi.capabilities.postgres import PostgresHistoryProvider


def pipeline() -> list[Any]:
    return [ToolResultCompactionStrategy(100), TokenBudgetComposedStrategy([], token_budget=4_000)]


def fetch_logs(service: str) -> str:
    """Fetch the recent logs of a service."""
    return f"{service}: " + "line of log output\n" * 200


def test_openai_agents_sessions_on_postgres(postgres_server: Server, pg_schema: str) -> None:
    from agents import Agent, RunConfig, Runner, function_tool
    from agents.items import ModelResponse
    from agents.models.interface import Model
    from agents.usage import Usage
    from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

    from ravi.integrations.openai_agents import RaviSession, ravi_input_filter

    class Scripted(Model):
        def __init__(self, service: str) -> None:
            call = ResponseFunctionToolCall(
                call_id=f"c-{service}", name="fetch_logs", arguments=json.dumps({"service": service}),
                type="function_call",
            )  # fmt: skip
            text = ResponseOutputText(text=f"{service} is fine", type="output_text", annotations=[])
            done = ResponseOutputMessage(id=f"m-{service}", role="assistant", status="completed", type="message",
                                         content=[text])  # fmt: skip
            self.script = [[call], [done]]

        async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
            await asyncio.sleep(0)  # let the other session's run interleave
            return ModelResponse(output=self.script.pop(0), usage=Usage(), response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError

    async def main() -> None:
        history = PostgresHistoryProvider(postgres_server.address, schema=pg_schema)
        config = ContextConfig(history, pipeline())

        async def one(service: str) -> list[Any]:
            agent = Agent(name="ops", tools=[function_tool(fetch_logs)], model=Scripted(service))
            session = RaviSession(f"s-{service}", history)
            run_config = RunConfig(call_model_input_filter=ravi_input_filter(config, session_id=session.session_id),
                                   tracing_disabled=True)  # fmt: skip
            result = await Runner.run(agent, f"is {service} fine?", session=session, run_config=run_config)
            assert result.final_output == f"{service} is fine"
            return await session.get_items()

        api, db = await asyncio.gather(one("api"), one("db"))
        assert [i.get("type", i.get("role")) for i in api] == ["user", "function_call", "function_call_output",
                                                               "message"]  # fmt: skip
        assert {i["call_id"] for i in api if "call_id" in i} == {"c-api"}  # each session holds only its own
        assert {i["call_id"] for i in db if "call_id" in i} == {"c-db"}
        fresh = RaviSession("s-api", PostgresHistoryProvider(postgres_server.address, schema=pg_schema))
        assert await fresh.get_items() == api  # another worker reads the same items
        await history.close()

    asyncio.run(main())


def test_pydantic_ai_runs_on_postgres(postgres_server: Server, pg_schema: str) -> None:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import FunctionModel

    from ravi.integrations.pydantic_ai import RaviHistory

    async def main() -> None:
        history = PostgresHistoryProvider(postgres_server.address, schema=pg_schema)

        async def one(service: str) -> None:
            def model(messages: list[Any], info: Any) -> ModelResponse:
                if len(messages) == 1:
                    return ModelResponse(parts=[ToolCallPart("fetch_logs", {"service": service}, tool_call_id="c1")])
                return ModelResponse(parts=[TextPart(f"{service} is fine")])

            ravi = RaviHistory(ContextConfig(history, pipeline()), session_id=f"s-{service}")
            result = await Agent(FunctionModel(model), tools=[fetch_logs], capabilities=[ravi]).run(f"{service}?")
            assert await ravi.messages() == result.all_messages()
            again = RaviHistory(
                ContextConfig(PostgresHistoryProvider(postgres_server.address, schema=pg_schema)),
                session_id=f"s-{service}",
            )
            assert await again.messages() == result.all_messages()  # a resumed session elsewhere

        await asyncio.gather(one("api"), one("db"))
        await history.close()

    asyncio.run(main())


def test_autogen_runs_on_postgres(postgres_server: Server, pg_schema: str) -> None:
    from autogen_agentchat.agents import AssistantAgent
    from autogen_core import FunctionCall
    from autogen_core.models import CreateResult, RequestUsage
    from autogen_ext.models.replay import ReplayChatCompletionClient

    from ravi.integrations.autogen import RaviChatCompletionContext

    usage = RequestUsage(prompt_tokens=0, completion_tokens=0)
    info = {"vision": False, "function_calling": True, "json_output": False, "family": "unknown",
            "structured_output": False}  # fmt: skip

    async def main() -> None:
        history = PostgresHistoryProvider(postgres_server.address, schema=pg_schema)

        async def one(service: str) -> None:
            call = FunctionCall(id=f"c-{service}", name="fetch_logs", arguments=json.dumps({"service": service}))
            client = ReplayChatCompletionClient(
                [CreateResult(finish_reason="function_calls", content=[call], usage=usage, cached=False),
                 CreateResult(finish_reason="stop", content=f"{service} is fine", usage=usage, cached=False)],
                model_info=info,  # type: ignore[arg-type]
            )  # fmt: skip
            context = RaviChatCompletionContext(ContextConfig(history, pipeline()), session_id=f"s-{service}")
            agent = AssistantAgent("ops", model_client=client, tools=[fetch_logs], model_context=context,
                                   reflect_on_tool_use=True)  # fmt: skip
            result = await agent.run(task=f"is {service} fine?")
            assert result.messages[-1].content == f"{service} is fine"
            stored = await history.get_messages("agent", session_id=f"s-{service}")
            assert [m.role for m in stored] == ["user", "assistant", "tool", "assistant"]
            assert all(service in m.model_dump_json() for m in stored if m.role == "tool")

        await asyncio.gather(one("api"), one("db"))
        await history.close()

    asyncio.run(main())


def test_langchain_agent_runs_on_postgres(postgres_server: Server, pg_schema: str) -> None:
    from langchain.agents import create_agent
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage, HumanMessage, message_to_dict

    from ravi.integrations.langchain import RaviContextMiddleware, to_langchain

    class Model(GenericFakeChatModel):
        def bind_tools(self, tools: Any, **kwargs: Any) -> Model:
            return self

    async def main() -> None:
        history = PostgresHistoryProvider(postgres_server.address, schema=pg_schema)

        async def one(service: str) -> None:
            model = Model(messages=iter([
                AIMessage("", tool_calls=[{"name": "fetch_logs", "args": {"service": service}, "id": f"c-{service}"}]),
                AIMessage(f"{service} is fine"),
            ]))  # fmt: skip
            middleware = RaviContextMiddleware(ContextConfig(history, pipeline()), session_id=f"s-{service}")
            agent = create_agent(model, [fetch_logs], middleware=[middleware])
            result = await agent.ainvoke({"messages": [HumanMessage(f"is {service} fine?")]})
            stored = await history.get_messages("agent", session_id=f"s-{service}")
            assert [message_to_dict(to_langchain(m)) for m in stored] == [
                message_to_dict(m) for m in result["messages"]
            ]

        await asyncio.gather(one("api"), one("db"))
        await history.close()

    asyncio.run(main())


RESUME = '''
import asyncio, json, sys
from agents import Agent, RunConfig, Runner
from agents.items import ModelResponse
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import ResponseOutputMessage, ResponseOutputText

from ravi.agents.context import ContextConfig, TokenBudgetComposedStrategy
from ravi.capabilities.postgres import PostgresHistoryProvider
from ravi.integrations.openai_agents import RaviSession, ravi_input_filter

dsn, schema, prompt = sys.argv[1:4]


class Echo(Model):
    """Answers with the user prompts it was sent, so the caller sees what the model saw."""

    async def get_response(self, system_instructions, input, *args, **kwargs):
        seen = [i["content"] for i in input if isinstance(i, dict) and i.get("role") == "user"]
        text = ResponseOutputText(text=json.dumps(seen), type="output_text", annotations=[])
        done = ResponseOutputMessage(id="m", role="assistant", status="completed", type="message", content=[text])
        return ModelResponse(output=[done], usage=Usage(), response_id=None)

    def stream_response(self, *args, **kwargs):
        raise NotImplementedError


async def main():
    history = PostgresHistoryProvider(dsn, schema=schema)
    config = ContextConfig(history, [TokenBudgetComposedStrategy([], token_budget=4_000)])
    session = RaviSession("resumed", history)
    run_config = RunConfig(call_model_input_filter=ravi_input_filter(config, session_id="resumed"),
                           tracing_disabled=True)
    result = await Runner.run(Agent(name="a", model=Echo()), prompt, session=session, run_config=run_config)
    print(json.dumps({"seen": json.loads(result.final_output), "items": await session.get_items()}))
    await history.aclose()


asyncio.run(main())
'''


def run_script(script: str, *args: str) -> dict[str, Any]:
    """Run ``script`` in a fresh Python process; what it printed last, as JSON."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", script, *args], capture_output=True, text=True, check=False, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2_000:]
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def test_a_session_resumes_in_a_new_process(postgres_server: Server, pg_schema: str) -> None:
    """A resumed session in a new process: A second process, with nothing in memory, continues the
    session from Postgres: its model sees the first process's turn, and the stored items are the first run's
    followed by the second's."""
    first = run_script(RESUME, postgres_server.address, pg_schema, "first question")
    second = run_script(RESUME, postgres_server.address, pg_schema, "second question")
    assert first["seen"] == ["first question"]
    assert second["seen"] == ["first question", "second question"]  # the new process read the stored turn
    assert second["items"][: len(first["items"])] == first["items"]
    assert len(second["items"]) == len(first["items"]) * 2


# Each script runs one turn of a framework's agent in a fresh process on a Postgres session named "resumed",
# with a model that answers with the user prompts it was sent, and prints what the model saw and the stored roles.
RESUME_PRELUDE = """
import asyncio, json, sys
from ravi.agents.context import ContextConfig, TokenBudgetComposedStrategy
from ravi.capabilities.postgres import PostgresHistoryProvider

dsn, schema, prompt = sys.argv[1:4]
history = PostgresHistoryProvider(dsn, schema=schema)
config = ContextConfig(history, [TokenBudgetComposedStrategy([], token_budget=4_000)])


async def report(seen):
    stored = await history.get_messages("agent", session_id="resumed")
    print(json.dumps({"seen": seen, "stored": [m.role for m in stored]}))
    await history.aclose()
"""

RESUME_IN = {
    "pydantic-ai": """
from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, TextPart, UserPromptPart
from pydantic_ai.models.function import FunctionModel
from ravi.integrations.pydantic_ai import RaviHistory


def echo(messages, info):
    seen = [p.content for m in messages for p in m.parts if isinstance(p, UserPromptPart)]
    return ModelResponse(parts=[TextPart(json.dumps(seen))])


async def main():
    ravi = RaviHistory(config, session_id="resumed")
    result = await Agent(FunctionModel(echo), capabilities=[ravi]).run(prompt, message_history=await ravi.messages())
    await report(json.loads(result.output))

asyncio.run(main())
""",
    "langchain": """
from langchain.agents import create_agent
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from ravi.integrations.langchain import RaviContextMiddleware


class Echo(BaseChatModel):
    @property
    def _llm_type(self):
        return "echo"

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        seen = [m.content for m in messages if m.type == "human"]
        return ChatResult(generations=[ChatGeneration(message=AIMessage(json.dumps(seen)))])

    def bind_tools(self, tools, **kwargs):
        return self


async def main():
    agent = create_agent(Echo(), [], middleware=[RaviContextMiddleware(config, session_id="resumed")])
    result = await agent.ainvoke({"messages": [HumanMessage(prompt)]})
    await report(json.loads(result["messages"][-1].content))

asyncio.run(main())
""",
    "autogen": """
from autogen_agentchat.agents import AssistantAgent
from autogen_core.models import CreateResult, RequestUsage, UserMessage
from autogen_ext.models.replay import ReplayChatCompletionClient
from ravi.integrations.autogen import RaviChatCompletionContext


class Echo(ReplayChatCompletionClient):
    async def create(self, messages, *args, **kwargs):
        seen = [m.content for m in messages if isinstance(m, UserMessage)]
        usage = RequestUsage(prompt_tokens=0, completion_tokens=0)
        return CreateResult(finish_reason="stop", content=json.dumps(seen), usage=usage, cached=False)


async def main():
    info = {"vision": False, "function_calling": True, "json_output": False, "family": "unknown",
            "structured_output": False}
    context = RaviChatCompletionContext(config, session_id="resumed")
    agent = AssistantAgent("a", model_client=Echo([], model_info=info), model_context=context)
    result = await agent.run(task=prompt)
    await report(json.loads(result.messages[-1].content))

asyncio.run(main())
""",
}


@pytest.mark.parametrize("framework", sorted(RESUME_IN))
def test_each_framework_resumes_a_session_in_a_new_process(
    framework: str, postgres_server: Server, pg_schema: str
) -> None:
    """For PydanticAI, LangChain and AutoGen as for the SDK above: a second process with nothing in
    memory continues the Postgres session, its model sees the first process's turn, and the store holds both turns
    once each."""
    script = RESUME_PRELUDE + RESUME_IN[framework]
    first = run_script(script, postgres_server.address, pg_schema, "first question")
    second = run_script(script, postgres_server.address, pg_schema, "second question")
    assert first == {"seen": ["first question"], "stored": ["user", "assistant"]}
    assert second == {"seen": ["first question", "second question"], "stored": ["user", "assistant"] * 2}
