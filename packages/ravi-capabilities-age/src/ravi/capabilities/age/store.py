"""``AGEGraphStore``: a knowledge graph in PostgreSQL with Apache AGE, with openCypher for everything else."""

from __future__ import annotations

import contextlib
import hashlib
import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any, Unpack

import asyncpg

from ravi.capabilities.age.agtype import check_params, dumps, parse
from ravi.capabilities.age.cypher import oversized_integers, return_columns
from ravi.capabilities.age.options import AGEOptions
from ravi.capabilities.postgres._db import ConnectionOptions, Database
from ravi.kernel.errors import ConfigurationError, InvalidArgument, NotFound, RaviError
from ravi.kernel.storage import Entity, Relationship, SubGraph, check_forget, check_relationship_types
from ravi.kernel.values import check_count, check_items, check_scope, check_text

_GRAPH = re.compile(r"^[a-z_][a-z0-9_]{2,62}$")
_LABEL = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")
_QUOTE = "$ravi_cypher$"


def _label(value: str, what: str) -> str:
    if not isinstance(value, str) or not _LABEL.match(value):
        raise InvalidArgument(
            f"{what} {value!r} is not valid in AGE",
            hint="use letters, digits and underscores, starting with a letter or underscore",
        )
    if value.lower().startswith("_ag_"):
        raise InvalidArgument(f"{what} {value!r} is reserved: AGE names its own tables _ag_...")
    return value


def _translate(error: BaseException) -> RaviError | None:
    """AGE's own readings of a driver error, before the Postgres layer's common ones."""
    if isinstance(error, asyncpg.exceptions.InsufficientPrivilegeError):
        return None  # a permission, not a query: the common mapping says PermissionDenied
    if isinstance(error, asyncpg.exceptions.UndefinedFileError):
        return ConfigurationError(
            f"Apache AGE is not installed on the server: {error}",
            hint="install the age extension (docker-compose.yml has an image with it)",
        )
    if isinstance(error, asyncpg.exceptions.DataError | asyncpg.exceptions.UntranslatableCharacterError):
        return InvalidArgument(f"AGE refused a value: {error}")
    if isinstance(error, asyncpg.exceptions.SyntaxOrAccessError | asyncpg.exceptions.FeatureNotSupportedError):
        return InvalidArgument(f"the Cypher query was refused: {error}")
    return None


_NAME_BYTES = 63
"""The longest name PostgreSQL keeps; it cuts a longer one to this."""


def _index_name(label: str, what: str) -> str:
    """The name of the index ``what`` the store makes on ``label``'s table, in the graph's schema where every
    label's table is too: never a label's name (a label has no ``:``), and never cut by PostgreSQL (a long label's
    name, cut, was the label itself, and no index was made). A label too long to be named in full is named by its
    start and a digest of the whole."""
    name = f"{label}:ravi_{what}"
    if len(name) <= _NAME_BYTES:  # a label is ASCII: characters are bytes
        return name
    tail = f":ravi_{what}:{hashlib.sha256(label.encode()).hexdigest()[:16]}"
    return label[: _NAME_BYTES - len(tail)] + tail


_SETTINGS = {"search_path": 'ag_catalog, "$user", public'}


async def _setup(connection: asyncpg.Connection) -> None:
    await connection.execute("LOAD 'age'")
    await connection.execute('SET search_path = ag_catalog, "$user", public')
    await connection.set_type_codec("agtype", schema="ag_catalog", encoder=str, decoder=str, format="text")


class AGEGraphStore:
    """The ``GraphStore`` and ``CypherCapable`` contracts on PostgreSQL with Apache AGE.

    Entities are vertices labelled with ``Entity.label``, relationships edges typed with
    ``Relationship.type``; each keeps Ravi's id in its ``id`` property (so ``id`` is reserved in properties),
    and labels must be plain identifiers. The graph is created on first use; every pooled connection loads AGE
    and sets its search path. Every value travels as a parameter (an agtype map bound to the statement), never
    in the query text, and results come back as plain Python values.

    Args:
        dsn: ``postgresql://...`` of a server with the ``age`` extension.
        graph: The graph's name (created if missing).
        min_size, max_size, command_timeout (60 s here), connect_timeout, statement_cache_size: the connection
            options of every Postgres store (``ConnectionOptions``). AGE is a Postgres extension, so this store
            builds on the Postgres capability's connection layer: its pool (shared with AGE stores of the same
            server and options), its error mapping and its options.

    Behind PgBouncer in transaction mode, a connection's session settings do not follow it from one
    transaction to the next, so the database must load AGE and set the search path itself:
    ``ALTER DATABASE db SET session_preload_libraries = 'age'`` and
    ``ALTER DATABASE db SET search_path = ag_catalog, "$user", public``, with ``ignore_startup_parameters =
    search_path`` in PgBouncer's configuration.
    """

    Options = AGEOptions
    """The store's options model (types, documentation, defaults), for configuration and keyword arguments."""

    def __init__(self, dsn: str, *, graph: str = "ravi_graph", **options: Unpack[ConnectionOptions]) -> None:
        AGEOptions.check(dsn=dsn, graph=graph, **options)
        if not _GRAPH.match(graph):
            raise ConfigurationError(
                f"graph name {graph!r} is not valid", hint="3-63 lower-case letters, digits and underscores"
            )
        options.setdefault("command_timeout", 60.0)
        self.graph = graph
        # search_path as a startup setting: the pool's RESET ALL on release keeps it
        self.db = Database(
            dsn, init=_setup, prepare=self._prepare, server_settings=_SETTINGS, translate=_translate, **options
        )
        self.dsn = self.db.dsn
        self._indexed: set[tuple[str, str]] = set()

    async def __aenter__(self) -> AGEGraphStore:
        await self.db.pool()
        return self

    async def __aexit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        await self.close()

    async def destroy(self) -> None:
        """Drop the whole graph and everything in it; the next use creates it again. For tests and throwaway
        data: the conformance runner calls it after each test."""
        async with self._connection() as connection:
            exists = await connection.fetchval("SELECT true FROM ag_catalog.ag_graph WHERE name = $1", self.graph)
            if exists:
                await connection.execute("SELECT ag_catalog.drop_graph($1, true)", self.graph)
        self._indexed.clear()
        self.db.prepare_again()
        await self.close()

    async def aclose(self) -> None:
        """The same as :meth:`close`; safe to call again."""
        await self.close()

    async def close(self) -> None:
        """Release the connection pool (shared with other stores on the server; closed with its last user)."""
        await self.db.close()

    async def _prepare(self, connection: asyncpg.Connection) -> None:
        """Before the pool opens: the extension and the graph, made once however many processes start."""
        async with connection.transaction():
            await connection.execute("SELECT pg_advisory_xact_lock(hashtext('ravi-age'))")
            await connection.execute("CREATE EXTENSION IF NOT EXISTS age")
            await _setup(connection)
            exists = await connection.fetchval("SELECT true FROM ag_catalog.ag_graph WHERE name = $1", self.graph)
            if not exists:
                taken = await connection.fetchval(
                    "SELECT true FROM pg_catalog.pg_namespace WHERE nspname = $1", self.graph
                )
                if taken:  # AGE keeps a graph in a schema of its name: create_graph would fail on every call
                    raise ConfigurationError(
                        f"graph {self.graph!r} cannot be created: the database has a schema named {self.graph!r} "
                        "already, and AGE keeps each graph in a schema of its name",
                        hint="give graph= a name no schema of the database has (the default is ravi_graph)",
                    )
                await connection.execute("SELECT ag_catalog.create_graph($1)", self.graph)

    def _connection(self) -> contextlib.AbstractAsyncContextManager[asyncpg.Connection]:
        return self.db.connection()

    def _sql(self, query: str, columns: int, with_params: bool) -> str:
        if _QUOTE in query:
            raise InvalidArgument(f"a Cypher query must not contain {_QUOTE}")
        if "\x00" in query:
            raise InvalidArgument("a Cypher query cannot contain a NUL character")
        cols = ", ".join(f"c{i} ag_catalog.agtype" for i in range(max(1, columns)))
        params = ", $1" if with_params else ""
        return f"SELECT * FROM ag_catalog.cypher('{self.graph}', {_QUOTE} {query} {_QUOTE}{params}) AS ({cols})"

    async def _run(
        self, connection: asyncpg.Connection, query: str, params: Mapping[str, Any] | None, columns: int = 1
    ) -> list[list[Any]]:
        sql = self._sql(query, columns, params is not None)
        args = [dumps(params)] if params is not None else []
        rows = await connection.fetch(sql, *args)
        return [[parse(r[i]) for i in range(max(1, columns))] for r in rows]

    async def _lock_ids(self, connection: asyncpg.Connection, kind: str, ids: Sequence[str]) -> None:
        """Serialise writers of the same ids until this transaction ends, so concurrent inserts of one id make
        one vertex (edge), not several: AGE has no unique constraint across labels. Locks are taken in one
        order, so two writers of overlapping batches cannot deadlock."""
        await connection.execute(
            "SELECT pg_advisory_xact_lock(k) FROM (SELECT DISTINCT hashtextextended($1 || x, 0) AS k "
            "FROM unnest($2::text[]) AS x ORDER BY k) AS keys",
            f"ravi-age:{self.graph}:{kind}:",
            list(ids),
        )

    async def _ensure_labels(self, connection: asyncpg.Connection, labels: Sequence[str], kind: str) -> list[str]:
        """Make the labels this store has not made yet, with the indexes AGE does not make itself, before the
        transaction writes with them; returns those labels, to be marked made once the transaction commits.

        AGE makes a label's table on its first use, and two transactions using a new label at once both try (one
        fails with "relation already exists"; so can ``CREATE INDEX IF NOT EXISTS``). So each new label is
        made under a lock of its own, held until this transaction ends, taken in one order so that two writers
        of overlapping labels cannot deadlock: the others wait, then find it made. The indexes: a vertex label's
        ``id`` property (for ``n.id = ...`` lookups) and an edge label's endpoints (for walking from a vertex),
        so a neighbourhood query does not scan, named by :func:`_index_name`."""
        new = sorted({label for label in labels if (label, kind) not in self._indexed})
        if not new:
            return []
        await connection.execute(
            "SELECT pg_advisory_xact_lock(k) FROM (SELECT DISTINCT hashtextextended($1 || x, 0) AS k "
            "FROM unnest($2::text[]) AS x ORDER BY k) AS keys",
            f"ravi-age:{self.graph}:label:",
            new,
        )
        made = {
            row["name"]: row["kind"]
            for row in await connection.fetch(
                "SELECT l.name::text AS name, l.kind::text AS kind FROM ag_catalog.ag_label l "
                "JOIN ag_catalog.ag_graph g ON l.graph = g.graphid WHERE g.name = $1 AND l.name = ANY($2::text[])",
                self.graph,
                new,
            )
        }
        for label, made_kind in made.items():
            if made_kind != kind[0]:  # AGE keeps labels and types in one namespace
                what, used_as = ("an entity label", "a relationship type")[:: 1 if kind == "vertex" else -1]
                raise InvalidArgument(
                    f"{label!r} cannot be {what}: the graph uses it as {used_as}",
                    hint="give entity labels and relationship types names of their own",
                )
        create = "create_vlabel" if kind == "vertex" else "create_elabel"
        for label in new:
            if label not in made:
                await connection.execute(
                    f"SELECT ag_catalog.{create}($1::text::cstring, $2::text::cstring)", self.graph, label
                )
            table = f'"{self.graph}"."{label}"'
            if kind == "vertex":
                await connection.execute(
                    f'CREATE INDEX IF NOT EXISTS "{_index_name(label, "id")}" ON {table} '
                    "(ag_catalog.agtype_access_operator(properties, '\"id\"'::ag_catalog.agtype))"
                )
            else:
                for what, column in (("start", "start_id"), ("end", "end_id")):
                    await connection.execute(
                        f'CREATE INDEX IF NOT EXISTS "{_index_name(label, what)}" ON {table} ({column})'
                    )
        return new

    async def _analyze_if_large(self, labels: list[str], parent: str, rows: int) -> None:
        """Refresh the planner's statistics after a bulk write, so the indexes are used at once rather than
        after autovacuum gets round to it. AGE plans a label-less MATCH over the parent table: without its
        statistics a neighbourhood query scans, some 20 times slower."""
        if rows >= 1_000:
            tables = ", ".join(f'"{self.graph}"."{t}"' for t in [*labels, parent])
            async with self._connection() as connection:
                await connection.execute(f"ANALYZE {tables}")

    # -- GraphStore ---------------------------------------------------------------------------------------

    async def add_entities(self, entities: Sequence[Entity]) -> None:
        """Insert or replace entities by id (an entity keeps its label and its relationships)."""
        latest: dict[str, Entity] = {}
        for e in check_items(entities, Entity, "entities"):
            latest.pop(e.id, None)
            latest[e.id] = e  # an id given twice: the last one wins, as if added one after the other
        entities = list(latest.values())
        by_label: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for e in entities:
            if "id" in e.properties:
                raise InvalidArgument(f"entity {e.id!r}: the property name 'id' is reserved for the entity id")
            by_label[_label(e.label, "label")].append({**dict(e.properties), "id": e.id})
        if not by_label:
            return
        async with self._connection() as connection, connection.transaction():
            ids = [e.id for e in entities]
            await self._lock_ids(connection, "v", ids)
            rows = await self._run(connection, "MATCH (n) WHERE n.id IN $ids RETURN n", {"ids": ids})
            for [vertex] in rows:
                wanted = next(e.label for e in entities if e.id == vertex["id"])
                if vertex["label"] != wanted:
                    raise InvalidArgument(
                        f"entity {vertex['id']!r} is a {vertex['label']}; AGE cannot relabel it",
                        hint="delete the entity first, then add it with its new label",
                    )
            made = await self._ensure_labels(connection, list(by_label), "vertex")
            for label, items in by_label.items():
                await self._run(
                    connection, f"UNWIND $rows AS row MERGE (n:{label} {{id: row.id}}) SET n = row", {"rows": items}
                )
        self._indexed.update((label, "vertex") for label in made)
        await self._analyze_if_large(list(by_label), "_ag_label_vertex", len(entities))

    async def add_relationships(self, relationships: Sequence[Relationship]) -> None:
        """Insert or replace relationships by id; both ends must exist (``NotFound``, nothing added)."""
        given = check_items(relationships, Relationship, "relationships")
        for r in given:  # every one given is checked, also one a later one of its id replaces
            if "id" in r.properties:
                raise InvalidArgument(f"relationship {r.id!r}: the property name 'id' is reserved for its id")
            _label(r.type, "relationship type")
        ends = sorted({x for r in given for x in (r.source_id, r.target_id)})
        latest: dict[str, Relationship] = {}
        for r in given:
            latest.pop(r.id, None)
            latest[r.id] = r  # an id given twice: the last one wins
        relationships = list(latest.values())
        by_type: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for r in relationships:
            # the ends beside the properties, not among them: every property name but id is the caller's
            by_type[r.type].append({"p": {**dict(r.properties), "id": r.id}, "s": r.source_id, "t": r.target_id})
        if not by_type:
            return
        async with self._connection() as connection, connection.transaction():
            await self._lock_ids(connection, "e", [r.id for r in relationships])
            # the ends too, as a delete of one takes its id's lock: a delete that ran between the check below and
            # the write left the new edge pointing at a vertex no longer there, invisible and never forgotten
            await self._lock_ids(connection, "v", ends)
            found = {
                row[0] for row in await self._run(connection, "MATCH (n) WHERE n.id IN $ids RETURN n.id", {"ids": ends})
            }
            missing = [x for x in ends if x not in found]
            if missing:
                raise NotFound(
                    f"relationships refer to unknown entities: {', '.join(map(repr, missing[:5]))}",
                    hint="add the entities first",
                )
            await self._run(
                connection, "MATCH ()-[r]->() WHERE r.id IN $ids DELETE r", {"ids": [r.id for r in relationships]}
            )
            made = await self._ensure_labels(connection, list(by_type), "edge")
            for rel_type, items in by_type.items():
                await self._run(
                    connection,
                    # SET takes a map named by a variable, not a map's field: hence the WITH
                    f"UNWIND $rows AS row WITH row, row.p AS p MATCH (a), (b) WHERE a.id = row.s AND b.id = row.t "
                    f"CREATE (a)-[r:{rel_type}]->(b) SET r = p",
                    {"rows": items},
                )
        self._indexed.update((label, "edge") for label in made)
        await self._analyze_if_large(list(by_type), "_ag_label_edge", len(relationships))

    async def get_entity(self, entity_id: str) -> Entity | None:
        """One entity by id, or ``None``."""
        check_scope(entity_id=entity_id)
        async with self._connection() as connection:
            rows = await self._run(connection, "MATCH (n) WHERE n.id = $id RETURN n", {"id": entity_id})
        return self._entity(rows[0][0]) if rows else None

    @staticmethod
    def _entity(vertex: Mapping[str, Any]) -> Entity:
        return Entity(id=vertex["id"], label=vertex["label"], properties=vertex["properties"])

    async def get_neighbors(
        self, entity_id: str, *, depth: int = 1, relationship_types: Sequence[str] | None = None
    ) -> SubGraph:
        """Breadth-first, both directions, up to ``depth`` hops: one query per hop, touching only the frontier. The
        entity comes first, then each hop's entities by id, and the relationships by id."""
        check_scope(entity_id=entity_id)
        depth = check_count(depth, "depth")  # a bool is not a count, as everywhere one is given
        checked = check_relationship_types(relationship_types)
        types = None if checked is None else [_label(t, "relationship type") for t in checked]
        async with self._connection() as connection:
            start = await self._run(connection, "MATCH (n) WHERE n.id = $id RETURN n", {"id": entity_id})
            if not start:
                raise NotFound(f"no entity {entity_id!r}")
            entities = {entity_id: self._entity(start[0][0])}
            order = [entity_id]
            walked: dict[str, Relationship] = {}
            frontier = [entity_id]
            type_filter = " AND label(r) IN $types" if types is not None else ""
            for _ in range(depth):
                if not frontier:
                    break
                rows = await self._run(
                    connection,
                    # one arm per direction, each served by the id and endpoint indexes
                    f"MATCH (s)-[r]->(t) WHERE s.id IN $ids{type_filter} RETURN s, r, t UNION "
                    f"MATCH (s)-[r]->(t) WHERE t.id IN $ids{type_filter} RETURN s, r, t",
                    {"ids": frontier, "types": types or []},
                    columns=3,
                )
                following = []
                for s, r, t in rows:
                    walked[r["id"]] = Relationship(
                        id=r["id"], source_id=s["id"], target_id=t["id"], type=r["type"], properties=r["properties"]
                    )
                    for vertex in (s, t):
                        if vertex["id"] not in entities:
                            entities[vertex["id"]] = self._entity(vertex)
                            following.append(vertex["id"])
                following.sort()  # each hop's entities by id, not in the order the query found them
                order += following
                frontier = following
        return SubGraph(
            entities=tuple(entities[i] for i in order), relationships=tuple(walked[k] for k in sorted(walked))
        )

    async def delete_entity(self, entity_id: str) -> bool:
        """Remove an entity and every relationship touching it (``DETACH DELETE``), under its id's lock, so a
        relationship being added to it lands first (and goes with it) or finds it gone (``NotFound``)."""
        check_scope(entity_id=entity_id)
        async with self._connection() as connection, connection.transaction():
            await self._lock_ids(connection, "v", [entity_id])
            rows = await self._run(connection, "MATCH (n) WHERE n.id = $id DETACH DELETE n RETURN 1", {"id": entity_id})
        return bool(rows)

    async def delete_relationship(self, relationship_id: str) -> bool:
        """Remove one relationship."""
        check_scope(relationship_id=relationship_id)
        async with self._connection() as connection:
            rows = await self._run(
                connection, "MATCH ()-[r]->() WHERE r.id = $id DELETE r RETURN 1", {"id": relationship_id}
            )
        return bool(rows)

    async def forget(self, agent_id: str, *, session_id: str | None = None) -> int:
        """Erase every relationship whose properties have ``agent_id`` (and ``session_id``) of the scope, every
        entity whose properties do, and every relationship touching one (``Forgetter``), in one transaction;
        returns how many entities and relationships."""
        check_forget(agent_id, session_id)
        params = {"a": agent_id} if session_id is None else {"a": agent_id, "s": session_id}

        def where(x: str) -> str:
            return f"{x}.agent_id = $a" + ("" if session_id is None else f" AND {x}.session_id = $s")

        removed = 0
        async with self._connection() as connection, connection.transaction():
            # the scope's entities under their ids' locks, as delete_entity: no relationship being added to one
            # is written after it is gone
            doomed = await self._run(connection, f"MATCH (n) WHERE {where('n')} RETURN n.id", params)
            await self._lock_ids(connection, "v", [str(row[0]) for row in doomed])
            for query in (
                f"MATCH ()-[r]->() WHERE {where('r')} DELETE r RETURN 1",
                f"MATCH (n)-[r]->() WHERE {where('n')} DELETE r RETURN 1",
                f"MATCH ()-[r]->(n) WHERE {where('n')} DELETE r RETURN 1",
                f"MATCH (n) WHERE {where('n')} DELETE n RETURN 1",
            ):
                removed += len(await self._run(connection, query, params))
        return removed

    # -- CypherCapable --------------------------------------------------------------------------------------

    async def query_cypher(self, query: str, params: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        """Run an openCypher query on the graph with ``params`` bound as an agtype map (never pasted into the
        text); rows as dicts of plain Python values keyed by the ``RETURN`` aliases. A ``numeric`` comes back as
        a ``Decimal`` with every digit AGE keeps, and a ``Decimal`` parameter goes in as that ``numeric``, exactly.

        Raises:
            InvalidArgument: the query is refused by AGE, uses ``RETURN *`` (name the columns instead), or has an
                integer literal past 64 bits (AGE would read it as a float; write ``'...'::numeric`` instead); or
                ``params`` is not JSON or finite ``Decimal`` values (a NaN or infinite ``Decimal`` is refused).
        """
        if not isinstance(query, str) or not query.strip():
            raise InvalidArgument("query must be a non-empty string")
        check_text(query, "query")
        names = return_columns(query)
        if names == ["*"]:
            raise InvalidArgument("RETURN * is not supported: AGE needs the columns named")
        oversized = oversized_integers(query)
        if oversized:
            raise InvalidArgument(
                f"the integer {oversized[0]} in the query is past 64 bits, which AGE would read as a float",
                hint=f"write it as a string cast to numeric, '{oversized[0]}'::numeric, to keep every digit",
            )
        if len(set(names)) != len(names):
            raise InvalidArgument(
                f"the query returns two columns with one name ({', '.join(names)})", hint="give each column an alias"
            )
        if params is not None and not isinstance(params, Mapping):
            raise InvalidArgument("params must be a mapping")
        if params is not None:
            check_params(params)
        async with self._connection() as connection:
            rows = await self._run(connection, query, dict(params) if params is not None else None, columns=len(names))
        if not names:
            return []
        return [dict(zip(names, row, strict=True)) for row in rows]


__all__ = ["AGEGraphStore"]
