"""``InMemoryFileStore`` under the path 000 gives it (``agents/storage/memory.py``)."""

from ravi.agents.storage.blob import InMemoryFileStore

__all__ = ["InMemoryFileStore"]
