"""Assembly contracts: compaction strategies, retention policies and the agent context."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from ravi.kernel.messages import ChatMessage


class HistoryRetention(enum.Enum):
    """What happens to a run's turns when the run ends.

    * ``PERMANENT``: kept (the default).
    * ``RUN``: kept while the run lasts, removed when it ends (``clear_run``).
    * ``NONE``: never written to the history store.
    """

    PERMANENT = "permanent"
    RUN = "run"
    NONE = "none"


@runtime_checkable
class CompactionStrategy(Protocol):
    """Turns a history into a smaller window.

    A strategy is a view: it never mutates ``history`` or its messages, keeps every system message, keeps the
    order, keeps each tool call together with its results, and gives the same output for the same input.
    """

    async def compact(self, history: Sequence[ChatMessage]) -> list[ChatMessage]:
        """The window to send, derived from ``history``."""
        ...


@runtime_checkable
class AgentContextProtocol(Protocol):
    """What an agent runtime calls around each model call."""

    async def get_prompt_window(self, session_id: str) -> list[ChatMessage]:
        """The compacted window for ``session_id``, ready for the model."""
        ...

    async def add_messages(self, session_id: str, messages: Sequence[ChatMessage], *, run_id: str = "") -> None:
        """Record new turns of a run."""
        ...

    async def end_run(self, session_id: str, run_id: str) -> None:
        """Finish a run, applying the retention policy to its turns."""
        ...


__all__ = ["AgentContextProtocol", "CompactionStrategy", "HistoryRetention"]
