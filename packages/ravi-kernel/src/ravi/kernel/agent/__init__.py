"""Assembly contracts: compaction strategies and what the engine asks of them, retention policies, the agent
context, and the session every window is assembled for."""

from ravi.kernel.agent.context import AgentContextProtocol, CompactionStrategy, SessionContext, SessionState, Slot
from ravi.kernel.agent.events import CompactionEvent, EventBus, EventKind, Listener, held_events
from ravi.kernel.agent.strategy import PlainStrategy, Strategy, StrategyTraits, as_strategies, as_strategy
from ravi.kernel.agent.supervision import HistoryRetention

__all__ = [
    "AgentContextProtocol",
    "CompactionEvent",
    "CompactionStrategy",
    "EventBus",
    "EventKind",
    "HistoryRetention",
    "Listener",
    "PlainStrategy",
    "SessionContext",
    "SessionState",
    "Slot",
    "Strategy",
    "StrategyTraits",
    "as_strategies",
    "as_strategy",
    "held_events",
]
