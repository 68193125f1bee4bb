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
    summarize,
)
from ravi.agents.context.compaction.summarization import is_summary
from ravi.agents.context.functional import PolicyCompactionStrategy
from ravi.agents.llm import ExtractiveSummarizer
from ravi.agents.tokens import HeuristicTokenCounter
from ravi.kernel.errors import ConfigurationError, InvalidArgument, InvalidMessage
from ravi.kernel.messages import ChatMessage, ImageBlock, ToolCallBlock
from ravi.kernel.scope import Scope


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
    # 002: "the boundary is then nudged forward (shrinking the tail ...) while the candidate first-kept turn
    # carries a ToolResultBlock"
    assert find_cut_point(msgs, 2) == 3
    assert find_cut_point(msgs, 10) == 0  # "0 means condense nothing"
    assert find_cut_point(msgs, 0) == 4  # "len means condense everything"
    with pytest.raises(InvalidArgument):
        find_cut_point(msgs, -1)


def test_find_cut_point_never_splits_a_pair_at_a_system_message_among_the_results() -> None:
    """A system message among a call's results is inside the group: a tail that would start at it starts after
    the group's last result instead (the system message is kept anyway, before the summary)."""
    calls = [ToolCallBlock(id=f"c{i}", name="f") for i in range(2)]
    msgs = [
        ChatMessage.user("a"),
        ChatMessage.assistant(tool_calls=calls),
        ChatMessage.tool("c0", "r0"),
        ChatMessage.system("note"),
        ChatMessage.tool("c1", "r1"),
        ChatMessage.user("b"),
    ]
    assert [find_cut_point(msgs, k) for k in range(1, 5)] == [5, 5, 5, 5]
    assert find_cut_point(msgs, 5) == 1  # the whole group kept


async def test_compact_returns_summary_then_tail() -> None:
    msgs = [ChatMessage.system("rules")] + [ChatMessage.user(f"turn {i} " + "x" * 300) for i in range(8)]
    policy = CompactionPolicy(trigger_ratio=0.5, keep_recent=3)
    assert should_compact(msgs, 1_000, policy)
    assert not should_compact(msgs, 100_000, policy)
    out = await compact(msgs, None, policy)
    assert out[0] is msgs[0] and is_summary(out[1]) and out[2:] == msgs[-3:]
    assert "turn 0" in out[1].text


class Provider:
    def get_info(self) -> dict[str, Any]:
        return {"defaults": {"context_window": 2_000, "max_output_tokens": 500}}


async def test_context_manager_contract() -> None:
    manager = ContextManager(keep_recent=2, max_tokens=100_000)
    for i in range(12):
        await manager.add_message({"role": "user", "content": f"message {i} " + "y" * 400})
    raw = await manager.get_messages()
    assert len(raw) == 12 and raw[0]["content"].startswith("message 0")
    request = await manager.get_messages_for_request(provider=Provider())  # budget 2000 - 500 - 1000 = 500
    assert estimate_context_tokens([ChatMessage.from_openai(m) for m in request]) <= 500
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
    # a provider that cannot say its window: max_tokens applies (001: "Fall back to configured max_tokens")
    assert len(await manager.get_messages_for_request(provider=object())) == 0


async def test_mount_registers_with_the_coordinator() -> None:
    class Coordinator:
        def __init__(self) -> None:
            self.mounted: dict[str, object] = {}

        async def mount(self, name: str, module: object) -> None:
            self.mounted[name] = module

    coordinator = Coordinator()
    manager = await mount(coordinator, {"max_tokens": 5_000, "keep_recent": 4})
    assert coordinator.mounted["context"] is manager
    assert manager.policy.keep_recent == 4 and manager.max_tokens == 5_000
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


def test_the_documented_estimate() -> None:
    """002: "sums the character counts of every block, divides by CHARS_PER_TOKEN (4) via math.ceil, and adds
    TURN_OVERHEAD_TOKENS (4) per turn"."""
    from ravi.agents.context.functional import CHARS_PER_TOKEN, DEFAULT_POLICY, TURN_OVERHEAD_TOKENS

    assert (CHARS_PER_TOKEN, TURN_OVERHEAD_TOKENS) == (4, 4)
    assert (DEFAULT_POLICY.trigger_ratio, DEFAULT_POLICY.keep_recent) == (0.8, 8)
    call = ToolCallBlock(id="c", name="look", arguments={"q": "é"})  # 'look' + '{"q":"é"}': 4 + 9 characters
    image = ImageBlock(url="data:image/png;base64," + "A" * 400)
    messages = [ChatMessage.user("abcde"), ChatMessage.assistant(tool_calls=[call])]
    messages.append(ChatMessage(role="user", content=(image,)))
    assert estimate_context_tokens(messages) == -(-(5 + 13 + 400) // 4) + 4 * 3


def test_should_compact_takes_a_model() -> None:
    """002: "should_compact(messages, model, cfg=None) returns True when the estimate reaches
    model.context_window * policy.trigger_ratio ... False for a non-positive context window"."""
    from ravi.kernel.llm import ModelInfo

    messages = [ChatMessage.user("x" * 396)]  # 99 + 4 = 103 tokens
    assert estimate_context_tokens(messages) == 103
    reaches = ModelInfo(name="m", context_window=128, max_output_tokens=10)  # 128 * 0.8 = 102.4
    assert should_compact(messages, reaches)
    assert should_compact(messages, 128)  # an int budget is still accepted
    assert not should_compact(messages, 129 * 2)
    assert not should_compact(messages, 0) and not should_compact(messages, -5)
    exactly = CompactionPolicy(trigger_ratio=0.5, keep_recent=1)
    assert should_compact(messages, 206, exactly)  # 103 >= 206 * 0.5: fires at >=
    assert should_compact(messages, "gpt-4o") is False


def test_the_summary_heading_is_named_where_the_engine_is() -> None:
    """002: the summary "is prefixed with the SUMMARY_HEADING [condensed earlier context]", a name of the runtime
    memory engine, as CHARS_PER_TOKEN and TURN_OVERHEAD_TOKENS are."""
    from ravi.agents.context import functional

    assert functional.SUMMARY_HEADING == "[condensed earlier context]"
    assert "SUMMARY_HEADING" in functional.__all__


async def test_a_model_that_is_not_an_llm_client_is_a_configuration_error() -> None:
    """``summarize`` and ``compact`` take an ``LLMClient`` (decision 38), as the strategies do: anything else, a
    plain function among them (002's ``invoke`` is a callable), is refused as ``ConfigurationError`` before any
    work, where it raised AttributeError once the summary was written (and ``compact`` with nothing to condense
    accepted it)."""

    def invoke(conversation: Any, options: Any) -> Any:
        return None

    msgs = [ChatMessage.user(f"turn {i} " + "x" * 300) for i in range(12)]
    with pytest.raises(ConfigurationError, match="LLMClient"):
        await summarize(msgs, invoke)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="LLMClient"):
        await compact(msgs, None, None, invoke)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="LLMClient"):
        await compact(msgs[:2], None, None, invoke)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="LLMClient"):
        await compact(msgs, llm=invoke)  # type: ignore[arg-type]


async def test_compact_takes_the_documented_arguments() -> None:
    """002: "new_history = await compact(messages, model, cfg=None, invoke=invoke)"; a summary is a user turn
    headed [condensed earlier context]."""
    msgs = [ChatMessage.user(f"turn {i} " + "x" * 300) for i in range(12)]
    out = await compact(msgs, "gpt-4o", cfg=None, invoke=None)
    assert is_summary(out[0]) and out[0].role == "user" and out[0].text.startswith("[condensed earlier context]")
    assert out[1:] == msgs[-8:]  # DEFAULT_POLICY keeps 8
    assert await compact(msgs[:3], "gpt-4o") == msgs[:3]  # nothing old enough: unchanged


async def test_a_cancelled_token_stops_the_summary_before_the_model_is_called() -> None:
    """A caller that has already cancelled pays for no model call, whatever client it passed: the token is checked
    before the call, not left to the client."""
    from ravi.agents.context import summarize
    from ravi.kernel.cancel import CancelledByToken, CancelToken

    calls: list[int] = []

    class Client:
        async def complete(self, messages: Any, *, max_tokens: int | None = None, cancel: Any = None) -> str:
            calls.append(len(messages))
            return "a summary"

    token = CancelToken()
    token.cancel("user pressed esc")
    msgs = [ChatMessage.user(f"turn {i}") for i in range(4)]
    with pytest.raises(CancelledByToken, match="esc"):
        await summarize(msgs, Client(), cancel=token)  # type: ignore[arg-type]
    with pytest.raises(CancelledByToken):
        await compact([ChatMessage.user(f"turn {i} " + "x" * 300) for i in range(12)], invoke=Client(), cancel=token)  # type: ignore[arg-type]
    assert calls == []
    assert (await summarize(msgs, Client(), cancel=CancelToken())).text.endswith("a summary")
    assert calls == [2]


@pytest.mark.parametrize("max_tokens", [0, -3, "5", 2.5, True, None])
async def test_summarize_refuses_a_length_that_is_not_a_positive_integer(max_tokens: object) -> None:
    from ravi.agents.context.functional import summarize
    from ravi.kernel.errors import InvalidArgument

    with pytest.raises(InvalidArgument, match="max_tokens"):
        await summarize([ChatMessage.user("a turn")], max_tokens=max_tokens)  # type: ignore[arg-type]


def _long() -> list[ChatMessage]:
    return [ChatMessage.user("x" * 400) for _ in range(6)]


def _call(name: str, **arguments: Any) -> Any:
    import asyncio

    from ravi.agents.context import functional

    result = getattr(functional, name)(_long(), **arguments)
    return asyncio.run(result) if asyncio.iscoroutine(result) else result


@pytest.mark.parametrize(
    ("name", "arguments", "error", "says"),
    [
        ("estimate_context_tokens", {"counter": 1}, ConfigurationError, "counter"),
        ("should_compact", {"model": 500, "counter": 1}, ConfigurationError, "counter"),
        ("should_compact", {"model": 500, "cfg": 0.8}, InvalidArgument, "cfg"),
        ("should_compact", {"model": 500, "cfg": 0}, InvalidArgument, "cfg"),
        ("should_compact", {"model": 500, "policy": 1}, InvalidArgument, "policy"),
        ("should_compact", {"model": 500, "token_budget": 100}, InvalidArgument, "token_budget"),
        (
            "should_compact",
            {"model": 500, "cfg": CompactionPolicy(0.5), "policy": CompactionPolicy(0.9)},
            InvalidArgument,
            "policy",
        ),
        ("find_cut_point", {"keep_recent": True}, InvalidArgument, "keep_recent"),
        ("summarize", {"instructions": None}, InvalidArgument, "instructions"),
        ("summarize", {"instructions": 1}, InvalidArgument, "instructions"),
        ("summarize", {"instructions": " "}, InvalidArgument, "instructions"),
        ("summarize", {"cancel": 1}, InvalidArgument, "cancel"),
        ("summarize", {"scope": 1}, InvalidArgument, "scope"),
        ("summarize", {"store": 1, "scope": Scope("a", "s", "g")}, ConfigurationError, "store"),
        ("compact", {"cfg": 1}, InvalidArgument, "cfg"),
        ("compact", {"cfg": CompactionPolicy(keep_recent=2), "cancel": 1}, InvalidArgument, "cancel"),
        ("compact", {"cfg": CompactionPolicy(keep_recent=2), "scope": 1}, InvalidArgument, "scope"),
        (
            "compact",
            {"cfg": CompactionPolicy(keep_recent=2), "store": 1, "scope": Scope("a", "s", "g")},
            ConfigurationError,
            "store",
        ),
        (
            "compact",
            {"invoke": ExtractiveSummarizer(), "llm": ExtractiveSummarizer()},
            ConfigurationError,
            "both",
        ),
    ],
)
def test_the_functional_api_refuses_a_bad_argument_before_any_work(
    name: str, arguments: dict[str, Any], error: type[Exception], says: str
) -> None:
    """Each of these was taken, and then failed with a bare ``AttributeError`` (a counter, a policy, a cancel
    token or a store of the wrong kind), gave pydantic's complaint about a message's text (instructions that are
    not text), or was silently dropped (a scope without a store, ``token_budget`` or ``policy`` beside the
    argument they are older names of, a second model client)."""
    with pytest.raises(error) as raised:
        _call(name, **arguments)
    assert says in str(raised.value)


@pytest.mark.parametrize(
    ("arguments", "error", "says"),
    [
        ({"policy": 1}, InvalidArgument, "policy"),
        ({"store": 1}, ConfigurationError, "store"),
        ({"counter": 1}, ConfigurationError, "counter"),
        ({"above": "yes"}, InvalidArgument, "above"),
    ],
)
def test_a_policy_strategy_refuses_what_it_would_fail_with_later(
    arguments: dict[str, Any], error: type[Exception], says: str
) -> None:
    with pytest.raises(error, match=says):
        PolicyCompactionStrategy(100, **arguments)


@pytest.mark.parametrize("keep_recent", [True, False, 2.0, None, -1])
def test_find_cut_point_refuses_a_keep_recent_that_is_not_a_count(keep_recent: object) -> None:
    """``find_cut_point(messages, True)`` kept one message, as ``keep_recent=1`` would; ``CompactionPolicy`` refuses
    a bool, and so does the function now."""
    with pytest.raises(InvalidArgument, match="keep_recent"):
        find_cut_point([ChatMessage.user("a"), ChatMessage.user("b")], keep_recent)  # type: ignore[arg-type]


def test_the_memory_facade_imports_and_exports_nothing() -> None:
    """002: "import indusagi.memory succeeds but exports nothing"; Ravi's is ``ravi.memory``."""
    import importlib

    facade = importlib.import_module("ravi.memory")
    assert facade.__all__ == []
    assert not [name for name in vars(facade) if not name.startswith("__")]
