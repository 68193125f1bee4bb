"""Supervision of an agent's runs (000: ``kernel/agent/supervision.py``): what happens to a run's turns."""

from __future__ import annotations

import enum


class HistoryRetention(enum.Enum):
    """What happens to a run's turns when the run ends.

    * ``PERMANENT``: kept (the default).
    * ``RUN``: kept while the run lasts, removed when it ends (``clear_run``).
    * ``NONE``: never written to the history store.
    """

    PERMANENT = "permanent"
    RUN = "run"
    NONE = "none"


__all__ = ["HistoryRetention"]
