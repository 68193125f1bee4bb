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


def test_without_the_model_the_hint_also_says_how_to_install_it_from_a_clone(monkeypatch: pytest.MonkeyPatch) -> None:
    """Asked for the offline model where it is not installed, the error's hint was only
    ``pip install 'ravi-agents[embeddings]'``, which fails until the distributions are published (pip finds no
    ``ravi-embeddings-wordllama``); it also gives the install from a clone, as the documentation does."""
    import sys

    from ravi.agents.context import RelevantRecallStrategy
    from ravi.agents.embeddings import offline_embedding_client
    from ravi.kernel.errors import ConfigurationError

    monkeypatch.setitem(sys.modules, "sentencepiece", None)  # as in an environment without the extra
    offline_embedding_client.cache_clear()
    try:
        assert RelevantRecallStrategy(100).meaning is None  # "auto": words alone
        with pytest.raises(ConfigurationError) as refused:
            RelevantRecallStrategy(100, meaning="offline")
    finally:
        offline_embedding_client.cache_clear()
    hint = refused.value.hint or ""
    assert "pip install 'ravi-agents[embeddings]'" in hint
    assert "./packages/ravi-embeddings-wordllama './packages/ravi-agents[embeddings]'" in hint, hint
