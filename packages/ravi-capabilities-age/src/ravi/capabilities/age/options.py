"""The options of ``AGEGraphStore``: the Postgres connection options, the graph's name, and a longer timeout."""

from __future__ import annotations

from pydantic import Field

from ravi.capabilities.postgres.options import PostgresConnectionOptions

GRAPH = r"^[a-z_][a-z0-9_]{2,62}$"
"""A graph name: 3-63 lower-case letters, digits and underscores, starting with a letter or underscore."""


class AGEOptions(PostgresConnectionOptions):
    """The options of ``AGEGraphStore`` (``[graph] backend = "age"``)."""

    graph: str = Field("ravi_graph", pattern=GRAPH, description="The graph's name (created if missing).")
    command_timeout: float = Field(
        60.0, gt=0, description="Seconds before a statement is cancelled (the call raises `BackendUnavailable`)."
    )


__all__ = ["GRAPH", "AGEOptions"]
