"""Every element the design documents place imports from where they say (000 "Where this lives", 004)."""

from __future__ import annotations

import importlib

import pytest

PLACES = {
    "ravi.kernel.agent.supervision": ["HistoryRetention"],
    "ravi.kernel.agent.context": ["CompactionStrategy", "AgentContextProtocol"],
    "ravi.kernel.storage.history": ["HistoryProvider"],
    "ravi.kernel.storage.memory": ["ShortTermMemory", "LongTermMemory", "Memory"],
    "ravi.kernel.storage.vector": ["VectorStore", "Document", "SearchResult"],
    "ravi.kernel.storage.graph": ["GraphStore", "CypherCapable", "Entity", "Relationship", "SubGraph"],
    "ravi.kernel.storage.blob": ["BlobStore", "Blob"],
    "ravi.kernel.storage.tasks": ["TaskStore", "Task", "TaskList", "TaskStatus"],
    "ravi.agents.context.context": ["ContextConfig", "AgentContext"],
    "ravi.agents.context.history": ["InMemoryHistoryProvider"],
    "ravi.agents.context.compaction": [
        "CompactionPipeline",
        "SlidingWindowCompaction",
        "ToolResultCompactionStrategy",
        "SelectiveToolCallCompactionStrategy",
        "SummarizationCompaction",
        "TokenBudgetComposedStrategy",
        "TruncationStrategy",
    ],
    "ravi.agents.storage.memory": ["InMemoryFileStore"],
    "ravi.agents.storage.tasks": [
        "TaskStore",
        "GlobalTaskStore",
        "InMemoryTaskStore",
        "current_thread_id",
        "current_agent_id",
        "current_agent_label",
        "current_parent_agent_id",
    ],
    "ravi.agents.storage.vector": ["InMemoryVectorStore"],
    "ravi.agents.storage.graph": ["InMemoryGraphStore"],
    # 003
    "ravi.core.context.base_context": ["ModelContext"],
    "ravi.core.context.implementations": [
        "UnboundedContext",
        "SlidingWindowContext",
        "TokenBudgetContext",
        "HybridContext",
        "SummarizingContext",
    ],
}


@pytest.mark.parametrize(("module", "names"), list(PLACES.items()))
def test_imports_as_the_documents_write_them(module: str, names: list[str]) -> None:
    loaded = importlib.import_module(module)
    missing = [n for n in names if not hasattr(loaded, n)]
    assert not missing, f"{module} lacks {missing}"


def test_the_old_paths_still_work() -> None:
    from ravi.kernel.agent import CompactionStrategy, HistoryRetention  # noqa: F401
    from ravi.kernel.storage import HistoryProvider, TaskStore  # noqa: F401
    from ravi.kernel.storage.tasks import TaskLifecycle
    from ravi.kernel.tasks import TaskLifecycle as Moved

    assert TaskLifecycle is Moved
