"""Apache AGE graph store for Ravi, registered under the name ``age``: :class:`AGEGraphStore`, a
``GraphStore`` that is also ``CypherCapable``."""

from ravi.capabilities.age.store import AGEGraphStore

__all__ = ["AGEGraphStore"]
