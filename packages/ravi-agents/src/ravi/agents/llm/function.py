"""``CallableLLMClient``: any model function, plain, async or streaming, as an ``LLMClient``."""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterable, Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel

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
    own. ``cancel`` is checked before the function is called, after each piece of a stream (a cancelled stream is
    read no further and closed) and once its text is whole.

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
        if isinstance(result, BaseModel):  # iterable as a pydantic model is (a ChatMessage, a provider's response
            # object): its fields, not its text
            hint = (
                "return message.text"
                if isinstance(result, ChatMessage)
                else "return the reply's text from it (an OpenAI response's choices[0].message.content)"
            )
            raise InvalidArgument(f"the model function returned a {type(result).__name__}, not its text", hint=hint)
        if isinstance(result, str):
            text = str.__str__(result)  # a plain str: a subclass and its behaviour stay with the function
        elif isinstance(result, AsyncIterable):
            text = await _collect_async(result, cancel)
        elif isinstance(result, Iterable) and not isinstance(result, bytes | bytearray | Mapping):
            text = _collect(result, cancel)
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
    return str.__str__(piece)


def _collect(stream: Iterable[object], cancel: CancelToken | None) -> str:
    """The pieces of ``stream`` joined, ``cancel`` checked after each one: a cancelled stream, even an endless
    one, is read no further and closed."""
    pieces: list[str] = []
    iterator = iter(stream)
    try:
        for piece in iterator:
            pieces.append(_piece(piece))
            if cancel is not None:
                cancel.raise_if_cancelled()
    finally:
        close = getattr(iterator, "close", None)
        if callable(close):
            close()
    return "".join(pieces)


async def _collect_async(stream: AsyncIterable[object], cancel: CancelToken | None) -> str:
    """As :func:`_collect`, for an async stream, which is closed (``aclose``) when left early."""
    pieces: list[str] = []
    iterator = aiter(stream)
    try:
        async for piece in iterator:
            pieces.append(_piece(piece))
            if cancel is not None:
                cancel.raise_if_cancelled()
    finally:
        aclose = getattr(iterator, "aclose", None)
        if callable(aclose):
            await aclose()
    return "".join(pieces)


__all__ = ["CallableLLMClient", "Completion"]
