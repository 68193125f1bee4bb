"""``GraphStoreContract`` and ``CypherCapableContract``: what every graph store must do."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
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
from ravi.kernel.errors import InvalidArgument, NotFound
from ravi.kernel.storage import MAX_NAME_LENGTH, CypherCapable, Entity, Forgetter, GraphStore, Relationship


class GraphStoreContract(ContractBase):
    """Subclass and override the ``backend`` fixture to yield an empty ``GraphStore``.

    The test graph: a chain ``a -KNOWS-> b -KNOWS-> c -WORKS_AT-> d``, plus ``e -KNOWS-> a`` (so ``a`` has an
    incoming edge) and a cycle ``c -KNOWS-> a``.
    """

    contract_name = "GraphStore"
    pytestmark = pytest.mark.asyncio

    @pytest.fixture
    def backend(self) -> GraphStore:
        """Override: an empty backend, fresh for each test."""
        raise NotImplementedError("override the 'backend' fixture to build an empty backend")

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

    async def test_is_a_graph_store(self, backend: GraphStore) -> None:
        """The backend satisfies the ``GraphStore`` Protocol: it has every method of it, each ``async def``.

        Fix: give the class each method the message names, as ``async def`` with the Protocol's signature
        (``ravi.kernel.storage.GraphStore``).
        """
        assert_protocol(backend, GraphStore)

    async def test_canary_fixture_gives_an_empty_backend_first(self, backend: GraphStore) -> None:
        """The fixture gives every test an empty backend (the first of two tests that each leave data behind).

        Fix: the store held data before the test ran: give each test an empty store of its own in the ``backend``
        fixture (an in-memory store, or a graph of its own), or isolate a persistent one with ``--isolate KIND=OPTION``
        (``--ravi-isolate``) and an ``async def destroy(self)`` that removes what the option names.
        """
        assert await backend.get_entity("canary") is None
        await backend.add_entities([Entity(id="canary")])

    async def test_canary_fixture_gives_an_empty_backend_second(self, backend: GraphStore) -> None:
        """The fixture gives every test an empty backend (the second of two tests that each leave data behind).

        Fix: give each test a store of its own: build it in the ``backend`` fixture (an in-memory or temporary
        store), or isolate a persistent one with ``--isolate KIND=OPTION`` (``--ravi-isolate``) and an
        ``async def destroy(self)`` that removes what the option names.
        """
        assert await backend.get_entity("canary") is None, (
            "state leaked between tests: get_entity('canary') found the first canary's entity"
        )
        await backend.add_entities([Entity(id="canary")])

    async def test_add_and_get_entities(self, backend: GraphStore) -> None:
        """An entity reads back with its label and properties.

        Fix: keep each entity's id, label and properties, and give ``None`` (not ``NotFound``) from ``get_entity`` for
        an unknown id.
        """
        ids = await self.build(backend)
        got = await backend.get_entity(ids["d"])
        assert got == Entity(id=ids["d"], label="Company", properties={"name": "d"})
        assert await backend.get_entity(unique("missing")) is None

    async def test_adding_an_entity_again_replaces_it(self, backend: GraphStore) -> None:
        """Adding an entity whose id exists replaces it.

        Fix: replace a held entity's properties in place (AGE: ``MERGE (n:Label {id: ...}) SET n = ...``), never delete
        and re-create it, which drops its relationships.
        """
        ids = await self.build(backend)
        await backend.add_entities([Entity(id=ids["a"], label="Person", properties={"name": "A", "age": 3})])
        got = await backend.get_entity(ids["a"])
        assert got is not None and got.properties == {"name": "A", "age": 3}
        sub = await backend.get_neighbors(ids["a"], depth=1)
        assert ids["b"] in sub.entity_ids(), "replacing an entity must keep its relationships"

    async def test_neighbors_at_depth_one_go_both_ways(self, backend: GraphStore) -> None:
        """``get_neighbors`` at depth 1 follows relationships in both directions.

        Fix: follow relationships in both directions, from their source and from their target (an undirected pattern
        ``-[r]-``, or an adjacency kept for both ends).
        """
        ids = await self.build(backend)
        sub = await backend.get_neighbors(ids["a"], depth=1)
        assert sub.entity_ids() == {ids["a"], ids["b"], ids["e"], ids["c"]}
        assert {r.id for r in sub.relationships} == {ids["ab"], ids["ea"], ids["ca"]}

    async def test_neighbors_at_depth_two(self, backend: GraphStore) -> None:
        """``get_neighbors`` at depth 2 reaches the neighbours of neighbours.

        Fix: walk breadth first, hop by hop, up to ``depth`` hops, from every entity the last hop reached.
        """
        ids = await self.build(backend)
        sub = await backend.get_neighbors(ids["b"], depth=2)
        assert sub.entity_ids() == {ids[k] for k in "abcde"}

    async def test_depth_zero_is_the_entity_alone(self, backend: GraphStore) -> None:
        """``get_neighbors`` at depth 0 is the entity alone.

        Fix: return the entity alone, with no relationships, for ``depth=0``, without running a walk.
        """
        ids = await self.build(backend)
        sub = await backend.get_neighbors(ids["a"], depth=0)
        assert sub.entity_ids() == {ids["a"]} and sub.relationships == ()

    async def test_relationship_type_filter(self, backend: GraphStore) -> None:
        """``relationship_types`` limits the walk to those types.

        Fix: check the types with ``check_relationship_types`` of ``ravi.kernel.storage`` and follow only relationships
        of those types, at every hop.
        """
        ids = await self.build(backend)
        sub = await backend.get_neighbors(ids["c"], depth=3, relationship_types=["WORKS_AT"])
        assert sub.entity_ids() == {ids["c"], ids["d"]}
        assert [r.type for r in sub.relationships] == ["WORKS_AT"]
        none = await backend.get_neighbors(ids["c"], depth=3, relationship_types=["LIKES"])
        assert none.entity_ids() == {ids["c"]}

    async def test_cycles_do_not_repeat_entities(self, backend: GraphStore) -> None:
        """A walk through a cycle returns each entity and relationship once.

        Fix: keep a set of the entities and relationships seen and add each once, however many paths reach it.
        """
        ids = await self.build(backend)
        sub = await backend.get_neighbors(ids["a"], depth=6)
        assert len(sub.entities) == len(sub.entity_ids()) == 5

    async def test_relationships_need_both_ends(self, backend: GraphStore) -> None:
        """A relationship to an entity that does not exist is ``NotFound`` and is not stored.

        Fix: look up both ends of every relationship of the call before writing any, and raise ``NotFound`` of
        ``ravi.kernel.errors`` for a missing one.
        """
        ids = await self.build(backend)
        ghost = Relationship(id=unique("r"), source_id=ids["a"], target_id=unique("ghost"), type="KNOWS")
        with pytest.raises(NotFound):
            await backend.add_relationships([ghost])
        sub = await backend.get_neighbors(ids["a"], depth=1)
        assert ghost.id not in {r.id for r in sub.relationships}

    async def test_delete_entity_detaches_its_relationships(self, backend: GraphStore) -> None:
        """Deleting an entity also deletes every relationship touching it.

        Fix: delete every relationship touching the entity with it (Cypher's ``DETACH DELETE``), and return whether the
        entity was there.
        """
        ids = await self.build(backend)
        assert await backend.delete_entity(ids["b"]) is True
        assert await backend.get_entity(ids["b"]) is None
        sub = await backend.get_neighbors(ids["a"], depth=1)
        assert ids["b"] not in sub.entity_ids()
        assert ids["ab"] not in {r.id for r in sub.relationships}
        assert await backend.delete_entity(ids["b"]) is False

    async def test_delete_relationship(self, backend: GraphStore) -> None:
        """Deleting a relationship leaves its entities.

        Fix: delete only the relationship, and return whether it was there (``False``, not an error, the second time).
        """
        ids = await self.build(backend)
        assert await backend.delete_relationship(ids["cd"]) is True
        assert await backend.delete_relationship(ids["cd"]) is False
        assert ids["d"] not in (await backend.get_neighbors(ids["c"], depth=1)).entity_ids()
        assert await backend.get_entity(ids["d"]) is not None

    async def test_unknown_entity_has_no_neighbourhood(self, backend: GraphStore) -> None:
        """The neighbourhood of an unknown entity is empty.

        Fix: raise ``NotFound`` of ``ravi.kernel.errors`` from ``get_neighbors`` when the starting entity does not
        exist.
        """
        with pytest.raises(NotFound):
            await backend.get_neighbors(unique("ghost"), depth=1)

    async def test_negative_depth_is_refused(self, backend: GraphStore) -> None:
        """A negative depth, or one that is a bool or a float, is refused with ``InvalidArgument`` (``True`` is not
        a depth of 1, as everywhere a count is given).

        Fix: pass ``depth`` through ``check_count`` of ``ravi.kernel.values``, which refuses a negative number, a bool
        and a float.
        """
        ids = await self.build(backend)
        for bad in (-1, True, 1.0):
            with pytest.raises(InvalidArgument):
                await backend.get_neighbors(ids["a"], depth=bad)  # type: ignore[arg-type]

    async def test_a_bare_string_is_not_a_list_of_relationship_types(self, backend: GraphStore) -> None:
        """``relationship_types="KNOWS"`` must not mean the types ``K``, ``N``, ``O``, ...: it is refused.

        Fix: pass ``relationship_types`` through ``check_relationship_types`` of ``ravi.kernel.storage``, which refuses
        a bare string instead of splitting it.
        """
        ids = await self.build(backend)
        with pytest.raises(InvalidArgument):
            await backend.get_neighbors(ids["a"], relationship_types="KNOWS")

    async def test_an_id_names_one_entity_and_one_relationship_even_under_concurrent_writers(
        self, backend: GraphStore
    ) -> None:
        """Concurrent inserts of one id keep one entity (one relationship): insert-or-replace, never duplicate.

        Fix: take a lock per id for the transaction (``pg_advisory_xact_lock`` of a hash of each id, in sorted order, or
        one lock in memory) before looking the id up, then replace what is there (AGE: ``MERGE`` on the id, then
        ``SET``), so concurrent writers of one id replace each other instead of each inserting one.
        """
        e, f, r = unique("e"), unique("f"), unique("r")
        await asyncio.gather(
            *(backend.add_entities([Entity(id=e, properties={"n": i})]) for i in range(12)),
            backend.add_entities([Entity(id=f)]),
        )
        await asyncio.gather(
            *(
                backend.add_relationships([Relationship(id=r, source_id=e, target_id=f, type="R", properties={"n": i})])
                for i in range(12)
            )
        )
        around = await backend.get_neighbors(e, depth=1)
        assert sorted(x.id for x in around.entities) == sorted([e, f]), "an id names more than one entity"
        assert [x.id for x in around.relationships] == [r], "an id names more than one relationship"

    async def test_one_call_giving_an_id_twice_keeps_one_entity(self, backend: GraphStore) -> None:
        """Two entities with one id in one call: the store keeps one (the last) or refuses the call.

        Fix: write the entities of a call in order as insert-or-replace (the last of an id wins), or refuse the call
        with ``InvalidArgument`` before writing any.
        """
        e = unique("e")
        try:
            await backend.add_entities([Entity(id=e, label="A"), Entity(id=e, label="B", properties={"last": 1})])
        except InvalidArgument:
            assert await backend.get_entity(e) is None
            return
        assert (await backend.get_neighbors(e, depth=0)).entities == (Entity(id=e, label="B", properties={"last": 1}),)

    async def test_every_relationship_of_a_call_needs_both_ends_even_one_given_again(self, backend: GraphStore) -> None:
        """A relationship to an unknown entity fails the call with ``NotFound``, and nothing is added, also when
        a later relationship of the same call has its id (a store that kept only the last of an id's
        relationships checked only its ends).

        Fix: check the ends of every relationship of the call, each one given, before writing any, not only the last one
        of each id.
        """
        a, r = unique("e"), unique("r")
        await backend.add_entities([Entity(id=a)])
        missing = unique("missing")
        with pytest.raises(NotFound):
            await backend.add_relationships(
                [
                    Relationship(id=r, source_id=a, target_id=missing, type="T"),
                    Relationship(id=r, source_id=a, target_id=a, type="T"),
                ]
            )
        assert (await backend.get_neighbors(a)).relationships == ()

    async def test_ids_that_are_not_text_are_refused(self, backend: GraphStore) -> None:
        """An id with a lone surrogate or a NUL (which PostgreSQL keeps in no text), or not a string, is
        InvalidArgument on every call, reads included, not a crash, and nothing of the call is stored.

        Fix: check ids with ``check_scope`` and ``check_items`` of ``ravi.kernel.values``."""
        kept = unique("e")
        with pytest.raises(InvalidArgument):
            await backend.add_entities([Entity(id=kept), Entity(id="e\x00")])
        assert await backend.get_entity(kept) is None
        for bad in ("e\ud800", "e\x00", 42, ""):
            with pytest.raises(InvalidArgument):
                await backend.get_entity(bad)  # type: ignore[arg-type]
            with pytest.raises(InvalidArgument):
                await backend.get_neighbors(bad)  # type: ignore[arg-type]
            with pytest.raises(InvalidArgument):
                await backend.delete_entity(bad)  # type: ignore[arg-type]
            with pytest.raises(InvalidArgument):
                await backend.delete_relationship(bad)  # type: ignore[arg-type]

    async def test_what_is_not_a_list_is_refused(self, backend: GraphStore) -> None:
        """``add_entities`` and ``add_relationships`` given ``None`` or a string instead of a list raise
        ``InvalidArgument``, never a ``TypeError``.

        Fix: pass the call's items through ``check_items`` of ``ravi.kernel.values`` (``check_items(entities, Entity,
        "entities")``) before the store sees them.
        """
        for bad in (None, "entities", 5):
            with pytest.raises(InvalidArgument):
                await backend.add_entities(bad)  # type: ignore[arg-type]
            with pytest.raises(InvalidArgument):
                await backend.add_relationships(bad)  # type: ignore[arg-type]

    async def test_properties_round_trip(self, backend: GraphStore) -> None:
        """Entity and relationship properties round-trip exactly (nested JSON, Unicode).

        Fix: pass properties as parameters (an agtype map on AGE), never formatted into the query, and read them back as
        the JSON they were, nested maps and lists included.
        """
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
        await backend.add_entities([Entity(id=e, label="Thing", properties=props)])
        got = await backend.get_entity(e)
        assert got is not None and got.properties == props
        f = unique("f")
        await backend.add_entities([Entity(id=f)])
        rel = Relationship(id=unique("r"), source_id=e, target_id=f, type="LINKS", properties=props)
        await backend.add_relationships([rel])
        [walked] = (await backend.get_neighbors(e, depth=1)).relationships
        assert walked == rel

    async def test_property_numbers_come_back_with_their_type_and_value(self, backend: GraphStore) -> None:
        """Whole-number floats stay floats, the extremes of a float and of a 64-bit integer come back exact; an
        integer past 64 bits (which graph databases do not hold) is refused when the entity is built.

        Fix: keep a float a float (``1e16`` written so the database reads a float, not an integer) and integers as
        64-bit integers; ``Entity`` and ``Relationship`` refuse wider integers when they are built.
        """
        numbers = {k: v for k, v in EXACT_NUMBERS.items() if k not in ("big_int", "low_int")}
        numbers |= {"int_max": 2**63 - 1, "int_min": -(2**63)}
        e, f = unique("e"), unique("f")
        await backend.add_entities([Entity(id=e, properties=numbers), Entity(id=f)])
        got = await backend.get_entity(e)
        assert got is not None and typed(got.properties) == typed(numbers)
        rel = Relationship(id=unique("r"), source_id=e, target_id=f, type="HAS", properties=numbers)
        await backend.add_relationships([rel])
        [walked] = (await backend.get_neighbors(e, depth=1)).relationships
        assert typed(walked.properties) == typed(numbers)
        for past in (2**63, -(2**63) - 1, EXACT_NUMBERS["big_int"]):
            with pytest.raises(InvalidArgument, match="64 bits"):
                Entity(id=e, properties={"nested": [past]})
            with pytest.raises(InvalidArgument, match="64 bits"):
                Relationship(source_id=e, target_id=f, type="HAS", properties={"n": past})

    async def test_forget_erases_the_entities_of_the_scope_and_their_relationships(self, backend: GraphStore) -> None:
        """``forget`` (``Forgetter``, optional) erases the entities whose properties have the scope's
        ``agent_id`` (and ``session_id``), every relationship touching one, and every relationship whose own
        properties place it in the scope; nothing else; a second call removes nothing.

        Fix: call ``check_forget`` of ``ravi.kernel.storage`` first; delete (detaching) every entity whose properties
        place it in the scope (``in_scope`` of ``ravi.kernel.storage``) and every relationship whose own properties do,
        and return how many entities and relationships went, those detached with an entity included.
        """
        if not isinstance(backend, Forgetter):
            pytest.skip(f"backend lacks forget: {type(backend).__name__} is not a Forgetter")
        a, b = unique("agent"), unique("agent")
        mine = Entity(id=unique("e"), label="Person", properties={"agent_id": a, "session_id": "s1"})
        later = Entity(id=unique("e"), label="Person", properties={"agent_id": a, "session_id": "s2"})
        theirs = Entity(id=unique("e"), label="Person", properties={"agent_id": b, "session_id": "s1"})
        shared = Entity(id=unique("e"), label="Place")
        await backend.add_entities([mine, later, theirs, shared])
        touching = Relationship(source_id=shared.id, target_id=mine.id, type="KNOWS")
        tagged = Relationship(
            source_id=shared.id, target_id=theirs.id, type="SAW", properties={"agent_id": a, "session_id": "s1"}
        )
        kept = Relationship(source_id=theirs.id, target_id=later.id, type="KNOWS")
        await backend.add_relationships([touching, tagged, kept])
        assert await backend.forget(a, session_id="s1") == 3
        assert await backend.forget(a, session_id="s1") == 0
        assert await backend.get_entity(mine.id) is None
        for entity in (later, theirs, shared):
            assert await backend.get_entity(entity.id) is not None
        around = await backend.get_neighbors(shared.id, depth=1)
        assert {r.id for r in around.relationships} == set()
        assert await backend.forget(a) == 2  # ``later`` and the relationship touching it
        assert await backend.get_entity(theirs.id) is not None

    async def test_a_neighbourhood_comes_in_one_order_on_every_store(self, backend: GraphStore) -> None:
        """``get_neighbors`` gives the entity first, then the entities one hop away, then those two hops away, and
        so on, each hop's by id, and the relationships by id: one call on one graph gives one ``SubGraph`` on
        every store (AGE gave a hop's entities in the order its query found them, the in-memory store in the
        order of the ids of the relationships that reached them).

        Fix: sort each hop's new entities by id before adding them to the result."""
        p = unique("o")
        hub, near, far = f"{p}-hub", [f"{p}-{c}" for c in "hgfd"], [f"{p}-{c}" for c in "zyxw"]
        await backend.add_entities([Entity(id=x) for x in (hub, *near, *far)])
        rels = [
            Relationship(id=f"{p}-r{k}", source_id=hub if k % 2 else x, target_id=x if k % 2 else hub, type="R")
            for k, x in enumerate(near)
        ]
        rels += [Relationship(id=f"{p}-s{k}", source_id=x, target_id=near[-1 - k], type="S") for k, x in enumerate(far)]
        await backend.add_relationships(rels)
        for _ in range(2):
            sub = await backend.get_neighbors(hub, depth=2)
            assert [e.id for e in sub.entities] == [hub, *sorted(near), *sorted(far)]
            assert [r.id for r in sub.relationships] == sorted(r.id for r in rels)
        sub = await backend.get_neighbors(near[0], depth=1)
        assert [e.id for e in sub.entities] == [near[0], *sorted([hub, far[-1]])]

    async def test_names_every_graph_store_keeps_are_taken_and_others_refused(self, backend: GraphStore) -> None:
        """A label or relationship type is a plain identifier (ASCII letters, digits and underscores, not starting
        with a digit) of at most ``MAX_NAME_LENGTH`` (63) characters, not starting with ``_ag_``: graph databases
        name a table or a type by it (Apache AGE). Every store takes every such name, the longest included; any
        other is refused with ``InvalidArgument`` when the entity or relationship is built, and as a
        relationship-type filter by every store (the in-memory store kept ``"has part"``, which AGE refused).

        Fix: build entities and relationships with ``Entity`` and ``Relationship`` of ``ravi.kernel.storage``, which
        check their names, and a filter with ``check_relationship_types``."""
        longest, longest_type = "L" * MAX_NAME_LENGTH, "T" * MAX_NAME_LENGTH
        a, b = unique("a"), unique("b")
        await backend.add_entities([Entity(id=a, label=longest), Entity(id=b, label="_x9")])
        await backend.add_relationships([Relationship(id=unique("r"), source_id=a, target_id=b, type=longest_type)])
        around = await backend.get_neighbors(a, relationship_types=[longest_type])
        assert {e.id: e.label for e in around.entities} == {a: longest, b: "_x9"}
        assert [r.type for r in around.relationships] == [longest_type]
        for bad in ("has part", "Persön", "1st", "WORKS-AT", "L" * (MAX_NAME_LENGTH + 1), "_ag_label_vertex", "_AG_x"):
            with pytest.raises(InvalidArgument):
                Entity(id=a, label=bad)
            with pytest.raises(InvalidArgument):
                Relationship(source_id=a, target_id=b, type=bad)
            with pytest.raises(InvalidArgument):
                await backend.get_neighbors(a, relationship_types=[bad])

    async def test_id_is_the_one_reserved_property_name(self, backend: GraphStore) -> None:
        """An entity's or relationship's properties may hold any name but ``id``, which a graph database keeps the
        id under (Apache AGE): ``id`` is refused with ``InvalidArgument`` when the entity or relationship is built
        (the in-memory store kept it, which AGE refused), and every other name, ``__s`` and ``__t`` included (which
        AGE refused, using them itself), is kept by every store.

        Fix: store every property name but ``id`` as given, and pass what the store needs of its own beside the
        properties, never among them (the AGE store sends a relationship's ends as ``s`` and ``t`` beside its map of
        properties ``p``); ``Entity`` and ``Relationship`` refuse ``id`` when they are built.
        """
        with pytest.raises(InvalidArgument, match="id"):
            Entity(id="e", properties={"id": "other"})
        with pytest.raises(InvalidArgument, match="id"):
            Relationship(source_id="a", target_id="b", type="T", properties={"id": 1})
        props = {"__s": 1, "__t": "t", "source_id": "x", "label": "L", "type": "T", "nested": {"id": 2}}
        a, b = unique("a"), unique("b")
        await backend.add_entities([Entity(id=a, properties=props), Entity(id=b)])
        rel = Relationship(id=unique("r"), source_id=a, target_id=b, type="HAS", properties=props)
        await backend.add_relationships([rel])
        assert (await backend.get_entity(a)) == Entity(id=a, properties=props)
        assert (await backend.get_neighbors(a)).relationships == (rel,)

    async def test_an_entity_keeps_its_label(self, backend: GraphStore) -> None:
        """Adding an entity again with another label is refused with ``InvalidArgument``, and nothing of the call
        is stored: a graph database keeps a vertex in its label's table and cannot move it (Apache AGE refused it
        while the in-memory store relabelled). Deleting the entity first, then adding it, gives it the new label.

        Fix: before writing anything, refuse a call that gives a stored entity's id with another label."""
        ids = await self.build(backend)
        other = unique("new")
        with pytest.raises(InvalidArgument):
            await backend.add_entities([Entity(id=other), Entity(id=ids["a"], label="Company", properties={"x": 1})])
        assert await backend.get_entity(ids["a"]) == Entity(id=ids["a"], label="Person", properties={"name": "a"})
        assert await backend.get_entity(other) is None
        assert await backend.delete_entity(ids["a"])
        await backend.add_entities([Entity(id=ids["a"], label="Company")])
        assert await backend.get_entity(ids["a"]) == Entity(id=ids["a"], label="Company")

    async def test_a_name_is_a_label_or_a_relationship_type_never_both(self, backend: GraphStore) -> None:
        """Once a graph has used a name as an entity label, a relationship of that type is refused with
        ``InvalidArgument``, and the other way round, nothing of the call stored: a graph database keeps both in
        one namespace (Apache AGE refused it, saying a column ``start_id`` does not exist, while the in-memory
        store kept both). The graph keeps the name's use after its last entity or relationship is gone, as AGE
        keeps the label's table.

        Fix: remember which names the graph has used as labels and which as types, and refuse the other use."""
        ids = await self.build(backend)  # labels Person and Company; types KNOWS and WORKS_AT
        new = unique("new")
        with pytest.raises(InvalidArgument):
            await backend.add_entities([Entity(id=new), Entity(id=unique("e"), label="KNOWS")])
        assert await backend.get_entity(new) is None
        with pytest.raises(InvalidArgument):
            await backend.add_relationships(
                [
                    Relationship(id=unique("r"), source_id=ids["a"], target_id=ids["d"], type="LIKES"),
                    Relationship(id=unique("r"), source_id=ids["a"], target_id=ids["d"], type="Company"),
                ]
            )
        before = await backend.get_neighbors(ids["a"], depth=1)
        assert {r.type for r in before.relationships} == {"KNOWS"}
        assert await backend.delete_entity(ids["d"])
        with pytest.raises(InvalidArgument):
            await backend.add_relationships(
                [Relationship(id=unique("r"), source_id=ids["a"], target_id=ids["b"], type="Company")]
            )

    async def test_ids_past_the_limit_are_refused_and_nothing_is_lost(self, backend: GraphStore) -> None:
        """An entity or relationship id (or a relationship's end) of more than ``MAX_ID_BYTES`` UTF-8 bytes is
        refused by every call with ``InvalidArgument`` naming it and the limit, on every backend (AGE indexes no
        longer keys), and nothing of the call is stored.

        Fix: check entities and relationships with ``check_items`` and ids with ``check_scope`` of
        ``ravi.kernel.values``, which hold ``MAX_ID_BYTES``.
        """
        a, b = unique("a"), unique("b")
        kept = Relationship(id=unique("r"), source_id=a, target_id=b, type="KNOWS")
        await backend.add_entities([Entity(id=a), Entity(id=b)])
        await backend.add_relationships([kept])

        def calls(long: str) -> dict[str, tuple[str, Callable[[], Awaitable[Any]]]]:
            out: dict[str, tuple[str, Callable[[], Awaitable[Any]]]] = {
                "add_entities(second id)": (
                    "entities[1].id",
                    lambda: backend.add_entities([Entity(id=unique("new")), Entity(id=long)]),
                ),
                "add_relationships(id)": (
                    "relationships[0].id",
                    lambda: backend.add_relationships([Relationship(id=long, source_id=a, target_id=b, type="KNOWS")]),
                ),
                "add_relationships(source_id)": (
                    "relationships[0].source_id",
                    lambda: backend.add_relationships([Relationship(source_id=long, target_id=b, type="KNOWS")]),
                ),
                "add_relationships(target_id)": (
                    "relationships[0].target_id",
                    lambda: backend.add_relationships([Relationship(source_id=a, target_id=long, type="KNOWS")]),
                ),
                "get_entity()": ("entity_id", lambda: backend.get_entity(long)),
                "get_neighbors()": ("entity_id", lambda: backend.get_neighbors(long)),
                "delete_entity()": ("entity_id", lambda: backend.delete_entity(long)),
                "delete_relationship()": ("relationship_id", lambda: backend.delete_relationship(long)),
            }
            return out

        await refuses_long_ids(calls)
        neighbourhood = await backend.get_neighbors(a)
        assert neighbourhood.entity_ids() == {a, b}
        assert [r.id for r in neighbourhood.relationships] == [kept.id]

    @settings(max_examples=10, deadline=None, suppress_health_check=PROPERTY_CHECKS)
    @given(text=id_texts())
    async def test_ids_at_the_limit_are_stored_and_read_back(self, backend: GraphStore, text: str) -> None:
        """Entity and relationship ids of exactly ``MAX_ID_BYTES`` UTF-8 bytes, of any text, are stored and read
        back by every backend.

        Fix: keep entity and relationship ids whole, as given: properties, keys or columns that hold ``MAX_ID_BYTES``
        bytes of UTF-8 (``check_scope`` of ``ravi.kernel.values`` refuses longer ones), no truncation.
        """
        tag = unique("")
        a, b, r = (at_limit(text, f"{tag}{part}") for part in "abr")
        await backend.add_entities([Entity(id=a, properties={"n": 1}), Entity(id=b)])
        await backend.add_relationships([Relationship(id=r, source_id=a, target_id=b, type="KNOWS")])
        assert await backend.get_entity(a) == Entity(id=a, properties={"n": 1})
        neighbourhood = await backend.get_neighbors(b)
        assert neighbourhood.entity_ids() == {a, b}
        assert [(x.id, x.source_id, x.target_id) for x in neighbourhood.relationships] == [(r, a, b)]
        assert await backend.delete_relationship(r)
        assert await backend.delete_entity(a)
        assert await backend.delete_entity(b)


class CypherCapableContract(ContractBase):
    """Subclass and override the ``backend`` fixture with a store that is also ``CypherCapable``."""

    contract_name = "CypherCapable"
    pytestmark = pytest.mark.asyncio

    @pytest.fixture
    def backend(self) -> GraphStore:
        """Override: an empty backend, fresh for each test."""
        raise NotImplementedError("override the 'backend' fixture to build an empty backend")

    @pytest.fixture
    def cypher(self, backend: GraphStore) -> CypherCapable:
        if not isinstance(backend, CypherCapable):
            pytest.skip(f"backend lacks cypher: {type(backend).__name__} is not CypherCapable")
        return backend

    async def test_query_with_parameters(self, backend: GraphStore, cypher: CypherCapable) -> None:
        """``query_cypher`` binds parameters and returns rows as dicts.

        Fix: bind ``params`` as the database's parameters (AGE: one agtype map passed as the third argument of
        ``cypher()``) and return each row as a dict keyed by the ``RETURN`` aliases.
        """
        e = unique("e")
        await backend.add_entities([Entity(id=e, label="Person", properties={"name": "Ada"})])
        rows = await cypher.query_cypher("MATCH (n:Person {id: $id}) RETURN n.name AS name", {"id": e})
        assert rows == [{"name": "Ada"}]

    @pytest.mark.parametrize(
        "hostile",
        ["it's", 'say "hi"', "$$ dollar $$", "back\\slash", "new\nline", "漢字 🚀", "x'}) DETACH DELETE n //", "$id"],
    )
    async def test_hostile_values_cannot_change_the_query(
        self, backend: GraphStore, cypher: CypherCapable, hostile: str
    ) -> None:
        """A parameter value is data: quotes and Cypher in it cannot change the query.

        Fix: send parameter values as parameters, never pasted into the query's text, however they are quoted.
        """
        e = unique("e")
        await backend.add_entities([Entity(id=e, label="Person", properties={"name": "kept"})])
        rows = await cypher.query_cypher(
            "MATCH (n:Person {id: $id}) RETURN $value AS value, n.name AS name", {"id": e, "value": hostile}
        )
        assert rows == [{"value": hostile, "name": "kept"}]
        assert await backend.get_entity(e) is not None

    async def test_scalars_and_lists_come_back_as_python_values(self, cypher: CypherCapable) -> None:
        """Scalars and lists in rows come back as Python values, not driver types.

        Fix: convert every value of a row to plain Python (parse AGE's agtype text as JSON), never return driver
        objects.
        """
        rows = await cypher.query_cypher("RETURN 1 AS i, 2.5 AS f, true AS b, null AS z, [1, 'a'] AS l", None)
        assert rows == [{"i": 1, "f": 2.5, "b": True, "z": None, "l": [1, "a"]}]

    async def test_params_that_are_not_json_are_refused(self, cypher: CypherCapable) -> None:
        """Parameters are JSON values: a set, bytes or NaN is refused with InvalidArgument.

        Fix: check ``params`` with ``check_json`` of ``ravi.kernel.values`` before the query is sent.
        """
        for params in ({"s": {1, 2}}, {"b": b"x"}, {"n": float("nan")}, {"t": "lone \ud800"}):
            with pytest.raises(InvalidArgument):
                await cypher.query_cypher("RETURN 1 AS one", params)

    async def test_a_query_that_is_not_text_is_refused(self, cypher: CypherCapable) -> None:
        """A query holding a lone surrogate (no server can receive it) raises ``InvalidArgument``.

        Fix: check the query with ``check_text`` of ``ravi.kernel.values`` before it is sent.
        """
        with pytest.raises(InvalidArgument):
            await cypher.query_cypher("RETURN 'lone \ud800' AS one", None)
