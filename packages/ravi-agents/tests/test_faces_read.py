"""Every face is a thin call to one engine, so none reads the whole session when its pipeline can be assembled
from the newest part: a 2,000-message session, and the rows each face's warm window reads."""

from __future__ import annotations

from ravi.agents.context import (
    AgentContext,
    CompactionPipeline,
    ContextConfig,
    ContextManager,
    SlidingWindowContext,
    TokenBudgetComposedStrategy,
    TokenBudgetContext,
    ToolResultCompactionStrategy,
    WindowRequest,
)
from ravi.kernel.messages import ChatMessage

from .doubles import Recording

SESSION = 2_000


async def _stored(store: Recording, agent: str = "agent", session: str = "s") -> None:
    messages = [ChatMessage.user(f"turn {i} " + "w" * 200) for i in range(SESSION)]
    for i in range(0, SESSION, 500):
        await store.append_many(agent, messages[i : i + 500], session_id=session)
    store.windowed = store.whole = 0


async def _warm(store: Recording, read: object) -> tuple[int, int]:
    """The rows a second window (the steady state) reads, whole and windowed."""
    await read()  # type: ignore[operator]
    store.windowed = store.whole = 0
    await store.append("agent", ChatMessage.user("one more"), session_id="s")
    await read()  # type: ignore[operator]
    return store.whole, store.windowed


async def test_agent_context_reads_the_window() -> None:
    store = Recording()
    await _stored(store)
    pipeline = [ToolResultCompactionStrategy(), TokenBudgetComposedStrategy([], 2_000)]
    context = AgentContext(ContextConfig(store, pipeline))
    whole, windowed = await _warm(store, lambda: context.get_prompt_window("s"))
    assert whole == 0 and 0 < windowed < SESSION // 10


async def test_the_engine_reads_the_window_and_explain_reads_the_session() -> None:
    store = Recording()
    await _stored(store)
    pipeline = CompactionPipeline([TokenBudgetComposedStrategy([], 2_000)])
    whole, windowed = await _warm(store, lambda: pipeline.window(WindowRequest("agent", "s", history=store)))
    assert whole == 0 and 0 < windowed < SESSION // 10
    store.windowed = store.whole = 0
    explained = await pipeline.window(WindowRequest("agent", "s", history=store, explain=True))
    assert store.whole == SESSION + 1 and len(explained.manifest) == SESSION + 1  # every message accounted for


async def test_context_manager_reads_the_window_once_its_summary_is_stored() -> None:
    """001's face: the first compaction reads the session whole to write the first summary; later requests
    fold it forward from the newest part."""
    store = Recording()
    await _stored(store, session="conversation")
    manager = ContextManager(history=store, session_id="conversation", max_tokens=4_000, keep_recent=8)
    await manager.get_messages_for_request()
    store.windowed = store.whole = 0
    await manager.add_message(ChatMessage.user("one more"))
    sent = await manager.get_messages_for_request()
    assert store.whole == 0 and 0 < store.windowed < SESSION // 10
    assert sent[0]["content"].startswith("[condensed earlier context]") and len(sent) == 9


async def test_a_budget_per_request_uses_one_pipeline() -> None:
    store = Recording()
    await _stored(store, session="conversation")
    manager = ContextManager(history=store, session_id="conversation", max_tokens=4_000, keep_recent=8)
    for budget in (3_000, 3_500, 4_000, 3_000):
        window = await manager.get_messages_for_request(token_budget=budget)
        assert sum(4 + -(-len(m["content"]) // 4) for m in window) <= budget
    assert len(manager.pipeline.sessions) == 1


async def test_model_contexts_read_the_window() -> None:
    store = Recording()
    await _stored(store)
    sliding = SlidingWindowContext(50, store)
    whole, windowed = await _warm(store, lambda: sliding.build("s", agent_id="agent"))
    assert whole == 0 and 0 < windowed < SESSION // 10

    class Client:
        def count_tokens(self, text: str) -> int:
            return len(text.split())

    budget = TokenBudgetContext(2_000, store)
    whole, windowed = await _warm(store, lambda: budget.build("s", agent_id="agent", model_client=Client()))
    assert whole == 0 and 0 < windowed < SESSION // 2


async def test_integration_faces_read_nothing_the_framework_holds() -> None:
    """The four framework integrations hand Ravi the messages their framework holds (``window_of``) and store
    the new ones (``append_new``): no read of the session, whole or windowed, while ids are new."""
    from ravi.agents.adapters import append_new, as_context, window_of

    store = Recording()
    await _stored(store)
    context = as_context(ContextConfig(store, [TokenBudgetComposedStrategy([], 2_000)]))
    held = await store.get_messages("agent", session_id="s")
    store.windowed = store.whole = 0
    window = await window_of(context, "s", held)
    await append_new(context, "s", [ChatMessage.user("one more")])
    assert store.whole == 0 and store.windowed == 0
    assert 0 < len(window) < SESSION // 10
