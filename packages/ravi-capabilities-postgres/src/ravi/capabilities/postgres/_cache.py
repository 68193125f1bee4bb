"""What a Postgres history provider keeps parsed between reads: the sessions it read whole, the last window of
each session, and the messages its searches of each session returned. Copies are replaced, never changed in
place, so concurrent readers never see one half-built; each ``Lru`` takes a thread lock for its few steps (never
across an ``await``), so threads that each run their own event loop can share a provider."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

from ravi.kernel.messages import ChatMessage

V = TypeVar("V")


@dataclass(frozen=True)
class Cached:
    """A session as read at one moment, in one generation: replaced, never changed."""

    generation: str
    next_seq: int
    messages: list[ChatMessage]


@dataclass(frozen=True)
class Window:
    """The messages of the last window read from a session, by seq, in one generation of the session: its tail
    (seq ``low`` to ``high``) and the system messages before it."""

    generation: str
    low: int
    high: int
    seqs: list[int]
    messages: list[ChatMessage]


@dataclass(frozen=True)
class Parsed:
    """The messages searches of a session returned, by seq, in one generation of the session (the most recently
    returned first): replaced, never changed."""

    generation: str
    messages: Mapping[int, ChatMessage]


class Lru(Generic[V]):
    """Up to ``size`` entries by session, the least recently kept dropped first (``size`` 0 keeps nothing)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._entries: OrderedDict[tuple[str, str], V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple[str, str]) -> V | None:
        """The entry of ``key``, or ``None``."""
        return self._entries.get(key)

    def keep(self, key: tuple[str, str], value: V) -> None:
        """Keep ``value`` as the entry of ``key``, the most recent."""
        if not self.size:
            return
        with self._lock:
            self._entries[key] = value
            self._entries.move_to_end(key)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)

    def pop(self, key: tuple[str, str]) -> None:
        """Forget the entry of ``key``, if any."""
        with self._lock:
            self._entries.pop(key, None)

    def drop(self, agent_id: str, session_id: str | None) -> None:
        """Forget the entries of the agent's session (of every session of the agent when ``None``)."""
        with self._lock:
            for key in [k for k in self._entries if k[0] == agent_id and session_id in (None, k[1])]:
                del self._entries[key]

    def values(self) -> list[V]:
        """The entries, the least recently kept first."""
        with self._lock:
            return list(self._entries.values())

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def __getitem__(self, key: tuple[str, str]) -> V:
        return self._entries[key]

    def __len__(self) -> int:
        return len(self._entries)


__all__ = ["Cached", "Lru", "Parsed", "Window"]
