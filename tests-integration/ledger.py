"""What threads did to one session and when, on one clock they share: a removal that returned before a read
started must show in that read."""

from __future__ import annotations

import threading
from collections.abc import Sequence


class Ledger:
    """What the threads did and when, on one clock shared by every thread: a removal that returned before a read
    started must show in that read."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tick = 0
        self.appended: dict[str, int] = {}  # message id -> tick its append returned
        self.removals: list[tuple[int, frozenset[str]]] = []  # (tick the removal returned, ids it surely removed)

    def now(self) -> int:
        with self._lock:
            self._tick += 1
            return self._tick

    def append_returned(self, ids: Sequence[str]) -> None:
        tick = self.now()
        with self._lock:
            for i in ids:
                self.appended[i] = tick

    def cleared(self, started: int) -> None:
        """A ``clear`` that started at ``started`` removed every message whose append returned before."""
        tick = self.now()
        with self._lock:
            gone = frozenset(i for i, at in self.appended.items() if at < started)
            self.removals.append((tick, gone))

    def replaced(self, message_id: str) -> None:
        tick = self.now()
        with self._lock:
            self.removals.append((tick, frozenset({message_id})))

    def removed_before(self, started: int) -> frozenset[str]:
        """The ids a removal that returned before ``started`` surely removed."""
        with self._lock:
            return frozenset().union(*(gone for at, gone in self.removals if at < started))

    def check_read(self, started: int, ids: Sequence[str], what: str) -> None:
        back = sorted(self.removed_before(started) & set(ids))
        assert not back, f"{what} returned {len(back)} removed messages: {back[:5]}"
