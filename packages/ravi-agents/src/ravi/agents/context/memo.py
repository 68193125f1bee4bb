"""Remembering a strategy's previous input for one session, so that a growing session is processed incrementally.

Histories grow at the end. A strategy that can extend its previous result from the new messages alone keeps a
:class:`PrefixMemo` in the session's state (see :mod:`ravi.agents.context.session`): the session's last input
and whatever the strategy derived from it. When the next input starts with the previous one (checked at C
speed: same objects, or equal messages), the strategy processes only what was appended. Anything else, a
cleared run, an edited history, is simply computed from scratch: the memo changes speed, never results.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Generic, TypeVar

from ravi.kernel.messages import ChatMessage

S = TypeVar("S")


class PrefixMemo(Generic[S]):
    """One session's previous input and the state derived from it."""

    def __init__(self) -> None:
        self._previous: list[ChatMessage] | None = None
        self._state: S | None = None

    def lookup(self, history: Sequence[ChatMessage]) -> tuple[int, S] | None:
        """``(length of the previous input, its state)`` if ``history`` extends that input, else ``None``."""
        previous = self._previous
        if previous is None or self._state is None:
            return None
        n = len(previous)
        if len(history) < n:
            return None
        prefix = history[:n]
        if (prefix if isinstance(prefix, list) else list(prefix)) != previous:
            return None
        return n, self._state

    def store(self, history: Sequence[ChatMessage], state: S) -> None:
        """Remember ``history`` (copied) and ``state``."""
        self._previous = list(history)
        self._state = state

    def clear(self) -> None:
        """Forget the previous input: the next is computed from scratch."""
        self._previous = self._state = None


__all__ = ["PrefixMemo"]
