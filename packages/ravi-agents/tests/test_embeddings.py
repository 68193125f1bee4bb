"""The offline embedder: bounded in cost, off the event loop for large texts, typed errors."""

from __future__ import annotations

import asyncio
import tracemalloc

import pytest

from ravi.agents.storage.embeddings import HashingEmbeddingClient
from ravi.kernel.errors import InvalidArgument


async def test_a_huge_text_costs_a_bounded_amount_of_memory() -> None:
    """A 20 MB tool output used to take 4.5 GB: one "word" of 20 M characters became 60 M pieces."""
    client = HashingEmbeddingClient()
    huge = "x" * 20_000_000
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        [vector] = await client.embed([huge])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 5_000_000, f"embedding one text held {peak / 1e6:.0f} MB"
    assert len(vector) == client.dimension


async def test_a_large_text_is_embedded_off_the_event_loop() -> None:
    client = HashingEmbeddingClient()
    ticks = 0
    done = asyncio.Event()

    async def ticker() -> None:
        nonlocal ticks
        while not done.is_set():
            ticks += 1
            await asyncio.sleep(0)

    task = asyncio.create_task(ticker())
    await asyncio.sleep(0)
    before = ticks
    await client.embed(["word " * 20_000])
    done.set()
    await task
    assert ticks > before, "the event loop did not run while a large text was embedded"


async def test_only_the_first_max_chars_count() -> None:
    client = HashingEmbeddingClient(max_chars=100)
    head = "refund policy for invoices " * 5
    assert await client.embed([head + "tail " * 10_000]) == await client.embed([head + "other " * 10_000])


async def test_bad_input_is_typed() -> None:
    client = HashingEmbeddingClient()
    with pytest.raises(InvalidArgument):
        await client.embed("a bare string")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument):
        await client.embed([b"bytes"])  # type: ignore[list-item]
    with pytest.raises(InvalidArgument):
        HashingEmbeddingClient(dimension=0)
