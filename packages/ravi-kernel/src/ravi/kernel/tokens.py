"""The stored token count: the heuristic every history store keeps beside each message.

A store counts each message once, when it is appended, with :data:`STORED_COUNTER` (``ceil(chars / 4)`` per block
plus :data:`MESSAGE_OVERHEAD`), and keeps the count beside it: a column in Postgres, a list in Redis, memory in
memory. The counts size a windowed read (``WindowReader.read_window``); the window itself is always measured with
the pipeline's own counter, so a store never has to know which model the window is for.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ravi.kernel.messages import (
    ChatMessage,
    DocumentBlock,
    ImageBlock,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
)

MESSAGE_OVERHEAD = 4
"""Tokens charged per message for the role and the framing, as chat formats add them."""


def _arguments(block: ToolCallBlock) -> tuple[str, ...]:
    return (block.name, json.dumps(dict(block.arguments), separators=(",", ":"), ensure_ascii=False))


def _document(block: DocumentBlock) -> tuple[str, ...]:
    return (block.data or block.url or "",)


_TEXTS: dict[type, Any] = {
    TextBlock: lambda block: (block.text,),
    ToolResultBlock: lambda block: (block.content,),
    ToolCallBlock: _arguments,
    ThinkingBlock: lambda block: (block.thinking,),
    ImageBlock: lambda block: (block.url,),
    DocumentBlock: _document,
}


def block_texts(block: Any) -> tuple[str, ...]:
    """The texts a content block sends to a model (what a counter counts): a text block's text, a tool
    result's content, a tool call's name and compact JSON arguments, thinking, an image's URL, a document's data
    or URL."""
    texts = _TEXTS.get(type(block))
    if texts is None:  # a subclass of a block type (looked up by exact type first: this runs once per block)
        texts = next((f for kind, f in _TEXTS.items() if isinstance(block, kind)), None)
        if texts is None:
            return ()
    return texts(block)  # type: ignore[no-any-return]


def _payload(text: str) -> int:
    """The length of a data URL's payload (what follows its comma), or of any other text."""
    if text.startswith("data:"):
        comma = text.find(",")
        if comma >= 0:
            return len(text) - comma - 1
    return len(text)


def message_chars(message: ChatMessage) -> int:
    """The characters a message carries, 002's measure of a turn (before its estimate divides by 4): the length of
    every :func:`block_texts` of its blocks, an image or document sent inline counted by its base64 payload."""
    total = 0
    for block in message.content:
        inline = isinstance(block, ImageBlock | DocumentBlock)
        for text in block_texts(block):
            total += _payload(text) if inline else len(text)
    return total


class CachedTokenCounter:
    """A counter that counts each message once: subclasses give ``key`` (the memo key, unique per counting
    rule) and ``count_text``; the message's count is kept in its ``memo`` (messages are immutable)."""

    key: str

    def count_text(self, text: str) -> int:
        """Tokens in ``text``."""
        raise NotImplementedError

    def count_message(self, message: ChatMessage) -> int:
        """Tokens in ``message``: its blocks plus :data:`MESSAGE_OVERHEAD`; cached on the message."""
        memo = message.memo
        n = memo.get(self.key)
        if n is None:
            n = MESSAGE_OVERHEAD
            for block in message.content:
                for text in block_texts(block):
                    n += self.count_text(text)
            if message.name:
                n += self.count_text(message.name)
            memo[self.key] = n
        return int(n)

    def count_messages(self, messages: Sequence[ChatMessage]) -> int:
        """Tokens in a whole window."""
        return sum(map(self.count_message, messages))


class HeuristicTokenCounter(CachedTokenCounter):
    """``ceil(chars / 4)`` per block plus 4 per message: no dependency, close to real tokenizers on English.

    Tool calls count their name and compact JSON arguments; images and documents count their payload.

    Example:
        >>> HeuristicTokenCounter().count_message(ChatMessage.user("hello world"))
        7
    """

    key = "tokens:heuristic"

    def count_text(self, text: str) -> int:
        """``ceil(len(text) / 4)``."""
        return -(-len(text) // 4)


STORED_COUNTER = HeuristicTokenCounter()
"""The counter whose counts history stores keep beside each message (one rule for every store, so counts
written by one process are read by every other)."""


def stored_tokens(message: ChatMessage) -> int:
    """The count a store keeps for ``message`` (:data:`STORED_COUNTER`'s, at least 1)."""
    return STORED_COUNTER.count_message(message)


def seed_stored_tokens(message: ChatMessage, tokens: int) -> ChatMessage:
    """Put a count read from a store into ``message``'s memo, so this process never counts it again."""
    message.memo.setdefault(STORED_COUNTER.key, tokens)
    return message


__all__ = [
    "MESSAGE_OVERHEAD",
    "STORED_COUNTER",
    "CachedTokenCounter",
    "HeuristicTokenCounter",
    "block_texts",
    "message_chars",
    "seed_stored_tokens",
    "stored_tokens",
]
