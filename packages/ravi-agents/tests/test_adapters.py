"""The public adapter module every framework face is built on: one default context, a bounded stored prefix per
(agent, session), and a framework's original messages kept in metadata and read back only when they are one."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ravi.agents.adapters import Originals, StoredPrefix, append_new, as_context, window_of
from ravi.agents.context import AgentContext, ContextConfig, InMemoryHistoryProvider, SlidingWindowCompaction
from ravi.kernel.errors import ConfigurationError, InvalidArgument
from ravi.kernel.messages import ChatMessage, TextBlock


def test_as_context_has_one_default_read_from_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``None`` is ``ContextConfig.from_settings()``: in memory with the default sliding window when nothing is
    configured, and what ``ravi.toml`` names when it names something."""
    monkeypatch.chdir(tmp_path)
    context = as_context(None)
    assert isinstance(context.config.history, InMemoryHistoryProvider)
    assert [type(s) for s in context.config.pipeline.strategies] == [SlidingWindowCompaction]
    (tmp_path / "ravi.toml").write_text('[context]\nagent_id = "support"\n')
    assert as_context(None).agent_id == "support"


def test_as_context_keeps_what_it_is_given() -> None:
    config = ContextConfig(InMemoryHistoryProvider(), [SlidingWindowCompaction(3)])
    assert as_context(config).config is config
    context = AgentContext(config, agent_id="bot")
    assert as_context(context) is context
    with pytest.raises(ConfigurationError, match="AgentContext, a ContextConfig or None"):
        as_context([SlidingWindowCompaction(3)])  # type: ignore[arg-type]


async def test_window_of_given_messages_stores_nothing() -> None:
    history = InMemoryHistoryProvider()
    context = as_context(ContextConfig(history, [SlidingWindowCompaction(2)]))
    messages = [ChatMessage.user(str(i)) for i in range(5)]
    assert [m.text for m in await window_of(context, "s1", messages)] == ["3", "4"]
    assert await history.get_messages("agent", session_id="s1") == []
    with pytest.raises(InvalidArgument):
        await window_of(context, "", messages)


def test_stored_prefix_says_where_the_new_messages_begin() -> None:
    """A face converts and appends only what a run added; a list it has not seen grown starts again."""
    stored = StoredPrefix(max_sessions=2)
    run = [ChatMessage.user("a"), ChatMessage.user("b")]
    assert stored.start("agent", "s", run) == 0
    stored.mark("agent", "s", run)
    run.append(ChatMessage.user("c"))
    assert stored.start("agent", "s", run) == 2  # only "c" is new
    assert stored.start("agent", "s", [ChatMessage.user("x"), ChatMessage.user("y"), ChatMessage.user("z")]) == 0
    assert stored.start("agent", "s", run[:1]) == 0  # shorter than what was stored: from the start
    stored.forget("agent", "s")
    assert stored.start("agent", "s", run) == 0


def test_stored_prefix_is_kept_per_agent_and_session() -> None:
    """Two agents' sessions of the same name are two sessions (it was keyed by the session id alone)."""
    stored = StoredPrefix()
    run = [ChatMessage.user("a")]
    stored.mark("agent-a", "s", run)
    assert stored.start("agent-a", "s", run) == 1
    assert stored.start("agent-b", "s", run) == 0


@given(st.lists(st.tuples(st.sampled_from("abcdef"), st.sampled_from("xyz")), max_size=60), st.integers(1, 4))
def test_stored_prefix_is_bounded(marks: list[tuple[str, str]], bound: int) -> None:
    """However many sessions it sees, it keeps at most ``max_sessions``, the most recently marked ones."""
    stored = StoredPrefix(max_sessions=bound)
    run = [object()]
    for agent, session in marks:
        stored.mark(agent, session, run)
    assert len(stored) <= bound
    recent = list(dict.fromkeys(reversed(marks)))[:bound]
    assert all(stored.start(agent, session, run) == 1 for agent, session in recent)


@pytest.mark.parametrize("bound", [0, -1, 1.5, True])
def test_stored_prefix_refuses_a_bound_that_is_not_a_positive_integer(bound: object) -> None:
    with pytest.raises(InvalidArgument):
        StoredPrefix(max_sessions=bound)  # type: ignore[arg-type]


def _load(data: object) -> dict[str, str]:
    if not isinstance(data, dict) or not isinstance(data.get("text"), str):
        raise ValueError("not one of ours")
    return {"text": data["text"]}


def test_originals_read_back_only_what_they_kept() -> None:
    originals = Originals("fw", load=_load)
    kept = ChatMessage.user("hi", metadata=originals.keep({"text": "hi"}))
    assert originals.of(kept) == {"text": "hi"}
    assert originals.unchanged(kept, lambda o: (TextBlock(text=o["text"]),)) == {"text": "hi"}
    changed = kept.model_copy(update={"content": (TextBlock(text="shortened"),)})
    assert originals.unchanged(changed, lambda o: (TextBlock(text=o["text"]),)) is None
    assert originals.of(ChatMessage.user("hi")) is None


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(), lambda c: st.lists(c) | st.dictionaries(st.text(), c)
    )
)
def test_an_applications_own_metadata_key_is_not_taken_for_an_original(value: object) -> None:
    """Whatever JSON an application keeps under the framework's key, reading it gives an original or ``None``,
    never the loader's exception."""
    originals = Originals("fw", load=_load)
    message = ChatMessage.user("hi", metadata={"fw": value})
    got = originals.of(message)
    assert got is None or got == _load(json.loads(json.dumps(value)))


def test_stored_prefix_finds_a_message_replaced_in_place_and_takes_a_copy_for_the_same() -> None:
    """LangGraph replaces a message by id in place; a state restored from a checkpoint is a copy of the stored
    one. The first is new, the second is not."""
    stored = StoredPrefix()
    run = [ChatMessage.user("a", id="1"), ChatMessage.user("b", id="2")]
    stored.mark("agent", "s", run)
    copy = [m.model_copy() for m in run]
    assert stored.unstored("agent", "s", copy) == []
    replaced = [ChatMessage.user("A", id="1"), run[1], ChatMessage.user("c", id="3")]
    assert stored.unstored("agent", "s", replaced) == [0, 2]
    assert stored.start("agent", "s", replaced) == 0


async def test_append_new_keeps_what_the_session_holds_as_it_was_stored() -> None:
    """A face that converts the same framework message again (in a new process) makes a message under the same id
    with a new ``created_at``, which the store refuses as a conflict: ``append_new`` appends only what the session
    does not hold, and the stored message stays as stored."""
    history = InMemoryHistoryProvider()
    context = as_context(ContextConfig(history))
    first = ChatMessage.user("hello", id="h1")
    await append_new(context, "s", [first])
    again = first.model_copy(update={"created_at": first.created_at + timedelta(seconds=5)})
    later = ChatMessage.assistant("hi", id="a1")
    await append_new(context, "s", [again, later, later])
    stored = await history.get_messages("agent", session_id="s")
    assert [(m.id, m.created_at) for m in stored] == [("h1", first.created_at), ("a1", later.created_at)]
    await append_new(context, "s", [])
