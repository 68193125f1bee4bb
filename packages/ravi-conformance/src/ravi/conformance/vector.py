"""``VectorStoreContract``: what every vector store must do."""

from __future__ import annotations

import math
from typing import Any

import pytest

from ravi.conformance._base import ContractBase, unique
from ravi.kernel.errors import InvalidArgument
from ravi.kernel.messages import ImageBlock, TextBlock
from ravi.kernel.storage import Document, VectorStore


def doc(doc_id: str, vector: list[float], **metadata: object) -> Document:
    return Document(id=doc_id, content=f"content of {doc_id}", embedding=tuple(vector), metadata=metadata)


AXES = {"x": [1.0, 0.0, 0.0], "y": [0.0, 1.0, 0.0], "z": [0.0, 0.0, 1.0], "xy": [1.0, 1.0, 0.0], "-x": [-1.0, 0.0, 0.0]}


class VectorStoreContract(ContractBase):
    """Subclass and override the ``vector_store`` fixture to yield an empty ``VectorStore``."""

    contract_name = "VectorStore"
    pytestmark = pytest.mark.asyncio

    @pytest.fixture
    def vector_store(self) -> VectorStore:
        """Override: an empty backend, fresh for each test (with no embedding client)."""
        raise NotImplementedError("override the 'vector_store' fixture to build an empty backend")

    async def fill(self, store: VectorStore) -> str:
        collection = unique("col")
        await store.add(
            [doc(k, v, axis=k, group="pos" if not k.startswith("-") else "neg") for k, v in AXES.items()],
            collection=collection,
        )
        return collection

    async def test_is_a_vector_store(self, vector_store: VectorStore) -> None:
        assert isinstance(vector_store, VectorStore)

    async def test_canary_fixture_gives_an_empty_backend_first(self, vector_store: VectorStore) -> None:
        assert "canary" not in await vector_store.list_collections()
        await vector_store.add([doc("left", [1.0, 2.0])], collection="canary")

    async def test_canary_fixture_gives_an_empty_backend_second(self, vector_store: VectorStore) -> None:
        assert "canary" not in await vector_store.list_collections(), "state leaked between tests"
        await vector_store.add([doc("left", [1.0, 2.0])], collection="canary")

    async def test_add_then_get(self, vector_store: VectorStore) -> None:
        c = await self.fill(vector_store)
        [got] = await vector_store.get(["xy"], collection=c)
        assert got.id == "xy" and got.text == "content of xy" and got.metadata == {"axis": "xy", "group": "pos"}
        assert got.embedding is not None
        assert all(math.isclose(a, b, rel_tol=1e-6) for a, b in zip(got.embedding, AXES["xy"], strict=True))

    async def test_get_keeps_the_order_asked_and_skips_missing(self, vector_store: VectorStore) -> None:
        c = await self.fill(vector_store)
        got = await vector_store.get(["z", "nope", "x"], collection=c)
        assert [d.id for d in got] == ["z", "x"]

    async def test_add_is_insert_if_absent(self, vector_store: VectorStore) -> None:
        c = await self.fill(vector_store)
        await vector_store.add([Document(id="x", content="replaced?", embedding=(0.0, 1.0, 0.0))], collection=c)
        [got] = await vector_store.get(["x"], collection=c)
        assert got.text == "content of x"

    async def test_upsert_replaces(self, vector_store: VectorStore) -> None:
        c = await self.fill(vector_store)
        await vector_store.upsert([Document(id="x", content="new", embedding=(0.0, 1.0, 0.0))], collection=c)
        [got] = await vector_store.get(["x"], collection=c)
        assert got.text == "new"
        top = await vector_store.search([0.0, 1.0, 0.0], collection=c, limit=2)
        assert {r.id for r in top} == {"x", "y"}

    async def test_search_ranks_by_cosine_similarity_higher_is_closer(self, vector_store: VectorStore) -> None:
        c = await self.fill(vector_store)
        results = await vector_store.search([2.0, 0.1, 0.0], collection=c, limit=5)
        assert [r.id for r in results][:2] == ["x", "xy"]
        assert results[-1].id == "-x"
        assert results[0].score > results[1].score > results[-1].score
        assert math.isclose(results[0].score, 2.0 / math.hypot(2.0, 0.1), abs_tol=1e-4)
        assert math.isclose(results[-1].score, -2.0 / math.hypot(2.0, 0.1), abs_tol=1e-4)

    async def test_search_returns_documents_with_their_content(self, vector_store: VectorStore) -> None:
        c = await self.fill(vector_store)
        [best] = await vector_store.search([0.0, 0.0, 3.0], collection=c, limit=1)
        assert best.id == "z" and best.text == "content of z"
        assert math.isclose(best.score, 1.0, abs_tol=1e-4)

    async def test_limit(self, vector_store: VectorStore) -> None:
        c = await self.fill(vector_store)
        assert len(await vector_store.search([1.0, 1.0, 1.0], collection=c, limit=2)) == 2
        assert len(await vector_store.search([1.0, 1.0, 1.0], collection=c, limit=50)) == len(AXES)

    async def test_metadata_filters(self, vector_store: VectorStore) -> None:
        c = await self.fill(vector_store)
        only = await vector_store.search([1.0, 0.0, 0.0], collection=c, limit=5, filter={"group": "neg"})
        assert [r.id for r in only] == ["-x"]
        either = await vector_store.search([1.0, 0.0, 0.0], collection=c, limit=5, filter={"axis": ["y", "z"]})
        assert {r.id for r in either} == {"y", "z"}
        assert await vector_store.search([1.0, 0.0, 0.0], collection=c, limit=5, filter={"axis": "none"}) == []
        assert await vector_store.search([1.0, 0.0, 0.0], collection=c, limit=5, filter={"missing": 1}) == []

    async def test_collections_are_isolated(self, vector_store: VectorStore) -> None:
        c1, c2 = unique("col"), unique("col")
        await vector_store.add([doc("a", [1.0, 0.0])], collection=c1)
        await vector_store.add([doc("b", [1.0, 0.0, 0.0, 0.0])], collection=c2)  # each collection its own dimension
        assert [r.id for r in await vector_store.search([1.0, 0.0], collection=c1, limit=5)] == ["a"]
        assert await vector_store.get(["a"], collection=c2) == []
        assert {c1, c2} <= set(await vector_store.list_collections())

    async def test_list_collections_is_sorted(self, vector_store: VectorStore) -> None:
        names = [unique("b-col"), unique("a-col"), unique("c-col")]
        for name in names:
            await vector_store.add([doc("d", [1.0])], collection=name)
        listed = [n for n in await vector_store.list_collections() if n in names]
        assert listed == sorted(names)

    async def test_delete_counts_and_is_idempotent(self, vector_store: VectorStore) -> None:
        c = await self.fill(vector_store)
        assert await vector_store.delete(["x", "y", "nope"], collection=c) == 2
        assert await vector_store.delete(["x"], collection=c) == 0
        assert {r.id for r in await vector_store.search([1.0, 1.0, 1.0], collection=c, limit=10)} == {
            "z",
            "xy",
            "-x",
        }

    async def test_delete_collection(self, vector_store: VectorStore) -> None:
        c = await self.fill(vector_store)
        assert await vector_store.delete_collection(c) is True
        assert await vector_store.delete_collection(c) is False
        assert c not in await vector_store.list_collections()
        assert await vector_store.search([1.0, 0.0, 0.0], collection=c, limit=3) == []

    async def test_unknown_collection_is_empty(self, vector_store: VectorStore) -> None:
        c = unique("col")
        assert await vector_store.search([1.0], collection=c, limit=3) == []
        assert await vector_store.get(["a"], collection=c) == []
        assert await vector_store.delete(["a"], collection=c) == 0

    async def test_wrong_dimension_is_refused_and_nothing_stored(self, vector_store: VectorStore) -> None:
        c = await self.fill(vector_store)
        with pytest.raises(InvalidArgument, match="dimension"):
            await vector_store.add([doc("ok", [1.0, 2.0, 3.0]), doc("bad", [1.0, 2.0])], collection=c)
        assert await vector_store.get(["ok", "bad"], collection=c) == []
        with pytest.raises(InvalidArgument, match="dimension"):
            await vector_store.search([1.0, 2.0], collection=c, limit=1)

    async def test_missing_embedding_without_a_client_is_a_value_error(self, vector_store: VectorStore) -> None:
        c = unique("col")
        with pytest.raises(ValueError, match="embedding"):
            await vector_store.add([Document(id="no-vector", content="text only")], collection=c)
        assert await vector_store.get(["no-vector"], collection=c) == []

    async def test_a_bare_string_is_not_a_list_of_ids(self, vector_store: VectorStore) -> None:
        """``delete("v1")`` must not delete ``"v"`` and ``"1"``: a string where ids are expected is refused."""
        collection = unique("col")
        await vector_store.add([doc("v", AXES["x"]), doc("1", AXES["y"]), doc("v1", AXES["z"])], collection=collection)
        with pytest.raises(InvalidArgument):
            await vector_store.delete("v1", collection=collection)
        with pytest.raises(InvalidArgument):
            await vector_store.get("v1", collection=collection)
        assert [d.id for d in await vector_store.get(["v", "1", "v1"], collection=collection)] == ["v", "1", "v1"]

    async def test_a_query_that_is_not_numbers_is_refused(self, vector_store: VectorStore) -> None:
        collection = await self.fill(vector_store)
        queries: list[Any] = [["a", "b", "c"], "abc", [1.0, float("nan"), 0.0]]
        for query in queries:
            with pytest.raises(InvalidArgument):
                await vector_store.search(query, collection=collection)

    async def test_names_and_ids_that_are_not_text_are_refused(self, vector_store: VectorStore) -> None:
        """A collection or id with a lone surrogate is InvalidArgument on every call, not a crash."""
        collection = await self.fill(vector_store)
        with pytest.raises(InvalidArgument):
            await vector_store.get(["x\ud800"], collection=collection)
        with pytest.raises(InvalidArgument):
            await vector_store.delete(["x\ud800"], collection=collection)
        with pytest.raises(InvalidArgument):
            await vector_store.search(AXES["x"], collection="c\ud800")
        with pytest.raises(InvalidArgument):
            await vector_store.upsert([doc("y", AXES["y"])], collection="c\ud800")
        assert len(await vector_store.get(list(AXES), collection=collection)) == len(AXES)

    async def test_search_defaults_and_result_fields(self, vector_store: VectorStore) -> None:
        """000: ``search(self, query_embedding, *, collection="default", limit=5, filter=None)``; 004: a search
        result has the fields ``id``, ``content``, ``score`` and ``metadata``."""
        await vector_store.upsert(
            [doc(f"{unique('d')}", [1.0, float(i), 0.0], n=i) for i in range(8)], collection="default"
        )
        results = await vector_store.search([1.0, 0.0, 0.0])
        assert len(results) == 5
        best = results[0]
        [stored] = await vector_store.get([best.id], collection="default")
        assert (best.content, best.metadata) == (stored.content, stored.metadata)
        assert set(type(best).model_fields) == {"id", "content", "score", "metadata"}
        assert best.score >= results[-1].score
        await vector_store.delete(
            [r.id for r in await vector_store.search([1.0, 0.0, 0.0], limit=50)], collection="default"
        )

    async def test_unicode_ids_and_metadata_round_trip(self, vector_store: VectorStore) -> None:
        c = unique("col")
        metadata = {"tag": "ünï 漢 🚀", "quote": "'\"\\", "nested": {"n": [1, 2]}}
        await vector_store.add(
            [Document(id="ид-🚀'\"", content="текст", embedding=(0.5, 0.5), metadata=metadata)], collection=c
        )
        [got] = await vector_store.get(["ид-🚀'\""], collection=c)
        assert got.text == "текст" and got.metadata == metadata

    async def test_content_blocks_round_trip(self, vector_store: VectorStore) -> None:
        """004: "Document: Represents raw chunks. Fields: content: list[ContentBlock]"; a document keeps its blocks
        exactly (an image and text, an empty text block, no blocks at all), through ``get`` and ``search``."""
        c = unique("col")
        kinds = {
            "mixed": (TextBlock(text="a chart"), ImageBlock(url="data:image/png;base64,iVBORw0KGgo=", detail="low")),
            "empty-text": (TextBlock(text=""),),
            "none": (),
            "two-texts": (TextBlock(text="one"), TextBlock(text="two")),
            "plain": (TextBlock(text="just text"),),
        }
        docs = [Document(id=k, content=v, embedding=(1.0, float(i))) for i, (k, v) in enumerate(kinds.items())]
        await vector_store.upsert(docs, collection=c)
        got = {d.id: d.content for d in await vector_store.get(list(kinds), collection=c)}
        assert got == kinds
        hits = await vector_store.search([1.0, 0.0], collection=c, limit=10)
        assert {h.id: h.content for h in hits} == kinds
        assert Document(id="s", content="as a string").content == (TextBlock(text="as a string"),)
