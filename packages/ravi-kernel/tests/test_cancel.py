import asyncio
import threading

import pytest

from ravi.kernel.cancel import CancelledByToken, CancelToken
from ravi.kernel.errors import InvalidArgument


def test_cancel_once_with_first_reason() -> None:
    token = CancelToken()
    assert not token.cancelled and token.reason is None
    assert token.cancel("first") is True
    assert token.cancel("second") is False
    assert token.cancelled and token.reason == "first"


def test_listeners_fire_exactly_once_and_can_be_disposed() -> None:
    token = CancelToken()
    seen: list[str] = []
    token.add_callback(lambda: seen.append("a"))
    dispose = token.add_callback(lambda: seen.append("b"))
    dispose()
    token.cancel()
    token.cancel()
    assert seen == ["a"]


def test_listener_on_cancelled_token_fires_at_once() -> None:
    token = CancelToken()
    token.cancel("done")
    seen: list[str | None] = []
    token.add_callback(lambda: seen.append(token.reason))
    assert seen == ["done"]


def test_failing_listener_does_not_stop_the_others(caplog: pytest.LogCaptureFixture) -> None:
    token = CancelToken()
    seen: list[int] = []

    def boom() -> None:
        raise RuntimeError("listener bug")

    token.add_callback(lambda: seen.append(1))
    token.add_callback(boom)
    token.add_callback(lambda: seen.append(3))
    token.cancel()
    assert seen == [1, 3]
    assert "listener bug" in caplog.text


def test_child_follows_parent_not_the_reverse() -> None:
    parent = CancelToken()
    child = parent.child()
    grandchild = child.child()
    child2 = parent.child()
    child2.cancel("only me")
    assert not parent.cancelled
    parent.cancel("stop")
    assert child.cancelled and grandchild.cancelled
    assert grandchild.reason == "stop"
    assert child2.reason == "only me"


def test_raise_if_cancelled_is_a_plain_exception() -> None:
    token = CancelToken()
    token.raise_if_cancelled()
    token.cancel("user stop")
    with pytest.raises(CancelledByToken, match="user stop") as info:
        token.raise_if_cancelled()
    assert not isinstance(info.value, asyncio.CancelledError)
    assert isinstance(info.value, Exception)


def _race_once() -> None:
    token = CancelToken()
    fired: list[int] = []
    lock = threading.Lock()
    for i in range(20):

        def listener(n: int = i) -> None:
            with lock:
                fired.append(n)

        token.add_callback(listener)
    barrier = threading.Barrier(8)
    wins: list[bool] = []

    def worker() -> None:
        barrier.wait()
        wins.append(token.cancel("race"))

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert wins.count(True) == 1
    assert sorted(fired) == list(range(20))


def test_cancel_races_across_threads_fire_each_listener_once() -> None:
    for _ in range(50):
        _race_once()


def _add_while_cancelling() -> None:
    token = CancelToken()
    fired: list[int] = []
    barrier = threading.Barrier(2)

    def adder() -> None:
        barrier.wait()
        for i in range(200):
            token.add_callback(lambda i=i: fired.append(i))

    thread = threading.Thread(target=adder)
    thread.start()
    barrier.wait()
    token.cancel()
    thread.join()
    assert sorted(fired) == list(range(200))  # each fired once: by cancel, or at once if added after


def test_adding_listeners_while_another_thread_cancels_never_loses_one() -> None:
    for _ in range(50):
        _add_while_cancelling()


def test_the_design_documents_example_prints(capsys: pytest.CaptureFixture[str]) -> None:
    """002: ``stop = token.add_callback(lambda: print("aborting work"))``: listeners take no argument."""
    token = CancelToken()
    stop = token.add_callback(lambda: print("aborting work"))
    token.cancel("user pressed stop")
    assert capsys.readouterr().out == "aborting work\n"
    stop()  # a disposer after the fact does nothing


def test_a_reason_that_is_not_text_and_a_listener_that_cannot_be_called_are_refused() -> None:
    """002: ``.reason`` is ``str | None`` and ``add_callback(cb)`` takes a ``Callable[[], None]``. Anything else
    is refused with ``InvalidArgument`` when it is given, not stored as is or found when the token fires; the
    token stays as it was."""
    token = CancelToken()
    with pytest.raises(InvalidArgument):
        token.cancel(5)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument):
        token.add_callback("print")  # type: ignore[arg-type]
    assert not token.cancelled
    assert token.cancel("stop") is True and token.reason == "stop"


def test_a_listener_may_be_given_by_the_name_the_design_gives_it() -> None:
    """002: ``add_callback(cb) -> unsubscribe``."""
    token = CancelToken()
    seen: list[str] = []
    stop = token.add_callback(cb=lambda: seen.append("fired"))
    token.cancel()
    stop()
    assert seen == ["fired"]


def test_cancelled_by_token_is_a_ravi_error_importable_from_errors() -> None:
    from ravi.kernel import errors

    assert errors.CancelledByToken is CancelledByToken
    assert "CancelledByToken" in errors.__all__
    token = CancelToken()
    token.cancel("stop")
    with pytest.raises(errors.RaviError) as caught:
        token.raise_if_cancelled()
    assert isinstance(caught.value, CancelledByToken)
    assert caught.value.reason == "stop" and str(caught.value) == "stop"
    assert not isinstance(caught.value, asyncio.CancelledError)
    assert str(CancelledByToken()) == "cancelled" and CancelledByToken().reason is None


def test_a_token_seen_cancelled_already_has_its_reason() -> None:
    # Another thread may look at the token between any two lines of cancel(): stop at every line and look.
    import sys
    from types import FrameType
    from typing import Any

    token = CancelToken()
    seen: list[tuple[bool, str | None]] = []

    def trace(frame: FrameType, event: str, arg: Any) -> Any:
        if frame.f_code is CancelToken.cancel.__code__:
            return local
        return None

    def local(frame: FrameType, event: str, arg: Any) -> Any:
        seen.append((token.cancelled, token.reason))
        return local

    previous = sys.gettrace()
    sys.settrace(trace)
    try:
        token.cancel("user pressed esc")
    finally:
        sys.settrace(previous)
    assert seen, "the trace saw no line of cancel()"
    assert all(reason == "user pressed esc" for cancelled, reason in seen if cancelled)
