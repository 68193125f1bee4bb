"""Ravi as an amplifier context module (design document 001), checked with the real ``amplifier-core`` package:
its ``ModuleLoader``, ``ContextValidator``, behavioural test base class, coordinator, hooks and ``AmplifierSession``.

Each test quotes the words of 001 it checks.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from amplifier_core import AmplifierSession
from amplifier_core.loader import ModuleLoader
from amplifier_core.message_models import ChatRequest, ChatResponse, Message, TextBlock, ToolCall
from amplifier_core.models import ProviderInfo
from amplifier_core.testing import MockCoordinator, MockTool
from amplifier_core.validation import ContextValidator
from amplifier_core.validation.behavioral import ContextBehaviorTests
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ravi.agents.context.history import InMemoryHistoryProvider
from ravi.agents.context.manager import ContextManager
from ravi.agents.tokens import DEFAULT_COUNTER
from ravi.kernel.errors import ConfigurationError, InvalidArgument, InvalidMessage, RaviError
from ravi.kernel.messages import ChatMessage


async def _load(coordinator: Any, config: dict[str, Any] | None = None) -> ContextManager:
    """Mount Ravi the way amplifier does: found by the loader through its entry point."""
    mount = await ModuleLoader(coordinator=coordinator).load("context-ravi", config or {})
    await mount(coordinator)
    context = coordinator.mount_points["context"]
    assert isinstance(context, ContextManager)
    return context


class TestAmplifierBehaviour(ContextBehaviorTests):
    """amplifier-core's own behavioural tests for context modules, run against Ravi."""

    @pytest.fixture
    async def context_module(self) -> Any:
        return await _load(MockCoordinator())


async def test_the_validator_passes_with_the_documented_config() -> None:
    """001: "amplifier module validate ./my-context --type context"."""
    result = await ContextValidator().validate(
        "ravi.agents.context.manager", config={"max_tokens": 100_000, "compaction_threshold": 0.8}
    )
    assert result.passed, result.summary()


async def test_discovered_through_the_entry_point() -> None:
    """001: '[project.entry-points."amplifier.modules"] my-context = "my_context:mount"'."""
    found = {m.id: m for m in await ModuleLoader().discover()}
    assert found["context-ravi"].type == "context" and found["context-ravi"].mount_point == "context"


async def test_mount_config_defaults_and_keys() -> None:
    """001: 'max_tokens=config.get("max_tokens", 100000), compaction_threshold=config.get("compaction_threshold",
    0.8)'."""
    context = await _load(MockCoordinator())
    assert (context.max_tokens, context.compaction_threshold) == (100_000, 0.8)
    tuned = await _load(MockCoordinator(), {"max_tokens": 2_000, "compaction_threshold": 0.5, "keep_recent": 3})
    assert (tuned.max_tokens, tuned.compaction_threshold, tuned.policy.keep_recent) == (2_000, 0.5, 3)
    with pytest.raises(ConfigurationError, match="unknown context options: max_token"):
        await _load(MockCoordinator(), {"max_token": 10})


async def test_the_documents_example_test() -> None:
    """001: 'context = MyContextManager(max_tokens=1000) ... assert len(messages) == 2'."""
    context = ContextManager(max_tokens=1000)
    await context.add_message({"role": "user", "content": "Hello"})
    await context.add_message({"role": "assistant", "content": "Hi there!"})
    messages = await context.get_messages_for_request()
    assert len(messages) == 2 and messages[0]["role"] == "user"
    assert len(await context.get_messages()) == 2
    await context.clear()
    assert len(await context.get_messages()) == 0


async def test_compaction_preserves_tool_pairs_and_applies_max_tokens() -> None:
    """001: "Every tool result should have matching tool use", and with no budget and no provider the configured
    max_tokens applies ("return self._max_tokens")."""
    context = ContextManager(max_tokens=100, compaction_threshold=0.5)
    await context.add_message({"role": "user", "content": "Read file.txt"})
    call = {"id": "call_123", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "f"}'}}
    await context.add_message({"role": "assistant", "content": None, "tool_calls": [call]})
    await context.add_message({"role": "tool", "tool_call_id": "call_123", "content": "File contents..."})
    for i in range(50):
        await context.add_message({"role": "user", "content": f"Message {i}"})
    messages = await context.get_messages_for_request()
    uses = {tc["id"] for m in messages for tc in m.get("tool_calls") or []}
    results = {m["tool_call_id"] for m in messages if m["role"] == "tool"}
    assert results <= uses, "Orphaned tool results found!"
    assert DEFAULT_COUNTER.count_messages([ChatMessage.from_openai(m) for m in messages]) <= 100
    assert len(await context.get_messages()) == 53  # "Internal state is NEVER modified by compaction"


async def test_session_resume_with_set_messages() -> None:
    """001: 'await context.set_messages(saved_messages) ... assert messages[0]["content"] == "Previous
    conversation"'."""
    context = ContextManager(max_tokens=1000)
    saved = [
        {"role": "user", "content": "Previous conversation"},
        {"role": "assistant", "content": "Previous response"},
    ]
    await context.set_messages(saved)
    messages = await context.get_messages()
    assert len(messages) == 2 and messages[0]["content"] == "Previous conversation"


@pytest.mark.parametrize("saved", [None, "user: hi", {"role": "user", "content": "hi"}, 5])
async def test_set_messages_takes_a_list(saved: Any) -> None:
    """``set_messages`` takes a list of messages; anything else is ``InvalidArgument`` and the transcript stays."""
    context = ContextManager(max_tokens=1000)
    await context.add_message({"role": "user", "content": "kept"})
    with pytest.raises(InvalidArgument, match="list of messages"):
        await context.set_messages(saved)
    assert [m["content"] for m in await context.get_messages()] == ["kept"]


def _provider(defaults: dict[str, Any]) -> Any:
    class Provider:
        def get_info(self) -> ProviderInfo:
            return ProviderInfo(id="scripted", display_name="Scripted", defaults=defaults)

    return Provider()


async def test_provider_budget_and_its_fallback() -> None:
    """001: "budget = context_window - max_output_tokens - safety_margin" with "safety_margin = 1000", and
    "Fall back to configured max_tokens" when get_info() raises or the defaults lack the fields."""
    context = ContextManager(max_tokens=777)
    assert context._budget(None, _provider({"context_window": 8_000, "max_output_tokens": 2_000})) == 5_000
    assert context._budget(None, _provider({"context_window": 8_000})) == 777
    assert context._budget(None, _provider({})) == 777

    class Broken:
        def get_info(self) -> Any:
            raise RuntimeError("no network")

    assert context._budget(None, Broken()) == 777
    assert context._budget(300, Broken()) == 300  # "Explicit budget takes precedence"


async def test_compaction_events_go_through_the_coordinators_hooks() -> None:
    """001: 'await self._hooks.emit("context:pre_compact", {"message_count": ..., "token_count": ...})', the same
    for "context:post_compact", and 'coordinator.register_contributor("observability.events", ...)'."""
    coordinator = MockCoordinator()
    seen: list[tuple[str, dict[str, Any]]] = []

    async def record(event: str, data: dict[str, Any]) -> Any:
        seen.append((event, dict(data)))

    coordinator.hooks.register("context:pre_compact", record, name="pre")
    coordinator.hooks.register("context:post_compact", record, name="post")
    context = await _load(coordinator, {"max_tokens": 400, "keep_recent": 4})
    contributed = await coordinator.collect_contributions("observability.events")
    assert ["context:pre_compact", "context:post_compact"] in contributed

    await context.add_message({"role": "user", "content": "short"})
    await context.get_messages_for_request()
    assert seen == []  # under the threshold: nothing to compact
    for i in range(40):
        await context.add_message({"role": "user", "content": f"message {i} " + "x" * 80})
    window = await context.get_messages_for_request()
    (pre_event, pre), (post_event, post) = seen
    assert (pre_event, post_event) == ("context:pre_compact", "context:post_compact")
    assert pre["message_count"] == 41 and pre["token_count"] > 400
    assert post["message_count"] == len(window) and post["token_count"] <= 400


# amplifier's messages, block for block (amplifier_core.message_models)
AMPLIFIER_MESSAGES: list[dict[str, Any]] = [
    {"role": "system", "content": "You are terse."},
    {"role": "developer", "content": "Prefer metric units."},
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "What is in this picture?"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
        ],
    },
    {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "Look first.", "signature": "sig-1", "content": ["enc", "rs_1"]},
            {"type": "redacted_thinking", "data": "opaque=="},
            {"type": "reasoning", "content": ["enc-2"], "summary": [{"type": "summary_text", "text": "measure"}]},
            {"type": "text", "text": "Let me measure it."},
            {"type": "tool_call", "id": "tc_1", "name": "measure", "input": {"unit": "cm"}},
        ],
    },
    {
        "role": "tool",
        "tool_call_id": "tc_1",
        "content": [{"type": "tool_result", "tool_call_id": "tc_1", "output": {"cm": 12}}],
    },
    {"role": "assistant", "content": "It is 12 cm wide.", "metadata": {"provider": "scripted"}},
]


async def test_developer_role_and_content_blocks_round_trip() -> None:
    """001: "Accept the developer role and amplifier's content blocks (thinking, redacted thinking, tool
    call, tool result, image, reasoning) and round-trip them"."""
    for message in AMPLIFIER_MESSAGES:
        Message.model_validate(message)  # they are amplifier's own messages
    context = ContextManager(max_tokens=100_000)
    for message in AMPLIFIER_MESSAGES:
        await context.add_message(message)
    assert await context.get_messages() == AMPLIFIER_MESSAGES
    assert await context.get_messages_for_request() == AMPLIFIER_MESSAGES  # nothing to compact: sent as given

    stored = await context.history.get_messages(context.agent_id, session_id=context.session_id)
    assert stored[1].role == "system"  # developer instructions are pinned like system ones
    assert [c.id for c in stored[3].tool_calls] == ["tc_1"] and stored[4].tool_result.tool_call_id == "tc_1"

    resumed = ContextManager(max_tokens=100_000)
    await resumed.set_messages(await context.get_messages())
    assert await resumed.get_messages() == AMPLIFIER_MESSAGES


async def test_tool_call_arguments_cut_off_mid_call_are_stored_and_given_back_as_written() -> None:
    """001 carries ``function.arguments`` as a string; a model cut off mid-call writes one that is not JSON.
    ``add_message`` refused it (``InvalidMessage``), so the orchestrator could not record the turn."""
    context = ContextManager(max_tokens=100_000)
    raw = '{"path": "notes/' + "a" * 400
    cut = {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "read_file", "arguments": raw}}],
    }
    listed = {
        **cut,
        "tool_calls": [{**cut["tool_calls"][0], "id": "call_2", "function": {"name": "f", "arguments": "[1]"}}],
    }
    for message in (cut, listed):
        await context.add_message(message)
        await context.add_message({"role": "tool", "tool_call_id": message["tool_calls"][0]["id"], "content": "error"})
    assert (await context.get_messages())[::2] == [cut, listed]
    assert (await context.get_messages_for_request())[::2] == [cut, listed]  # sent as written
    stored = await context.history.get_messages(context.agent_id, session_id=context.session_id)
    assert DEFAULT_COUNTER.count_message(stored[0]) > len(raw) // 4  # counted with what the model wrote


async def test_tool_call_arguments_that_are_an_object_no_store_keeps_are_stored_as_written() -> None:
    """A JSON object in ``function.arguments`` that Ravi cannot keep as an object (NaN, which JSON has no spelling
    for, negative zero, an escaped lone surrogate, nesting deeper than JSON may) was refused, and nesting deep
    enough for the parser raised a bare RecursionError: the orchestrator could not record the turn."""
    context = ContextManager(max_tokens=100_000)
    too_deep, deepest = ('{"x": ' + "[" * n + "]" * n + "}" for n in (80, 100_000))
    for i, raw in enumerate(('{"x": NaN}', '{"x": -0.0}', '{"x": "\\ud800"}', too_deep, deepest)):
        call = {"id": f"call_{i}", "type": "function", "function": {"name": "f", "arguments": raw}}
        message = {"role": "assistant", "content": None, "tool_calls": [call]}
        await context.add_message(message)
        await context.add_message({"role": "tool", "tool_call_id": call["id"], "content": "error"})
        assert (await context.get_messages())[-2] == message


async def test_a_dict_is_the_contexts_own_once_added() -> None:
    """001 keeps the transcript non-destructive and hands readers copies: an orchestrator that reuses or edits
    the dict it added, or one it got back, changes nothing the context holds."""
    context = ContextManager(max_tokens=100_000)
    added = {"role": "user", "content": [{"type": "text", "text": "hi"}], "x_trace": {"spans": ["a"]}}
    await context.add_message(added)
    added["content"][0]["text"] = "rewritten"
    added["x_trace"]["spans"].append("b")
    read = await context.get_messages()
    read[0]["content"].append({"type": "text", "text": "more"})
    expected = [{"role": "user", "content": [{"type": "text", "text": "hi"}], "x_trace": {"spans": ["a"]}}]
    assert await context.get_messages() == expected
    assert await context.get_messages_for_request() == expected


async def test_a_developer_message_is_kept_through_compaction() -> None:
    """001: "Preserves system messages during compaction" (a developer message is one) and "Compaction MUST be
    ephemeral": the stored transcript stays whole."""
    context = ContextManager(max_tokens=300, keep_recent=2)
    await context.add_message({"role": "developer", "content": "Be brief."})
    for i in range(30):
        await context.add_message({"role": "user", "content": [{"type": "text", "text": f"question {i} " + "q" * 60}]})
    window = await context.get_messages_for_request()
    assert window[0] == {"role": "developer", "content": "Be brief."}
    assert DEFAULT_COUNTER.count_messages([ChatMessage.from_openai({**m, "role": "system"}) for m in window[:1]]) > 0
    assert len(await context.get_messages()) == 31


async def test_malformed_messages_are_refused_and_nothing_is_lost() -> None:
    """001: 'if "role" not in message: raise ValueError("Message must have \'role\' field")'; Ravi raises its typed
    InvalidMessage (a ValueError) and keeps what was stored."""
    context = ContextManager()
    await context.add_message({"role": "user", "content": "kept"})
    for bad in ({}, {"role": "wizard", "content": "x"}, {"role": "user", "content": [{"type": "image"}]}):
        with pytest.raises(InvalidMessage):
            await context.add_message(bad)
    assert await context.get_messages() == [{"role": "user", "content": "kept"}]


# -- a real AmplifierSession ------------------------------------------------------------------------------------


class ScriptedProvider:
    """A provider with a window of 6,000 tokens and 1,000 of output: Ravi's budget is 4,000."""

    name = "scripted"

    def __init__(self) -> None:
        self.requests: list[list[dict[str, Any]]] = []

    def get_info(self) -> ProviderInfo:
        return ProviderInfo(
            id="scripted", display_name="Scripted", defaults={"context_window": 6_000, "max_output_tokens": 1_000}
        )

    async def complete(self, request: ChatRequest, **_: Any) -> ChatResponse:
        sent = [m.model_dump(exclude_none=True) for m in request.messages]
        self.requests.append(sent)
        last = sent[-1]
        if last["role"] == "user" and "measure" in str(last["content"]):
            call = ToolCall(id=f"call_{len(self.requests)}", name="measure", arguments={"unit": "cm"})
            return ChatResponse(content=[TextBlock(text="Measuring.")], tool_calls=[call])
        return ChatResponse(content=[TextBlock(text=f"reply {len(self.requests)} " + "r" * 400)])


class LoopOrchestrator:
    """The smallest tool loop: ask the context for the request, call the provider, run tools, record every turn."""

    async def execute(
        self, prompt: str, context: Any, providers: dict[str, Any], tools: dict[str, Any], **_: Any
    ) -> str:
        provider = next(iter(providers.values()))
        await context.add_message({"role": "user", "content": prompt})
        while True:
            messages = await context.get_messages_for_request(provider=provider)
            response = await provider.complete(ChatRequest(messages=[Message.model_validate(m) for m in messages]))
            text = "".join(b.text for b in response.content if isinstance(b, TextBlock))
            turn: dict[str, Any] = {"role": "assistant", "content": text}
            if response.tool_calls:
                turn["tool_calls"] = [
                    {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": json.dumps(c.arguments)}}
                    for c in response.tool_calls
                ]
            await context.add_message(turn)
            if not response.tool_calls:
                return text
            for call in response.tool_calls:
                result = await tools[call.name].execute(call.arguments)
                await context.add_message({"role": "tool", "tool_call_id": call.id, "content": str(result.output)})


class Loader(ModuleLoader):
    """amplifier's loader, with the test's orchestrator beside what it discovers (Ravi comes from its entry point)."""

    async def load(self, module_id: str, config: dict[str, Any] | None = None, **kwargs: Any) -> Any:
        if module_id == "loop-scripted":

            async def mount(coordinator: Any) -> None:
                await coordinator.mount("orchestrator", LoopOrchestrator())

            return mount
        return await super().load(module_id, config, **kwargs)


async def test_a_real_amplifier_session_runs_turns_on_ravi() -> None:
    """001: "session: orchestrator: loop-basic, context: my-context" with the documented context config; every
    request fits the provider's budget, the transcript stays whole, and a resumed session keeps it."""
    history = InMemoryHistoryProvider()
    plan = {
        "session": {
            "orchestrator": "loop-scripted",
            "context": {
                "module": "context-ravi",
                "config": {"max_tokens": 100_000, "compaction_threshold": 0.8, "history": history},
            },
        }
    }
    session = AmplifierSession(plan, session_id="amp-1")
    session.coordinator.loader = Loader(coordinator=session.coordinator)
    await session.initialize()
    context = session.coordinator.get("context")
    assert isinstance(context, ContextManager) and context.session_id == "amp-1"
    provider = ScriptedProvider()
    await session.coordinator.mount("providers", provider, name="scripted")
    await session.coordinator.mount("tools", MockTool("measure", "12 cm"), name="measure")

    compactions: list[dict[str, Any]] = []

    async def on_compact(event: str, data: dict[str, Any]) -> Any:
        compactions.append(dict(data))

    session.coordinator.hooks.register("context:post_compact", on_compact, name="test")
    for i in range(30):
        await session.execute(f"turn {i}: measure the box" if i % 5 == 0 else f"turn {i}: " + "p" * 300)
    budget = 6_000 - 1_000 - 1_000
    for request in provider.requests:
        sent = [ChatMessage.from_openai(m) for m in request]
        assert DEFAULT_COUNTER.count_messages(sent) <= budget
        calls = {c.id for m in sent for c in m.tool_calls}
        assert {m.tool_result.tool_call_id for m in sent if m.tool_result} <= calls
    raw = await context.get_messages()
    assert len(raw) == 30 * 2 + 6 * 2  # 30 prompts and answers, 6 tool calls with their results
    assert len(provider.requests[-1]) < len(raw)  # the last request was compacted, the transcript was not
    assert compactions and all(c["token_count"] <= budget for c in compactions)
    assert compactions[-1]["session_id"] == "amp-1"  # amplifier adds its default fields to Ravi's events
    await session.cleanup()

    again = AmplifierSession(plan, session_id="amp-1", is_resumed=True)
    again.coordinator.loader = Loader(coordinator=again.coordinator)
    await again.initialize()
    resumed = again.coordinator.get("context")
    await resumed.set_messages(raw[2:])  # the runtime's filtered copy: ignored, the store's transcript is whole
    assert await resumed.get_messages() == raw
    await resumed.set_messages(raw[:2])  # later calls replace it
    assert await resumed.get_messages() == raw[:2]
    await again.cleanup()


# -- every chat dict comes back as it was added ------------------------------------------------------------------

_text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=20)
_ids = st.text("abcdef0123456789_", min_size=1, max_size=8)
_call_ids = st.sampled_from(["0", "1"]) | _ids  # often the same: results that answer a call, twice, or apart
_json = st.recursive(
    st.none() | st.booleans() | st.integers(-1000, 1000) | _text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=6,
)
_blocks = st.one_of(
    st.builds(lambda t: {"type": "text", "text": t}, _text),
    st.builds(lambda t, s: {"type": "thinking", "thinking": t, "signature": s}, _text, _text),
    st.builds(lambda d: {"type": "redacted_thinking", "data": d}, _text),
    st.builds(
        lambda c, t: {"type": "reasoning", "content": c, "summary": [{"type": "summary_text", "text": t}]},
        st.lists(_text, max_size=2),
        _text,
    ),
    st.builds(lambda d: {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": d}}, _ids),
)


@st.composite
def chat_dicts(draw: st.DrawFn) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for _ in range(draw(st.integers(1, 6))):
        role = draw(st.sampled_from(["system", "developer", "user", "assistant", "tool"]))
        content: Any = draw(_text | st.lists(_blocks, max_size=3))
        message: dict[str, Any] = {"role": role, "content": content}
        if role == "assistant" and draw(st.booleans()):
            call_id = draw(_call_ids)
            args = draw(st.dictionaries(_text, _json, max_size=3))
            if draw(st.booleans()):
                encoded = json.dumps(args, separators=(",", ":") if draw(st.booleans()) else None)
                call = {"id": call_id, "type": "function", "function": {"name": "f", "arguments": encoded}}
                message["tool_calls"] = [call]
            else:
                message["content"] = (
                    [*content, {"type": "tool_call", "id": call_id, "name": "f", "input": args}]
                    if isinstance(content, list)
                    else content
                )
        if role == "tool":
            call_id = draw(_call_ids)
            message = {"role": "tool", "tool_call_id": call_id, "content": draw(_text)}
            if draw(st.booleans()):
                output = draw(_json)
                message["content"] = [{"type": "tool_result", "tool_call_id": call_id, "output": output}]
        if draw(st.booleans()):
            message["metadata"] = draw(st.dictionaries(_text, _json, min_size=1, max_size=2))
        out.append(message)
    return out


@settings(max_examples=200, deadline=None)
@given(chat_dicts())
def test_any_chat_dict_round_trips(messages: list[dict[str, Any]]) -> None:
    """001: content blocks and the developer role "round-trip": get_messages gives every dict back as
    it was added, and a request under budget sends them as they were added."""

    async def main() -> None:
        context = ContextManager()
        for message in messages:
            await context.add_message(message)
        assert await context.get_messages() == messages
        assert await context.get_messages_for_request() == _as_sent(messages)

    asyncio.run(main())


def _calls_of(message: dict[str, Any]) -> list[str]:
    """The ids an assistant dict calls (``tool_calls``, and ``tool_call`` blocks in its content)."""
    if message["role"] != "assistant":
        return []
    blocks = message["content"] if isinstance(message["content"], list) else []
    ids = [call["id"] for call in message.get("tool_calls", ())]
    return ids + [block["id"] for block in blocks if block.get("type") == "tool_call" and block["id"] not in ids]


def _as_sent(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` as a provider takes them (decisions 111 and 113): each result right after its call's group
    (moved up when stored apart from it), left out when no call before it has its id or that call has a result
    already; a call no result answers taken out of its message (rebuilt from its blocks), and the message left
    out when it says nothing else. Every other dict as it was added."""
    from ravi.agents.context.chat_dicts import from_chat_dict, to_chat_dict
    from ravi.agents.context.units import without_calls

    where: dict[str, int] = {}  # each call id: the newest message calling it
    answered: set[tuple[int, str]] = set()
    apart: dict[int, list[dict[str, Any]]] = {}  # the results to move up after each call's group
    sent: set[int] = set()  # the results sent where they are
    group = -1  # the message whose group is being read
    for i, message in enumerate(messages):
        if message["role"] == "tool":
            at = where.get(message["tool_call_id"])
            if at is not None and (at, message["tool_call_id"]) not in answered:
                answered.add((at, message["tool_call_id"]))
                if at == group:
                    sent.add(i)
                else:
                    apart.setdefault(at, []).append(message)
        elif message["role"] not in ("system", "developer"):
            group = i if _calls_of(message) else -1
            for call in _calls_of(message):
                where[call] = i
    out: list[dict[str, Any]] = []
    moved: list[dict[str, Any]] = []  # the results moved up after the group being written
    for i, message in enumerate(messages):
        if message["role"] in ("tool", "system", "developer"):
            if message["role"] != "tool" or i in sent:
                out.append(message)
            continue
        out += moved
        moved = apart.get(i, [])
        unanswered = {c for c in _calls_of(message) if (i, c) not in answered}
        if not unanswered:
            out.append(message)
        elif (kept := without_calls(from_chat_dict(message), unanswered)) is not None:
            out.append(to_chat_dict(kept, request=True))
    return out + moved


@settings(max_examples=300, deadline=None)
@given(chat_dicts(), st.integers(0, 3))
# a dict whose own metadata holds the key under which a stored dict records how to give it back
@example([{"role": "system", "content": "", "metadata": {"chat_dict": None}}], 0)
def test_a_request_that_does_not_compact_sends_no_tool_result_without_its_call(
    stored: list[dict[str, Any]], resumed: int
) -> None:
    """001: "tool_use and tool_result messages must be kept together". A request under budget sent the transcript
    as stored, a tool result whose call was never stored with it (a saved conversation resumed from the middle of
    a tool group, a result added on its own): the provider refuses such a request. Now every result sent has its
    call before it, and nothing else is left out (a call sent keeps every result stored after it)."""

    async def main() -> None:
        context = ContextManager()
        await context.set_messages(stored[resumed:])  # a slice of a saved conversation, as a session resumed
        sent = await context.get_messages_for_request()
        assert sent == _as_sent(stored[resumed:])
        calls: set[str] = set()
        for message in sent:
            if message["role"] == "tool":
                assert message["tool_call_id"] in calls, "Orphaned tool results found!"
            elif message["role"] == "assistant":
                calls.update(call["id"] for call in message.get("tool_calls", ()))
                blocks = message["content"] if isinstance(message["content"], list) else []
                calls.update(block["id"] for block in blocks if block.get("type") == "tool_call")
        assert await context.get_messages() == stored[resumed:]  # the transcript itself is kept as it is

    asyncio.run(main())


def test_a_dict_the_pipeline_changed_is_rebuilt_from_its_blocks() -> None:
    """001: "Compaction MUST be ephemeral"; a stored dict whose content a strategy changed is sent as changed
    (not as the stale original), keeping its ``developer`` role, while the raw transcript keeps the original."""
    from ravi.agents.context.chat_dicts import from_chat_dict, to_chat_dict
    from ravi.kernel.messages import TextBlock

    original = {"role": "developer", "content": [{"type": "text", "text": "x" * 500, "visibility": "developer"}]}
    stored = from_chat_dict(original)
    shortened = stored.model_copy(update={"content": (TextBlock(text="x" * 20),)})
    assert to_chat_dict(stored, request=True) == original
    assert to_chat_dict(shortened, request=True) == {"role": "developer", "content": "x" * 20}
    assert to_chat_dict(shortened) == original  # outside a request: the dict as stored


async def test_bad_settings_are_typed_errors() -> None:
    """A value is used exactly or refused: ``True`` is not a threshold, and a history that is not a store (a name
    from a YAML mount plan, say) is a ConfigurationError, not an AttributeError later."""
    from ravi.kernel.errors import InvalidArgument

    with pytest.raises(InvalidArgument):
        ContextManager(compaction_threshold=True)
    with pytest.raises(ConfigurationError, match="history"):
        await _load(MockCoordinator(), {"history": "postgres"})


async def test_bad_arguments_are_refused_when_the_manager_is_built() -> None:
    """An agent id, a list of tools, a reserve and a mount config that cannot be used are refused when the
    manager is built, with Ravi's typed errors, not as a builtin error or at the first request."""
    for agent_id in ("", 5):
        with pytest.raises(InvalidArgument, match="agent_id"):
            ContextManager(agent_id=agent_id)  # type: ignore[arg-type]
    for tools in (5, "search", {"name": "search"}):
        with pytest.raises(InvalidArgument, match="tools"):
            ContextManager(tools=tools)  # type: ignore[arg-type]
    for reserve in (-1, "10", True):
        with pytest.raises(InvalidArgument, match="reserve"):
            ContextManager(reserve=reserve)  # type: ignore[arg-type]
    for config in (["max_tokens"], "max_tokens=10"):
        with pytest.raises(ConfigurationError, match="config"):
            await _load(MockCoordinator(), config)  # type: ignore[arg-type]


async def test_a_session_id_given_is_used_exactly_or_refused() -> None:
    """An empty ``session_id`` in the mount config stored the conversation under a random id, which no resume
    finds; it is refused. A coordinator without a session id still gets one of the manager's own."""
    with pytest.raises(InvalidArgument, match="session_id"):
        ContextManager(session_id="")
    with pytest.raises(InvalidArgument, match="session_id"):
        await _load(MockCoordinator(), {"session_id": ""})
    assert (await _load(MockCoordinator(), {"session_id": "s-1"})).session_id == "s-1"
    assert ContextManager().session_id


@pytest.mark.parametrize("failure", [RuntimeError("provider down"), ConfigurationError("bad key")])
async def test_a_summary_the_model_cannot_write_leaves_a_window_that_fits(failure: Exception) -> None:
    """001: the orchestrator trusts the manager to return messages that fit. A model that failed while writing the
    summary made ``get_messages_for_request`` raise its error (a bare ``RuntimeError`` from a model function);
    the window is now trimmed to the budget without a summary, and ``summarization_failed`` says why."""
    from ravi.agents.llm import CallableLLMClient

    def model(messages: Any) -> str:
        raise failure

    context = ContextManager(max_tokens=400, keep_recent=4, llm=CallableLLMClient(model))
    events: list[Any] = []
    context.subscribe(events.append)
    for i in range(40):
        await context.add_message({"role": "user", "content": f"message {i} " + "word " * 20})
    window = await context.get_messages_for_request()
    assert window and window[-1]["content"].startswith("message 39 ")
    assert DEFAULT_COUNTER.count_messages([ChatMessage.user(m["content"]) for m in window]) <= 400
    failed = [e for e in events if e.kind == "summarization_failed"]
    assert failed
    if isinstance(failure, RaviError):
        assert failed[0].error is failure
    else:  # the model function's own exception, typed: a RaviError with it as the cause
        assert type(failed[0].error) is RaviError and failed[0].error.__cause__ is failure
    assert len(await context.get_messages()) == 40


class _ClosingHistory(InMemoryHistoryProvider):
    """An in-memory store that, like a Postgres or Redis one, holds something to release."""

    def __init__(self) -> None:
        super().__init__()
        self.closed = 0

    async def aclose(self) -> None:
        self.closed += 1


async def test_a_store_built_from_the_settings_closes_with_the_coordinator(monkeypatch: pytest.MonkeyPatch) -> None:
    """001: mount's cleanup; a pool mount opened from the settings is released when the session ends, while a
    store given in the config is left to its owner."""
    import ravi.agents.settings as settings_module

    built = _ClosingHistory()
    monkeypatch.setattr(settings_module, "build_store", lambda kind: built)
    coordinator = MockCoordinator()
    context = await _load(coordinator)
    await context.add_message({"role": "user", "content": "hello"})
    assert built.closed == 0
    await coordinator.cleanup()
    assert built.closed == 1

    given_store = _ClosingHistory()
    coordinator = MockCoordinator()
    await _load(coordinator, {"history": given_store})
    await coordinator.cleanup()
    assert given_store.closed == 0
