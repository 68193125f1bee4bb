"""The OpenAI Agents SDK's session classes, rebound to ``RaviSession``, and what of its tests does not apply.

Each stand-in is a ``RaviSession`` built from the arguments the SDK's class takes. Sessions that share storage
in the SDK (the same database file, engine, or Redis client and key prefix) share an agent scope of the one
Ravi store of the run (``ravi_upstream.store()``: in memory, or Postgres or Redis by configuration); each
``":memory:"`` database is a scope of its own, and no two tests share one.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import ravi_upstream

from ravi.integrations.openai_agents import RaviSession


def _scope(key: object) -> str:
    return ravi_upstream.scope(uuid.uuid4().hex if str(key).endswith(":memory:") else key)


class _Stand(RaviSession):
    def __init__(self, session_id: str, key: object, session_settings: Any) -> None:
        ravi_upstream.built()
        super().__init__(session_id, ravi_upstream.store(), agent_id=_scope(key), session_settings=session_settings)

    async def aclose(self) -> None:
        """Nothing to close: the store outlives the session object."""

    async def ping(self) -> bool:
        return True


class SQLiteSession(_Stand):
    """A RaviSession built with ``SQLiteSession``'s arguments."""

    def __init__(
        self,
        session_id: str,
        db_path: str | Path = ":memory:",
        sessions_table: str = "agent_sessions",
        messages_table: str = "agent_messages",
        session_settings: Any = None,
    ) -> None:
        super().__init__(session_id, (db_path, sessions_table, messages_table), session_settings)

    def close(self) -> None:
        """Nothing to close: the store outlives the session object."""


class AsyncSQLiteSession(_Stand):
    """A RaviSession built with ``AsyncSQLiteSession``'s arguments."""

    def __init__(
        self,
        session_id: str,
        db_path: str | Path = ":memory:",
        sessions_table: str = "agent_sessions",
        messages_table: str = "agent_messages",
        session_settings: Any = None,
    ) -> None:
        super().__init__(session_id, (db_path, sessions_table, messages_table), session_settings)

    async def close(self) -> None:
        """Nothing to close: the store outlives the session object."""


class SQLAlchemySession(_Stand):
    """A RaviSession built with ``SQLAlchemySession``'s arguments."""

    def __init__(
        self,
        session_id: str,
        *,
        engine: Any,
        create_tables: bool = False,
        sessions_table: str = "agent_sessions",
        messages_table: str = "agent_messages",
        session_settings: Any = None,
        ensure_ascii: bool = True,
    ) -> None:
        where = engine if isinstance(engine, str) else id(engine)  # a URL (from_url), or one engine object
        super().__init__(session_id, (where, sessions_table, messages_table), session_settings)

    @classmethod
    def from_url(
        cls, session_id: str, *, url: str, engine_kwargs: Any = None, session_settings: Any = None, **kwargs: Any
    ) -> SQLAlchemySession:
        engine = url if not url.endswith(":memory:") else object()  # each in-memory engine is a database of its own
        return cls(session_id, engine=engine, session_settings=session_settings, **kwargs)

    async def close(self) -> None:
        """Nothing to close: the store outlives the session object."""


class RedisSession(_Stand):
    """A RaviSession built with ``RedisSession``'s arguments."""

    def __init__(
        self,
        session_id: str,
        *,
        redis_client: Any,
        key_prefix: str = "agents:session",
        ttl: int | None = None,
        session_settings: Any = None,
    ) -> None:
        where = redis_client if isinstance(redis_client, str) else id(redis_client)  # a URL (from_url), or a client
        super().__init__(session_id, (where, key_prefix), session_settings)

    @classmethod
    def from_url(
        cls, session_id: str, *, url: str, redis_kwargs: Any = None, session_settings: Any = None, **kwargs: Any
    ) -> RedisSession:
        return cls(session_id, redis_client=url, session_settings=session_settings, **kwargs)

    async def close(self) -> None:
        """Nothing to close: the store outlives the session object."""


# Why a test of the SDK's does not apply to a Ravi session: each reason names the SDK internal the test probes.
_SQLITE = "SQLiteSession's own SQLite connections, file locks or transactions (_connections, _locked_connection, _lock)"
_AIOSQLITE = "AsyncSQLiteSession's own aiosqlite connection, WAL start-up and transactions (_get_connection)"
_SQLALCHEMY = (
    "SQLAlchemySession's own engine, session factory, table locks or SQL statements (engine, _session_factory)"
)
_REDIS = "RedisSession's own Redis client, keys, counters and pipelines (_redis, _get_next_id, _owns_client)"
_RAW_ROWS = "rows written with raw SQL into the SDK session's own tables (corrupt rows, forged timestamps)"
_CLOSE = "close() making the SDK's session terminal; a Ravi session has no close(): its store outlives it"
_COMPACTION = (
    "the SDK's private compaction hooks of its own sessions (_get_compaction_snapshot, _atomic_replace_items, "
    "_read_compaction_items), which it probes with getattr and a third-party Session does not have"
)
_NEGATIVE_LIMIT = "SQLite's reading of a negative limit as no limit (SQL LIMIT -1); a Ravi session gives nothing"
_RAW_REDIS = "data written with raw Redis commands into RedisSession's own keys (corrupt entries, an older layout)"
_CLUSTER = "RedisSession's refusal of a RedisCluster client's transactions (redis-py's own client)"

NOT_APPLICABLE: dict[str, dict[str, str]] = {
    "openai-agents": {
        **{
            f"tests/memory/test_session.py::{name}": _SQLITE
            for name in (
                "test_sqlite_session_close_closes_worker_thread_connections",
                "test_sqlite_session_reaps_connections_from_exited_worker_threads",
                "test_sqlite_session_closes_retired_connections_before_the_next_allocation",
                "test_sqlite_session_keeps_connections_of_live_worker_threads",
                "test_sqlite_session_file_lock_is_shared_across_instances",
                "test_sqlite_session_failed_add_items_releases_write_lock",
                "test_sqlite_session_failed_clear_session_rolls_back",
                "test_sqlite_session_failed_pop_item_releases_write_lock",
                "test_sqlite_session_rollback_failure_evicts_connection",
                "test_sqlite_session_close_retries_quarantined_connection",
                "test_sqlite_session_post_commit_cancellation_propagates_after_known_outcome",
            )
        },
        **{
            f"tests/memory/test_session.py::{name}": _RAW_ROWS
            for name in (
                "test_sqlite_session_pop_item_skips_corrupt_most_recent",
                "test_sqlite_session_pop_item_returns_none_after_dropping_only_corrupt_rows",
                "test_sqlite_session_get_items_limit_skips_corrupt_newest_rows",
                "test_sqlite_session_get_items_session_settings_limit_skips_corrupt_rows",
            )
        },
        "tests/memory/test_session.py::test_sqlite_session_closed_rejects_empty_add_items": _CLOSE,
        **{
            f"tests/extensions/memory/test_async_sqlite_session.py::{name}": _AIOSQLITE
            for name in (
                "test_cancelled_add_items_rolls_back_write_transaction",
                "test_cancelled_close_finishes_cleanup_and_propagates_cancellation",
                "test_cancelled_connect_closes_eventually_acquired_connection",
                "test_cancelled_initialization_finishes_candidate_close",
                "test_cancelled_wal_retry_closes_startup_connection",
                "test_close_retries_connection_quarantined_after_rollback_failure",
                "test_close_retries_quarantined_failed_initialization_candidate",
                "test_failed_add_items_rolls_back_and_reuses_connection",
                "test_failed_clear_session_rolls_back",
                "test_failed_initialization_closes_candidate_connection",
                "test_failed_pop_item_releases_write_lock",
                "test_initialization_does_not_retry_unrecoverable_wal_errors",
                "test_initialization_failure_then_cancellation_during_candidate_close",
                "test_initialization_retries_transient_wal_lock",
                "test_initialization_releases_wal_cursor_before_schema_write",
                "test_operation_failure_then_cancellation_during_rollback",
                "test_post_commit_cancellation_propagates_after_known_mutation_outcome",
                "test_rollback_failure_closes_and_evicts_connection",
            )
        },
        **{
            f"tests/extensions/memory/test_async_sqlite_session.py::{name}": _RAW_ROWS
            for name in (
                "test_async_sqlite_session_get_items_limit_skips_corrupt_newest_rows",
                "test_async_sqlite_session_pop_item_returns_none_after_dropping_only_corrupt_rows",
                "test_async_sqlite_session_pop_item_skips_corrupt_most_recent",
                "test_async_sqlite_session_get_items_same_timestamp_consistent_order",
                "test_async_sqlite_session_pop_item_same_timestamp_returns_latest",
            )
        },
        **{
            f"tests/extensions/memory/test_async_sqlite_session.py::{name}": _CLOSE
            for name in (
                "test_async_sqlite_session_close_before_use_is_terminal",
                "test_async_sqlite_session_close_is_idempotent",
                "test_async_sqlite_session_closed_operations_raise_runtime_error",
                "test_async_sqlite_session_closed_rejects_empty_add_items",
            )
        },
        **{
            f"tests/extensions/memory/test_sqlalchemy_session.py::{name}": _SQLALCHEMY
            for name in (
                "test_add_items_cancelled_waiter_does_not_strand_table_init_lock",
                "test_add_items_concurrent_first_access_across_from_url_sessions",
                "test_add_items_concurrent_first_access_across_from_url_sessions_cross_loop",
                "test_add_items_concurrent_first_access_with_shared_session_cross_loop",
                "test_add_items_waits_for_transient_sqlite_write_lock",
                "test_create_tables_false_does_not_allocate_shared_init_lock",
                "test_engine_property_from_external_engine",
                "test_engine_property_from_url",
                "test_engine_property_is_read_only",
                "test_mutation_cancellation_waits_for_transaction_exit",
                "test_pop_item_retries_returning_claim_lost_to_concurrent_delete",
                "test_pop_item_supports_unknown_delete_rowcount",
                "test_sqlalchemy_session_can_store_non_ascii_without_escaping",
                "test_sqlalchemy_session_defaults_to_escaped_non_ascii_storage",
                "test_sqlite_configuration_registry_does_not_grow_unbounded",
                "test_sqlite_configuration_registry_releases_collected_engines",
                "test_sqlite_fallback_reserves_writer_before_tail_claim",
            )
        },
        **{
            f"tests/extensions/memory/test_sqlalchemy_session.py::{name}": _RAW_ROWS
            for name in (
                "test_get_items_limit_skips_corrupt_newest_rows",
                "test_get_items_orders_by_id_for_ties",
                "test_get_items_same_timestamp_consistent_order",
                "test_pop_item_returns_none_after_dropping_only_corrupt_rows",
                "test_pop_item_same_timestamp_returns_latest",
                "test_pop_item_skips_corrupt_most_recent",
            )
        },
        **{
            f"tests/extensions/memory/test_redis_session.py::{name}": _REDIS
            for name in (
                "test_add_items_preserves_created_at_metadata",
                "test_atomic_replacement_preserves_clear_add_metadata",
                "test_atomic_replacement_rejects_colliding_counter_key",
                "test_atomic_replacement_serializes_before_deleting_history",
                "test_cancelled_redis_compaction_handoff_remains_resumable",
                "test_compaction_cancel_after_redis_commit_invalidates_cached_history",
                "test_compaction_replaces_redis_history_atomically",
                "test_compaction_subclass_retains_overridden_storage_methods",
                "test_get_next_id_method",
                "test_internal_client_ownership",
                "test_mutation_cancellation_waits_for_authoritative_outcome",
                "test_add_items_applies_ttl_in_the_write_transaction",
                "test_add_items_refreshes_server_timestamps_after_watch_retry",
                "test_add_items_rejects_unrepresentable_ttl_before_writing",
                "test_add_items_rejects_wrong_metadata_key_type_before_writing",
                "test_add_items_uses_server_absolute_expiration_after_serialization",
                "test_ambiguous_exec_watch_error_is_not_retried",
                "test_blocking_pool_cancellation_completion_owns_release",
                "test_blocking_pool_detached_disconnect_notifies_waiter",
                "test_blocking_pool_listener_failure_notifies_waiter",
                "test_cancelled_connection_acquisition_is_discarded_before_release",
                "test_cancelled_in_flight_watch_command_reconnects_before_pool_reuse",
                "test_cancelled_watch_releases_single_connection_pool",
                "test_clear_rechecks_key_types_after_concurrent_replacement",
                "test_colliding_counter_rejects_ttl_write_before_side_effects",
                "test_colliding_session_clear_preserves_existing_session",
                "test_ordinary_pool_cancellation_completion_owns_release",
                "test_ping_connection_failure",
                "test_post_commit_cancellation_propagates_after_cleanup",
                "test_post_commit_detached_close_failure_is_quarantined",
                "test_pre_exec_cancellation_skips_pipeline_reset",
                "test_pre_exec_close_failure_is_quarantined",
                "test_reconnect_marked_inside_release_failure_is_detached",
                "test_redis81_standard_pool_checkout_records_native_observability",
                "test_redis8_blocking_pool_checkout_preserves_native_timing",
                "test_redis_cluster_reads_and_subclass_writes",
                "test_release_failure_after_reborrow_preserves_new_borrower",
                "test_transparent_overridden_pool_release_is_supported",
            )
        },
        **{
            f"tests/extensions/memory/test_redis_session.py::{name}": _RAW_REDIS
            for name in (
                "test_corrupted_data_handling",
                "test_get_items_limit_skips_corrupt_newest_messages",
                "test_released_redis_layout_remains_usable",
            )
        },
        **{
            f"tests/extensions/memory/test_redis_session.py::{name}": _CLOSE
            for name in (
                "test_close_method_coverage",
                "test_redis_session_cancelled_cleanup_is_terminal_and_retried",
                "test_redis_session_close_is_idempotent",
                "test_redis_session_close_is_noop_for_injected_client",
                "test_redis_session_closed_operations_raise_runtime_error",
                "test_redis_session_closed_rejects_empty_add_items",
                "test_redis_session_failed_cleanup_is_terminal_and_retried",
                "test_redis_session_operation_waiting_behind_close_raises",
                "test_redis_session_ping_raises_after_close",
            )
        },
        "test_redis_session_rejects_cluster_transactions_before_pipeline": _CLUSTER,
        **{
            f"tests/extensions/memory/test_encrypt_session.py::{name}": _SQLITE
            for name in (
                "test_encrypted_pop_authentication_is_atomic_with_concurrent_mutations",
                "test_encrypted_pop_cancellation_waits_for_authentication_rollback",
                "test_encrypted_pop_wrong_key_preserves_row_identity",
            )
        },
        "tests/extensions/memory/test_encrypt_session.py::test_encrypted_pop_preserves_sqlalchemy_history": _SQLALCHEMY,
        "tests/extensions/memory/test_encrypt_session.py::test_encrypted_compaction_skips_unencrypted_stored_history": (
            _COMPACTION
        ),
        "test_encrypted_session_scan_budget_rejects_negative_limit_before_read": _NEGATIVE_LIMIT,
        **{
            f"tests/memory/test_compaction_model_visibility.py::{name}": _COMPACTION
            for name in (
                "test_automatic_compaction_does_not_reload_unbounded_hidden_history",
                "test_backend_read_limit_cannot_hide_retained_history_from_compaction",
                "test_expired_read_overhead_does_not_authorize_hidden_history",
            )
        },
        "tests/memory/test_openai_responses_compaction_session.py::test_automatic_compaction_rollback_budget[True]": (
            _COMPACTION
        ),
        **{
            f"tests/memory/test_openai_responses_compaction_session.py::{name}": _SQLITE
            for name in (
                "test_settled_clear_failure_invalidates_response_chain",
                "test_settled_pop_failure_invalidates_response_chain",
            )
        },
        "tests/test_run_impl_resume_paths.py::test_handoff_resume_after_cancelled_compaction_commits": _SQLITE,
    }
}
