"""Time for expiry, injectable so tests can move it without sleeping."""

from __future__ import annotations

import time
from collections.abc import Callable

Clock = Callable[[], float]
"""Returns the current time in seconds since the epoch."""

system_clock: Clock = time.time
