"""A session that changes generation between a window's read and the store search the window makes: the window is
assembled again from a fresh read, never from the old read beside the new session's units."""

from __future__ import annotations

from typing import Any

import pytest

from ravi.agents.context import CompactionPipeline, InMemoryHistoryProvider, RelevantRecallStrategy, WindowRequest
from ravi.kernel.errors import CompactionError
from ravi.kernel.messages import ChatMessage

TOPICS = ["walrus", "kettle", "harbour", "violin"]


def conversation(tag: str, turns: int = 60) -> list[ChatMessage]:
    """Questions and answers, then a request about the walrus; the ids depend only on the positions."""
    messages = [ChatMessage.system("be brief", id="system")]
    for i in range(turns):
        topic = TOPICS[i % len(TOPICS)]
        messages += [
            ChatMessage.user(f"{tag} question {i} about the {topic} " + "detail " * 30, id=f"q{i}"),
            ChatMessage.assistant(f"{tag} answer {i}: the {topic} is fine " + "more " * 30, id=f"a{i}"),
        ]
    return [*messages, ChatMessage.user(f"{tag}: what did we say about the walrus?", id="request")]


class RefilledBeforeSearch(InMemoryHistoryProvider):
    """The in-memory provider whose next ``times`` searches each first clear the session and store another
    conversation under the same ids (what another process can do between a window's read and its search)."""

    def __init__(self) -> None:
        super().__init__()
        self.times = 0
        self.refills = 0

    async def search_hybrid(self, agent_id: str, *, session_id: str, **kw: Any) -> Any:
        if self.times:
            self.times -= 1
            self.refills += 1
            await self.clear(agent_id, session_id=session_id)
            await self.append_many(agent_id, conversation(f"refill{self.refills}"), session_id=session_id)
        return await super().search_hybrid(agent_id, session_id=session_id, **kw)


def _pipeline() -> CompactionPipeline:
    return CompactionPipeline([RelevantRecallStrategy(1_000, meaning=None)])


async def test_a_session_refilled_before_the_search_is_read_again() -> None:
    history = RefilledBeforeSearch()
    old = conversation("old")
    await history.append_many("a", old, session_id="s")
    pipeline = _pipeline()
    request = WindowRequest("a", "s", history=history)
    history.times = 1
    window = (await pipeline.window(request)).messages
    assert history.refills == 1
    stored = await history.get_messages("a", session_id="s")
    assert all(m in stored for m in window), "the window holds a message the refill removed"
    assert any(m.text.startswith("refill1 question") for m in window), "no unit was recalled"
    assert window == (await _pipeline().window(request)).messages
    assert (await pipeline.window(request)).messages == window


async def test_a_session_changed_before_every_search_is_refused_with_a_typed_error() -> None:
    history = RefilledBeforeSearch()
    await history.append_many("a", conversation("old"), session_id="s")
    history.times = 10
    with pytest.raises(CompactionError, match="changed 3 times"):
        await _pipeline().window(WindowRequest("a", "s", history=history))
    assert history.refills == 3


async def test_messages_read_by_the_caller_before_a_change_are_refused() -> None:
    history = RefilledBeforeSearch()
    await history.append_many("a", conversation("old"), session_id="s")
    generation = await history.generation("a", session_id="s")
    messages = await history.get_messages("a", session_id="s")
    history.times = 1
    request = WindowRequest("a", "s", history=history, messages=messages, generation=generation)
    with pytest.raises(CompactionError, match="changed"):
        await _pipeline().window(request)


@pytest.mark.parametrize(("explain", "turns"), [(False, 60), (False, 10), (True, 60)])
async def test_a_window_read_again_delivers_its_events_once(explain: bool, turns: int) -> None:
    """The attempt the change broke delivers nothing: subscribers see one window's events, not a second
    ``pre_compact`` after a first one that no ``post_compact`` followed."""
    from ravi.agents.context import ToolResultCompactionStrategy

    history = RefilledBeforeSearch()
    await history.append_many("a", conversation("old", turns), session_id="s")
    pipeline = CompactionPipeline([ToolResultCompactionStrategy(), RelevantRecallStrategy(1_000, meaning=None)])
    kinds: list[str] = []
    pipeline.subscribe(lambda event: kinds.append(event.kind))
    history.times = 1
    await pipeline.window(WindowRequest("a", "s", history=history, explain=explain))
    assert history.refills == 1
    assert kinds == ["pre_compact", "strategy_applied", "strategy_applied", "post_compact"]


@pytest.mark.parametrize("explain", [False, True])
async def test_a_window_refused_after_three_changes_delivers_no_events(explain: bool) -> None:
    history = RefilledBeforeSearch()
    await history.append_many("a", conversation("old"), session_id="s")
    pipeline = _pipeline()
    kinds: list[str] = []
    pipeline.subscribe(lambda event: kinds.append(event.kind))
    history.times = 10
    with pytest.raises(CompactionError, match="changed 3 times"):
        await pipeline.window(WindowRequest("a", "s", history=history, explain=explain))
    assert kinds == []


async def test_the_window_read_again_is_kept_for_the_new_generation() -> None:
    history = RefilledBeforeSearch()
    await history.append_many("a", conversation("old"), session_id="s")
    old_generation = await history.generation("a", session_id="s")
    pipeline = _pipeline()
    history.times = 1
    window = (await pipeline.window(WindowRequest("a", "s", history=history))).messages
    generation = await history.generation("a", session_id="s")
    assert generation != old_generation
    assert pipeline.sessions.last_window("a", "s") == (window, generation)
    assert await pipeline.last_window("a", "s", history=history) == window
    # the state kept is the new generation's: the next window, with no change, is the same one
    assert (await pipeline.window(WindowRequest("a", "s", history=history))).messages == window


async def test_the_events_of_a_window_that_fails_otherwise_are_delivered() -> None:
    """Only an attempt that is redone holds its events back: a strategy's error still shows what ran before it."""
    from ravi.agents.context import ToolResultCompactionStrategy

    class Failing:
        name = "failing"

        async def compact(self, history: Any, session: Any = None) -> Any:
            raise CompactionError("the strategy failed")

    history = InMemoryHistoryProvider()
    await history.append_many("a", conversation("old"), session_id="s")
    pipeline = CompactionPipeline([ToolResultCompactionStrategy(), Failing()])
    kinds: list[str] = []
    pipeline.subscribe(lambda event: kinds.append(event.kind))
    with pytest.raises(CompactionError, match="the strategy failed"):
        await pipeline.window(WindowRequest("a", "s", history=history))
    assert kinds == ["pre_compact", "strategy_applied"]
