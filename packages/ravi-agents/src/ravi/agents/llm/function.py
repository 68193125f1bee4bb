"""``CallableLLMClient``: any model function, plain, async or streaming, as an ``LLMClient``."""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
from collections.abc import AsyncIterable, Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from pydantic import BaseModel

from ravi.agents.llm._request import check_request
from ravi.kernel.cancel import CancelledByToken, CancelToken
from ravi.kernel.errors import BackendUnavailable, ConfigurationError, InvalidArgument, PermissionDenied, RaviError
from ravi.kernel.messages import ChatMessage

Completion = str | Iterable[str] | AsyncIterable[str]
"""What a model function gives: the text, or the text in pieces (a stream)."""


class CallableLLMClient:
    """Wrap a model function as an :class:`~ravi.kernel.llm.LLMClient`, so the summarising strategies and
    :func:`~ravi.agents.context.functional.summarize` can use any model.

    ``function(messages)`` is given the messages to answer (``ChatMessage`` objects) and returns the reply's text,
    or an awaitable of it, or the text in pieces: an iterable or async iterable of strings (a stream), which is
    collected into one text. A plain function (not ``async def``) is called in a worker thread of its own, with
    the caller's context variables, so the event loop runs on while a blocking model call waits (a function that
    needs the running loop is written ``async def``); an ``async def`` function, or an async generator function,
    is called on the event loop. A stream that is not a list or a tuple (a generator reading a model's response)
    is read in a worker thread of its own, one piece at a time, so the event loop runs on while the model streams.
    A function whose signature has a ``max_tokens`` parameter is given the caller's ``max_tokens`` as that
    keyword, when one is given (and always, ``None`` for no limit, when the parameter has no default); any other
    function is called with the messages alone, and keeps to a length on its own. ``cancel`` is checked before
    the function is called, while a plain function's call is awaited (a blocking call is left at the cancel, to
    finish in its thread, its reply no one's), after each piece of a stream (a cancelled stream is read no further
    and closed), while a piece of a stream read in its worker thread is awaited (a stalled stream is left at the
    cancel) and once its text is whole; a stream left early (cancelled, a bad piece, the awaiting task cancelled)
    is closed, in its worker thread once the piece being read is in.

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
        if isinstance(function, type) or not callable(function):
            # a class is callable, and called with the messages it gives an instance (str(messages) their repr),
            # not the model's reply
            what = f"the class {function.__name__}" if isinstance(function, type) else type(function).__name__
            raise ConfigurationError(
                f"CallableLLMClient takes a function of the messages, got {what}",
                hint="for example CallableLLMClient(lambda messages: my_model(messages))",
            )
        self._takes_max_tokens = _takes_max_tokens(function)
        self._on_loop = _is_async(function)
        self._function = function

    async def complete(
        self, messages: Sequence[ChatMessage], *, max_tokens: int | None = None, cancel: CancelToken | None = None
    ) -> str:
        """The function's reply to ``messages``, collected into one text.

        Raises:
            InvalidArgument: ``messages`` are not ``ChatMessage`` objects, ``max_tokens`` is neither ``None`` nor
                an integer > 0, or ``cancel`` is not a ``CancelToken`` (before the function is called); or the
                function gave something other than text or pieces of text.
            CancelledByToken: ``cancel`` was cancelled.
            BackendUnavailable: the function raised a ``ConnectionError`` or ``TimeoutError`` (its model could not
                be reached), the original as ``__cause__``.
            PermissionDenied: the function raised a ``PermissionError``, the original as ``__cause__``.
            RaviError: the function (or its stream) raised any other exception, the original as ``__cause__``; a
                ``RaviError`` it raises is raised as it is.
        """
        check_request(messages, max_tokens, cancel)
        if cancel is not None:
            cancel.raise_if_cancelled()
        try:
            return await self._complete(messages, max_tokens, cancel)
        except RaviError:  # Ravi's own (a cancel, a reply that is not text, one the function raised itself)
            raise
        except Exception as error:  # the function's own failure, typed as a provider's is; asyncio's
            # CancelledError is no Exception and passes as it is
            original = error.error if isinstance(error, _Stopped) else error
            raise _failure(original) from original

    async def _complete(
        self, messages: Sequence[ChatMessage], max_tokens: int | None, cancel: CancelToken | None
    ) -> str:
        if self._takes_max_tokens is not None and (max_tokens is not None or self._takes_max_tokens):
            # a parameter without a default is always given, None when the caller sets no limit
            call = functools.partial(self._function, messages, max_tokens=max_tokens)  # type: ignore[call-arg]
        else:
            call = functools.partial(self._function, messages)
        context = contextvars.copy_context()  # the function's context variables, as on the event loop
        result: Any = call() if self._on_loop else await _call_in_thread(call, context, cancel)
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
        elif isinstance(result, list | tuple):
            text = _collect(result, cancel)
        elif isinstance(result, Iterable) and not isinstance(result, bytes | bytearray | Mapping):
            text = await _collect_in_thread(result, context, cancel)
        else:
            raise InvalidArgument(
                f"the model function returned {type(result).__name__}, not text or pieces of text",
                hint="return a str, or yield the reply's text in str pieces",
            )
        if cancel is not None:
            cancel.raise_if_cancelled()
        return text


def _failure(error: Exception) -> RaviError:
    """The Ravi error for an exception the model function raised, as :class:`OpenAICompatibleClient` types a
    provider's failures: unreachable, refused, or failed."""
    try:
        text = str(error)
    except Exception:  # an exception whose __str__ raises, or gives no text: named by its class alone
        text = ""
    what = f"{type(error).__name__}: {text}" if text else type(error).__name__
    if isinstance(error, ConnectionError | TimeoutError):
        return BackendUnavailable(f"the model function could not reach its model ({what})")
    if isinstance(error, PermissionError):
        return PermissionDenied(f"the model function was refused ({what})")
    return RaviError(f"the model function failed ({what})")


def _piece(piece: object) -> str:
    if not isinstance(piece, str):
        raise InvalidArgument(f"the model function streamed a {type(piece).__name__}, not a piece of text")
    return str.__str__(piece)


def _collect(given: list[object] | tuple[object, ...], cancel: CancelToken | None) -> str:
    """The pieces of a list or tuple (all there already: nothing to read in a thread, nothing to close) joined,
    ``cancel`` checked after each one."""
    pieces: list[str] = []
    for piece in given:
        pieces.append(_piece(piece))
        if cancel is not None:
            cancel.raise_if_cancelled()
    return "".join(pieces)


_END = object()


async def _call_in_thread(call: Callable[[], object], context: contextvars.Context, cancel: CancelToken | None) -> Any:
    """``call()`` in a worker thread of its own, in ``context`` (a plain function blocks while the model answers;
    on the event loop it would stop every other task). A cancel of ``cancel`` while it runs ends the wait at once
    (``CancelledByToken``), as a task cancelled does: the call goes on in its thread, its reply no one's."""
    loop = asyncio.get_running_loop()
    worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ravi-llm-call")
    cancelled = loop.create_future()
    dispose = cancel.add_callback(lambda: loop.call_soon_threadsafe(_settle, cancelled)) if cancel is not None else None
    try:
        return await _read(loop, worker, context, cancelled, _invoke, call)
    except _StillReading:
        raise CancelledByToken(cancel.reason if cancel is not None else None) from None
    finally:
        if dispose is not None:
            dispose()
        worker.shutdown(wait=False)


def _invoke(call: Callable[[], object]) -> object:
    return call()


def _is_async(function: Callable[..., object]) -> bool:
    """Whether ``function`` (or its ``__call__``) is an ``async def`` function or async generator function: called
    on the event loop, where what it does before its first ``await`` runs at once. Any other function is called in
    a worker thread."""
    candidates = (function, getattr(function, "__call__", None))  # noqa: B004 (its kind, not whether it is callable)
    return any(inspect.iscoroutinefunction(c) or inspect.isasyncgenfunction(c) for c in candidates)


async def _collect_in_thread(stream: Iterable[object], context: contextvars.Context, cancel: CancelToken | None) -> str:
    """As :func:`_collect`, each piece read in a worker thread of the stream's own (a sync generator blocks while
    the model streams; on the event loop it would stop every other task), in ``context`` (the one the function
    was called in). The stream is closed in that thread too, after the piece being read: a generator cannot be
    closed while it runs, and a task cancelled while a piece is being read does not wait for it."""
    loop = asyncio.get_running_loop()
    worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ravi-llm-stream")
    iterator: Iterator[object] | None = None
    pieces: list[str] = []
    # a cancel while a piece is being read ends the wait for it: a stalled stream is left at once
    cancelled = loop.create_future()
    dispose = cancel.add_callback(lambda: loop.call_soon_threadsafe(_settle, cancelled)) if cancel is not None else None
    try:
        iterator = await _read(loop, worker, context, cancelled, iter, stream)
        while (piece := await _read(loop, worker, context, cancelled, _next, iterator)) is not _END:
            pieces.append(_piece(piece))
            if cancel is not None:
                cancel.raise_if_cancelled()
        iterator = None  # read to its end: nothing to close
    except (asyncio.CancelledError, _StillReading):
        if iterator is not None:  # closed once the piece being read is in, without waiting for it here
            worker.submit(context.run, _close, iterator)
            iterator = None
        if cancel is not None and cancel.cancelled:
            raise CancelledByToken(cancel.reason) from None
        raise
    finally:
        if dispose is not None:
            dispose()
        try:
            if iterator is not None:  # left early (cancel, a bad piece, the stream's own error): closed now
                await loop.run_in_executor(worker, context.run, _guarded, _close, iterator)
        finally:
            worker.shutdown(wait=False)
    return "".join(pieces)


class _Stopped(Exception):
    """A ``StopIteration`` raised in a worker thread (by the function, its stream's ``iter`` or ``close``), held:
    asyncio cannot set a ``StopIteration`` on a future, which then is never settled."""

    def __init__(self, error: StopIteration) -> None:
        super().__init__(repr(error))
        self.error = error


def _guarded(step: Callable[[Any], object], argument: object) -> object:
    """``step(argument)``, a ``StopIteration`` it raises held in a :class:`_Stopped`."""
    try:
        return step(argument)
    except StopIteration as error:
        raise _Stopped(error) from None


class _StillReading(Exception):
    """The stream's cancel token was cancelled while a piece was being read."""


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


async def _read(
    loop: asyncio.AbstractEventLoop,
    worker: ThreadPoolExecutor,
    context: contextvars.Context,
    cancelled: asyncio.Future[None],
    step: Callable[[Any], object],
    argument: object,
) -> Any:
    """``step(argument)`` in the worker thread; ``_StillReading`` as soon as ``cancelled`` is settled (the step
    goes on in the worker, unawaited)."""
    reading = loop.run_in_executor(worker, context.run, _guarded, step, argument)
    try:
        await asyncio.wait((reading, cancelled), return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        reading.add_done_callback(_retrieved)
        raise
    if not reading.done():
        reading.add_done_callback(_retrieved)  # its outcome, an error included, is no one's now
        raise _StillReading
    return reading.result()


def _retrieved(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()


def _next(iterator: Iterator[object]) -> object:
    return next(iterator, _END)


def _close(iterator: object) -> None:
    close = getattr(iterator, "close", None)
    if callable(close):
        close()


def _takes_max_tokens(function: Callable[..., object]) -> bool | None:
    """Whether ``function``'s signature names a ``max_tokens`` parameter that can be passed by keyword: ``None``
    when it does not (or has no signature to read, as some builtins), ``True`` when the parameter has no default
    (it must be given), ``False`` when it has one.

    Raises:
        ConfigurationError: ``function`` cannot be called with the messages as its one argument (and
            ``max_tokens``, when it names one without a default).
    """
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):  # no signature to read: taken as it is
        return None
    parameter = signature.parameters.get("max_tokens")
    takes: bool | None = None
    if parameter is not None and parameter.kind in (parameter.POSITIONAL_OR_KEYWORD, parameter.KEYWORD_ONLY):
        takes = parameter.default is parameter.empty
    try:
        signature.bind((), **({"max_tokens": None} if takes else {}))
    except TypeError as error:
        raise ConfigurationError(
            f"CallableLLMClient calls its function with one argument, the messages; {function!r} cannot be ({error})",
            hint="def model(messages, max_tokens=None): ... (max_tokens is optional)",
        ) from None
    return takes


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
