"""The stored token count: one rule, kept by every store beside each message, so it must never drift."""

from __future__ import annotations

import pytest

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
