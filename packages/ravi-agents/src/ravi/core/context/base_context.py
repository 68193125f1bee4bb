"""003 names ``ModelContext`` at ``core/context/base_context.py``; it lives in ``ravi.agents.context.model_context``."""

from ravi.agents.context.model_context import ModelContext

__all__ = ["ModelContext"]
