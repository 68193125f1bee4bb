"""The options of every Postgres store, one model each: types, documentation and defaults in one place.

The same model checks ``ravi.toml``, ``RAVI_<KIND>__<KEY>`` variables (strings, converted here: the PgBouncer
setting ``RAVI_HISTORY__STATEMENT_CACHE_SIZE=0`` arrives as the integer 0) and keyword arguments, and the
configuration page's tables are generated from it. :class:`PostgresConnectionOptions` belongs to the connection
layer, which the AGE graph store shares.
"""

from __future__ import annotations

from typing import Any, ClassVar, Self

from pydantic import Field, field_validator, model_validator

from ravi.kernel.options import BackendOptions

IDENTIFIER = r"^[a-z_][a-z0-9_]{0,40}$"
"""A schema, table prefix or graph name: formatted into SQL, so held to lower-case letters, digits, underscores."""

MAX_TABLE_PREFIX = 20
"""The longest table prefix: PostgreSQL cuts names past 63 bytes, and the longest name a store gives with the prefix
in front has 43 (``messages_agent_id_session_id_message_id_key``)."""

TABLE_PREFIX = rf"^$|^[a-z_][a-z0-9_]{{0,{MAX_TABLE_PREFIX - 1}}}$"
"""A table prefix: empty or an identifier of at most :data:`MAX_TABLE_PREFIX` characters."""


class PostgresConnectionOptions(BackendOptions):
    """How a store reaches its server: the DSN and the pool (shared by every store of one server)."""

    dsn: str = Field(description="`postgresql://user:password@host:port/database`.")
    min_size: int = Field(1, ge=0, description="Connections the pool keeps open.")
    max_size: int = Field(10, ge=1, description="Connections the pool opens at most.")
    command_timeout: float = Field(
        30.0, gt=0, description="Seconds before a statement is cancelled (the call raises `BackendUnavailable`)."
    )
    connect_timeout: float = Field(10.0, gt=0, description="Seconds to wait for a new connection.")
    statement_cache_size: int = Field(
        100,
        ge=0,
        description="Prepared statements kept per connection; 0 behind PgBouncer older than 1.21 or without "
        "`max_prepared_statements`.",
    )

    @field_validator("dsn")
    @classmethod
    def _a_postgres_address(cls, dsn: str) -> str:
        if not dsn.startswith(("postgres://", "postgresql://")):
            raise ValueError("a Postgres DSN starts with postgresql://, for example postgresql://user@localhost/db")
        return dsn

    @model_validator(mode="after")
    def _pool_sizes(self) -> Self:
        if self.min_size > self.max_size:
            raise ValueError(f"pool sizes must satisfy min_size <= max_size, got {self.min_size}, {self.max_size}")
        return self


class PostgresStoreOptions(PostgresConnectionOptions):
    """The options of a store with tables of its own: the connection, and where its tables live."""

    schema_: str = Field(
        "ravi",
        alias="schema",
        pattern=IDENTIFIER,
        description="The schema holding the tables (created and migrated on first use).",
    )
    table_prefix: str = Field(
        "",
        pattern=TABLE_PREFIX,
        description="Prepended to every table name, so several apps can share one schema (at most 20 characters, "
        "not ending in `session_`).",
    )


class PostgresHistoryOptions(PostgresStoreOptions):
    """The options of ``PostgresHistoryProvider`` (``[history] backend = "postgres"``)."""

    cache_sessions: int = Field(64, ge=0, description="Sessions kept parsed in memory (0 turns the cache off).")


class PostgresStateOptions(PostgresStoreOptions):
    """The options of ``PostgresMemoryStore`` (``[state] backend = "postgres"``)."""


class PgLongTermOptions(PostgresStoreOptions):
    """The options of ``PgLongTermMemory`` (``[longterm] backend = "postgres"``)."""

    code_only: ClassVar[frozenset[str]] = frozenset({"embedding_client"})
    embedding_client: Any = Field(
        None, description="An `EmbeddingClient` (in code only); the hashing embedder by default."
    )


class PgVectorOptions(PostgresStoreOptions):
    """The options of ``PgVectorStore`` (``[vector] backend = "postgres"``)."""

    code_only: ClassVar[frozenset[str]] = frozenset({"embedding_client"})
    command_timeout: float = Field(
        60.0, gt=0, description="Seconds before a statement is cancelled (index builds take a while)."
    )
    embedding_client: Any = Field(
        None, description="An `EmbeddingClient` (in code only) for documents that come without an embedding."
    )
    ef_search: int = Field(100, ge=1, description="HNSW search breadth: higher finds more of the true nearest.")
    hnsw_m: int = Field(16, ge=2, description="HNSW links per node, for new collections.")
    hnsw_ef_construction: int = Field(64, ge=4, description="HNSW build breadth, for new collections.")
    exact_search_kb: int = Field(
        10_240,
        ge=0,
        description="A collection smaller than this many KiB is searched exactly, a larger one through its index "
        "(0: always the index).",
    )


class PgTaskOptions(PostgresStoreOptions):
    """The options of ``PgTaskStore`` (``[tasks] backend = "postgres"``)."""


class PostgresSummaryOptions(PostgresStoreOptions):
    """The options of ``PostgresSummaryStore`` (``[summaries] backend = "postgres"``)."""


__all__ = [
    "IDENTIFIER",
    "MAX_TABLE_PREFIX",
    "TABLE_PREFIX",
    "PgLongTermOptions",
    "PgTaskOptions",
    "PgVectorOptions",
    "PostgresConnectionOptions",
    "PostgresHistoryOptions",
    "PostgresStateOptions",
    "PostgresStoreOptions",
    "PostgresSummaryOptions",
]
