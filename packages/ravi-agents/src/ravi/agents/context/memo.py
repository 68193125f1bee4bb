"""Remembering the previous input of a strategy, so that a growing session is processed incrementally.

Histories grow at the end. A strategy that can extend its previous result from the new messages alone keeps a
:class:`PrefixMemo`: for each conversation (recognised by the id of its first message) it holds the last input
and whatever the strategy derived from it. When the next input starts with the previous one (checked at C
speed: same objects, or equal messages), the strategy processes only what was appended. Anything else, a
cleared run, an edited history, is simply computed from scratch: the memo changes speed, never results.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import Generic, TypeVar

from ravi.kernel.messages import ChatMessage

S = TypeVar("S")


class PrefixMemo(Generic[S]):
    """A small LRU of ``conversation -> (previous input, derived state)``."""

    def __init__(self, size: int = 128) -> None:
        self._size = size
        self._entries: OrderedDict[str, tuple[list[ChatMessage], S]] = OrderedDict()

    def lookup(self, history: Sequence[ChatMessage]) -> tuple[int, S] | None:
        """``(length of the previous input, its state)`` if ``history`` extends that input, else ``None``."""
        if not history:
            return None
        entry = self._entries.get(history[0].id)
        if entry is None:
            return None
        previous, state = entry
        n = len(previous)
        prefix = history[:n]
        if len(history) < n or (prefix if isinstance(prefix, list) else list(prefix)) != previous:
            return None
        self._entries.move_to_end(history[0].id)
        return n, state

    def store(self, history: Sequence[ChatMessage], state: S) -> None:
        """Remember ``history`` (copied) and ``state`` for its conversation."""
        if not history:
            return
        key = history[0].id
        self._entries[key] = (list(history), state)
        self._entries.move_to_end(key)
        while len(self._entries) > self._size:
            self._entries.popitem(last=False)


__all__ = ["PrefixMemo"]
