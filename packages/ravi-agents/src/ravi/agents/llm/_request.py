"""The arguments of an ``LLMClient.complete`` call, checked before any work, the same way by every client."""

from __future__ import annotations

from ravi.kernel.cancel import CancelToken, check_cancel
from ravi.kernel.errors import InvalidArgument
from ravi.kernel.messages import ChatMessage
from ravi.kernel.values import check_items


def check_request(messages: object, max_tokens: object, cancel: object) -> tuple[list[ChatMessage], CancelToken | None]:
    """``messages`` as a list and ``cancel``, else ``InvalidArgument`` naming the first bad argument: ``messages``
    that are not a sequence of ``ChatMessage`` objects, a ``max_tokens`` that is neither ``None`` nor an integer
    > 0 (a bool is refused), a ``cancel`` that is neither ``None`` nor a ``CancelToken``."""
    checked = check_items(messages, ChatMessage, "messages")
    if max_tokens is not None and (not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens <= 0):
        raise InvalidArgument(f"must be an integer > 0 or None, got {max_tokens!r}", field="max_tokens")
    return checked, check_cancel(cancel)


def check_positive(value: object, what: str) -> None:
    """``InvalidArgument`` naming ``what`` unless ``value`` is an integer > 0 (a bool is refused)."""
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise InvalidArgument(f"must be an integer > 0, got {value!r}", field=what)


__all__: list[str] = []
