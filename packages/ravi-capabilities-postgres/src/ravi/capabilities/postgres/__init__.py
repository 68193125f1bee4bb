"""PostgreSQL backends for Ravi: durable history, session state, pgvector search, long-term memory, task boards.

Not implemented yet: this package registers no backend, so ``load_backend(..., "postgres")`` says so clearly.
Planned: PostgresHistoryProvider, PostgresMemoryStore, PgVectorStore, PgTaskStore.
"""

__all__: list[str] = []
