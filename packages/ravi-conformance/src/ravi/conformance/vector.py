"""``VectorStoreContract``: what every vector store must do."""

from __future__ import annotations

import math
import random
from collections import UserDict
from collections.abc import Awaitable, Callable
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given, settings

from ravi.conformance._base import (
    EXACT_NUMBERS,
    PROPERTY_CHECKS,
    ContractBase,
    assert_protocol,
    at_limit,
    id_texts,
    refuses_long_ids,
    typed,
    unique,
)
from ravi.kernel.errors import InvalidArgument
from ravi.kernel.messages import ImageBlock, TextBlock
from ravi.kernel.storage import Document, Forgetter, VectorStore


def doc(doc_id: str, vector: list[float], **metadata: object) -> Document:
    return Document(id=doc_id, content=f"content of {doc_id}", embedding=tuple(vector), metadata=metadata)


AXES = {"x": [1.0, 0.0, 0.0], "y": [0.0, 1.0, 0.0], "z": [0.0, 0.0, 1.0], "xy": [1.0, 1.0, 0.0], "-x": [-1.0, 0.0, 0.0]}


class VectorStoreContract(ContractBase):
    """Subclass and override the ``backend`` fixture to yield an empty ``VectorStore``."""

    contract_name = "VectorStore"
    pytestmark = pytest.mark.asyncio

    @pytest.fixture
    def backend(self) -> VectorStore:
        """Override: an empty backend, fresh for each test (with no embedding client)."""
        raise NotImplementedError("override the 'backend' fixture to build an empty backend")

    async def fill(self, store: VectorStore) -> str:
        collection = unique("col")
        await store.add(
            [doc(k, v, axis=k, group="pos" if not k.startswith("-") else "neg") for k, v in AXES.items()],
            collection=collection,
        )
        return collection

    async def test_is_a_vector_store(self, backend: VectorStore) -> None:
        """The backend satisfies the ``VectorStore`` Protocol: it has every method of it, each ``async def``.

        Fix: give the class each method the message names, as ``async def`` with the Protocol's signature
        (``ravi.kernel.storage.VectorStore``).
        """
        assert_protocol(backend, VectorStore)

    async def test_canary_fixture_gives_an_empty_backend_first(self, backend: VectorStore) -> None:
        """The fixture gives every test an empty backend (the first of two tests that each leave data behind).

        Fix: the store held data before the test ran: give each test an empty store of its own in the ``backend``
        fixture (an in-memory or temporary store), or isolate a persistent one with ``--isolate KIND=OPTION``
        (``--ravi-isolate``) and an ``async def destroy(self)`` that removes what the option names.
        """
        assert "canary" not in await backend.list_collections()
        await backend.add([doc("left", [1.0, 2.0])], collection="canary")

    async def test_canary_fixture_gives_an_empty_backend_second(self, backend: VectorStore) -> None:
        """The fixture gives every test an empty backend (the second of two tests that each leave data behind).

        Fix: give each test a store of its own: build it in the ``backend`` fixture (an in-memory or temporary
        store), or isolate a persistent one with ``--isolate KIND=OPTION`` (``--ravi-isolate``) and an
        ``async def destroy(self)`` that removes what the option names.
        """
        assert "canary" not in await backend.list_collections(), (
            "state leaked between tests: list_collections() holds the first canary's collection"
        )
        await backend.add([doc("left", [1.0, 2.0])], collection="canary")

    async def test_add_then_get(self, backend: VectorStore) -> None:
        """A document reads back with its content, embedding and metadata.

        Fix: store each document's id, content, embedding and metadata, and build a ``Document`` from them on ``get``;
        an embedding comes back within float32's precision, metadata as the JSON it was.
        """
        c = await self.fill(backend)
        [got] = await backend.get(["xy"], collection=c)
        assert got.id == "xy" and got.text == "content of xy" and got.metadata == {"axis": "xy", "group": "pos"}
        assert got.embedding is not None
        assert all(math.isclose(a, b, rel_tol=1e-6) for a, b in zip(got.embedding, AXES["xy"], strict=True))

    async def test_takes_the_collection_by_position_as_004_lists_it(self, backend: VectorStore) -> None:
        """004 lists ``add(documents, collection)``, ``upsert``, ``get(ids, collection)`` and ``delete``: the
        collection comes second, by position as by name.

        Fix: declare ``collection`` as an ordinary parameter after the documents or ids, as the Protocol does (``async
        def add(self, documents, collection)``), not keyword-only.
        """
        c = unique("c")
        assert await backend.add([doc("a", [1.0, 0.0])], c) == ["a"]
        await backend.upsert([doc("a", [0.0, 1.0], kind="replaced")], c)
        [got] = await backend.get(["a"], c)
        assert got.metadata == {"kind": "replaced"}
        assert await backend.delete(["a"], c) == 1
        assert await backend.get(["a"], c) == []

    async def test_get_keeps_the_order_asked_and_skips_missing(self, backend: VectorStore) -> None:
        """``get`` returns documents in the order asked and skips missing ids.

        Fix: look the ids up (``check_ids`` of ``ravi.kernel.values`` first) and return the found documents in the order
        of ``ids``, not the store's order; a missing id is left out.
        """
        c = await self.fill(backend)
        got = await backend.get(["z", "nope", "x"], collection=c)
        assert [d.id for d in got] == ["z", "x"]

    async def test_add_is_insert_if_absent(self, backend: VectorStore) -> None:
        """``add`` leaves a document whose id exists as it is.

        Fix: make ``add`` insert only ids the collection lacks (``INSERT ... ON CONFLICT (id) DO NOTHING``) and
        ``upsert`` replace (``DO UPDATE``).
        """
        c = await self.fill(backend)
        await backend.add([Document(id="x", content="replaced?", embedding=(0.0, 1.0, 0.0))], collection=c)
        [got] = await backend.get(["x"], collection=c)
        assert got.text == "content of x"

    async def test_upsert_replaces(self, backend: VectorStore) -> None:
        """``upsert`` replaces a document whose id exists.

        Fix: make ``upsert`` replace the whole document of a held id, its embedding included (``INSERT ... ON CONFLICT
        (id) DO UPDATE`` of every column), so a search ranks it by its new vector.
        """
        c = await self.fill(backend)
        await backend.upsert([Document(id="x", content="new", embedding=(0.0, 1.0, 0.0))], collection=c)
        [got] = await backend.get(["x"], collection=c)
        assert got.text == "new"
        top = await backend.search([0.0, 1.0, 0.0], collection=c, limit=2)
        assert {r.id for r in top} == {"x", "y"}

    async def test_search_ranks_by_cosine_similarity_higher_is_closer(self, backend: VectorStore) -> None:
        """``search`` ranks by cosine similarity, higher is closer.

        Fix: score by cosine similarity (1 - pgvector's cosine distance ``<=>``), in [-1, 1], and return the best first;
        a distance, or a similarity of unnormalised vectors, is not the score.
        """
        c = await self.fill(backend)
        results = await backend.search([2.0, 0.1, 0.0], collection=c, limit=5)
        assert [r.id for r in results][:2] == ["x", "xy"]
        assert results[-1].id == "-x"
        assert results[0].score > results[1].score > results[-1].score
        assert math.isclose(results[0].score, 2.0 / math.hypot(2.0, 0.1), abs_tol=1e-4)
        assert math.isclose(results[-1].score, -2.0 / math.hypot(2.0, 0.1), abs_tol=1e-4)

    async def test_equal_scores_come_in_id_order(self, backend: VectorStore) -> None:
        """Documents of one score (the same text embedded twice, for instance) come in the order of their ids,
        whatever order they were written in, so one search gives one order on every store.

        Fix: sort the results by score, best first, then by id."""
        c = unique("col")
        ids = ["d3", "d0", "d4", "d1", "d2"]
        await backend.add([Document(id=i, content=i, embedding=(1.0, 2.0, 3.0)) for i in ids], collection=c)
        await backend.add([Document(id="a", content="a", embedding=(3.0, 2.0, 1.0))], collection=c)
        results = await backend.search([1.0, 2.0, 3.0], collection=c, limit=10)
        assert [r.id for r in results] == [*sorted(ids), "a"]

    async def test_copies_of_one_embedding_score_the_same_wherever_they_are_kept(self, backend: VectorStore) -> None:
        """Documents of one embedding score the same, in [-1, 1], and come in the order of their ids, however
        many there are and wherever they were written among other documents (the in-memory store's matrix product
        rounded each column its own way: copies scored apart in the last place, and it ordered them by their
        scores before it clamped them to 1, so equal scores came out of id order).

        Fix: score copies alike (one exact product per candidate, the same for equal embeddings), and sort by the
        score given back, then by id."""
        for seed in range(4):
            rng = random.Random(seed)
            wide = [rng.uniform(-1, 1) for _ in range(384)]
            others = [Document(id=f"o{i:03d}", embedding=[rng.uniform(-1, 1) for _ in range(384)]) for i in range(31)]
            twins = [Document(id=f"t{i:03d}", embedding=wide) for i in range(40)]
            written = others + twins
            rng.shuffle(written)
            c = unique("col")
            for document in written:
                await backend.add([document], collection=c)
            results = await backend.search(wide, collection=c, limit=len(twins))
            assert [r.id for r in results] == [t.id for t in twins], f"seed {seed}: copies out of id order"
            assert len({r.score for r in results}) == 1, f"seed {seed}: {sorted({r.score for r in results})}"
            assert all(-1.0 <= r.score <= 1.0 for r in results)

    async def test_a_limit_among_equal_scores_keeps_the_first_ids(self, backend: VectorStore) -> None:
        """A ``limit`` that cuts through documents of one score keeps those of the first ids, whatever order they
        were written in, so one search gives the same documents on every store (Postgres ordered by distance
        alone, and its ``LIMIT`` kept any of the tied rows). Only exact ties are held to it: stores measure in
        float32 or float64 and may order near-equal scores apart.

        Fix: order by distance, then id, before the limit is applied."""
        for seed in range(3):
            rng = random.Random(seed)
            wide = [rng.uniform(-1, 1) for _ in range(64)]
            twins = [Document(id=f"t{i:03d}", embedding=wide) for i in range(30)]
            away = [Document(id=f"a{i:03d}", embedding=[-x for x in wide]) for i in range(3)]
            written = twins + away
            rng.shuffle(written)
            c = unique("col")
            await backend.add(written, collection=c)
            for limit in (1, 7, 29):
                results = await backend.search(wide, collection=c, limit=limit)
                assert [r.id for r in results] == [t.id for t in twins[:limit]], f"seed {seed}, limit {limit}"
            results = await backend.search(wide, collection=c, limit=31)
            assert [r.id for r in results] == [*(t.id for t in twins), "a000"], f"seed {seed}"

    async def test_search_returns_documents_with_their_content(self, backend: VectorStore) -> None:
        """A search result carries the document's content and its score.

        Fix: build each result with ``SearchResult.of(document, score)`` from the stored document, so it carries its
        content and metadata.
        """
        c = await self.fill(backend)
        [best] = await backend.search([0.0, 0.0, 3.0], collection=c, limit=1)
        assert best.id == "z" and best.text == "content of z"
        assert math.isclose(best.score, 1.0, abs_tol=1e-4)

    async def test_limit(self, backend: VectorStore) -> None:
        """``search`` returns at most ``limit`` results; a limit that is not an integer >= 0 (a bool, a float) is
        refused.

        Fix: pass ``limit`` through ``check_count`` of ``ravi.kernel.values``, which refuses a bool, a float or a
        negative number and caps a larger one at ``MAX_COUNT``, and give the driver the number it returns.
        """
        c = await self.fill(backend)
        assert len(await backend.search([1.0, 1.0, 1.0], collection=c, limit=2)) == 2
        assert len(await backend.search([1.0, 1.0, 1.0], collection=c, limit=50)) == len(AXES)
        for huge in (2**63, 2**64 + 7):  # past a server's integers: every document, as in memory (Postgres refused)
            assert len(await backend.search([1.0, 1.0, 1.0], collection=c, limit=huge)) == len(AXES)
        for bad in (-1, True, 2.0, None):  # a bool is not a count of 1, as everywhere a count is given
            with pytest.raises(InvalidArgument):
                await backend.search([1.0, 1.0, 1.0], collection=c, limit=bad)  # type: ignore[arg-type]

    async def test_metadata_filters(self, backend: VectorStore) -> None:
        """A filter keeps documents whose metadata equals each value, or one of a list's values; a filter made of
        mappings that are not dicts (``MappingProxyType``, ``UserDict``) and tuples compares as the JSON it holds.

        Fix: call ``check_filter`` of ``ravi.kernel.storage`` and compare as ``matches`` does: each key equal to the
        value, or to one of a list's values, compared as JSON (``thaw`` of ``ravi.kernel.values`` turns a
        ``MappingProxyType`` or tuple into plain JSON first); on Postgres, ``metadata -> key = value::jsonb`` and ``=
        ANY(values::jsonb[])``.
        """
        c = await self.fill(backend)
        only = await backend.search([1.0, 0.0, 0.0], collection=c, limit=5, filter={"group": "neg"})
        assert [r.id for r in only] == ["-x"]
        either = await backend.search([1.0, 0.0, 0.0], collection=c, limit=5, filter={"axis": ["y", "z"]})
        assert {r.id for r in either} == {"y", "z"}
        assert await backend.search([1.0, 0.0, 0.0], collection=c, limit=5, filter={"axis": "none"}) == []
        assert await backend.search([1.0, 0.0, 0.0], collection=c, limit=5, filter={"missing": 1}) == []
        await backend.add([doc("obj", [0.0, 1.0, 0.0], place={"city": "Oslo", "at": [1, 2]})], collection=c)
        for proxy in (  # a filter of mappings that are not dicts, and tuples, compares as the JSON it holds
            MappingProxyType({"place": MappingProxyType({"city": "Oslo", "at": (1, 2)})}),
            {"place": [UserDict(city="Oslo", at=[1, 2])]},
        ):
            found = await backend.search([1.0, 0.0, 0.0], collection=c, limit=5, filter=proxy)
            assert [r.id for r in found] == ["obj"]

    async def test_a_filter_tells_booleans_from_numbers(self, backend: VectorStore) -> None:
        """JSON ``true`` is not the number 1, nor ``false`` 0, in a filter's values, its lists and nested
        objects; 1 and 1.0 are one JSON number.

        Fix: compare filter values as JSON values, as ``matches`` of ``ravi.kernel.storage`` (through ``same_json``) and
        jsonb do: ``true`` is not 1 and ``false`` is not 0, at any depth, while 1 and 1.0 are equal; Python's ``==``
        says ``True == 1``.
        """
        c = unique("col")
        metadata = {"flag": True, "off": False, "n": 1, "z": 0, "nested": {"x": 1}, "nested_flag": {"x": True}}
        await backend.add([doc("m", [1.0, 0.0], **metadata)], collection=c)

        async def found(filter: dict[str, Any]) -> bool:
            return [r.id for r in await backend.search([1.0, 0.0], collection=c, limit=5, filter=filter)] == ["m"]

        for key, value in metadata.items():
            assert await found({key: value}), key
        assert await found({"n": 1.0})
        assert await found({"flag": [False, True]})
        for refused in (
            {"flag": 1},
            {"off": 0},
            {"n": True},
            {"z": False},
            {"flag": [1]},
            {"n": [True]},
            {"off": [0.0]},
            {"nested": {"x": True}},
            {"nested_flag": {"x": 1}},
        ):
            assert not await found(refused), refused

    async def test_collections_are_isolated(self, backend: VectorStore) -> None:
        """Documents in one collection are never found in another.

        Fix: keep each collection apart (a table, index or key prefix per collection, or a collection column in every
        key and condition), each with its own dimension.
        """
        c1, c2 = unique("col"), unique("col")
        await backend.add([doc("a", [1.0, 0.0])], collection=c1)
        await backend.add([doc("b", [1.0, 0.0, 0.0, 0.0])], collection=c2)  # each collection its own dimension
        assert [r.id for r in await backend.search([1.0, 0.0], collection=c1, limit=5)] == ["a"]
        assert await backend.get(["a"], collection=c2) == []
        assert {c1, c2} <= set(await backend.list_collections())

    async def test_list_collections_is_sorted(self, backend: VectorStore) -> None:
        """``list_collections`` returns the collection names, sorted.

        Fix: return the names of the collections that exist, sorted (``sorted(...)`` or ``ORDER BY name``).
        """
        names = [unique("b-col"), unique("a-col"), unique("c-col")]
        for name in names:
            await backend.add([doc("d", [1.0])], collection=name)
        listed = [n for n in await backend.list_collections() if n in names]
        assert listed == sorted(names)

    async def test_delete_counts_and_is_idempotent(self, backend: VectorStore) -> None:
        """``delete`` returns how many existed; deleting again is not an error.

        Fix: return how many of the ids existed (``DELETE ... RETURNING`` counted, or the number of keys removed), and 0
        for ids already gone, without raising.
        """
        c = await self.fill(backend)
        assert await backend.delete(["x", "y", "nope"], collection=c) == 2
        assert await backend.delete(["x"], collection=c) == 0
        assert {r.id for r in await backend.search([1.0, 1.0, 1.0], collection=c, limit=10)} == {
            "z",
            "xy",
            "-x",
        }

    async def test_delete_collection(self, backend: VectorStore) -> None:
        """``delete_collection`` removes a collection and says whether it existed.

        Fix: remove the collection and every document in it, return whether it existed, and drop it from
        ``list_collections``; a second call returns ``False``.
        """
        c = await self.fill(backend)
        assert await backend.delete_collection(c) is True
        assert await backend.delete_collection(c) is False
        assert c not in await backend.list_collections()
        assert await backend.search([1.0, 0.0, 0.0], collection=c, limit=3) == []

    async def test_unknown_collection_is_empty(self, backend: VectorStore) -> None:
        """An unknown collection is empty for ``get``, ``search`` and ``delete``.

        Fix: answer ``get``, ``search`` and ``delete`` of a collection that does not exist with ``[]``, ``[]`` and 0,
        without creating it or raising.
        """
        c = unique("col")
        assert await backend.search([1.0], collection=c, limit=3) == []
        assert await backend.get(["a"], collection=c) == []
        assert await backend.delete(["a"], collection=c) == 0

    async def test_wrong_dimension_is_refused_and_nothing_stored(self, backend: VectorStore) -> None:
        """A vector of the wrong dimension is refused, and nothing of the call is stored.

        Fix: check every vector of the call against the collection's dimension (and against each other) before writing
        any, and raise ``InvalidArgument`` naming the dimension; check a query vector the same way.
        """
        c = await self.fill(backend)
        with pytest.raises(InvalidArgument, match="dimension"):
            await backend.add([doc("ok", [1.0, 2.0, 3.0]), doc("bad", [1.0, 2.0])], collection=c)
        assert await backend.get(["ok", "bad"], collection=c) == []
        with pytest.raises(InvalidArgument, match="dimension"):
            await backend.search([1.0, 2.0], collection=c, limit=1)

    async def test_missing_embedding_without_a_client_is_a_value_error(self, backend: VectorStore) -> None:
        """A document without an embedding, on a store without an embedding client, is a ``ValueError``.

        Fix: raise ``InvalidArgument`` (a ``ValueError``) naming the embedding before anything is stored when a document
        has no embedding and the store has no ``embedding_client``.
        """
        c = unique("col")
        with pytest.raises(ValueError, match="embedding"):
            await backend.add([Document(id="no-vector", content="text only")], collection=c)
        assert await backend.get(["no-vector"], collection=c) == []

    async def test_a_bare_string_is_not_a_list_of_ids(self, backend: VectorStore) -> None:
        """``delete("v1")`` must not delete ``"v"`` and ``"1"``: a string where ids are expected is refused.

        Fix: pass ``ids`` through ``check_ids`` of ``ravi.kernel.values``, which refuses a bare string instead of
        reading it as a list of characters.
        """
        collection = unique("col")
        await backend.add([doc("v", AXES["x"]), doc("1", AXES["y"]), doc("v1", AXES["z"])], collection=collection)
        with pytest.raises(InvalidArgument):
            await backend.delete("v1", collection=collection)
        with pytest.raises(InvalidArgument):
            await backend.get("v1", collection=collection)
        assert [d.id for d in await backend.get(["v", "1", "v1"], collection=collection)] == ["v", "1", "v1"]

    async def test_a_query_that_is_not_numbers_is_refused(self, backend: VectorStore) -> None:
        """A query vector that is not finite numbers is refused with ``InvalidArgument``.

        Fix: pass the query through ``check_vector`` of ``ravi.kernel.values``, which refuses a string, a non-number and
        NaN with ``InvalidArgument``.
        """
        collection = await self.fill(backend)
        queries: list[Any] = [["a", "b", "c"], "abc", [1.0, float("nan"), 0.0]]
        for query in queries:
            with pytest.raises(InvalidArgument):
                await backend.search(query, collection=collection)

    async def test_names_and_ids_that_are_not_text_are_refused(self, backend: VectorStore) -> None:
        """A collection or id with a lone surrogate or a NUL (which PostgreSQL keeps in no text) is
        InvalidArgument on every call, reads included, not a crash, and nothing is stored.

        Fix: check ids with ``check_ids`` and ``check_items`` of ``ravi.kernel.values``."""
        collection = await self.fill(backend)
        with pytest.raises(InvalidArgument):
            await backend.get(["x\x00"], collection=collection)
        with pytest.raises(InvalidArgument):
            await backend.upsert([doc("y\x00", AXES["y"])], collection=collection)
        with pytest.raises(InvalidArgument):
            await backend.search(AXES["x"], collection="c\x00")
        with pytest.raises(InvalidArgument):
            await backend.get(["x\ud800"], collection=collection)
        with pytest.raises(InvalidArgument):
            await backend.delete(["x\ud800"], collection=collection)
        with pytest.raises(InvalidArgument):
            await backend.search(AXES["x"], collection="c\ud800")
        with pytest.raises(InvalidArgument):
            await backend.upsert([doc("y", AXES["y"])], collection="c\ud800")
        assert len(await backend.get(list(AXES), collection=collection)) == len(AXES)

    async def test_what_is_not_a_list_of_documents_is_refused(self, backend: VectorStore) -> None:
        """``add`` and ``upsert`` given ``None`` or a string instead of a list of documents raise
        ``InvalidArgument`` (never a ``TypeError``), and store nothing.

        Fix: pass the documents through ``check_items`` of ``ravi.kernel.values`` (``check_items(documents, Document,
        "documents")``) before the store sees them.
        """
        collection = await self.fill(backend)
        for bad in (None, "documents", 5):
            with pytest.raises(InvalidArgument):
                await backend.upsert(bad, collection=collection)  # type: ignore[arg-type]
            with pytest.raises(InvalidArgument):
                await backend.add(bad, collection=collection)  # type: ignore[arg-type]
        assert len(await backend.get(list(AXES), collection=collection)) == len(AXES)

    async def test_a_filter_that_is_not_json_is_refused(self, backend: VectorStore) -> None:
        """A filter whose values are not JSON (a set, an object, NaN, an integer of 5,000 digits) raises
        ``InvalidArgument``: no store can compare stored metadata with them.

        Fix: call ``check_filter`` of ``ravi.kernel.storage`` before searching: it refuses a filter that is not JSON
        every store can compare with.
        """
        collection = await self.fill(backend)
        for bad in ({"n": {1, 2}}, {"n": object()}, {"n": float("nan")}, {"n": [1, {2}]}, {"n": [10**5000]}):
            with pytest.raises(InvalidArgument):
                await backend.search(AXES["x"], collection=collection, filter=bad)

    async def test_search_defaults_and_result_fields(self, backend: VectorStore) -> None:
        """000: ``search(self, query_embedding, *, collection="default", limit=5, filter=None)``; 004: a search
        result has the fields ``id``, ``content``, ``score`` and ``metadata``.

        Fix: give ``search`` the defaults of the Protocol (``collection="default", limit=5, filter=None``) and return
        ``SearchResult`` objects (``SearchResult.of(document, score)``).
        """
        await backend.upsert([doc(f"{unique('d')}", [1.0, float(i), 0.0], n=i) for i in range(8)], collection="default")
        results = await backend.search([1.0, 0.0, 0.0])
        assert len(results) == 5
        best = results[0]
        [stored] = await backend.get([best.id], collection="default")
        assert (best.content, best.metadata) == (stored.content, stored.metadata)
        assert set(type(best).model_fields) == {"id", "content", "score", "metadata"}
        assert best.score >= results[-1].score
        await backend.delete([r.id for r in await backend.search([1.0, 0.0, 0.0], limit=50)], collection="default")

    async def test_unicode_ids_and_metadata_round_trip(self, backend: VectorStore) -> None:
        """Unicode ids and metadata round-trip exactly.

        Fix: pass ids, content and metadata as bound parameters, keep them as UTF-8 text or JSON, and read metadata back
        as the JSON it was written as.
        """
        c = unique("col")
        metadata = {"tag": "ünï 漢 🚀", "quote": "'\"\\", "nested": {"n": [1, 2]}}
        await backend.add(
            [Document(id="ид-🚀'\"", content="текст", embedding=(0.5, 0.5), metadata=metadata)], collection=c
        )
        [got] = await backend.get(["ид-🚀'\""], collection=c)
        assert got.text == "текст" and got.metadata == metadata

    async def test_embeddings_of_a_large_model_are_stored_and_found(self, backend: VectorStore) -> None:
        """Embedding models give up to a few thousand dimensions (3,072 for OpenAI's text-embedding-3-large):
        such documents are stored exactly and ranked by cosine similarity. A query of more than 16,000 (what
        pgvector keeps, ``MAX_DIMENSIONS``) is refused.

        Troubleshooting: pgvector's HNSW index takes at most 2,000 dimensions; a collection of more is searched
        without one."""
        c = unique("col")
        n = 3_072

        def axis(i: int, j: int) -> tuple[float, ...]:
            return tuple(1.0 if k in (i, j) else 0.0 for k in range(n))

        await backend.add(
            [Document(id=f"d{i}", content=f"doc {i}", embedding=axis(i, n - 1 - i)) for i in range(3)], collection=c
        )
        hits = await backend.search(list(axis(1, 1)), collection=c, limit=3)
        assert hits[0].id == "d1" and hits[0].score == pytest.approx(2**-0.5, abs=1e-3)
        [got] = await backend.get(["d2"], collection=c)
        assert got.embedding == axis(2, n - 3)
        with pytest.raises(InvalidArgument):  # wider than pgvector keeps (16,000): refused by every store
            await backend.search([1.0] * 16_001, collection=unique("col"))

    async def test_a_vector_float32_cannot_measure_is_refused(self, backend: VectorStore) -> None:
        """Embeddings are compared in float32: a vector whose squared length passes float32's largest number
        (``[1e20, 1e20]``) scored 0.0 against its own direction, or dropped out of the results, and one whose
        squared length is below float32's smallest normal number (``[1e-30, 1e-30]``) was a zero vector to one
        store and a direction to another. Both are refused, as a document and as a query; a large vector within
        range ranks by its direction.

        Fix: compute each vector's squared length in float64 and pass it to ``check_length`` of ``ravi.kernel.values``,
        for every document and every query, before anything is stored.
        """
        c = unique("col")
        await backend.add([Document(id="big", content="big", embedding=(1e19, 1e19))], collection=c)
        [hit] = await backend.search([1.0, 1.0], collection=c, limit=1)
        assert hit.id == "big" and hit.score == pytest.approx(1.0, abs=1e-3)
        for bad in ((1e20, 1e20), (3.4e38, 3.4e38), (1e-30, 1e-30)):
            with pytest.raises(InvalidArgument):
                await backend.add([Document(id="bad", content="bad", embedding=bad)], collection=c)
            with pytest.raises(InvalidArgument):
                await backend.search(list(bad), collection=c)
        assert [d.id for d in await backend.get(["bad"], collection=c)] == []

    async def test_metadata_numbers_keep_their_type_and_value(self, backend: VectorStore) -> None:
        """Every number in a document's metadata comes back with its type and value (``1e16`` stays a float),
        through ``get`` and ``search``, and a filter on a whole-number float still finds it.

        Fix: keep metadata as JSON text, or in ``jsonb`` with floats written in positional notation with a decimal point
        (a float of 1e16 or more otherwise reads back as an int), and compare filter numbers as JSON does (1e16 equals
        itself as a float).
        """
        c = unique("col")
        await backend.add(
            [Document(id="n", content="numbers", embedding=(1.0, 0.0), metadata=EXACT_NUMBERS)], collection=c
        )
        [got] = await backend.get(["n"], collection=c)
        assert typed(got.metadata) == typed(EXACT_NUMBERS)
        [hit] = await backend.search([1.0, 0.0], collection=c, limit=1, filter={"e16": 1e16})
        assert typed(hit.metadata) == typed(EXACT_NUMBERS)

    async def test_content_blocks_round_trip(self, backend: VectorStore) -> None:
        """004: "Document: Represents raw chunks. Fields: content: list[ContentBlock]"; a document keeps its blocks
        exactly (an image and text, an empty text block, no blocks at all), through ``get`` and ``search``.

        Fix: store a document's content blocks (``block.model_dump(mode="json")`` of each) whenever they are not one
        non-empty text block, and rebuild them on ``get`` and ``search``; an empty text block and no blocks at all are
        different contents.
        """
        c = unique("col")
        kinds = {
            "mixed": (TextBlock(text="a chart"), ImageBlock(url="data:image/png;base64,iVBORw0KGgo=", detail="low")),
            "empty-text": (TextBlock(text=""),),
            "none": (),
            "two-texts": (TextBlock(text="one"), TextBlock(text="two")),
            "plain": (TextBlock(text="just text"),),
        }
        docs = [Document(id=k, content=v, embedding=(1.0, float(i))) for i, (k, v) in enumerate(kinds.items())]
        await backend.upsert(docs, collection=c)
        got = {d.id: d.content for d in await backend.get(list(kinds), collection=c)}
        assert got == kinds
        hits = await backend.search([1.0, 0.0], collection=c, limit=10)
        assert {h.id: h.content for h in hits} == kinds
        assert Document(id="s", content="as a string").content == (TextBlock(text="as a string"),)

    async def test_forget_erases_the_documents_of_the_scope_only(self, backend: VectorStore) -> None:
        """``forget`` (``Forgetter``, optional) erases, in every collection, the documents whose metadata has the
        scope's ``agent_id`` (and ``session_id``), and no other; a second call removes nothing.

        Fix: call ``check_forget`` of ``ravi.kernel.storage`` first, then, in every collection, delete the documents
        whose metadata places them in the scope (``in_scope`` of ``ravi.kernel.storage``; ``metadata @> '{"agent_id":
        ...}'`` on Postgres), and return how many.
        """
        if not isinstance(backend, Forgetter):
            pytest.skip(f"backend lacks forget: {type(backend).__name__} is not a Forgetter")
        a, b = unique("agent"), unique("agent")
        c1, c2 = unique("c"), unique("c")
        docs = {
            (c, agent, session): doc(unique("d"), [1.0, 0.0], agent_id=agent, session_id=session)
            for c in (c1, c2)
            for agent in (a, b)
            for session in ("s1", "s2")
        }
        plain = doc(unique("d"), [1.0, 0.0], topic="a")
        for (c, _, _), d in docs.items():
            await backend.add([d], collection=c)
        await backend.add([plain], collection=c1)
        assert await backend.forget(a, session_id="s1") == 2
        assert await backend.forget(a, session_id="s1") == 0
        for (c, agent, session), d in docs.items():
            assert bool(await backend.get([d.id], collection=c)) != (agent == a and session == "s1")
        assert await backend.forget(a) == 2
        for (c, agent, _), d in docs.items():
            assert bool(await backend.get([d.id], collection=c)) == (agent == b)
        assert await backend.get([plain.id], collection=c1)
        hits = await backend.search([1.0, 0.0], collection=c1, limit=10)
        assert all(h.metadata.get("agent_id") != a for h in hits)

    async def test_ids_past_the_limit_are_refused_and_nothing_is_lost(self, backend: VectorStore) -> None:
        """A collection name or document id of more than ``MAX_ID_BYTES`` UTF-8 bytes is refused by every call with
        ``InvalidArgument`` naming it and the limit, on every backend (PostgreSQL indexes no longer keys), and
        nothing of the call is stored.

        Fix: check the collection with ``check_scope``, the documents with ``check_items`` and ids with
        ``check_ids`` of ``ravi.kernel.values``, which hold ``MAX_ID_BYTES``.
        """
        c = unique("col")
        await backend.add([doc("kept", [1.0, 0.0])], collection=c)

        def calls(long: str) -> dict[str, tuple[str, Callable[[], Awaitable[Any]]]]:
            out: dict[str, tuple[str, Callable[[], Awaitable[Any]]]] = {
                "add(collection)": ("collection", lambda: backend.add([doc("d", [1.0, 0.0])], collection=long)),
                "add(second document id)": (
                    "documents[1].id",
                    lambda: backend.add([doc("ok", [0.0, 1.0]), doc(long, [1.0, 1.0])], collection=c),
                ),
                "upsert(document id)": (
                    "documents[0].id",
                    lambda: backend.upsert([doc(long, [1.0, 1.0])], collection=c),
                ),
                "search(collection)": ("collection", lambda: backend.search([1.0, 0.0], collection=long)),
                "get(ids)": ("ids[1]", lambda: backend.get(["kept", long], collection=c)),
                "get(collection)": ("collection", lambda: backend.get(["kept"], collection=long)),
                "delete(ids)": ("ids[0]", lambda: backend.delete([long, "kept"], collection=c)),
                "delete_collection()": ("collection", lambda: backend.delete_collection(long)),
            }
            return out

        await refuses_long_ids(calls)
        assert [d.id for d in await backend.get(["kept", "ok"], collection=c)] == ["kept"]
        assert [h.id for h in await backend.search([1.0, 0.0], collection=c, limit=10)] == ["kept"]

    @settings(max_examples=10, deadline=None, suppress_health_check=PROPERTY_CHECKS)
    @given(text=id_texts())
    async def test_ids_at_the_limit_are_stored_and_read_back(self, backend: VectorStore, text: str) -> None:
        """A collection name and document ids of exactly ``MAX_ID_BYTES`` UTF-8 bytes, of any text, are stored and
        read back by every backend.

        Fix: keep collection names and document ids whole, as given: keys, columns or table names that hold
        ``MAX_ID_BYTES`` bytes of UTF-8 (a collection name longer than a table name holds gets a table named by its
        digest, with the name kept in a catalogue), no truncation.
        """
        tag = unique("")
        c, d = at_limit(text, f"{tag}c"), at_limit(text, f"{tag}d")
        assert await backend.add([doc(d, [1.0, 0.0], n=1)], collection=c) == [d]
        [got] = await backend.get([d], collection=c)
        assert (got.id, dict(got.metadata)) == (d, {"n": 1})
        assert [h.id for h in await backend.search([1.0, 0.0], collection=c)] == [d]
        assert c in await backend.list_collections()
        assert await backend.delete([d], collection=c) == 1
        assert await backend.delete_collection(c)
