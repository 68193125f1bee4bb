"""Who is running: context variables an agent runtime sets so stores and tools can read them anywhere."""

from __future__ import annotations

from contextvars import ContextVar

current_thread_id: ContextVar[str | None] = ContextVar("current_thread_id", default=None)
"""The conversation (thread) being served."""

current_agent_id: ContextVar[str | None] = ContextVar("current_agent_id", default=None)
"""The agent running now."""

current_agent_label: ContextVar[str | None] = ContextVar("current_agent_label", default=None)
"""A human-readable name of the agent running now."""

current_parent_agent_id: ContextVar[str | None] = ContextVar("current_parent_agent_id", default=None)
"""The agent that started the current one, for sub-agents."""

__all__ = ["current_agent_id", "current_agent_label", "current_parent_agent_id", "current_thread_id"]
