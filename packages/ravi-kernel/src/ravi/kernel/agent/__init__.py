"""Assembly contracts: compaction strategies, retention policies and the agent context."""

from ravi.kernel.agent.context import AgentContextProtocol, CompactionStrategy, SessionContext
from ravi.kernel.agent.supervision import HistoryRetention

__all__ = ["AgentContextProtocol", "CompactionStrategy", "HistoryRetention", "SessionContext"]
