"""Summaries as derived records keyed by span: the ``SummaryStore`` Protocol."""

from __future__ import annotations

from typing import Protocol, runtime_checkable


@runtime_checkable
class SummaryStore(Protocol):
    """Summaries kept as derived records, keyed by the span of message ids they cover.

    The transcript is never changed; a summary is a record beside it, so the same span is summarised once
    across calls and processes. The first text stored for a span is kept.
    """

    async def get_summary(self, span_id: str) -> str | None:
        """The summary of the span, or ``None``."""
        ...

    async def put_summary(self, span_id: str, text: str) -> None:
        """Keep ``text`` as the span's summary (a span already summarised keeps its first text)."""
        ...


__all__ = ["SummaryStore"]
