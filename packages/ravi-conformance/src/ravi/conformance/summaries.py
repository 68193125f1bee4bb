"""``SummaryStoreContract``: what every store of derived summaries must do."""

from __future__ import annotations

import asyncio

import pytest

from ravi.conformance._base import ContractBase, unique
from ravi.kernel.errors import InvalidArgument
from ravi.kernel.storage import SummaryStore


class SummaryStoreContract(ContractBase):
    """Subclass and override the ``summary_store`` fixture to yield an empty ``SummaryStore``."""

    contract_name = "SummaryStore"
    pytestmark = pytest.mark.asyncio

    @pytest.fixture
    def summary_store(self) -> SummaryStore:
        """Override: an empty backend, fresh for each test."""
        raise NotImplementedError("override the 'summary_store' fixture to build an empty backend")

    async def test_is_a_summary_store(self, summary_store: SummaryStore) -> None:
        assert isinstance(summary_store, SummaryStore)

    async def test_canary_fixture_gives_an_empty_backend_first(self, summary_store: SummaryStore) -> None:
        assert await summary_store.get_summary("canary") is None
        await summary_store.put_summary("canary", "left behind")

    async def test_canary_fixture_gives_an_empty_backend_second(self, summary_store: SummaryStore) -> None:
        assert await summary_store.get_summary("canary") is None, "state leaked between tests"
        await summary_store.put_summary("canary", "left behind")

    async def test_put_then_get(self, summary_store: SummaryStore) -> None:
        span = unique("summary")
        await summary_store.put_summary(span, "the user wants a refund for INV-2291")
        assert await summary_store.get_summary(span) == "the user wants a refund for INV-2291"

    async def test_missing_span_is_none(self, summary_store: SummaryStore) -> None:
        assert await summary_store.get_summary(unique("summary")) is None

    async def test_the_first_text_of_a_span_is_kept(self, summary_store: SummaryStore) -> None:
        span = unique("summary")
        await summary_store.put_summary(span, "first")
        await summary_store.put_summary(span, "second")
        assert await summary_store.get_summary(span) == "first"

    async def test_spans_are_isolated(self, summary_store: SummaryStore) -> None:
        a, b = unique("summary"), unique("summary")
        await summary_store.put_summary(a, "for a")
        assert await summary_store.get_summary(b) is None

    async def test_concurrent_writers_of_one_span_agree(self, summary_store: SummaryStore) -> None:
        span = unique("summary")
        await asyncio.gather(*(summary_store.put_summary(span, f"text {i}") for i in range(20)))
        text = await summary_store.get_summary(span)
        assert text is not None and text.startswith("text ")
        assert all([await summary_store.get_summary(span) == text for _ in range(3)])

    async def test_unicode_and_long_text_round_trip(self, summary_store: SummaryStore) -> None:
        span = unique("summary") + "-ü漢🚀'\""
        text = "Zusammenfassung: 漢字 🚀 'quotes' \"$$\" \\ \n" * 5_000
        await summary_store.put_summary(span, text)
        assert await summary_store.get_summary(span) == text

    async def test_bad_input_is_refused(self, summary_store: SummaryStore) -> None:
        with pytest.raises(InvalidArgument):
            await summary_store.put_summary("", "text")
        with pytest.raises(InvalidArgument):
            await summary_store.get_summary("")
        with pytest.raises(InvalidArgument):
            await summary_store.put_summary(unique("summary"), 42)  # type: ignore[arg-type]
        with pytest.raises(InvalidArgument):  # lone surrogates: no store can keep them
            await summary_store.put_summary(unique("summary"), "text \ud800")
        with pytest.raises(InvalidArgument):
            await summary_store.put_summary(unique("summary") + "\udfff", "text")
