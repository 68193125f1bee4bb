"""``ContextConfig`` and ``AgentContext`` under the path 000 gives them (``agents/context/context.py``)."""

from ravi.agents.context.agent_context import AgentContext
from ravi.agents.context.config import ContextConfig

__all__ = ["AgentContext", "ContextConfig"]
