"""The knowledge graph (004): ``Entity``, ``Relationship``, ``SubGraph``, ``GraphStore`` and ``CypherCapable``."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Protocol, runtime_checkable

from pydantic import AfterValidator, Field

from ravi.kernel.errors import InvalidArgument
from ravi.kernel.messages import FrozenDict, ReadOnlyDict
from ravi.kernel.storage._common import _FROZEN, JSON, _new_id
from ravi.kernel.values import MAX_DEPTH, Value, check_ids

MAX_NAME_LENGTH = 63
"""The most characters of an entity's label or a relationship's type: PostgreSQL's longest name, which Apache AGE
names a label's table by."""

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def check_name(value: str, what: str = "a name") -> str:
    """``value`` if it is a name every graph store keeps as a label or a relationship type, else
    ``InvalidArgument`` naming it as ``what``: a plain identifier (ASCII letters, digits and underscores, not
    starting with a digit) of at most :data:`MAX_NAME_LENGTH` characters, not starting with ``_ag_`` (Apache AGE's
    own tables are named so)."""
    if not isinstance(value, str):
        raise InvalidArgument(f"{what} must be a string, got {type(value).__name__}")
    if not _NAME.fullmatch(value) or len(value) > MAX_NAME_LENGTH:
        raise InvalidArgument(
            f"{what} {value[:80]!r} is not a name every graph store keeps: use at most {MAX_NAME_LENGTH} ASCII "
            "letters, digits and underscores, not starting with a digit"
        )
    if value[:4].lower() == "_ag_":
        raise InvalidArgument(f"{what} {value!r} is reserved: Apache AGE names its own tables _ag_...")
    return value


def _label(value: str) -> str:
    return check_name(value, "a label")


def _type(value: str) -> str:
    return check_name(value, "a relationship type")


INT64 = range(-(2**63), 2**63)
"""The integers a graph property holds: 64-bit, as graph databases keep them (Apache AGE, Neo4j)."""


def _int64(value: Any, where: str = "", depth: int = 0) -> Any:
    """``value`` when every integer in it is 64-bit; else ``ValueError`` naming where. What nests deeper than
    JSON may is left to the value's check, which refuses it."""
    if isinstance(value, int) and not isinstance(value, bool):
        # compared, not ``in INT64``: a range walks every integer for an int subclass (an IntEnum)
        if not INT64.start <= value < INT64.stop:
            raise ValueError(f"{where or 'a value'}: {int(value)} is past 64 bits, which graph databases do not hold")
    elif depth >= MAX_DEPTH:
        return value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            _int64(item, f"{where}.{key}" if where else str(key), depth + 1)
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            _int64(item, f"{where}[{i}]", depth + 1)
    return value


def _no_id(value: Mapping[str, Any]) -> Mapping[str, Any]:
    if "id" in value:
        raise ValueError(
            "the property name 'id' is reserved: graph databases keep the entity's or relationship's id there"
        )
    return value


GraphProperties = Annotated[ReadOnlyDict, AfterValidator(_int64), AfterValidator(_no_id)]
"""An entity's or relationship's properties: JSON whose integers are 64-bit (:data:`INT64`), without the name
``id``, which graph databases keep the id under."""


class Entity(Value):
    """A node of the knowledge graph."""

    model_config = _FROZEN
    ID_FIELDS = ("id",)

    id: str = Field(min_length=1)
    label: Annotated[str, AfterValidator(_label)] = "Entity"
    """A name (:func:`check_name`). Fixed once the entity is stored: to give it another, delete it first."""
    properties: GraphProperties = Field(default_factory=FrozenDict)


class Relationship(Value):
    """A directed, typed edge between two entities."""

    model_config = _FROZEN
    ID_FIELDS = ("id", "source_id", "target_id")

    id: str = Field(default_factory=_new_id, min_length=1)
    source_id: str = Field(min_length=1)
    target_id: str = Field(min_length=1)
    type: Annotated[str, AfterValidator(_type)]
    """A name (:func:`check_name`); a graph's relationship types and entity labels never share one."""
    properties: GraphProperties = Field(default_factory=FrozenDict)


class SubGraph(Value):
    """A part of the graph: entities and the relationships among them."""

    model_config = _FROZEN

    entities: tuple[Entity, ...] = ()
    relationships: tuple[Relationship, ...] = ()

    def entity_ids(self) -> set[str]:
        """The ids of the entities."""
        return {e.id for e in self.entities}


@runtime_checkable
class GraphStore(Protocol):
    """Entities and relationships, explored by neighbourhood."""

    async def add_entities(self, entities: Sequence[Entity]) -> None:
        """Insert or replace entities by id."""
        ...

    async def add_relationships(self, relationships: Sequence[Relationship]) -> None:
        """Insert or replace relationships by id; both ends must exist (``NotFound`` otherwise)."""
        ...

    async def get_entity(self, entity_id: str) -> Entity | None:
        """One entity by id, or ``None``."""
        ...

    async def get_neighbors(
        self, entity_id: str, *, depth: int = 1, relationship_types: Sequence[str] | None = None
    ) -> SubGraph:
        """The entities within ``depth`` hops of ``entity_id`` (either direction), itself included, and the
        relationships walked to reach them; only relationships of ``relationship_types`` when given. The entity
        comes first, then the entities one hop away, then two, each hop's by id; the relationships by id."""
        ...

    async def delete_entity(self, entity_id: str) -> bool:
        """Remove an entity and every relationship touching it; ``False`` if it did not exist."""
        ...

    async def delete_relationship(self, relationship_id: str) -> bool:
        """Remove one relationship; ``False`` if it did not exist."""
        ...


@runtime_checkable
class CypherCapable(Protocol):
    """A graph store that also runs openCypher queries."""

    async def query_cypher(self, query: str, params: Mapping[str, JSON] | None = None) -> list[dict[str, Any]]:
        """Run ``query`` with ``params`` bound (never pasted into the text); rows as plain Python values."""
        ...


def check_relationship_types(types: Sequence[str] | None) -> list[str] | None:
    """``relationship_types`` as a list (``None`` stays ``None``) of names (:func:`check_name`); a bare string is
    refused, not split."""
    if types is None:
        return None
    out = check_ids(types, "relationship_types")
    for i, name in enumerate(out):
        check_name(name, f"relationship_types[{i}]")
    return out


__all__ = [
    "INT64",
    "MAX_NAME_LENGTH",
    "CypherCapable",
    "Entity",
    "GraphProperties",
    "GraphStore",
    "Relationship",
    "SubGraph",
    "check_name",
    "check_relationship_types",
]
