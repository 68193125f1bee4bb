"""Which of the SDK's session tests do not apply to a Ravi session, and why.

The rest run unchanged against ``RaviSession`` (see ``stand_in.py`` and ``README.md``).
"""

from __future__ import annotations

import pytest

_SQLITE_INTERNALS = (
    "tests SQLiteSession's own SQLite connections, locks or transactions, which a Ravi session does not have"
)
_RAW_ROWS = "writes corrupt rows with raw SQL into SQLiteSession's tables; a Ravi store refuses such rows on the way in"

NOT_APPLICABLE = {
    "test_sqlite_session_close_closes_worker_thread_connections": _SQLITE_INTERNALS,
    "test_sqlite_session_reaps_connections_from_exited_worker_threads": _SQLITE_INTERNALS,
    "test_sqlite_session_closes_retired_connections_before_the_next_allocation": _SQLITE_INTERNALS,
    "test_sqlite_session_keeps_connections_of_live_worker_threads": _SQLITE_INTERNALS,
    "test_sqlite_session_closed_rejects_empty_add_items": "a Ravi session has no close(): its store outlives it",
    "test_sqlite_session_pop_item_skips_corrupt_most_recent": _RAW_ROWS,
    "test_sqlite_session_pop_item_returns_none_after_dropping_only_corrupt_rows": _RAW_ROWS,
    "test_sqlite_session_get_items_limit_skips_corrupt_newest_rows": _RAW_ROWS,
    "test_sqlite_session_get_items_session_settings_limit_skips_corrupt_rows": _RAW_ROWS,
    "test_sqlite_session_file_lock_is_shared_across_instances": _SQLITE_INTERNALS,
    "test_sqlite_session_failed_add_items_releases_write_lock": _SQLITE_INTERNALS,
    "test_sqlite_session_failed_clear_session_rolls_back": _SQLITE_INTERNALS,
    "test_sqlite_session_failed_pop_item_releases_write_lock": _SQLITE_INTERNALS,
    "test_sqlite_session_rollback_failure_evicts_connection": _SQLITE_INTERNALS,
    "test_sqlite_session_close_retries_quarantined_connection": _SQLITE_INTERNALS,
    "test_sqlite_session_post_commit_cancellation_propagates_after_known_outcome": _SQLITE_INTERNALS,
    "test_session_settings_rejects_unknown_dictionary_fields": (
        "Ravi refuses unknown settings with ravi.kernel.errors.ConfigurationError where SQLiteSession raises "
        "TypeError (test_openai_agents.py checks Ravi's error)"
    ),
}


@pytest.fixture(autouse=True)
def _applies_to_ravi(request: pytest.FixtureRequest) -> None:
    reason = NOT_APPLICABLE.get(request.node.originalname)
    if reason is not None:
        pytest.skip(f"not for a Ravi session: {reason}")
