"""The stored token count: one rule, kept by every store beside each message, so it must never drift."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ravi.kernel.messages import (
    ChatMessage,
    DocumentBlock,
    ImageBlock,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
)
from ravi.kernel.tokens import MESSAGE_OVERHEAD, block_texts, stored_tokens


@pytest.mark.parametrize(
    ("block", "texts"),
    [
        (TextBlock(text="hello"), ("hello",)),
        (ToolResultBlock(tool_call_id="c", content="42 rows"), ("42 rows",)),
        (ToolCallBlock(id="c", name="search", arguments={"q": "straße", "n": 3}), ("search", '{"q":"straße","n":3}')),
        (ThinkingBlock(thinking="let me see", signature="sig"), ("let me see",)),
        (ImageBlock(url="https://example.invalid/a.png"), ("https://example.invalid/a.png",)),
        (DocumentBlock(data="QUJD", media_type="application/pdf"), ("QUJD",)),
        (DocumentBlock(url="https://example.invalid/a.pdf"), ("https://example.invalid/a.pdf",)),
    ],
)
def test_each_block_counts_what_it_sends(block: object, texts: tuple[str, ...]) -> None:
    assert block_texts(block) == texts


def test_a_message_counts_its_blocks_name_and_overhead() -> None:
    call = ToolCallBlock(id="c", name="search", arguments={"q": "x"})  # "search" 2, '{"q":"x"}' 3
    message = ChatMessage(role="assistant", content=(TextBlock(text="abcde"), call), name="planner")
    assert stored_tokens(message) == MESSAGE_OVERHEAD + 2 + 2 + 3 + 2


def test_a_subclass_of_a_block_counts_like_its_base() -> None:
    class Quoted(TextBlock):
        pass

    assert block_texts(Quoted(text="quote")) == ("quote",)
    assert block_texts(object()) == ()


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 400), max_size=30),
    head=st.integers(0, 5),
    before=st.one_of(st.none(), st.integers(0, 10_000)),
    data=st.data(),
)
def test_a_read_gives_each_message_its_offset_asked_in_any_order(
    sizes: list[int], head: int, before: int | None, data: st.DataObject
) -> None:
    """``SessionContext.offset`` is the stored tokens before a message of the part read (``None`` for a head
    message, an unknown id, or a read whose place is unknown), whatever order the messages are asked in."""
    from ravi.kernel.agent import SessionContext

    messages = [ChatMessage.user("x" * n or "y") for n in sizes]
    head = min(head, len(messages))
    session = SessionContext("a", "s")
    session.read_from(messages, head=head, before=before)
    expected: dict[str, int | None] = {m.id: None for m in messages[:head]}
    running = before
    for message in messages[head:]:
        expected[message.id] = running
        if running is not None:
            running += stored_tokens(message)
    asked = data.draw(st.permutations([*expected, "unknown"]))
    for message_id in asked:
        assert session.offset(message_id) == expected.get(message_id)
