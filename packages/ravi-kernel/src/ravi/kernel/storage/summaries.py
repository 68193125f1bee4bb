"""Summaries as derived records of a session: the ``SummaryStore`` Protocol."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from ravi.kernel.errors import InvalidArgument
from ravi.kernel.scope import Scope


@runtime_checkable
class SummaryStore(Protocol):
    """Summaries kept as derived records beside a transcript, keyed by the :class:`~ravi.kernel.scope.Scope` they
    were derived in (the session and its generation) and a span id within it.

    The transcript is never changed; a summary is a record beside it, so the same span of the same session is
    summarised once across calls and processes, and the first text stored for it is kept. Two sessions (or two
    tenants) never see each other's summaries, even when their message ids and span ids are equal, and a summary
    of another generation of the session (from before a ``clear``) is never returned.

    A store that keeps the history as well (every history provider Ravi ships) refuses, in the same statement, a
    summary whose generation is no longer the session's, and removes a session's summaries when the session is
    cleared.
    """

    async def get_summary(self, scope: Scope, span_id: str) -> str | None:
        """The summary of the span in ``scope``, or ``None``."""
        ...

    async def put_summary(self, scope: Scope, span_id: str, text: str) -> bool:
        """Keep ``text`` as the span's summary in ``scope`` unless it has one; returns whether the store holds a
        summary for the span afterwards (``False`` when it refused one of a generation that is no longer the
        session's)."""
        ...

    async def clear_summaries(self, agent_id: str, *, session_id: str | None = None) -> int:
        """Remove every summary of the session (of every session of the agent when ``session_id`` is ``None``),
        whatever its generation; returns how many were removed."""
        ...


def check_summary_scope(scope: object) -> Scope:
    """``scope`` if it is a :class:`~ravi.kernel.scope.Scope`, else ``InvalidArgument`` (what every
    ``SummaryStore`` checks first)."""
    if not isinstance(scope, Scope):
        raise InvalidArgument(
            f"scope must be a ravi.kernel.scope.Scope, got {type(scope).__name__}",
            hint="Scope(agent_id, session_id, generation)",
        )
    return scope


__all__ = ["SummaryStore", "check_summary_scope"]
