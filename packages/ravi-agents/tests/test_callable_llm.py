"""``CallableLLMClient``: a model function, plain, async or streaming, used wherever an ``LLMClient`` goes."""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

import pytest
from pydantic import BaseModel

from ravi.agents.context import AgentContext, SummarizingContext, summarize
from ravi.agents.llm import CallableLLMClient
from ravi.kernel.cancel import CancelledByToken, CancelToken
from ravi.kernel.errors import (
    BackendUnavailable,
    CompactionError,
    ConfigurationError,
    InvalidArgument,
    PermissionDenied,
    RaviError,
)
from ravi.kernel.llm import LLMClient
from ravi.kernel.messages import ChatMessage

ASKED = [ChatMessage.user("summarise")]


def plain(messages: Sequence[ChatMessage]) -> str:
    return f"{len(messages)} messages"


async def awaited(messages: Sequence[ChatMessage]) -> str:
    return f"{len(messages)} messages"


def pieces(messages: Sequence[ChatMessage]) -> Iterator[str]:
    yield from (f"{len(messages)} ", "messages")


async def stream(messages: Sequence[ChatMessage]) -> AsyncIterator[str]:
    for piece in (f"{len(messages)} ", "messages"):
        yield piece


async def awaited_stream(messages: Sequence[ChatMessage]) -> AsyncIterator[str]:
    return stream(messages)


@pytest.mark.parametrize("function", [plain, awaited, pieces, stream, awaited_stream])
async def test_every_kind_of_function_gives_its_whole_text(function: Any) -> None:
    client = CallableLLMClient(function)
    assert isinstance(client, LLMClient)
    assert await client.complete(ASKED) == "1 messages"


@pytest.mark.parametrize("returned", [None, 5, b"bytes", {"text": "a mapping"}, ["text", 5]])
async def test_what_is_not_text_is_refused(returned: object) -> None:
    with pytest.raises(InvalidArgument, match="model function"):
        await CallableLLMClient(lambda messages: returned).complete(ASKED)


def test_a_client_needs_a_function() -> None:
    with pytest.raises(ConfigurationError, match="function"):
        CallableLLMClient("gpt-4o")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("given", "named"),
    [
        (str, "the class str"),
        (dict, "the class dict"),
        (ChatMessage, "the class ChatMessage"),
        (5, "int"),
        (None, "NoneType"),
    ],
)
def test_what_cannot_be_a_model_function_is_refused_and_named_when_the_client_is_built(given: Any, named: str) -> None:
    """A class is callable: ``CallableLLMClient(str)`` was accepted, and every summary was the messages' repr."""
    with pytest.raises(ConfigurationError, match=f"function of the messages, got {named} \\(hint"):
        CallableLLMClient(given)


async def test_an_instance_with_a_call_method_is_a_model_function() -> None:
    class Model:
        def __call__(self, messages: Sequence[ChatMessage]) -> str:
            return f"{len(messages)} messages"

    assert await CallableLLMClient(Model()).complete(ASKED) == "1 messages"


async def test_cancel_is_checked_before_the_call_and_after_the_stream() -> None:
    called: list[int] = []
    token = CancelToken()
    token.cancel()
    with pytest.raises(CancelledByToken):
        await CallableLLMClient(lambda messages: called.append(1) or "x").complete(ASKED, cancel=token)
    assert not called  # not called once cancelled

    late = CancelToken()

    async def cancelled_midway(messages: Sequence[ChatMessage]) -> AsyncIterator[str]:
        yield "half"
        late.cancel()
        yield " of it"

    with pytest.raises(CancelledByToken):
        await CallableLLMClient(cancelled_midway).complete(ASKED, cancel=late)


async def test_summarize_and_a_summarising_strategy_take_a_streaming_function() -> None:
    """Decision 38: a streaming model is used by collecting its text."""
    turns = [ChatMessage.user(f"turn {i} " + "word " * 60) for i in range(12)]
    seen: list[int] = []

    async def model(messages: Sequence[ChatMessage]) -> AsyncIterator[str]:
        seen.append(len(messages))
        for piece in ("the user ", "asked twelve times"):
            yield piece

    summary = await summarize(turns, CallableLLMClient(model))
    assert "the user asked twelve times" in summary.text
    context = SummarizingContext(CallableLLMClient(model), max_tokens=500)
    await AgentContext(context).add_messages("s", turns)
    window = await context.build("s")
    assert any("the user asked twelve times" in m.text for m in window)
    assert len(seen) == 2


@pytest.mark.parametrize("asynchronous", [False, True])
async def test_a_cancelled_stream_is_read_no_further_and_closed(asynchronous: bool) -> None:
    """``cancel`` is checked after each piece: an endless stream cancelled midway used to be read for ever, and
    a long one to its end, before the cancel was seen."""
    token = CancelToken()
    read: list[int] = []
    closed: list[bool] = []

    def endless(messages: Sequence[ChatMessage]) -> Iterator[str]:
        try:
            for i in range(1_000):
                read.append(i)
                if i == 2:
                    token.cancel()
                yield "word "
        finally:
            closed.append(True)

    async def endless_async(messages: Sequence[ChatMessage]) -> AsyncIterator[str]:
        for piece in endless(messages):
            yield piece

    with pytest.raises(CancelledByToken):
        await CallableLLMClient(endless_async if asynchronous else endless).complete(ASKED, cancel=token)
    assert read == [0, 1, 2]
    assert closed == [True]


async def test_a_stream_that_fails_midway_is_closed_at_once() -> None:
    """A piece that is not text, or the stream's own error, leaves the stream closed (its ``finally`` has run)
    before the error reaches the caller, not whenever the event loop gets to finalising it."""
    closed: list[str] = []

    async def bad_piece(messages: Sequence[ChatMessage]) -> AsyncIterator[object]:
        try:
            yield "text"
            yield b"bytes"
            yield "more"
        finally:
            closed.append("bad piece")

    with pytest.raises(InvalidArgument, match="streamed a bytes"):
        await CallableLLMClient(bad_piece).complete(ASKED)  # type: ignore[arg-type]
    assert closed == ["bad piece"]


class Markup(str):
    """A str subclass of the kind template and HTML libraries return, with behaviour of its own."""

    def strip(self, chars: str | None = None) -> str:
        return "<escaped>"


@pytest.mark.parametrize("function", [lambda m: Markup("the reply"), lambda m: iter([Markup("the "), "reply"])])
async def test_the_text_is_a_plain_str_whatever_str_subclass_the_function_gives(function: Any) -> None:
    """A summary is built with ``text.strip()``: a subclass's own methods ended up in the stored summary."""
    text = await CallableLLMClient(function).complete(ASKED)
    assert type(text) is str
    assert text == "the reply"
    summary = await summarize([ChatMessage.user("a turn")], CallableLLMClient(function))
    assert summary.text.endswith("the reply")


@pytest.mark.parametrize("reply", [lambda m: "", lambda m: iter([]), lambda m: " \n"])
async def test_an_empty_reply_is_no_summary(reply: Any) -> None:
    """A model that answers with no text (a stream that yields nothing, a reasoning model out of tokens) gave an
    empty summary, which then stood for the turns it replaced, and was kept for that span: summarize refuses it,
    and a summarising strategy keeps the turns, as for a failed model call."""
    turns = [ChatMessage.user(f"turn {i} " + "word " * 60) for i in range(12)]
    with pytest.raises(CompactionError, match="empty summary"):
        await summarize(turns, CallableLLMClient(reply))
    context = SummarizingContext(CallableLLMClient(reply), max_tokens=500)
    await AgentContext(context).add_messages("s", turns)
    window = await context.build("s")
    assert window and all(m.text.startswith("turn ") for m in window)


async def test_a_chat_message_returned_is_named() -> None:
    """A ChatMessage is iterable (a pydantic model's fields): it was refused as "streamed a tuple"."""
    with pytest.raises(InvalidArgument, match="returned a ChatMessage, not its text"):
        await CallableLLMClient(lambda messages: ChatMessage.assistant("a summary")).complete(ASKED)


class _Completion(BaseModel):
    """A provider's response object, a pydantic model as the OpenAI and Anthropic SDKs' are."""

    id: str = "chatcmpl-1"
    content: str = "a summary"


async def test_a_providers_response_object_returned_is_named() -> None:
    """A provider's response object is a pydantic model, iterable as one: it was refused as "streamed a tuple",
    which names neither what was returned nor what to return."""
    with pytest.raises(InvalidArgument, match="returned a _Completion, not its text") as raised:
        await CallableLLMClient(lambda messages: _Completion()).complete(ASKED)
    assert "content" in (raised.value.hint or "")


async def test_a_sync_stream_is_read_off_the_event_loop() -> None:
    """A sync generator was iterated on the event loop, which stopped while the model streamed: here the stream
    waits for a task on the loop to let it go on, which it never saw (the wait ran out and said so)."""
    started, go = threading.Event(), threading.Event()
    loop_thread = threading.get_ident()
    threads: list[int] = []

    def stream(messages: Sequence[ChatMessage]) -> Iterator[str]:
        threads.append(threading.get_ident())
        yield "first, "
        started.set()
        yield "then " + ("the loop ran" if go.wait(timeout=10) else "the loop was blocked")

    async def let_it_go_on() -> None:
        await asyncio.to_thread(started.wait, 10)
        go.set()

    text, _ = await asyncio.gather(CallableLLMClient(stream).complete(ASKED), let_it_go_on())
    assert text == "first, then the loop ran"
    assert threads and loop_thread not in threads


async def test_a_task_cancelled_while_a_piece_is_read_closes_the_stream_once_the_piece_is_in() -> None:
    reading, release, closed = threading.Event(), threading.Event(), threading.Event()

    def stream(messages: Sequence[ChatMessage]) -> Iterator[str]:
        try:
            yield "first"
            reading.set()
            release.wait(timeout=10)
            yield "second"
            yield "never read"
        finally:
            closed.set()

    task = asyncio.create_task(CallableLLMClient(stream).complete(ASKED))
    assert await asyncio.to_thread(reading.wait, 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task  # at once: the piece being read is not waited for
    assert not closed.is_set()
    release.set()
    assert await asyncio.to_thread(closed.wait, 10)


async def test_a_function_that_takes_max_tokens_is_given_it() -> None:
    """``complete(messages, max_tokens=...)`` called every function with the messages alone, so one that can keep
    to a length never heard of it."""
    given: list[object] = []

    def keyword(messages: Sequence[ChatMessage], max_tokens: int | None = None) -> str:
        given.append(max_tokens)
        return "ok"

    async def keyword_only(messages: Sequence[ChatMessage], *, max_tokens: int = 4_096) -> str:
        given.append(max_tokens)
        return "ok"

    def streaming(messages: Sequence[ChatMessage], max_tokens: int = 4_096) -> Iterator[str]:
        given.append(max_tokens)
        yield "ok"

    for function in (keyword, keyword_only, streaming):
        assert await CallableLLMClient(function).complete(ASKED, max_tokens=50) == "ok"
        assert await CallableLLMClient(function).complete(ASKED) == "ok"  # none asked: the function's default
    assert given == [50, None, 50, 4_096, 50, 4_096]


async def test_a_cancel_while_a_sync_stream_stalls_ends_the_wait_at_once() -> None:
    """The token was checked only once a piece was in, so a model that stalled mid-stream kept ``complete``
    waiting however long it stalled, the cancel unheard. The wait ends at the cancel; the stream is closed in its
    thread once the stalled piece is in."""
    loop = asyncio.get_running_loop()
    stalled, release, closed = asyncio.Event(), threading.Event(), threading.Event()

    def stalling(messages: Sequence[ChatMessage]) -> Iterator[str]:
        try:
            yield "The user "
            loop.call_soon_threadsafe(stalled.set)
            release.wait(60)  # bounded: a client that waited for it fails the test, never hangs it
            yield "prefers Postgres."
        finally:
            closed.set()

    token = CancelToken()
    reply = asyncio.create_task(CallableLLMClient(stalling).complete(ASKED, cancel=token))
    await stalled.wait()
    token.cancel("the user left")
    with pytest.raises(CancelledByToken, match="the user left"):
        await reply
    assert not closed.is_set()  # still stalled: not waited for
    release.set()
    assert await asyncio.to_thread(closed.wait, 30)


async def test_a_function_whose_max_tokens_has_no_default_is_always_given_it() -> None:
    """Called with the messages alone when the caller set no limit, it raised a bare ``TypeError`` (a missing
    argument): a parameter without a default is given ``None`` then, whatever kind of callable declares it."""
    given: list[object] = []

    def required(messages: Sequence[ChatMessage], max_tokens: int | None) -> str:
        given.append(max_tokens)
        return "ok"

    class Model:
        def __call__(self, messages: Sequence[ChatMessage], *, max_tokens: int | None) -> Iterator[str]:
            given.append(max_tokens)
            yield "ok"

        async def reply(self, messages: Sequence[ChatMessage], max_tokens: int | None) -> str:
            given.append(max_tokens)
            return "ok"

    def two(messages: Sequence[ChatMessage], temperature: float, max_tokens: int | None) -> str:
        given.append((temperature, max_tokens))
        return "ok"

    for function in (required, Model(), Model().reply, functools.partial(two, temperature=0.0)):
        assert await CallableLLMClient(function).complete(ASKED, max_tokens=50) == "ok"
        assert await CallableLLMClient(function).complete(ASKED) == "ok"
    assert given == [50, None, 50, None, 50, None, (0.0, 50), (0.0, None)]


async def test_a_function_without_a_max_tokens_parameter_is_called_with_the_messages_alone() -> None:
    calls: list[tuple[object, ...]] = []

    def anything(messages: Sequence[ChatMessage], *args: object, **kwargs: object) -> str:
        calls.append((args, kwargs))
        return "ok"

    assert await CallableLLMClient(anything).complete(ASKED, max_tokens=50) == "ok"
    assert await CallableLLMClient(plain).complete(ASKED, max_tokens=50) == "1 messages"
    assert calls == [((), {})]


@pytest.mark.parametrize("function", [lambda: "x", lambda messages, other: "x", lambda *, messages: "x"])
def test_a_function_that_cannot_take_the_messages_is_refused_when_wrapped(function: Any) -> None:
    """It would fail with a bare TypeError at its first call, in the middle of a window."""
    with pytest.raises(ConfigurationError, match="one argument"):
        CallableLLMClient(function)


async def test_a_plain_sync_function_is_called_off_the_event_loop() -> None:
    """A plain function returning the text was called on the event loop, so a blocking model call in it stopped
    every other task: here it waits for a task on the same loop to let it go on, which never ran (the function's
    own wait ran out and said so; ``wait_for`` bounds the test should the call never return)."""
    loop = asyncio.get_running_loop()
    started, go = asyncio.Event(), threading.Event()
    threads: list[int] = []

    def blocking(messages: Sequence[ChatMessage]) -> str:
        threads.append(threading.get_ident())
        loop.call_soon_threadsafe(started.set)
        return "the loop ran" if go.wait(timeout=5) else "the loop was blocked"

    async def let_it_go_on() -> None:
        await started.wait()
        go.set()

    text, _ = await asyncio.wait_for(
        asyncio.gather(CallableLLMClient(blocking).complete(ASKED), let_it_go_on()), timeout=30
    )
    assert text == "the loop ran"
    assert threads and threading.get_ident() not in threads


async def test_a_cancel_while_a_plain_function_blocks_ends_the_wait_at_once() -> None:
    """As for a stalled stream: the wait for a blocking function ends at the cancel, the call going on in its
    thread, its reply no one's; the function sees the caller's context variables."""
    import contextvars

    who = contextvars.ContextVar("who", default="nobody")
    who.set("the caller")
    loop = asyncio.get_running_loop()
    called, release, returned = asyncio.Event(), threading.Event(), threading.Event()
    seen: list[str] = []

    def blocking(messages: Sequence[ChatMessage]) -> str:
        seen.append(who.get())
        loop.call_soon_threadsafe(called.set)
        release.wait(10)  # bounded: a client that waited for it fails the test, never hangs it
        returned.set()
        return "too late"

    token = CancelToken()
    reply = asyncio.create_task(CallableLLMClient(blocking).complete(ASKED, cancel=token))
    await asyncio.wait_for(called.wait(), timeout=30)
    token.cancel("the user left")
    with pytest.raises(CancelledByToken, match="the user left"):
        await asyncio.wait_for(reply, timeout=30)
    assert not returned.is_set()  # still blocked: not waited for
    assert seen == ["the caller"]
    release.set()
    assert await asyncio.to_thread(returned.wait, 30)


async def test_a_plain_function_returning_an_awaitable_or_a_stream_still_gives_its_text() -> None:
    for function in (lambda messages: awaited(messages), lambda messages: stream(messages), pieces):
        assert await CallableLLMClient(function).complete(ASKED) == "1 messages"


def _failing(error: BaseException, kind: str) -> Any:
    """A model function of ``kind`` that raises ``error``: when called, when awaited, or midway through its
    stream (sync or async)."""

    def plain(messages: Sequence[ChatMessage]) -> str:
        raise error

    async def awaited(messages: Sequence[ChatMessage]) -> str:
        raise error

    def pieces(messages: Sequence[ChatMessage]) -> Iterator[str]:
        yield "the "
        raise error

    async def stream(messages: Sequence[ChatMessage]) -> AsyncIterator[str]:
        yield "the "
        raise error

    return {"plain": plain, "awaited": awaited, "pieces": pieces, "stream": stream}[kind]


KINDS = ["plain", "awaited", "pieces", "stream"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    ("error", "raised", "said"),
    [
        (RuntimeError("model crashed"), RaviError, "the model function failed (RuntimeError: model crashed)"),
        (KeyError("choices"), RaviError, "the model function failed (KeyError: 'choices')"),
        (ConnectionError("refused"), BackendUnavailable, "could not reach its model (ConnectionError: refused)"),
        (TimeoutError(), BackendUnavailable, "could not reach its model (TimeoutError)"),
        (PermissionError("bad key"), PermissionDenied, "was refused (PermissionError: bad key)"),
    ],
)
async def test_the_functions_own_failure_is_a_ravi_error_with_it_as_the_cause(
    kind: str, error: Exception, raised: type[RaviError], said: str
) -> None:
    """A model function's exception left ``complete`` and ``summarize`` as it was: a public call raised a bare
    ``RuntimeError`` or ``KeyError``."""
    client = CallableLLMClient(_failing(error, kind))
    with pytest.raises(raised) as caught:
        await client.complete(ASKED)
    assert type(caught.value) is raised and said in str(caught.value)
    assert _same(caught.value.__cause__, error)
    with pytest.raises(raised) as caught:
        await summarize([ChatMessage.user("a turn")], client)
    assert _same(caught.value.__cause__, error)


def _same(cause: BaseException | None, error: Exception) -> bool:
    """The function's exception (asyncio gives a ``TimeoutError`` from a worker thread as a copy of it)."""
    return cause is error or (type(cause) is type(error) is TimeoutError and cause.args == error.args)


@pytest.mark.parametrize("kind", KINDS)
async def test_a_ravi_error_or_a_cancel_the_function_raises_passes_as_it_is(kind: str) -> None:
    for error in (CancelledByToken("the user left"), InvalidArgument("too long", field="messages")):
        with pytest.raises(type(error)) as caught:
            await CallableLLMClient(_failing(error, kind)).complete(ASKED)
        assert caught.value is error
    with pytest.raises(asyncio.CancelledError):
        await CallableLLMClient(_failing(asyncio.CancelledError(), kind)).complete(ASKED)


class _Unprintable(Exception):
    def __str__(self) -> str:
        raise ValueError("no text")


class _NotText(Exception):
    def __str__(self) -> Any:
        return 5


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("error", [_Unprintable(), _NotText()], ids=["raising", "not-text"])
async def test_a_failure_whose_text_cannot_be_read_is_still_a_ravi_error(kind: str, error: Exception) -> None:
    """Describing the function's exception called its ``__str__``: one that raised (or gave no text) left
    ``complete`` as a bare ``ValueError`` or ``TypeError``."""
    with pytest.raises(RaviError) as caught:
        await CallableLLMClient(_failing(error, kind)).complete(ASKED)
    assert type(caught.value) is RaviError and caught.value.__cause__ is error
    assert f"the model function failed ({type(error).__name__})" in str(caught.value)


class _Stops:
    """An iterable whose ``__iter__`` raises ``StopIteration``."""

    def __iter__(self) -> Iterator[str]:
        raise StopIteration


def _stops(messages: Sequence[ChatMessage]) -> str:
    raise StopIteration


@pytest.mark.parametrize("function", [_stops, lambda messages: _Stops()], ids=["call", "stream"])
async def test_a_stop_iteration_in_a_worker_thread_is_a_ravi_error_not_a_hang(function: Any) -> None:
    """A plain function (or its stream) raising ``StopIteration`` in its worker thread: asyncio cannot set it on
    a future, so the call's future was never settled and ``complete`` waited forever. (``wait_for`` only keeps
    the old behaviour from hanging the suite.)"""
    with pytest.raises(RaviError) as caught:
        await asyncio.wait_for(CallableLLMClient(function).complete(ASKED), 60)
    assert type(caught.value) is RaviError and "StopIteration" in str(caught.value)
    assert isinstance(caught.value.__cause__, StopIteration)
