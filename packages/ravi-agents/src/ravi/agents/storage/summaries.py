"""``InMemorySummaryStore``: summaries as derived records, keyed by span, in process memory."""

from __future__ import annotations

from collections import OrderedDict

from ravi.kernel.closing import Closeable
from ravi.kernel.values import check_span, check_summary


class InMemorySummaryStore(Closeable):
    """Up to ``max_entries`` summaries, the least recently used dropped first; the first text of a span wins."""

    def __init__(self, max_entries: int = 10_000) -> None:
        self._texts: OrderedDict[str, str] = OrderedDict()
        self._max = max_entries

    async def get_summary(self, span_id: str) -> str | None:
        """The summary of the span, or ``None``."""
        check_span(span_id)
        text = self._texts.get(span_id)
        if text is not None:
            self._texts.move_to_end(span_id)
        return text

    async def put_summary(self, span_id: str, text: str) -> None:
        """Keep ``text`` as the span's summary unless it has one."""
        check_span(span_id)
        check_summary(text)
        self._texts.setdefault(span_id, text)
        self._texts.move_to_end(span_id)
        while len(self._texts) > self._max:
            self._texts.popitem(last=False)


__all__ = ["InMemorySummaryStore", "check_span"]
