"""``SummaryStoreContract``: what every store of derived summaries must do."""

from __future__ import annotations

import asyncio

import pytest

from ravi.conformance._base import ContractBase, unique
from ravi.kernel.errors import InvalidArgument
from ravi.kernel.storage import SummaryStore


class SummaryStoreContract(ContractBase):
    """Subclass and override the ``backend`` fixture to yield an empty ``SummaryStore``."""

    contract_name = "SummaryStore"
    pytestmark = pytest.mark.asyncio

    @pytest.fixture
    def backend(self) -> SummaryStore:
        """Override: an empty backend, fresh for each test."""
        raise NotImplementedError("override the 'backend' fixture to build an empty backend")

    async def test_is_a_summary_store(self, backend: SummaryStore) -> None:
        """The backend satisfies the ``SummaryStore`` Protocol."""
        assert isinstance(backend, SummaryStore)

    async def test_canary_fixture_gives_an_empty_backend_first(self, backend: SummaryStore) -> None:
        """The fixture gives every test an empty backend (the first of two tests that each leave data behind)."""
        assert await backend.get_summary("canary") is None
        await backend.put_summary("canary", "left behind")

    async def test_canary_fixture_gives_an_empty_backend_second(self, backend: SummaryStore) -> None:
        """The fixture gives every test an empty backend (the second of two tests that each leave data behind)."""
        assert await backend.get_summary("canary") is None, "state leaked between tests"
        await backend.put_summary("canary", "left behind")

    async def test_put_then_get(self, backend: SummaryStore) -> None:
        """A summary reads back as it was put."""
        span = unique("summary")
        await backend.put_summary(span, "the user wants a refund for INV-2291")
        assert await backend.get_summary(span) == "the user wants a refund for INV-2291"

    async def test_missing_span_is_none(self, backend: SummaryStore) -> None:
        """A span with no summary reads as ``None``."""
        assert await backend.get_summary(unique("summary")) is None

    async def test_the_first_text_of_a_span_is_kept(self, backend: SummaryStore) -> None:
        """The first summary put for a span is kept; later ones do not replace it."""
        span = unique("summary")
        await backend.put_summary(span, "first")
        await backend.put_summary(span, "second")
        assert await backend.get_summary(span) == "first"

    async def test_spans_are_isolated(self, backend: SummaryStore) -> None:
        """Summaries of different spans never mix."""
        a, b = unique("summary"), unique("summary")
        await backend.put_summary(a, "for a")
        assert await backend.get_summary(b) is None

    async def test_concurrent_writers_of_one_span_agree(self, backend: SummaryStore) -> None:
        """Concurrent writers of one span leave one of their summaries, and every read returns it."""
        span = unique("summary")
        await asyncio.gather(*(backend.put_summary(span, f"text {i}") for i in range(20)))
        text = await backend.get_summary(span)
        assert text is not None and text.startswith("text ")
        assert all([await backend.get_summary(span) == text for _ in range(3)])

    async def test_unicode_and_long_text_round_trip(self, backend: SummaryStore) -> None:
        """Unicode and long summaries round-trip exactly."""
        span = unique("summary") + "-ü漢🚀'\""
        text = "Zusammenfassung: 漢字 🚀 'quotes' \"$$\" \\ \n" * 5_000
        await backend.put_summary(span, text)
        assert await backend.get_summary(span) == text

    async def test_bad_input_is_refused(self, backend: SummaryStore) -> None:
        """Bad input is refused with a typed error."""
        with pytest.raises(InvalidArgument):
            await backend.put_summary("", "text")
        with pytest.raises(InvalidArgument):
            await backend.get_summary("")
        with pytest.raises(InvalidArgument):
            await backend.put_summary(unique("summary"), 42)  # type: ignore[arg-type]
        with pytest.raises(InvalidArgument):  # lone surrogates: no store can keep them
            await backend.put_summary(unique("summary"), "text \ud800")
        with pytest.raises(InvalidArgument):
            await backend.put_summary(unique("summary") + "\udfff", "text")
