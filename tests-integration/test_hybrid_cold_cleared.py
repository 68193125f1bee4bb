"""A hybrid history (Redis in front of Postgres) whose cold tier is changed directly, through a provider of its
own (``ravi forget`` and ``ravi import`` on the Postgres store, another process's code): cleared, then given the
same ids again, with other messages or the same ones. The hot tier is a copy of the cold tier, kept for the cold
tier's generation: no read through any hybrid provider, and no window, serves a message the change removed."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from servers import Server
from session_editors import REQUEST as ASKED
from session_editors import turns_of

from ravi.agents.context import (
    AgentContext,
    ContextConfig,
    HybridHistoryProvider,
    RelevantRecallStrategy,
    TokenBudgetComposedStrategy,
)
from ravi.capabilities.postgres import PostgresHistoryProvider
from ravi.capabilities.redis import RedisHistoryProvider
from ravi.kernel.messages import ChatMessage

REQUEST = ChatMessage.user(ASKED, id="request")
"""The newest message, the same in every conversation of these tests."""


def conversation(tag: str) -> list[ChatMessage]:
    return turns_of(tag, turns=40)


@pytest_asyncio.fixture
async def tiers(redis_server: Server, redis_prefix: str, postgres_server: Server, pg_schema: str) -> AsyncIterator[Any]:
    opened: list[Any] = []

    def hot() -> RedisHistoryProvider:
        opened.append(RedisHistoryProvider(redis_server.address, prefix=redis_prefix))
        return opened[-1]

    def cold() -> PostgresHistoryProvider:
        opened.append(PostgresHistoryProvider(postgres_server.address, schema=pg_schema))
        return opened[-1]

    try:
        yield hot, cold
    finally:
        for store in opened:
            await store.close()


def _old(window: list[ChatMessage]) -> list[str]:
    return [m.id for m in window if "old question" in m.text or "old answer" in m.text]


@pytest.mark.parametrize("change", ["clear", "forget"])
async def test_a_cold_tier_cleared_directly_and_given_other_messages_under_the_same_ids_serves_none_of_the_old(
    tiers: Any, change: str
) -> None:
    """Before the fix, the hot tier, holding as many messages as the cold tier and the same newest one, was served
    to every read: 80 removed messages from ``get_messages`` and ``read_window``, 20 to 26 in a window, and the
    next write through the hybrid provider kept them (its copy checks only the message before what it copies)."""
    make_hot, make_cold = tiers
    hybrid = HybridHistoryProvider(make_hot(), make_cold())
    elsewhere = HybridHistoryProvider(make_hot(), make_cold())  # another process's provider over the same tiers
    direct = make_cold()
    recall = AgentContext(ContextConfig(hybrid, [RelevantRecallStrategy(1_500, meaning=None)]), agent_id="a")
    budget = AgentContext(ContextConfig(hybrid, [TokenBudgetComposedStrategy([], 1_500)]), agent_id="a")
    await hybrid.append_many("a", [*conversation("old"), REQUEST], session_id="s")
    assert _old(await recall.get_prompt_window("s")) and _old(await budget.get_prompt_window("s"))
    assert len(await hybrid.hot.get_messages("a", session_id="s")) == 82  # the hot tier serves the session

    if change == "clear":
        await direct.clear("a", session_id="s")
    else:
        await direct.forget("a", session_id="s")
    await direct.append_many("a", [*conversation("new"), REQUEST], session_id="s")  # the newest message alike

    async def check() -> None:
        stored = await direct.get_messages("a", session_id="s")
        for provider in (hybrid, elsewhere):
            assert await provider.get_messages("a", session_id="s") == stored
            assert (await provider.read_window("a", session_id="s", tokens=10**6)).messages == stored
            part = (await provider.read_window("a", session_id="s", tokens=2_000)).messages
            assert part and all(m in stored for m in part)
        for context in (recall, budget):
            window = await context.get_prompt_window("s")
            assert not _old(window), f"the window holds removed messages: {_old(window)}"

    await check()
    await hybrid.append("a", ChatMessage.user("and the kettle?", id="later"), session_id="s")
    await check()
    await elsewhere.append("a", ChatMessage.user("and the violin?", id="latest"), session_id="s")
    await check()
    hot = await hybrid.hot.get_messages("a", session_id="s")
    assert not _old(hot), "the hot tier still holds the old generation"


async def test_a_cold_tier_given_the_same_messages_again_serves_them(tiers: Any) -> None:
    """An export imported again after a clear (the same messages under the same ids): reads are the cold tier's,
    and the hot tier serves the session again after the next write."""
    make_hot, make_cold = tiers
    hybrid = HybridHistoryProvider(make_hot(), make_cold())
    direct = make_cold()
    messages = [*conversation("same"), REQUEST]
    await hybrid.append_many("a", messages, session_id="s")
    await direct.clear("a", session_id="s")
    await direct.append_many("a", messages, session_id="s")
    assert await hybrid.get_messages("a", session_id="s") == messages
    later = ChatMessage.user("and the kettle?", id="later")
    await hybrid.append("a", later, session_id="s")
    assert await hybrid.get_messages("a", session_id="s") == [*messages, later]
    assert await hybrid.hot.get_messages("a", session_id="s") == [*messages, later]
