from __future__ import annotations

from typing import Any

import pytest

from ravi.agents.context import (
    CompactionPolicy,
    ContextManager,
    compact,
    estimate_context_tokens,
    find_cut_point,
    mount,
    should_compact,
)
from ravi.agents.context.compaction.summarization import is_summary
from ravi.agents.tokens import HeuristicTokenCounter
from ravi.kernel.errors import ConfigurationError, InvalidArgument, InvalidMessage
from ravi.kernel.messages import ChatMessage, ImageBlock, ToolCallBlock


def test_heuristic_counts() -> None:
    counter = HeuristicTokenCounter()
    assert counter.count_message(ChatMessage.user("abcdefgh")) == 4 + 2
    assert counter.count_message(ChatMessage.user("abcdefghi")) == 4 + 3
    call = ToolCallBlock(id="c", name="look", arguments={"q": "x"})
    assert counter.count_message(ChatMessage.assistant(tool_calls=[call])) == 4 + 1 + 3  # 'look' + '{"q":"x"}'
    image = ChatMessage(role="user", content=(ImageBlock(url="data:image/png;base64," + "A" * 400),))
    assert counter.count_message(image) == 4 + 106
    assert estimate_context_tokens([ChatMessage.user("abcd")] * 3) == 15


def test_find_cut_point_never_splits_a_pair() -> None:
    call = ToolCallBlock(id="c", name="f")
    msgs = [
        ChatMessage.user("a"),
        ChatMessage.assistant(tool_calls=[call]),
        ChatMessage.tool("c", "r"),
        ChatMessage.user("b"),
    ]
    assert find_cut_point(msgs, 1) == 3
    assert find_cut_point(msgs, 2) == 1  # would cut between call and result: moves back to the call
    assert find_cut_point(msgs, 10) == 0
    with pytest.raises(InvalidArgument):
        find_cut_point(msgs, -1)


async def test_compact_returns_summary_then_tail() -> None:
    msgs = [ChatMessage.system("rules")] + [ChatMessage.user(f"turn {i} " + "x" * 300) for i in range(8)]
    policy = CompactionPolicy(trigger_ratio=0.5, keep_recent=3)
    assert should_compact(msgs, 1_000, policy)
    assert not should_compact(msgs, 100_000, policy)
    out = await compact(msgs, policy=policy)
    assert out[0] is msgs[0] and is_summary(out[1]) and out[2:] == msgs[-3:]
    assert "turn 0" in out[1].text


class Provider:
    def get_info(self) -> dict[str, Any]:
        return {"defaults": {"context_window": 2_000, "max_output_tokens": 500}}


async def test_context_manager_contract() -> None:
    manager = ContextManager(policy=CompactionPolicy(keep_recent=2))
    for i in range(12):
        await manager.add_message({"role": "user", "content": f"message {i} " + "y" * 400})
    raw = await manager.get_messages()
    assert len(raw) == 12 and raw[0]["content"].startswith("message 0")
    request = await manager.get_messages_for_request(provider=Provider())  # budget 2000 - 500 - 1024 = 476
    assert estimate_context_tokens([ChatMessage.from_openai(m) for m in request]) <= 476
    assert all("id" not in m for m in request)  # ready to send
    assert len(await manager.get_messages()) == 12  # the transcript is never compacted
    whole = await manager.get_messages_for_request()
    assert len(whole) == 12
    await manager.set_messages(raw[:3])
    assert await manager.get_messages() == raw[:3]
    with pytest.raises(InvalidMessage):
        await manager.set_messages([raw[0], {"role": "nobody"}])
    assert await manager.get_messages() == raw[:3]  # nothing lost
    await manager.clear()
    assert await manager.get_messages() == []
    with pytest.raises(ConfigurationError):
        await manager.get_messages_for_request(provider=object())


async def test_mount_registers_with_the_coordinator() -> None:
    class Coordinator:
        def __init__(self) -> None:
            self.mounted: dict[str, object] = {}

        async def mount(self, name: str, module: object) -> None:
            self.mounted[name] = module

    coordinator = Coordinator()
    manager = await mount(coordinator, {"token_budget": 5_000, "keep_recent": 4})
    assert coordinator.mounted["context"] is manager
    assert manager.policy.keep_recent == 4 and manager.token_budget == 5_000
    with pytest.raises(ConfigurationError, match="unknown context options: colour"):
        await mount(coordinator, {"colour": "blue"})


def test_exact_counter_counts_real_tokens_offline() -> None:
    from ravi.agents.tokens import ExactTokenCounter

    counter = ExactTokenCounter("cl100k_base")
    assert counter.count_text("hello world") == 2  # 'hello', ' world' in cl100k_base
    assert counter.count_text("<|endoftext|>") > 1  # special-token text is ordinary text here
    message = ChatMessage.user("hello world")
    assert counter.count_message(message) == 2 + 4
    assert message.memo[counter.key] == 6  # cached on the message
    assert counter.count_message(message) != HeuristicTokenCounter().count_message(ChatMessage.user("x" * 400))
