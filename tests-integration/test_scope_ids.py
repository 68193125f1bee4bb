"""Sessions and agents whose ids are prefixes of one another or hold the characters stores use as separators
and patterns (Redis keys, Postgres names, globs and LIKE patterns), all sharing message ids: on Postgres, Redis
and in memory, each session's windows, recall and summaries show its own messages only, and a clear or a forget
of one leaves every other as it was."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from servers import Server, closing

from ravi.agents.context import (
    AgentContext,
    ContextConfig,
    InMemoryHistoryProvider,
    RelevantRecallStrategy,
)
from ravi.agents.context.functional import CompactionPolicy, PolicyCompactionStrategy
from ravi.capabilities.postgres import PostgresHistoryProvider
from ravi.capabilities.redis import RedisHistoryProvider
from ravi.kernel.messages import ChatMessage

IDS = ["s", "s:", "s:1", "s\x1f1", "s%", "s_", "s*", "s?", "s[1]", "s{1}", "s|1", "s%3A1", "s 1", "S"]
"""Session ids that are prefixes of one another, or hold a separator, a glob or LIKE character, an escape."""
AGENTS = ["a", "a|s", "a:", "a*", "a%", "a{", "a_"]
"""Agent ids of the same kinds."""


def secret(agent: str, session: str) -> str:
    return f"CODE-{AGENTS.index(agent)}-{IDS.index(session)}-END"


def transcript(agent: str, session: str) -> list[ChatMessage]:
    """The same message ids in every session; the first turn holds the session's own code."""
    first = ChatMessage.user(f"my access code is {secret(agent, session)} keep it safe", id="m-0")
    rest = [ChatMessage.user(f"filler turn {i} about the weather, nothing more", id=f"m-{i}") for i in range(1, 30)]
    return [first, *rest, ChatMessage.user("what is my access code?", id="m-30")]


class EchoLLM:
    """Summarises by quoting the transcript, so a summary holds the codes of the turns it covers."""

    async def complete(self, messages: Sequence[ChatMessage], **_: Any) -> str:
        return "summary: " + messages[-1].text[:3_000]


def codes(window: Sequence[ChatMessage]) -> set[str]:
    """Every session code a window shows."""
    text = " ".join(m.text for m in window)
    return {secret(a, s) for a in AGENTS for s in IDS if secret(a, s) in text}


async def stays_apart(history: Any) -> None:
    recall = ContextConfig(history, [RelevantRecallStrategy(token_budget=300, recall_share=0.5)])
    summarise = ContextConfig(history, [PolicyCompactionStrategy(400, CompactionPolicy(keep_recent=4), EchoLLM())])
    pairs = [(a, s) for a in AGENTS[:2] for s in IDS] + [(a, "s") for a in AGENTS[2:]]
    for agent, session in pairs:
        await AgentContext(recall, agent_id=agent).add_messages(session, transcript(agent, session))

    async def shown(agent: str, session: str) -> set[str]:
        found = codes(await AgentContext(recall, agent_id=agent).get_prompt_window(session))
        found |= codes(await AgentContext(summarise, agent_id=agent).get_prompt_window(session))
        return found

    for agent, session in pairs:
        assert await shown(agent, session) == {secret(agent, session)}, (agent, session)

    # a clear of one session and a forget of one agent leave every other session as it was
    await AgentContext(recall, agent_id="a").clear("s:")
    await history.forget("a|s")
    gone = {("a", "s:")} | {("a|s", s) for s in IDS}
    for agent, session in pairs:
        if (agent, session) in gone:
            assert await history.get_messages(agent, session_id=session) == []
            assert await shown(agent, session) == set()
        else:
            assert await shown(agent, session) == {secret(agent, session)}, (agent, session)
    assert await history.list_sessions("a", limit=100) == sorted(set(IDS) - {"s:"})
    assert await history.list_sessions("a:", limit=100) == ["s"]
    assert await history.list_sessions("a|s", limit=100) == []


async def test_in_memory_sessions_with_hostile_ids_stay_apart() -> None:
    await stays_apart(InMemoryHistoryProvider())


async def test_postgres_sessions_with_hostile_ids_stay_apart(postgres_server: Server, pg_schema: str) -> None:
    async for history in closing(PostgresHistoryProvider(postgres_server.address, schema=pg_schema)):
        await stays_apart(history)


async def test_redis_sessions_with_hostile_ids_stay_apart(redis_server: Server, redis_prefix: str) -> None:
    async for history in closing(RedisHistoryProvider(redis_server.address, prefix=redis_prefix)):
        await stays_apart(history)
