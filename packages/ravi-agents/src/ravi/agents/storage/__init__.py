"""In-memory implementations of every storage Protocol, and the agent context variables.

They are the reference implementations: the conformance suite is tested against them, and they are what
Ravi runs on when nothing else is configured. Nothing here is shared between processes.
"""

from ravi.agents.storage.blob import InMemoryFileStore
from ravi.agents.storage.context_vars import (
    current_agent_id,
    current_agent_label,
    current_parent_agent_id,
    current_thread_id,
)
from ravi.agents.storage.embeddings import CallableEmbeddingClient, HashingEmbeddingClient
from ravi.agents.storage.graph import InMemoryGraphStore
from ravi.agents.storage.longterm import InMemoryLongTermMemory
from ravi.agents.storage.state import InMemoryStateStore
from ravi.agents.storage.summaries import InMemorySummaryStore
from ravi.agents.storage.tasks import GlobalTaskStore, InMemoryTaskStore, TaskStore
from ravi.agents.storage.vector import InMemoryVectorStore

__all__ = [
    "CallableEmbeddingClient",
    "GlobalTaskStore",
    "HashingEmbeddingClient",
    "InMemoryFileStore",
    "InMemoryGraphStore",
    "InMemoryLongTermMemory",
    "InMemoryStateStore",
    "InMemorySummaryStore",
    "InMemoryTaskStore",
    "InMemoryVectorStore",
    "TaskStore",
    "current_agent_id",
    "current_agent_label",
    "current_parent_agent_id",
    "current_thread_id",
]
