"""One error tree for all of Ravi.

Every backend raises these and never a driver's own exception, so callers catch one family whatever the
store. Where a Ravi error means the same as a builtin, it also derives from that builtin
(``InvalidArgument`` is a ``ValueError``), so generic handlers keep working.
"""

from __future__ import annotations


class RaviError(Exception):
    """Base of every error Ravi raises.

    Args:
        message: What went wrong, in one sentence.
        hint: What the caller can do about it, if anything.

    Example:
        >>> try:
        ...     raise ConfigurationError("unknown backend 'pg'", hint="did you mean 'postgres'?")
        ... except RaviError as exc:
        ...     print(exc)
        unknown backend 'pg' (hint: did you mean 'postgres'?)
    """

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message} (hint: {self.hint})" if self.hint else self.message


class InvalidArgument(RaviError, ValueError):
    """A caller passed a value the operation cannot accept (bad key, wrong dimension, bad limit).

    ``field``, when known, names the offending field or path (``"metadata.a"``, ``"ids[2]"``); the message then
    starts with it.
    """

    def __init__(self, message: str, *, field: str | None = None, hint: str | None = None) -> None:
        super().__init__(f"{field}: {message}" if field else message, hint=hint)
        self.field = field
        self.reason = message


class InvalidMessage(InvalidArgument):
    """A message, or a dict meant to become one, is malformed.

    ``field`` names the offending field (``"role"``, ``"tool_call_id"``, ``"tool_calls[0].arguments"``).
    """

    field: str

    def __init__(self, message: str, *, field: str, hint: str | None = None) -> None:
        super().__init__(message, field=field, hint=hint)


class AlreadyExists(RaviError, ValueError):
    """An insert-only operation met an existing item."""


class MessageConflict(AlreadyExists):
    """A message was appended under an id the session already holds for a different message (or twice in one
    batch, with different content).

    A message id is a promise: the same id is the same message. Re-appending a stored message (a retried append)
    changes nothing; one with different content under the same id is refused, with the whole batch, so nothing
    is stored and nothing is dropped silently. It is an :class:`AlreadyExists` (an insert met an existing item),
    not an :class:`InvalidMessage`: the message itself is well formed, and the same message under a fresh id is
    accepted. Retrying the same call fails the same way.

    Attributes:
        message_id: The id in conflict.
    """

    def __init__(self, message_id: str, *, hint: str | None = None) -> None:
        super().__init__(
            f"message id {message_id!r} is already stored in this session with different content",
            hint=hint or "give a different message a new id (ChatMessage ids are unique per session)",
        )
        self.message_id = message_id


class InvalidTransition(RaviError, ValueError):
    """A task was asked to move to a status its lifecycle does not allow from where it is."""


class NotFound(RaviError, LookupError):
    """The thing asked for does not exist (an object key, a task, an entity)."""


class BackendUnavailable(RaviError, ConnectionError):
    """The backend's server cannot be reached right now; the call may succeed once it is back."""


class ConfigurationError(RaviError, ValueError):
    """Settings or backend options are missing, unknown or malformed; raised at start-up where possible."""


class UnknownSetting(ConfigurationError, TypeError):
    """A setting or option of a name that is not known. A ``TypeError`` too, as Python's own error for an
    unexpected keyword argument is, so code written against a framework that raises ``TypeError`` there keeps
    working."""


class PermissionDenied(RaviError, PermissionError):
    """The backend refused the credentials or the operation."""


class CancelledByToken(RaviError):
    """Raised by work that stopped because its :class:`~ravi.kernel.cancel.CancelToken` was cancelled.

    A :class:`RaviError`, so a handler of Ravi's errors sees it, but not a failure: nothing went wrong, the caller
    asked to stop. Ravi never retries it, never logs it as a failure and never turns it into another error (a
    summariser that is cancelled raises it, where a failed model call gives no summary). A handler of
    ``RaviError`` that retries or falls back should let it through first (``except CancelledByToken: raise``).
    Deliberately not ``asyncio.CancelledError``, so it never tears down the task or the event loop that hosts the
    work. Also importable as ``ravi.kernel.cancel.CancelledByToken`` (the same class).

    Attributes:
        reason: The reason given to the token's ``cancel``, if any (the message is ``"cancelled"`` without one).
    """

    def __init__(self, reason: str | None = None) -> None:
        super().__init__(reason or "cancelled")
        self.reason = reason


class CompactionError(RaviError):
    """A compaction strategy could not produce a window (for example, a budget too small for the system prompt)."""


__all__ = [
    "AlreadyExists",
    "BackendUnavailable",
    "CancelledByToken",
    "CompactionError",
    "ConfigurationError",
    "InvalidArgument",
    "InvalidMessage",
    "InvalidTransition",
    "MessageConflict",
    "NotFound",
    "PermissionDenied",
    "RaviError",
    "UnknownSetting",
]
