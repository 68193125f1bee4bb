"""Who is running: context variables an agent runtime sets so stores and tools can read them anywhere."""

from __future__ import annotations

from contextvars import ContextVar

DEFAULT = "default"
"""Where a board lands when no agent set the variables (000: "boards will all land on the "default" thread")."""

current_thread_id: ContextVar[str] = ContextVar("current_thread_id", default=DEFAULT)
"""The conversation (thread) being served; ``"default"`` until an agent sets it."""

current_agent_id: ContextVar[str] = ContextVar("current_agent_id", default=DEFAULT)
"""The agent running now; ``"default"`` until an agent sets it."""

current_agent_label: ContextVar[str] = ContextVar("current_agent_label", default=DEFAULT)
"""A human-readable name of the agent running now."""

current_parent_agent_id: ContextVar[str | None] = ContextVar("current_parent_agent_id", default=None)
"""The agent that started the current one, for sub-agents."""

__all__ = ["DEFAULT", "current_agent_id", "current_agent_label", "current_parent_agent_id", "current_thread_id"]
