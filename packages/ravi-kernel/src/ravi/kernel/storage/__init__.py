"""The storage Protocols and their value types.

Every method is ``async``. Scope keys follow the design: history by ``(agent_id, session_id)`` with each message
tagged by ``run_id``; session state by ``session_id``; long-term memory by ``(agent_id, namespace)``; vectors by
``(collection, id)``; task boards by ``(conversation_id, agent_id)``.

The Protocols are runtime-checkable, so ``isinstance(store, HistoryProvider)`` tells whether an object has the
methods (not whether it keeps the contract: ``ravi-conformance`` tells that).
"""

from ravi.kernel.messages import ChatMessage
from ravi.kernel.storage._common import JSON, Filter
from ravi.kernel.storage.blob import (
    EXPIRY_METADATA_BYTES,
    MAX_KEY_BYTES,
    MAX_METADATA_BYTES,
    MAX_METADATA_ENTRIES,
    MAX_SEGMENT_BYTES,
    Blob,
    BlobStore,
    BoundedKeys,
    check_blob_key,
    check_blob_metadata,
    check_content_type,
)
from ravi.kernel.storage.forget import Forgetter, blob_prefix, check_forget, in_scope
from ravi.kernel.storage.graph import (
    MAX_NAME_LENGTH,
    CypherCapable,
    Entity,
    GraphStore,
    Relationship,
    SubGraph,
    check_name,
    check_relationship_types,
)
from ravi.kernel.storage.history import (
    HistoryProvider,
    HistorySearcher,
    HistoryWindow,
    HybridMatches,
    HybridSearcher,
    RunReader,
    SessionGeneration,
    SessionLister,
    SessionReplacer,
    StoredMessage,
    TailEditor,
    WindowReader,
    check_append,
    check_replace,
    check_search,
    replace_session,
    stored_body,
    window_of,
    window_start,
)
from ravi.kernel.storage.memory import LongTermMemory, Memory, ReservedState, ShortTermMemory
from ravi.kernel.storage.summaries import SummaryStore
from ravi.kernel.storage.tasks import (
    MAX_RETRIES,
    TRANSITIONS,
    Task,
    TaskLifecycle,
    TaskList,
    TaskStatus,
    TaskStore,
    as_tasks,
)
from ravi.kernel.storage.vector import Document, SearchResult, VectorStore, check_filter, matches
from ravi.kernel.values import ttl_seconds

__all__ = [
    "JSON",
    "TRANSITIONS",
    "Blob",
    "BlobStore",
    "BoundedKeys",
    "ChatMessage",
    "CypherCapable",
    "Document",
    "Entity",
    "Filter",
    "Forgetter",
    "GraphStore",
    "HistoryProvider",
    "HistorySearcher",
    "HybridMatches",
    "HybridSearcher",
    "HistoryWindow",
    "LongTermMemory",
    "Memory",
    "Relationship",
    "SearchResult",
    "RunReader",
    "SessionGeneration",
    "SessionLister",
    "SessionReplacer",
    "StoredMessage",
    "ReservedState",
    "ShortTermMemory",
    "SubGraph",
    "SummaryStore",
    "Task",
    "TaskList",
    "TaskStatus",
    "TaskLifecycle",
    "TaskStore",
    "TailEditor",
    "VectorStore",
    "WindowReader",
    "EXPIRY_METADATA_BYTES",
    "MAX_KEY_BYTES",
    "MAX_NAME_LENGTH",
    "MAX_RETRIES",
    "as_tasks",
    "check_name",
    "check_relationship_types",
    "MAX_METADATA_BYTES",
    "MAX_METADATA_ENTRIES",
    "MAX_SEGMENT_BYTES",
    "blob_prefix",
    "replace_session",
    "check_append",
    "check_forget",
    "in_scope",
    "check_replace",
    "check_search",
    "stored_body",
    "check_blob_key",
    "check_blob_metadata",
    "check_content_type",
    "check_filter",
    "matches",
    "window_of",
    "window_start",
    "ttl_seconds",
]
