"""Vectors (004): ``Document``, ``SearchResult`` and the ``VectorStore`` Protocol, with metadata filters."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Protocol, runtime_checkable

from pydantic import AfterValidator, BeforeValidator, Field

from ravi.kernel.messages import ContentBlock, FrozenDict, ReadOnlyDict, TextBlock
from ravi.kernel.storage._common import _FROZEN, JSON, Filter, _new_id
from ravi.kernel.values import MAX_DIMENSIONS, Value


def _blocks(value: Any) -> Any:
    """A plain string is one text block (an empty one, none)."""
    if isinstance(value, str):
        return (TextBlock(text=value),) if value else ()
    return value


def _within_dimensions(embedding: tuple[float, ...] | None) -> tuple[float, ...] | None:
    if embedding is not None and len(embedding) > MAX_DIMENSIONS:
        raise ValueError(f"{len(embedding)} dimensions; every store keeps at most {MAX_DIMENSIONS} (pgvector's limit)")
    return embedding


class Document(Value):
    """A chunk of content (a tuple of content blocks) with its embedding and metadata, stored by
    ``(collection, id)``.

    ``content`` takes content blocks, as chat messages do; a plain string is accepted as one text block.
    ``text`` is what an embedding client embeds when the document comes without an embedding.

    Example:
        >>> Document(id="d1", content="hello").content
        (TextBlock(type='text', text='hello'),)
    """

    model_config = _FROZEN
    ID_FIELDS = ("id",)

    id: str = Field(default_factory=_new_id, min_length=1)
    content: Annotated[tuple[ContentBlock, ...], BeforeValidator(_blocks)] = ()
    embedding: Annotated[tuple[float, ...] | None, AfterValidator(_within_dimensions)] = None
    metadata: ReadOnlyDict = Field(default_factory=FrozenDict)

    @property
    def text(self) -> str:
        """The text blocks joined by newlines (empty when there are none)."""
        return "\n".join(b.text for b in self.content if isinstance(b, TextBlock))


class SearchResult(Value):
    """A search hit: the matched document's ``id``, ``content`` and ``metadata``, and its ``score``, a similarity
    (higher is closer: cosine similarity, in [-1, 1])."""

    model_config = _FROZEN

    id: str = Field(min_length=1)
    content: Annotated[tuple[ContentBlock, ...], BeforeValidator(_blocks)] = ()
    score: float
    metadata: ReadOnlyDict = Field(default_factory=FrozenDict)

    @classmethod
    def of(cls, document: Document, score: float) -> SearchResult:
        """The hit for ``document`` at ``score``."""
        return cls(id=document.id, content=document.content, score=score, metadata=document.metadata)

    @property
    def text(self) -> str:
        """The text blocks joined by newlines (empty when there are none)."""
        return "\n".join(b.text for b in self.content if isinstance(b, TextBlock))


@runtime_checkable
class VectorStore(Protocol):
    """Documents with embeddings, searched by cosine similarity within a collection."""

    async def add(self, documents: Sequence[Document], collection: str) -> list[str]:
        """Insert documents whose id is not yet in the collection (others are left as they are); returns ids."""
        ...

    async def upsert(self, documents: Sequence[Document], collection: str) -> list[str]:
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

    async def get(self, ids: Sequence[str], collection: str) -> list[Document]:
        """The documents with these ids that exist, in the order asked."""
        ...

    async def delete(self, ids: Sequence[str], collection: str) -> int:
        """Remove documents by id; returns how many existed."""
        ...

    async def list_collections(self) -> list[str]:
        """The names of the collections, sorted."""
        ...

    async def delete_collection(self, collection: str) -> bool:
        """Remove a collection and its documents; ``False`` if it did not exist."""
        ...


def check_filter(filter: object) -> None:
    """``InvalidArgument`` unless ``filter`` is ``None`` or a mapping of string keys to JSON values (what every
    store can compare stored metadata with)."""
    from ravi.kernel.errors import InvalidArgument
    from ravi.kernel.values import check_json

    if filter is None:
        return
    if not isinstance(filter, Mapping):
        raise InvalidArgument(f"filter must be a mapping of metadata keys to values, got {type(filter).__name__}")
    check_json(filter, "filter")


def matches(metadata: Mapping[str, JSON], filter: Filter | None) -> bool:
    """Whether ``metadata`` satisfies ``filter``: each key equal to the value, or to one of a list's values.

    Equal as JSON values are (:func:`same_json`): ``true`` is not the number 1, as in a jsonb comparison.
    """
    if not filter:
        return True
    for key, wanted in filter.items():
        if key not in metadata:
            return False
        value = metadata[key]
        if isinstance(wanted, list):
            if not any(same_json(value, option) for option in wanted):
                return False
        elif not same_json(value, wanted):
            return False
    return True


def same_json(a: object, b: object) -> bool:
    """Whether two JSON values are equal as JSON: Python's ``==``, except that a bool equals only a bool (Python
    has ``True == 1``; JSON and jsonb tell ``true`` from ``1``). Numbers compare by value (``1`` is ``1.0``)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(same_json(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(same_json(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, Mapping | list | tuple) or isinstance(b, Mapping | list | tuple):
        return False
    return a == b


__all__ = ["Document", "SearchResult", "VectorStore", "check_filter", "matches", "same_json"]
