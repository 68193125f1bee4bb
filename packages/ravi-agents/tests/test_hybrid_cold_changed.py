"""A hybrid history whose cold tier is changed directly, through the cold tier's own provider: the hot tier's copy
of the old generation is never served again, whatever ids and count the new transcript has."""

from __future__ import annotations

import pytest

from ravi.agents.context import HybridHistoryProvider, InMemoryHistoryProvider
from ravi.agents.context.hybrid import COPY_OF
from ravi.kernel.messages import ChatMessage
from ravi.kernel.scope import Scope


def conversation(tag: str, newest: ChatMessage) -> list[ChatMessage]:
    """Ten messages whose ids depend only on their positions, then ``newest``."""
    return [*(ChatMessage.user(f"{tag} {i}", id=f"m{i}") for i in range(10)), newest]


@pytest.mark.parametrize("change", ["clear", "forget", "replace_session", "clear_run"])
async def test_a_hot_copy_of_a_generation_the_cold_tier_left_is_not_served(change: str) -> None:
    cold = InMemoryHistoryProvider()
    history = HybridHistoryProvider(InMemoryHistoryProvider(), cold)
    elsewhere = HybridHistoryProvider(history.hot, cold)  # another process's provider over the same tiers
    newest = ChatMessage.user("the newest", id="newest")
    await history.append_many("a", conversation("old", newest), session_id="s", run_id="r")
    hot_generation = await history.hot.generation("a", session_id="s")
    cold_generation = await cold.generation("a", session_id="s")
    assert await history.hot.get_summary(Scope("a", "s", hot_generation), COPY_OF) == cold_generation

    new = conversation("new", newest)
    if change == "replace_session":
        await cold.replace_session("a", new, session_id="s", run_id="r")
    else:
        if change == "clear":
            await cold.clear("a", session_id="s")
        elif change == "forget":
            await cold.forget("a", session_id="s")
        else:
            await cold.clear_run("a", session_id="s", run_id="r")
        await cold.append_many("a", new, session_id="s", run_id="r")
    for provider in (history, elsewhere):
        assert await provider.get_messages("a", session_id="s") == new
        assert (await provider.read_window("a", session_id="s", tokens=10**6)).messages == new
        assert (await provider.search_units("a", session_id="s", query="old", before=10**6, limit=5)) == []
    later = ChatMessage.user("later", id="later")
    await elsewhere.append("a", later, session_id="s", run_id="r")
    assert await history.hot.get_messages("a", session_id="s") == [*new, later]
    for provider in (history, elsewhere):
        assert await provider.get_messages("a", session_id="s") == [*new, later]


async def test_a_hot_copy_kept_untagged_is_checked_against_the_cold_tier_before_it_is_tagged() -> None:
    """A hot copy made before tags were kept (or whose tag was lost) is kept when it is the cold tier's start."""
    hot, cold = InMemoryHistoryProvider(), InMemoryHistoryProvider()
    messages = [ChatMessage.user(f"m {i}", id=f"m{i}") for i in range(5)]
    await hot.append_many("a", messages, session_id="s")
    await cold.append_many("a", messages, session_id="s")
    history = HybridHistoryProvider(hot, cold)
    generation = await hot.generation("a", session_id="s")
    later = ChatMessage.user("later", id="later")
    await history.append("a", later, session_id="s")
    assert await hot.generation("a", session_id="s") == generation, "the hot copy was kept"
    assert await hot.get_summary(Scope("a", "s", generation), COPY_OF) == await cold.generation("a", session_id="s")
    assert await history.get_messages("a", session_id="s") == [*messages, later]
