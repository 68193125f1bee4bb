"""The AGE graph store against PostgreSQL with Apache AGE: the graph and Cypher contracts, parameter safety,
agtype parsing."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from decimal import Decimal

import asyncpg
import pytest
import pytest_asyncio
import servers

from ravi.capabilities.age import AGEGraphStore
from ravi.capabilities.age.cypher import oversized_integers, return_columns
from ravi.conformance import CypherCapableContract, GraphStoreContract
from ravi.kernel.errors import ConfigurationError, InvalidArgument, NotFound
from ravi.kernel.messages import ChatMessage
from ravi.kernel.registry import load_backend
from ravi.kernel.storage import Entity, Relationship


@pytest_asyncio.fixture
async def age_store(age_dsn: str, age_graph: str) -> AsyncIterator[AGEGraphStore]:
    async for store in servers.age_graph(age_dsn, age_graph, where="this PostgreSQL (set RAVI_TEST_AGE_DSN)"):
        yield store


class TestAGEGraph(GraphStoreContract):
    @pytest.fixture
    def backend(self, age_store: AGEGraphStore) -> AGEGraphStore:
        return age_store


class TestAGECypher(CypherCapableContract):
    @pytest.fixture
    def backend(self, age_store: AGEGraphStore) -> AGEGraphStore:
        return age_store


async def test_a_hostile_value_cannot_change_the_query(age_store: AGEGraphStore) -> None:
    await age_store.add_entities([Entity(id="victim", label="Person", properties={"name": "v"})])
    hostile = "x'}) MATCH (n) DETACH DELETE n RETURN 1 // $$ \\ \n"
    rows = await age_store.query_cypher("MATCH (n:Person {id: $id}) RETURN n.name AS name", {"id": hostile})
    assert rows == []
    assert await age_store.get_entity("victim") is not None
    await age_store.add_entities([Entity(id=hostile, label="Person", properties={"name": hostile})])
    assert (await age_store.get_entity(hostile)) == Entity(id=hostile, label="Person", properties={"name": hostile})
    assert await age_store.get_entity("victim") is not None


async def test_vertices_edges_and_paths_come_back_as_plain_values(age_store: AGEGraphStore) -> None:
    await age_store.add_entities([Entity(id="a", label="Person", properties={"n": 1}), Entity(id="b", label="City")])
    await age_store.add_relationships(
        [Relationship(id="r", source_id="a", target_id="b", type="LIVES_IN", properties={"since": 2020})]
    )
    [row] = await age_store.query_cypher("MATCH p = (a:Person)-[r]->(b) RETURN a, r, p, b.id AS city")
    assert row["a"]["kind"] == "vertex" and row["a"]["id"] == "a" and row["a"]["properties"] == {"n": 1}
    assert row["r"]["kind"] == "edge" and row["r"]["type"] == "LIVES_IN" and row["r"]["properties"] == {"since": 2020}
    assert [part["kind"] for part in row["p"]] == ["vertex", "edge", "vertex"]
    assert row["city"] == "b"


async def test_labels_and_reserved_names_are_refused(age_store: AGEGraphStore) -> None:
    with pytest.raises(InvalidArgument):
        await age_store.add_entities([Entity(id="x", label="Not A Label")])
    with pytest.raises(InvalidArgument, match="reserved"):
        await age_store.add_entities([Entity(id="x", properties={"id": "other"})])
    with pytest.raises(InvalidArgument):
        await age_store.query_cypher("MATCH (n) RETURN *")
    with pytest.raises(InvalidArgument):
        await age_store.query_cypher("THIS IS NOT CYPHER")


def test_return_columns_are_read_from_the_query() -> None:
    assert return_columns("MATCH (n) RETURN n.name AS name, count(*) AS c ORDER BY c LIMIT 3") == ["name", "c"]
    assert return_columns("MATCH (n) WHERE n.x = 'RETURN a, b' RETURN n") == ["n"]
    assert return_columns("RETURN [1, 2] AS l, {a: 1, b: 2} AS m") == ["l", "m"]
    assert return_columns("CREATE (n:Thing)") == []
    assert return_columns("MATCH (n) RETURN DISTINCT n.kind") == ["n.kind"]


def test_comments_and_quoted_aliases_are_read_as_cypher_reads_them() -> None:
    """A comment is not part of the ``RETURN`` clause (its commas made extra columns, and AGE refused the query),
    and a backtick alias doubles its backticks (the whole item was taken for the column's name)."""
    assert return_columns("MATCH (n) RETURN n.a AS a // the name, and more") == ["a"]
    assert return_columns("RETURN 1 AS x /* one, two */, 2 AS y") == ["x", "y"]
    assert return_columns("// RETURN a, b\nRETURN 1 AS only") == ["only"]
    assert return_columns("RETURN '// not a comment, really' AS s") == ["s"]
    assert return_columns("RETURN 1 AS `x``y`, 2 AS `a b`") == ["x`y", "a b"]


async def test_a_query_with_comments_runs(age_store: AGEGraphStore) -> None:
    rows = await age_store.query_cypher("RETURN 1 AS x, /* a comment, with commas */ 2 AS `y``z` // the end, z")
    assert rows == [{"x": 1, "y`z": 2}]


async def test_registered_under_age(age_dsn: str, age_graph: str) -> None:
    store = load_backend("graph", "age", dsn=age_dsn, graph=age_graph)
    assert isinstance(store, AGEGraphStore)
    await store.close()
    with pytest.raises(ConfigurationError):
        AGEGraphStore(age_dsn, graph="Bad-Name")


@pytest.mark.asyncio
async def test_a_graph_named_after_a_schema_the_database_has_is_a_configuration_error(age_dsn: str) -> None:
    """AGE keeps a graph in a schema of its name, so ``graph = "ravi"`` beside the Postgres stores' schema (or
    ``public``) could not be created: every call raised ``InvalidArgument`` ("the Cypher query was refused"),
    blaming the caller's entities for the configuration, and the schema's tables were left alone."""
    for name in ("public", "ag_catalog"):
        store = AGEGraphStore(age_dsn, graph=name)
        try:
            with pytest.raises(ConfigurationError, match=f"schema named '{name}'"):
                await store.add_entities([Entity(id="x", label="Person")])
        finally:
            await store.close()


async def test_a_postgres_store_in_a_graphs_schema_is_a_configuration_error(age_dsn: str) -> None:
    """AGE keeps a graph in a schema of its name; a Postgres store given that schema put its tables among the
    graph's, and either store's ``destroy()`` then dropped the other's data. The store refuses the schema, and
    ``destroy()`` refuses to drop it; the graph is left whole."""
    from ravi.capabilities.postgres import PostgresHistoryProvider

    graph = AGEGraphStore(age_dsn, graph="shared_by_mistake")
    try:
        await graph.add_entities([Entity(id="kept", label="Person")])
        store = PostgresHistoryProvider(age_dsn, schema="shared_by_mistake")
        try:
            with pytest.raises(ConfigurationError, match="Apache AGE graph"):
                await store.append("agent", ChatMessage.user("hello"), session_id="s")
            with pytest.raises(ConfigurationError, match="Apache AGE graph"):
                await store.destroy()
        finally:
            await store.close()
        assert [e.id for e in (await graph.get_neighbors("kept", depth=1)).entities] == ["kept"]
    finally:
        await graph.destroy()
        await graph.close()


def test_a_dsn_that_is_not_postgres_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="DSN"):
        AGEGraphStore("mysql://x")


@pytest.mark.asyncio
@pytest.mark.parametrize("label", ["_ag_label_vertex", "_ag_label_edge", "_AG_LABEL_VERTEX", "_ag_anything"])
async def test_labels_named_after_ages_own_tables_are_refused(age_store: AGEGraphStore, label: str) -> None:
    """A label such as ``_ag_label_vertex`` would write into AGE's own tables and break every later read."""
    with pytest.raises(InvalidArgument, match="reserved"):
        await age_store.add_entities([Entity(id="e1", label=label)])
    await age_store.add_entities([Entity(id="a"), Entity(id="b")])
    with pytest.raises(InvalidArgument, match="reserved"):
        await age_store.add_relationships([Relationship(id="r", source_id="a", target_id="b", type=label)])
    assert [e.id for e in (await age_store.get_neighbors("a", depth=1)).entities] == ["a"]


@pytest.mark.asyncio
async def test_every_label_is_taken_whatever_labels_exist_and_gets_its_index(
    age_dsn: str, age_store: AGEGraphStore
) -> None:
    """Every label the store accepts is accepted whatever labels the graph has, and each one, up to the longest,
    gets the index on its ``id`` the store makes.

    The store named that index ``{label}_ravi_id`` (and an edge label's ``{label}_ravi_start``, ``_ravi_end``):
    a label of such a name is a table, which clashed with the index of another label ("relation already exists",
    ``InvalidArgument``, or the index silently not made, by the order of the writes), and PostgreSQL cut the
    name of a long label's index to 63 bytes, the label's own name, so no index was made."""
    longest, long_type = "L" * 63, "E" * 60
    await age_store.add_entities([Entity(id="a", label="X"), Entity(id="b", label="Y_ravi_id")])
    await age_store.add_entities([Entity(id="c", label="X_ravi_id"), Entity(id="d", label="Y")])
    await age_store.add_entities([Entity(id="e", label=longest)])
    await age_store.add_relationships([Relationship(id="r1", source_id="a", target_id="b", type="R")])
    await age_store.add_relationships(
        [
            Relationship(id="r2", source_id="a", target_id="c", type="R_ravi_start"),
            Relationship(id="r3", source_id="a", target_id="e", type=long_type),
        ]
    )
    around = await age_store.get_neighbors("a")
    assert {e.id: e.label for e in around.entities} == {
        "a": "X",
        "b": "Y_ravi_id",
        "c": "X_ravi_id",
        "e": longest,
    }
    assert [(r.id, r.type) for r in around.relationships] == [("r1", "R"), ("r2", "R_ravi_start"), ("r3", long_type)]
    assert (await age_store.get_entity("d")) == Entity(id="d", label="Y")
    connection = await asyncpg.connect(age_dsn)
    try:
        rows = await connection.fetch(
            "SELECT tablename, indexdef FROM pg_indexes WHERE schemaname = $1", age_store.graph
        )
    finally:
        await connection.close()
    for label in ("X", "Y", "X_ravi_id", "Y_ravi_id", longest):
        defs = [r["indexdef"] for r in rows if r["tablename"] == label]
        assert any("agtype_access_operator" in d for d in defs), f"label {label!r} has no index on its id: {defs}"
    for edge_type in ("R", "R_ravi_start", long_type):
        defs = [r["indexdef"] for r in rows if r["tablename"] == edge_type]
        for column in ("(start_id)", "(end_id)"):
            assert any(d.endswith(column) for d in defs), f"type {edge_type!r} has no index on {column}: {defs}"


@pytest.mark.asyncio
async def test_a_nul_in_a_query_is_the_callers_error(age_store: AGEGraphStore) -> None:
    with pytest.raises(InvalidArgument, match="NUL"):
        await age_store.query_cypher("RETURN 'a\x00b' AS x")
    assert await age_store.query_cypher("RETURN 1 AS one") == [{"one": 1}]


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "query",
    [
        "CREATE (n)-[:R]-(m) RETURN n AS n",  # AGE: FeatureNotSupported
        "RETURN 1 AS x, 2 AS x",  # two columns, one name: a row would lose one
        "MATCH (n) WITH n RETURN m AS m",
        "RETURN 1 / 0 AS x",
    ],
)
async def test_queries_age_refuses_are_the_callers_error(age_store: AGEGraphStore, query: str) -> None:
    with pytest.raises(InvalidArgument):
        await age_store.query_cypher(query)


@pytest.mark.parametrize("kind", ["vertex", "edge"])
async def test_writers_of_a_new_label_at_once_all_succeed(age_dsn: str, age_graph: str, kind: str) -> None:
    """Several stores (processes, or threads each with their own loop) write the first entities of a label, or
    the first relationships of a type, at once: every write is stored. AGE creates a label's table on its first
    use, and concurrent first uses raised "relation already exists" as ``InvalidArgument``."""
    stores = [AGEGraphStore(age_dsn, graph=age_graph) for _ in range(6)]
    try:
        await stores[0].add_entities([Entity(id="hub"), *(Entity(id=f"e{i}") for i in range(len(stores)))])
        for step in range(4):  # a new label each step, written first by every store at once
            if kind == "vertex":
                await asyncio.gather(
                    *(s.add_entities([Entity(id=f"v{step}-{i}", label=f"Fresh{step}")]) for i, s in enumerate(stores))
                )
                found = [await stores[0].get_entity(f"v{step}-{i}") for i in range(len(stores))]
                assert [e.label if e else None for e in found] == [f"Fresh{step}"] * len(stores)
            else:
                await asyncio.gather(
                    *(
                        s.add_relationships(
                            [Relationship(id=f"r{step}-{i}", source_id="hub", target_id=f"e{i}", type=f"LINKS{step}")]
                        )
                        for i, s in enumerate(stores)
                    )
                )
                around = await stores[0].get_neighbors("hub", relationship_types=[f"LINKS{step}"])
                assert sorted(r.id for r in around.relationships) == sorted(f"r{step}-{i}" for i in range(len(stores)))
    finally:
        await stores[0].destroy()
        for s in stores:
            await s.close()


async def test_a_map_shaped_like_a_vertex_comes_back_as_it_is(age_store: AGEGraphStore) -> None:
    """Only what AGE annotates as a vertex or an edge is reshaped: a property's value or a parameter that merely
    has the keys ``id``, ``label`` and ``properties`` came back as a made-up vertex (``kind``, ``graph_id``)."""
    lookalike = {"id": "x", "label": "y", "properties": {"k": 1}}
    await age_store.add_entities([Entity(id="a", label="Person", properties={"meta": lookalike})])
    [row] = await age_store.query_cypher("MATCH (n {id: 'a'}) RETURN n.meta AS m, {v: n} AS wrapped, n AS n")
    assert row["m"] == lookalike
    assert row["n"]["kind"] == "vertex" and row["n"]["properties"] == {"meta": lookalike}
    assert row["wrapped"]["v"]["kind"] == "vertex" and row["wrapped"]["v"]["id"] == "a"
    assert await age_store.query_cypher("RETURN $x AS x", {"x": [lookalike]}) == [{"x": [lookalike]}]


async def test_a_numeric_comes_back_with_every_digit(age_store: AGEGraphStore) -> None:
    """A ``numeric`` came back as a float: its 31 significant digits were cut to 17."""
    [row] = await age_store.query_cypher(
        "RETURN '1.123456789012345678901234567890'::numeric AS d, '123456789012345678901234567890'::numeric AS big, "
        "{m: ['-1.50'::numeric, 'x::numeric']} AS nested, 'NaN'::numeric AS nan, 1.5 AS f, 7 AS i"
    )
    assert row["d"] == Decimal("1.123456789012345678901234567890") and isinstance(row["d"], Decimal)
    assert row["big"] == Decimal("123456789012345678901234567890")
    assert row["nested"] == {"m": [Decimal("-1.50"), "x::numeric"]} and str(row["nested"]["m"][0]) == "-1.50"
    assert row["nan"].is_nan()
    assert (row["f"], row["i"]) == (1.5, 7) and isinstance(row["f"], float) and isinstance(row["i"], int)
    await age_store.add_entities([Entity(id="a", label="Person")])
    [row] = await age_store.query_cypher(
        "MATCH (n {id: 'a'}) SET n.w = '0.100000000000000000001'::numeric RETURN n AS n, n.w AS w"
    )
    assert row["w"] == row["n"]["properties"]["w"] == Decimal("0.100000000000000000001")


async def test_a_numeric_read_back_is_accepted_as_a_parameter_exactly(age_store: AGEGraphStore) -> None:
    """``query_cypher`` returns a ``numeric`` as a ``Decimal``, but a ``Decimal`` parameter was refused ("Decimal is
    not a JSON value"): it now goes in as that ``numeric``, every digit and its trailing zeros kept."""
    await age_store.add_entities([Entity(id="a", label="Person")])
    [row] = await age_store.query_cypher(
        "MATCH (n {id: 'a'}) SET n.w = '0.100000000000000000001'::numeric RETURN n.w AS w"
    )
    assert isinstance(row["w"], Decimal)
    [back] = await age_store.query_cypher(
        "MATCH (n {id: 'a'}) WHERE n.w = $w SET n.v = $w RETURN n.v AS v, $m AS m, $big + 1 AS sum",
        {
            "w": row["w"],
            "m": {"xs": [Decimal("-1.50"), Decimal("1E+40"), Decimal("1.5E-30")], "plain": 1.5},
            "big": Decimal("123456789012345678901234567890"),
        },
    )
    assert back["v"] == Decimal("0.100000000000000000001") and isinstance(back["v"], Decimal)
    assert back["m"]["xs"] == [Decimal("-1.50"), Decimal("1E+40"), Decimal("1.5E-30")]
    assert str(back["m"]["xs"][0]) == "-1.50" and back["m"]["plain"] == 1.5
    assert back["sum"] == Decimal("123456789012345678901234567891")


@pytest.mark.parametrize("value", [Decimal("NaN"), Decimal("sNaN"), Decimal("Infinity"), Decimal("-Infinity")])
async def test_a_decimal_that_is_not_finite_is_refused_as_a_parameter(age_store: AGEGraphStore, value: Decimal) -> None:
    with pytest.raises(InvalidArgument, match="NaN and infinities") as info:
        await age_store.query_cypher("RETURN $p AS p", {"p": {"xs": [1, value]}})
    assert info.value.field == "params.p.xs[1]"


async def test_an_integer_literal_past_64_bits_is_refused(age_store: AGEGraphStore) -> None:
    """AGE reads such a literal as a float, so it came back changed (even cast to ``numeric``)."""
    for query in ("RETURN 123456789012345678901234567890::numeric AS n", "RETURN 9223372036854775808 AS n"):
        with pytest.raises(InvalidArgument, match="past 64 bits"):
            await age_store.query_cypher(query)
    assert await age_store.query_cypher("RETURN -9223372036854775808 AS a, 9223372036854775807 AS b") == [
        {"a": -(2**63), "b": 2**63 - 1}
    ]


def test_oversized_integers_are_read_outside_strings_and_comments() -> None:
    assert oversized_integers("RETURN 123456789012345678901234567890, 0x1FFFFFFFFFFFFFFFF AS h") == [
        "123456789012345678901234567890",
        "0x1FFFFFFFFFFFFFFFF",
    ]
    quiet = (
        "RETURN '123456789012345678901234567890' AS s, `99999999999999999999` AS b, n99999999999999999999 AS n, "
        "1.99999999999999999999 AS f, 1e99999999999999999999 AS e, -9223372036854775808 AS m "
        "// 99999999999999999999\n /* 99999999999999999999 */"
    )
    assert oversized_integers(quiet) == []


def test_a_literal_after_a_subtraction_is_not_read_as_negative() -> None:
    """Only a unary minus makes ``9223372036854775808`` AGE's smallest integer: ``n-9223372036854775808``
    subtracts a literal AGE reads as a float, and was let through (it came back as ``-9.223372036854776e+18``)."""
    for subtraction in (
        "RETURN 1-9223372036854775808 AS x",
        "WITH 5 AS n RETURN n -9223372036854775808 AS x",
        "RETURN [1]-9223372036854775808 AS x",
        "RETURN 'a'-9223372036854775808 AS x",
        "RETURN `return`-9223372036854775808 AS x",
    ):
        assert oversized_integers(subtraction) == ["9223372036854775808"], subtraction
    for negation in (
        "RETURN -9223372036854775808 AS x",
        "RETURN 2*-9223372036854775808 AS x",
        "UNWIND [1, -9223372036854775808] AS v RETURN v AS v",
        "RETURN CASE WHEN true THEN -9223372036854775808 END AS x",
        "RETURN /* the smallest */ -9223372036854775808 AS x",
    ):
        assert oversized_integers(negation) == [], negation


async def test_a_subtraction_of_a_literal_past_64_bits_is_refused(age_store: AGEGraphStore) -> None:
    with pytest.raises(InvalidArgument, match="past 64 bits"):
        await age_store.query_cypher("WITH 5 AS n RETURN n-9223372036854775808 AS x")
    assert await age_store.query_cypher("RETURN [1, -9223372036854775808] AS x") == [{"x": [1, -(2**63)]}]


async def test_a_backslash_in_a_backticked_name_escapes_nothing(age_store: AGEGraphStore) -> None:
    """In Cypher a backslash escapes in strings only: a name ending in one (`` `a\\` ``) was read as going on to
    the end of the query, so its RETURN was not seen and the query's rows came back as ``[]``, and a literal past
    64 bits after it was not refused."""
    query = "WITH 1 AS `a\\` RETURN 5 AS n, `a\\` AS a"
    assert return_columns(query) == ["n", "a"]
    assert await age_store.query_cypher(query) == [{"n": 5, "a": 1}]
    assert oversized_integers("WITH 1 AS `a\\` RETURN 99999999999999999999 AS n") == ["99999999999999999999"]
    assert return_columns("RETURN 'it\\'s, here' AS s, 2 AS t") == ["s", "t"]


async def test_a_relationship_added_while_an_end_is_deleted_never_outlives_it(age_dsn: str, age_graph: str) -> None:
    """``add_relationships`` checked that both ends exist, then wrote its edges, while a ``delete_entity`` of an end
    (from another store, or process) ran between: the edge was written after the ``DETACH DELETE`` had removed the
    ones it saw, and pointed at a vertex that no longer existed, invisible to every read and left behind by
    ``forget``, the agent's properties on it. Each race now either adds the relationship before the delete (which
    removes it) or refuses it with ``NotFound``; no edge is left without its vertices, and forget erases all."""
    import asyncpg

    async for writer in servers.age_graph(age_dsn, age_graph, where="this PostgreSQL (set RAVI_TEST_AGE_DSN)"):
        async for deleter in servers.age_graph(age_dsn, age_graph, where="this PostgreSQL"):
            for i in range(40):
                await writer.add_entities([Entity(id="a", properties={"agent_id": "ag"}), Entity(id="b")])
                relationship = Relationship(
                    id=f"r{i}", source_id="a", target_id="b", type="T", properties={"agent_id": "ag"}
                )
                added, _ = await asyncio.gather(
                    writer.add_relationships([relationship]), deleter.delete_entity("a"), return_exceptions=True
                )
                assert added is None or isinstance(added, NotFound), added
            connection = await asyncpg.connect(age_dsn)
            try:
                await connection.execute("LOAD 'age'; SET search_path = ag_catalog, public")
                dangling = await connection.fetchval(
                    f'SELECT count(*) FROM "{age_graph}"._ag_label_edge e WHERE NOT EXISTS '
                    f'(SELECT 1 FROM "{age_graph}"._ag_label_vertex v WHERE v.id = e.start_id)'
                )
            finally:
                await connection.close()
            assert dangling == 0
