"""Cooperative cancellation: a ``CancelToken`` that long operations check and listen to.

Cancelling is a request, not an interruption: the work decides where it stops, by calling
:meth:`CancelToken.raise_if_cancelled` or by listening with :meth:`CancelToken.add_callback`. The error it then
raises, :class:`CancelledByToken` (defined in :mod:`ravi.kernel.errors`, a ``RaviError``), is deliberately not
``asyncio.CancelledError``, so it never tears down the task or the event loop that hosts the work.

Example:
    >>> token = CancelToken()
    >>> child = token.child()
    >>> token.cancel("user pressed stop")
    True
    >>> child.cancelled, child.reason
    (True, 'user pressed stop')
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from ravi.kernel.errors import CancelledByToken, InvalidArgument

_log = logging.getLogger(__name__)

Callback = Callable[[], object]
"""A cancellation listener: no argument (read the token's ``reason`` where you registered it); any return value is
ignored, so ``lambda: print(...)`` works."""


class CancelToken:
    """A thread-safe, cancel-once flag with listeners and children.

    * :meth:`cancel` is idempotent: the first reason wins and listeners fire exactly once.
    * :meth:`add_callback` returns a disposer; on an already cancelled token the listener fires at once.
    * A listener that raises is logged and never stops the others.
    * :meth:`child` gives a token cancelled with its parent, never the reverse.
    """

    __slots__ = ("_callbacks", "_cancelled", "_lock", "_reason")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cancelled = False
        self._reason: str | None = None
        self._callbacks: dict[int, Callback] = {}

    @property
    def cancelled(self) -> bool:
        """Whether :meth:`cancel` has been called."""
        return self._cancelled

    @property
    def reason(self) -> str | None:
        """The reason given to the first :meth:`cancel`, if any."""
        return self._reason

    def cancel(self, reason: str | None = None) -> bool:
        """Cancel the token; returns ``True`` if this call did it, ``False`` if it was already cancelled.

        Raises:
            InvalidArgument: ``reason`` is neither text nor ``None`` (the token is left as it was).
        """
        if reason is not None and not isinstance(reason, str):
            raise InvalidArgument(f"reason must be text or None, got {type(reason).__name__}", field="reason")
        with self._lock:
            if self._cancelled:
                return False
            self._reason = reason  # first: a thread that sees the token cancelled sees its reason
            self._cancelled = True
            callbacks = list(self._callbacks.values())
            self._callbacks.clear()
        for callback in callbacks:
            self._fire(callback)
        return True

    def add_callback(self, cb: Callback) -> Callable[[], None]:
        """Call ``cb()`` on cancellation; returns a function that removes it again.

        If the token is already cancelled, the callback runs at once (in the caller's thread).

        Raises:
            InvalidArgument: ``cb`` cannot be called.
        """
        if not callable(cb):
            raise InvalidArgument(f"cb must be callable, got {type(cb).__name__}", field="cb")
        with self._lock:
            if not self._cancelled:
                key = id(cb) ^ len(self._callbacks) << 64
                while key in self._callbacks:
                    key += 1
                self._callbacks[key] = cb

                def dispose() -> None:
                    with self._lock:
                        self._callbacks.pop(key, None)

                return dispose
        self._fire(cb)
        return lambda: None

    def child(self) -> CancelToken:
        """A new token that is cancelled when this one is (with the same reason), and not the other way."""
        child = CancelToken()
        dispose = self.add_callback(lambda: child.cancel(self.reason))
        child.add_callback(dispose)
        return child

    def raise_if_cancelled(self) -> None:
        """Raise :class:`CancelledByToken` if the token is cancelled; otherwise do nothing."""
        if self._cancelled:
            raise CancelledByToken(self._reason)

    def _fire(self, callback: Callback) -> None:
        try:
            callback()
        except Exception:
            _log.exception("a CancelToken listener failed; the other listeners still run")

    def __repr__(self) -> str:
        state = f"cancelled, reason={self._reason!r}" if self._cancelled else "active"
        return f"<CancelToken {state}>"


def check_cancel(cancel: object, what: str = "cancel") -> CancelToken | None:
    """``cancel`` as given, else ``InvalidArgument`` naming ``what``, unless it is ``None`` or a
    :class:`CancelToken` (for a call's ``cancel=`` argument, checked before any work)."""
    if cancel is not None and not isinstance(cancel, CancelToken):
        raise InvalidArgument(f"must be a CancelToken or None, got {type(cancel).__name__}", field=what)
    return cancel


__all__ = ["Callback", "CancelToken", "CancelledByToken", "check_cancel"]
