"""The in-memory vector store scores copies of one embedding alike, wherever they are kept."""

from __future__ import annotations

import asyncio

from hypothesis import given, settings
from hypothesis import strategies as st

from ravi.agents.storage import InMemoryVectorStore
from ravi.kernel.storage import Document

_NUMBERS = st.tuples(st.booleans(), st.floats(min_value=0.0009765625, max_value=1.0, width=32)).map(
    lambda signed: signed[1] if signed[0] else -signed[1]
)


@settings(max_examples=40, deadline=None)
@given(
    dimension=st.integers(min_value=1, max_value=40),
    data=st.data(),
)
def test_copies_of_an_embedding_score_alike_in_id_order_within_cosine_range(
    dimension: int, data: st.DataObject
) -> None:
    """Whatever the documents, their order and how they were written (one at a time or in batches), copies of
    one embedding come back with one score, in id order, and every score is a cosine similarity, in [-1, 1]; a
    search for fewer results gives the first of a longer one's (among copies, those of the smallest ids)."""
    vector = st.lists(_NUMBERS, min_size=dimension, max_size=dimension)
    wanted = data.draw(vector)
    others = data.draw(st.lists(vector, max_size=30))
    copies = data.draw(st.integers(min_value=2, max_value=30))
    documents = [Document(id=f"o{i:02d}", embedding=v) for i, v in enumerate(others)]
    documents += [Document(id=f"t{i:02d}", embedding=wanted) for i in range(copies)]
    order = data.draw(st.permutations(documents))
    batch = data.draw(st.integers(min_value=1, max_value=8))
    limit = data.draw(st.integers(min_value=1, max_value=copies))

    async def run() -> None:
        store = InMemoryVectorStore()
        for start in range(0, len(order), batch):
            await store.upsert(list(order[start : start + batch]), "c")
        results = await store.search(wanted, collection="c", limit=len(documents))
        assert all(-1.0 <= r.score <= 1.0 for r in results)
        twins = [r for r in results if r.id.startswith("t")]
        assert len({r.score for r in twins}) == 1
        assert [r.id for r in twins] == sorted(r.id for r in twins)
        first = await store.search(wanted, collection="c", limit=limit)
        assert [r.id for r in first] == [r.id for r in results[:limit]]

    asyncio.run(run())
