"""Rows of the design documents that an audit found partial, each checked as the document words it (or as the
numbered decision that says why Ravi differs)."""

from __future__ import annotations

from typing import Any

import pytest
from amplifier_core import AmplifierSession
from amplifier_core.testing import MockCoordinator

from ravi.agents.context import ContextConfig, ContextManager, InMemoryHistoryProvider
from ravi.agents.context.functional import CompactionPolicy, compact
from ravi.agents.react import ReActAgent, ScriptedModel, Tool
from ravi.agents.storage import current_agent_id, current_agent_label, current_parent_agent_id, current_thread_id
from ravi.agents.tokens import DEFAULT_COUNTER
from ravi.kernel.messages import ChatMessage, ToolCallBlock


def _asks(tool: str) -> list[ChatMessage]:
    call = ToolCallBlock(id="c1", name=tool, arguments={})
    return [ChatMessage.assistant(tool_calls=[call]), ChatMessage.assistant("done")]


async def test_a_tool_sees_which_agent_and_thread_run_it() -> None:
    """000: "Stamp these inside the agent's message handler — not in serving code — or boards will all land on
    the "default" thread." ``ReActAgent('bot').run('sess-42')`` sets them for its tools, and restores them."""
    seen: list[tuple[str, str, str, str | None]] = []

    def who() -> str:
        seen.append((current_thread_id.get(), current_agent_id.get(), current_agent_label.get(), None))
        return "ok"

    agent = ReActAgent("bot", model=ScriptedModel(_asks("who")), tools=[Tool("who", "Who runs me?", who)])
    await agent.run("sess-42", "hello")
    assert seen == [("sess-42", "bot", "bot", None)]
    assert (current_thread_id.get(), current_agent_id.get()) == ("default", "default")


async def test_a_sub_agent_names_the_agent_that_started_it() -> None:
    """000: ``current_parent_agent_id``, "the agent that started the current one"."""
    parents: list[str | None] = []

    def leaf() -> str:
        parents.append(current_parent_agent_id.get())
        return "leaf"

    child = ReActAgent("child", model=ScriptedModel(_asks("leaf")), tools=[Tool("leaf", "Leaf.", leaf)], label="C")

    async def delegate() -> str:
        return (await child.run("sess-42", "go")).text

    parent = ReActAgent("parent", model=ScriptedModel(_asks("delegate")), tools=[Tool("delegate", "Ask.", delegate)])
    await parent.run("sess-42", "start")
    assert parents == ["parent"]
    assert current_parent_agent_id.get() is None


def _exactly(tokens: int, count: int) -> list[ChatMessage]:
    """``count`` user turns holding ``tokens`` tokens together, as the default counter counts them."""
    each = tokens // count
    messages = [ChatMessage.user("x" * ((each - 4) * 4)) for _ in range(count)]
    assert DEFAULT_COUNTER.count_messages(messages) == tokens
    return messages


async def test_at_exactly_the_threshold_nothing_is_compacted_and_no_event_fires() -> None:
    """001: "if self._token_count > (budget * self._compaction_threshold): await self._compact_internal()", and
    the hooks "context:pre_compact" / "context:post_compact" fire for every compaction."""
    coordinator = MockCoordinator()
    fired: list[str] = []

    async def record(event: str, data: dict[str, Any]) -> Any:
        fired.append(event)

    coordinator.hooks.register("context:pre_compact", record, name="pre")
    coordinator.hooks.register("context:post_compact", record, name="post")
    manager = ContextManager(max_tokens=1_040, compaction_threshold=0.5, keep_recent=4, hooks=coordinator.hooks)
    for message in _exactly(520, 10):
        await manager.add_message(message)
    sent = await manager.get_messages_for_request()
    assert len(sent) == 10 and fired == []  # 520 is not above 1,040 x 0.5
    await manager.add_message(ChatMessage.user("x" * 4))  # one token and its framing more
    sent = await manager.get_messages_for_request()
    assert sent[0]["content"].startswith("[condensed earlier context]") and len(sent) == 5
    assert fired == ["context:pre_compact", "context:post_compact"]


async def test_a_tool_result_without_its_call_is_not_sent_after_compaction() -> None:
    """001: "Identify which tool results have matching tool_use ... orphan_result_indices", and the example test
    "assert tool_result_ids.issubset(tool_use_ids), 'Orphaned tool results found!'"."""
    manager = ContextManager(max_tokens=200, compaction_threshold=0.5, keep_recent=3)
    for i in range(12):
        await manager.add_message(ChatMessage.user(f"turn {i} " + "w" * 80))
    await manager.add_message({"role": "tool", "tool_call_id": "never-called", "content": "stray output"})
    await manager.add_message(ChatMessage.user("and now?"))
    sent = await manager.get_messages_for_request()
    calls = {c["id"] for m in sent for c in m.get("tool_calls", [])}
    results = {m["tool_call_id"] for m in sent if m["role"] == "tool"}
    assert results <= calls
    assert any(m["tool_call_id"] == "never-called" for m in await manager.get_messages() if m["role"] == "tool")


async def test_compact_accepts_the_model_and_discards_it() -> None:
    """002: "The model argument is accepted for signature parity and is immediately discarded (del model); only
    the policy and invoker drive the work." Any model, known or not, gives the same result."""
    history = [ChatMessage.user(f"m{i} " + "x" * 40) for i in range(6)]
    policy = CompactionPolicy(keep_recent=2)
    assert await compact(history, "no-such-model", policy) == await compact(history, None, policy)


async def test_compact_keeps_system_messages_before_the_summary() -> None:
    """002: compact "returns (summary, *tail)"; Ravi keeps every system message (decision 31), so a history that
    starts with one gives (system, summary, *tail)."""
    history = [ChatMessage.system("rules"), *(ChatMessage.user(f"m{i} " + "x" * 40) for i in range(6))]
    out = await compact(history, None, CompactionPolicy(keep_recent=2))
    assert out[0] is history[0] and out[1].text.startswith("[condensed earlier context]") and out[2:] == history[-2:]


async def test_the_real_coordinator_mounts_a_context_at_context() -> None:
    """001 writes 'await coordinator.mount("session", context, name="context")'; the real amplifier-core refuses
    the mount point "session" and keeps its context module at "context" (decision 32), where Ravi mounts."""
    session = AmplifierSession({"session": {"orchestrator": "loop-basic", "context": "context-ravi"}}, "s")
    with pytest.raises(ValueError, match="session"):
        await session.coordinator.mount("session", object(), name="context")
    manager = ContextManager(history=InMemoryHistoryProvider())
    await session.coordinator.mount("context", manager)
    assert session.coordinator.get("context") is manager


def test_the_default_context_config_is_a_sliding_window() -> None:
    """000: ``ContextConfig.default()`` "returns an InMemoryHistoryProvider wrapped in default sliding-window
    compaction" (decision 6)."""
    config = ContextConfig.default()
    assert isinstance(config.history, InMemoryHistoryProvider)
    assert [type(s).__name__ for s in config.pipeline.strategies] == ["SlidingWindowCompaction"]


def test_a_task_list_tracks_the_retry_limit_of_its_tasks() -> None:
    """004: "TaskList groups multiple tasks and tracks max_retries" (decision 40: each task keeps its own limit)."""
    from ravi.kernel.storage import Task, TaskList

    board = TaskList(conversation_id="c", agent_id="a", tasks=(Task(title="fetch"), Task(title="parse")))
    assert board.max_retries == 3
    mixed = TaskList(conversation_id="c", agent_id="a", tasks=(Task(title="fetch", max_retries=5), Task(title="x")))
    assert mixed.max_retries is None


async def test_the_pipeline_and_every_strategy_take_raw_history_by_name() -> None:
    """000: ``async def compact(self, raw_history)``, for the pipeline and "every strategy", so a caller may name
    the argument as the document does."""
    from ravi.agents.context.compaction import (
        CompactionPipeline,
        RelevantRecallStrategy,
        SelectiveToolCallCompactionStrategy,
        SlidingWindowCompaction,
        SummarizationCompaction,
        TokenBudgetComposedStrategy,
        ToolResultCompactionStrategy,
        TruncationStrategy,
    )
    from ravi.agents.context.functional import PolicyCompactionStrategy

    history = [ChatMessage.system("be brief"), ChatMessage.user("hello"), ChatMessage.assistant("hi")]
    strategies: list[Any] = [
        CompactionPipeline([SlidingWindowCompaction()]),
        SlidingWindowCompaction(),
        ToolResultCompactionStrategy(),
        SelectiveToolCallCompactionStrategy(),
        SummarizationCompaction(),
        TruncationStrategy(max_messages=10),
        TokenBudgetComposedStrategy([SlidingWindowCompaction()], 1_000),
        RelevantRecallStrategy(1_000),
        PolicyCompactionStrategy(1_000),
    ]
    for strategy in strategies:
        assert await strategy.compact(raw_history=history) == history, type(strategy).__name__
