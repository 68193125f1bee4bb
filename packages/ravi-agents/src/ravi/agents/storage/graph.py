"""``InMemoryGraphStore``: entities and relationships with an adjacency index."""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Sequence

from ravi.kernel.closing import Closeable
from ravi.kernel.errors import InvalidArgument, NotFound
from ravi.kernel.options import NoOptions
from ravi.kernel.storage import Entity, Relationship, SubGraph, check_forget, check_relationship_types, in_scope
from ravi.kernel.values import check_count, check_items, check_scope


class InMemoryGraphStore(Closeable):
    """A knowledge graph in process memory.

    Each entity keeps the ids of the relationships that touch it, so ``get_neighbors`` walks only the edges of
    the neighbourhood it returns: its cost grows with the neighbourhood, not with the graph. Not
    ``CypherCapable``: use the AGE backend for openCypher. Each call holds a ``threading.Lock`` and never awaits,
    so tasks of any event loop, in any thread, may share the store.
    """

    Options = NoOptions
    """The store's options model, for configuration."""

    def __init__(self) -> None:
        self._entities: dict[str, Entity] = {}
        self._relationships: dict[str, Relationship] = {}
        self._adjacent: defaultdict[str, set[str]] = defaultdict(set)
        self._labels: set[str] = set()  # every name used as a label, and as a type: as AGE keeps a label's table
        self._types: set[str] = set()
        self._lock = threading.Lock()

    async def add_entities(self, entities: Sequence[Entity]) -> None:
        """Insert or replace entities by id; ``InvalidArgument`` (nothing added) for a stored entity given with
        another label, or a label the graph uses as a relationship type."""
        entities = check_items(entities, Entity, "entities")
        with self._lock:
            for e in entities:
                stored = self._entities.get(e.id)
                if stored is not None and stored.label != e.label:
                    raise InvalidArgument(
                        f"entity {e.id!r} is a {stored.label}; an entity keeps its label",
                        hint="delete the entity first, then add it with its new label",
                    )
                _check_unshared(e.label, self._types, "an entity label", "a relationship type")
            for e in entities:
                self._entities[e.id] = e
                self._labels.add(e.label)

    async def add_relationships(self, relationships: Sequence[Relationship]) -> None:
        """Insert or replace relationships by id; both ends must exist (``NotFound`` otherwise, nothing added)."""
        relationships = check_items(relationships, Relationship, "relationships")
        with self._lock:
            for r in relationships:
                for end in (r.source_id, r.target_id):
                    if end not in self._entities:
                        raise NotFound(
                            f"relationship {r.id!r} refers to unknown entity {end!r}", hint="add the entities first"
                        )
                _check_unshared(r.type, self._labels, "a relationship type", "an entity label")
            for r in relationships:
                self._types.add(r.type)
                old = self._relationships.get(r.id)
                if old is not None:
                    self._adjacent[old.source_id].discard(old.id)
                    self._adjacent[old.target_id].discard(old.id)
                self._relationships[r.id] = r
                self._adjacent[r.source_id].add(r.id)
                self._adjacent[r.target_id].add(r.id)

    async def get_entity(self, entity_id: str) -> Entity | None:
        """One entity by id, or ``None``."""
        check_scope(entity_id=entity_id)
        return self._entities.get(entity_id)

    async def get_neighbors(
        self, entity_id: str, *, depth: int = 1, relationship_types: Sequence[str] | None = None
    ) -> SubGraph:
        """Breadth-first, both directions, up to ``depth`` hops; ``NotFound`` for an unknown entity. The entity
        comes first, then each hop's entities by id, and the relationships by id."""
        check_scope(entity_id=entity_id)
        depth = check_count(depth, "depth")  # a bool is not a count, as everywhere one is given
        checked = check_relationship_types(relationship_types)
        types = None if checked is None else set(checked)
        with self._lock:
            if entity_id not in self._entities:
                raise NotFound(f"no entity {entity_id!r}")
            return self._walk(entity_id, depth, types)

    def _walk(self, entity_id: str, depth: int, types: set[str] | None) -> SubGraph:
        seen = {entity_id}
        order = [entity_id]
        walked: dict[str, Relationship] = {}
        frontier = [entity_id]
        for _ in range(depth):
            following = []
            for node in frontier:
                for rel_id in sorted(self._adjacent.get(node, ())):
                    rel = self._relationships[rel_id]
                    if types is not None and rel.type not in types:
                        continue
                    walked[rel_id] = rel
                    other = rel.target_id if rel.source_id == node else rel.source_id
                    if other not in seen:
                        seen.add(other)
                        following.append(other)
            following.sort()  # each hop's entities by id, as on every store
            order += following
            frontier = following
            if not frontier:
                break
        return SubGraph(
            entities=tuple(self._entities[i] for i in order), relationships=tuple(walked[k] for k in sorted(walked))
        )

    async def delete_entity(self, entity_id: str) -> bool:
        """Remove an entity and every relationship touching it."""
        check_scope(entity_id=entity_id)
        with self._lock:
            return self._drop_entity(entity_id)

    def _drop_entity(self, entity_id: str) -> bool:
        if self._entities.pop(entity_id, None) is None:
            return False
        for rel_id in self._adjacent.pop(entity_id, set()):
            rel = self._relationships.pop(rel_id)
            other = rel.target_id if rel.source_id == entity_id else rel.source_id
            self._adjacent[other].discard(rel_id)
        return True

    async def forget(self, agent_id: str, *, session_id: str | None = None) -> int:
        """Erase every entity whose properties have ``agent_id`` (and ``session_id``) of the scope, with every
        relationship touching it, and every relationship whose own properties place it in the scope
        (``Forgetter``); returns how many entities and relationships."""
        check_forget(agent_id, session_id)
        with self._lock:
            before = len(self._entities) + len(self._relationships)
            for rel in [r for r in self._relationships.values() if in_scope(r.properties, agent_id, session_id)]:
                self._drop_relationship(rel.id)
            for entity in [e for e in self._entities.values() if in_scope(e.properties, agent_id, session_id)]:
                self._drop_entity(entity.id)
            return before - len(self._entities) - len(self._relationships)

    async def delete_relationship(self, relationship_id: str) -> bool:
        """Remove one relationship."""
        check_scope(relationship_id=relationship_id)
        with self._lock:
            return self._drop_relationship(relationship_id)

    def _drop_relationship(self, relationship_id: str) -> bool:
        rel = self._relationships.pop(relationship_id, None)
        if rel is None:
            return False
        self._adjacent[rel.source_id].discard(relationship_id)
        self._adjacent[rel.target_id].discard(relationship_id)
        return True


def _check_unshared(name: str, other: set[str], what: str, used_as: str) -> None:
    """``InvalidArgument`` if ``name``, given as ``what``, is in ``other``, the names the graph uses as
    ``used_as``: graph databases keep labels and types in one namespace (Apache AGE)."""
    if name in other:
        raise InvalidArgument(
            f"{name!r} cannot be {what}: the graph uses it as {used_as}",
            hint="give entity labels and relationship types names of their own",
        )


__all__ = ["InMemoryGraphStore"]
