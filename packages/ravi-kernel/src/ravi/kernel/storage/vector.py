"""Vectors (004): ``Document``, ``SearchResult`` and the ``VectorStore`` Protocol, with metadata filters."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol, runtime_checkable

from pydantic import Field

from ravi.kernel.messages import FrozenDict, ReadOnlyDict
from ravi.kernel.storage._common import _FROZEN, JSON, Filter, _new_id
from ravi.kernel.values import Value


class Document(Value):
    """A piece of content with its embedding and metadata, stored by ``(collection, id)``."""

    model_config = _FROZEN

    id: str = Field(default_factory=_new_id, min_length=1)
    content: str = ""
    embedding: tuple[float, ...] | None = None
    metadata: ReadOnlyDict = Field(default_factory=FrozenDict)


class SearchResult(Value):
    """A search hit. ``score`` is a similarity: higher is closer (cosine similarity, in [-1, 1]).

    004 names its fields ``id``, ``content``, ``score`` and ``metadata``: the first, second and last are the
    matched document's.
    """

    model_config = _FROZEN

    document: Document
    score: float

    @property
    def id(self) -> str:
        """The matched document's id."""
        return self.document.id

    @property
    def content(self) -> str:
        """The matched document's content."""
        return self.document.content

    @property
    def metadata(self) -> ReadOnlyDict:
        """The matched document's metadata."""
        return self.document.metadata


@runtime_checkable
class VectorStore(Protocol):
    """Documents with embeddings, searched by cosine similarity within a collection."""

    async def add(self, documents: Sequence[Document], *, collection: str) -> list[str]:
        """Insert documents whose id is not yet in the collection (others are left as they are); returns ids."""
        ...

    async def upsert(self, documents: Sequence[Document], *, collection: str) -> list[str]:
        """Insert or replace documents by id; returns ids."""
        ...

    async def search(
        self,
        query_embedding: Sequence[float],
        *,
        collection: str = "default",
        limit: int = 5,
        filter: Filter | None = None,
    ) -> list[SearchResult]:
        """The ``limit`` documents most similar to ``query_embedding``, best first, matching ``filter``."""
        ...

    async def get(self, ids: Sequence[str], *, collection: str) -> list[Document]:
        """The documents with these ids that exist, in the order asked."""
        ...

    async def delete(self, ids: Sequence[str], *, collection: str) -> int:
        """Remove documents by id; returns how many existed."""
        ...

    async def list_collections(self) -> list[str]:
        """The names of the collections, sorted."""
        ...

    async def delete_collection(self, collection: str) -> bool:
        """Remove a collection and its documents; ``False`` if it did not exist."""
        ...


def matches(metadata: Mapping[str, JSON], filter: Filter | None) -> bool:
    """Whether ``metadata`` satisfies ``filter``: each key equal to the value, or to one of a list's values."""
    if not filter:
        return True
    for key, wanted in filter.items():
        if key not in metadata:
            return False
        value = metadata[key]
        if isinstance(wanted, list):
            if value not in wanted:
                return False
        elif value != wanted:
            return False
    return True


__all__ = ["Document", "SearchResult", "VectorStore", "matches"]
