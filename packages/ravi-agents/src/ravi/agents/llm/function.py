"""``CallableLLMClient``: any model function, plain, async or streaming, as an ``LLMClient``."""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterable, Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any

from ravi.kernel.cancel import CancelToken
from ravi.kernel.errors import ConfigurationError, InvalidArgument
from ravi.kernel.messages import ChatMessage

Completion = str | Iterable[str] | AsyncIterable[str]
"""What a model function gives: the text, or the text in pieces (a stream)."""


class CallableLLMClient:
    """Wrap a model function as an :class:`~ravi.kernel.llm.LLMClient`, so the summarising strategies and
    :func:`~ravi.agents.context.functional.summarize` can use any model.

    ``function(messages)`` is given the messages to answer (``ChatMessage`` objects) and returns the reply's text,
    or an awaitable of it, or the text in pieces: an iterable or async iterable of strings (a stream), which is
    collected into one text. Its ``max_tokens`` is the caller's wish; a function that keeps to it does so on its
    own. ``cancel`` is checked before the function is called and again once its text is whole.

    Example:
        >>> import asyncio
        >>> async def stream(messages):
        ...     for piece in ("The user ", "prefers ", "Postgres."):
        ...         yield piece
        >>> client = CallableLLMClient(stream)
        >>> asyncio.run(client.complete([ChatMessage.user("summarise")]))
        'The user prefers Postgres.'
    """

    def __init__(self, function: Callable[[Sequence[ChatMessage]], Completion | Awaitable[Completion]]) -> None:
        if not callable(function):
            raise ConfigurationError(
                f"CallableLLMClient takes a function of the messages, got {type(function).__name__}",
                hint="for example CallableLLMClient(lambda messages: my_model(messages))",
            )
        self._function = function

    async def complete(
        self, messages: Sequence[ChatMessage], *, max_tokens: int | None = None, cancel: CancelToken | None = None
    ) -> str:
        """The function's reply to ``messages``, collected into one text.

        Raises:
            InvalidArgument: the function gave something other than text or pieces of text.
            CancelledByToken: ``cancel`` was cancelled.
        """
        if cancel is not None:
            cancel.raise_if_cancelled()
        result: Any = self._function(messages)
        if inspect.isawaitable(result):
            result = await result
        if isinstance(result, str):
            text = result
        elif isinstance(result, AsyncIterable):
            text = "".join([_piece(p) async for p in result])
        elif isinstance(result, Iterable) and not isinstance(result, bytes | bytearray | Mapping):
            text = "".join(_piece(p) for p in result)
        else:
            raise InvalidArgument(
                f"the model function returned {type(result).__name__}, not text or pieces of text",
                hint="return a str, or yield the reply's text in str pieces",
            )
        if cancel is not None:
            cancel.raise_if_cancelled()
        return text


def _piece(piece: object) -> str:
    if not isinstance(piece, str):
        raise InvalidArgument(f"the model function streamed a {type(piece).__name__}, not a piece of text")
    return piece


__all__ = ["CallableLLMClient", "Completion"]
