"""Redis backends for Ravi: hot conversation history with TTL, session state, long-term memory.

Not implemented yet: this package registers no backend, so ``load_backend(..., "redis")`` says so clearly.
Planned: RedisHistoryProvider, RedisSessionStore.
"""

__all__: list[str] = []
