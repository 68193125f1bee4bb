"""``GraphStoreContract`` and ``CypherCapableContract``: what every graph store must do."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from ravi.conformance._base import ContractBase, unique
from ravi.kernel.errors import InvalidArgument, NotFound
from ravi.kernel.storage import CypherCapable, Entity, GraphStore, Relationship


class GraphStoreContract(ContractBase):
    """Subclass and override the ``graph_store`` fixture to yield an empty ``GraphStore``.

    The test graph: a chain ``a -KNOWS-> b -KNOWS-> c -WORKS_AT-> d``, plus ``e -KNOWS-> a`` (so ``a`` has an
    incoming edge) and a cycle ``c -KNOWS-> a``.
    """

    contract_name = "GraphStore"
    pytestmark = pytest.mark.asyncio

    @pytest.fixture
    def graph_store(self) -> GraphStore:
        """Override: an empty backend, fresh for each test."""
        raise NotImplementedError("override the 'graph_store' fixture to build an empty backend")

    async def build(self, store: GraphStore) -> dict[str, str]:
        p = unique("g")
        ids = {k: f"{p}-{k}" for k in "abcde"}
        await store.add_entities(
            [Entity(id=ids[k], label="Person", properties={"name": k}) for k in "abce"]
            + [Entity(id=ids["d"], label="Company", properties={"name": "d"})]
        )
        edges = [
            ("ab", "a", "b", "KNOWS"),
            ("bc", "b", "c", "KNOWS"),
            ("cd", "c", "d", "WORKS_AT"),
            ("ea", "e", "a", "KNOWS"),
            ("ca", "c", "a", "KNOWS"),
        ]
        await store.add_relationships(
            [Relationship(id=f"{p}-{r}", source_id=ids[s], target_id=ids[t], type=ty) for r, s, t, ty in edges]
        )
        ids.update({r: f"{p}-{r}" for r, *_ in edges})
        return ids

    async def test_is_a_graph_store(self, graph_store: GraphStore) -> None:
        assert isinstance(graph_store, GraphStore)

    async def test_canary_fixture_gives_an_empty_backend_first(self, graph_store: GraphStore) -> None:
        assert await graph_store.get_entity("canary") is None
        await graph_store.add_entities([Entity(id="canary")])

    async def test_canary_fixture_gives_an_empty_backend_second(self, graph_store: GraphStore) -> None:
        assert await graph_store.get_entity("canary") is None, "state leaked between tests"
        await graph_store.add_entities([Entity(id="canary")])

    async def test_add_and_get_entities(self, graph_store: GraphStore) -> None:
        ids = await self.build(graph_store)
        got = await graph_store.get_entity(ids["d"])
        assert got == Entity(id=ids["d"], label="Company", properties={"name": "d"})
        assert await graph_store.get_entity(unique("missing")) is None

    async def test_adding_an_entity_again_replaces_it(self, graph_store: GraphStore) -> None:
        ids = await self.build(graph_store)
        await graph_store.add_entities([Entity(id=ids["a"], label="Person", properties={"name": "A", "age": 3})])
        got = await graph_store.get_entity(ids["a"])
        assert got is not None and got.properties == {"name": "A", "age": 3}
        sub = await graph_store.get_neighbors(ids["a"], depth=1)
        assert ids["b"] in sub.entity_ids(), "replacing an entity must keep its relationships"

    async def test_neighbors_at_depth_one_go_both_ways(self, graph_store: GraphStore) -> None:
        ids = await self.build(graph_store)
        sub = await graph_store.get_neighbors(ids["a"], depth=1)
        assert sub.entity_ids() == {ids["a"], ids["b"], ids["e"], ids["c"]}
        assert {r.id for r in sub.relationships} == {ids["ab"], ids["ea"], ids["ca"]}

    async def test_neighbors_at_depth_two(self, graph_store: GraphStore) -> None:
        ids = await self.build(graph_store)
        sub = await graph_store.get_neighbors(ids["b"], depth=2)
        assert sub.entity_ids() == {ids[k] for k in "abcde"}

    async def test_depth_zero_is_the_entity_alone(self, graph_store: GraphStore) -> None:
        ids = await self.build(graph_store)
        sub = await graph_store.get_neighbors(ids["a"], depth=0)
        assert sub.entity_ids() == {ids["a"]} and sub.relationships == ()

    async def test_relationship_type_filter(self, graph_store: GraphStore) -> None:
        ids = await self.build(graph_store)
        sub = await graph_store.get_neighbors(ids["c"], depth=3, relationship_types=["WORKS_AT"])
        assert sub.entity_ids() == {ids["c"], ids["d"]}
        assert [r.type for r in sub.relationships] == ["WORKS_AT"]
        none = await graph_store.get_neighbors(ids["c"], depth=3, relationship_types=["LIKES"])
        assert none.entity_ids() == {ids["c"]}

    async def test_cycles_do_not_repeat_entities(self, graph_store: GraphStore) -> None:
        ids = await self.build(graph_store)
        sub = await graph_store.get_neighbors(ids["a"], depth=6)
        assert len(sub.entities) == len(sub.entity_ids()) == 5

    async def test_relationships_need_both_ends(self, graph_store: GraphStore) -> None:
        ids = await self.build(graph_store)
        ghost = Relationship(id=unique("r"), source_id=ids["a"], target_id=unique("ghost"), type="KNOWS")
        with pytest.raises(NotFound):
            await graph_store.add_relationships([ghost])
        sub = await graph_store.get_neighbors(ids["a"], depth=1)
        assert ghost.id not in {r.id for r in sub.relationships}

    async def test_delete_entity_detaches_its_relationships(self, graph_store: GraphStore) -> None:
        ids = await self.build(graph_store)
        assert await graph_store.delete_entity(ids["b"]) is True
        assert await graph_store.get_entity(ids["b"]) is None
        sub = await graph_store.get_neighbors(ids["a"], depth=1)
        assert ids["b"] not in sub.entity_ids()
        assert ids["ab"] not in {r.id for r in sub.relationships}
        assert await graph_store.delete_entity(ids["b"]) is False

    async def test_delete_relationship(self, graph_store: GraphStore) -> None:
        ids = await self.build(graph_store)
        assert await graph_store.delete_relationship(ids["cd"]) is True
        assert await graph_store.delete_relationship(ids["cd"]) is False
        assert ids["d"] not in (await graph_store.get_neighbors(ids["c"], depth=1)).entity_ids()
        assert await graph_store.get_entity(ids["d"]) is not None

    async def test_unknown_entity_has_no_neighbourhood(self, graph_store: GraphStore) -> None:
        with pytest.raises(NotFound):
            await graph_store.get_neighbors(unique("ghost"), depth=1)

    async def test_negative_depth_is_refused(self, graph_store: GraphStore) -> None:
        ids = await self.build(graph_store)
        with pytest.raises(InvalidArgument):
            await graph_store.get_neighbors(ids["a"], depth=-1)

    async def test_properties_round_trip(self, graph_store: GraphStore) -> None:
        props: Mapping[str, Any] = {
            "name": "Zoë 漢字 🚀",
            "quote": 'it\'s "$$" \\ \n',
            "n": 3,
            "f": 2.5,
            "ok": True,
            "tags": ["a", "b"],
            "nested": {"k": [1, {"x": None}]},
        }
        e = unique("e")
        await graph_store.add_entities([Entity(id=e, label="Thing", properties=props)])
        got = await graph_store.get_entity(e)
        assert got is not None and got.properties == props
        f = unique("f")
        await graph_store.add_entities([Entity(id=f)])
        rel = Relationship(id=unique("r"), source_id=e, target_id=f, type="LINKS", properties=props)
        await graph_store.add_relationships([rel])
        [walked] = (await graph_store.get_neighbors(e, depth=1)).relationships
        assert walked == rel


class CypherCapableContract(ContractBase):
    """Subclass and override the ``graph_store`` fixture with a store that is also ``CypherCapable``."""

    contract_name = "CypherCapable"
    pytestmark = pytest.mark.asyncio

    @pytest.fixture
    def graph_store(self) -> GraphStore:
        """Override: an empty backend, fresh for each test."""
        raise NotImplementedError("override the 'graph_store' fixture to build an empty backend")

    @pytest.fixture
    def cypher(self, graph_store: GraphStore) -> CypherCapable:
        if not isinstance(graph_store, CypherCapable):
            pytest.skip(f"backend lacks cypher: {type(graph_store).__name__} is not CypherCapable")
        return graph_store

    async def test_query_with_parameters(self, graph_store: GraphStore, cypher: CypherCapable) -> None:
        e = unique("e")
        await graph_store.add_entities([Entity(id=e, label="Person", properties={"name": "Ada"})])
        rows = await cypher.query_cypher("MATCH (n:Person {id: $id}) RETURN n.name AS name", {"id": e})
        assert rows == [{"name": "Ada"}]

    @pytest.mark.parametrize(
        "hostile",
        ["it's", 'say "hi"', "$$ dollar $$", "back\\slash", "new\nline", "漢字 🚀", "x'}) DETACH DELETE n //", "$id"],
    )
    async def test_hostile_values_cannot_change_the_query(
        self, graph_store: GraphStore, cypher: CypherCapable, hostile: str
    ) -> None:
        e = unique("e")
        await graph_store.add_entities([Entity(id=e, label="Person", properties={"name": "kept"})])
        rows = await cypher.query_cypher(
            "MATCH (n:Person {id: $id}) RETURN $value AS value, n.name AS name", {"id": e, "value": hostile}
        )
        assert rows == [{"value": hostile, "name": "kept"}]
        assert await graph_store.get_entity(e) is not None

    async def test_scalars_and_lists_come_back_as_python_values(self, cypher: CypherCapable) -> None:
        rows = await cypher.query_cypher("RETURN 1 AS i, 2.5 AS f, true AS b, null AS z, [1, 'a'] AS l", None)
        assert rows == [{"i": 1, "f": 2.5, "b": True, "z": None, "l": [1, "a"]}]
