"""Embedding clients: an offline default and a hook for real models (standard library only, so every store can
use them)."""

from __future__ import annotations

import asyncio
import inspect
import math
import re
import zlib
from array import array
from collections.abc import Awaitable, Callable, Sequence

from ravi.kernel.errors import InvalidArgument
from ravi.kernel.values import check_dimensions, check_length

_WORD = re.compile(r"\w+", re.UNICODE)
_LONGEST_WORD = 64  # pieces are taken from the first 64 characters of a longer "word" (a hash, base64, ...)
_INLINE_CHARS = 4_096  # texts up to this size are embedded on the event loop; larger ones in a worker thread


class HashingEmbeddingClient:
    """Embeddings from hashed word and character n-grams: offline, deterministic, no model download.

    Each text becomes a signed bag of its words and their 3- to 5-character pieces, hashed into ``dimension``
    buckets and normalised, so texts that share words and word pieces (``"refund"``, ``"refunds"``) land close.
    It captures lexical overlap, not meaning: right for tests, demos and small deployments; plug a real model in
    through :class:`CallableEmbeddingClient` when paraphrases must match.

    Its cost is bounded, like a real model's input: it reads the first ``max_chars`` characters of a text
    (default 32,768) and at most 64 characters of any one word, so a multi-megabyte tool output costs about
    what a page does. Texts beyond 4,096 characters are embedded in a worker thread, off the event loop.

    Example:
        >>> import asyncio
        >>> [vector] = asyncio.run(HashingEmbeddingClient(dimension=8).embed(["hello"]))
        >>> len(vector)
        8
    """

    def __init__(self, dimension: int = 384, *, max_chars: int = 32_768) -> None:
        if not isinstance(dimension, int) or dimension < 1:
            raise InvalidArgument(f"dimension must be an integer >= 1, got {dimension!r}")
        if not isinstance(max_chars, int) or max_chars < 1:
            raise InvalidArgument(f"max_chars must be an integer >= 1, got {max_chars!r}")
        self._dimension = dimension
        self._max_chars = max_chars

    @property
    def dimension(self) -> int:
        """The vector length."""
        return self._dimension

    def embed_one(self, text: str) -> list[float]:
        """The embedding of one text (synchronous)."""
        if not isinstance(text, str):
            raise InvalidArgument(f"texts to embed must be strings, got {type(text).__name__}")
        vector = [0.0] * self._dimension
        dimension = self._dimension
        for match in _WORD.finditer(text, 0, self._max_chars):
            word = match.group().lower()
            h = zlib.crc32(word.encode("utf-8", "replace"))
            vector[h % dimension] += 2.0 if (h >> 31) & 1 else -2.0
            padded = f"<{word[:_LONGEST_WORD]}>"
            for n in (3, 4, 5):
                for i in range(len(padded) - n + 1):
                    h = zlib.crc32(padded[i : i + n].encode("utf-8", "replace"))
                    vector[h % dimension] += 1.0 if (h >> 31) & 1 else -1.0
        norm = math.sqrt(sum(x * x for x in vector))
        if norm == 0:
            vector[0] = 1.0  # empty text: a fixed unit vector, never a zero one
            return vector
        return [x / norm for x in vector]

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in order; large texts are embedded in a worker thread."""
        if isinstance(texts, str) or not isinstance(texts, Sequence):
            raise InvalidArgument(f"texts must be a list of strings, got {type(texts).__name__}")
        if sum(min(len(t), self._max_chars) if isinstance(t, str) else 0 for t in texts) <= _INLINE_CHARS:
            return [self.embed_one(t) for t in texts]
        return await asyncio.to_thread(lambda: [self.embed_one(t) for t in texts])


class CallableEmbeddingClient:
    """Wrap any embedding function, sync or async, as an :class:`~ravi.kernel.llm.EmbeddingClient`.

    Example:
        >>> from sentence_transformers import SentenceTransformer  # doctest: +SKIP
        >>> model = SentenceTransformer("all-MiniLM-L6-v2")  # doctest: +SKIP
        >>> client = CallableEmbeddingClient(lambda texts: model.encode(list(texts)).tolist(), 384)  # doctest: +SKIP
    """

    def __init__(
        self,
        function: Callable[[Sequence[str]], list[list[float]] | Awaitable[list[list[float]]]],
        dimension: int,
    ) -> None:
        self._function = function
        self._dimension = dimension

    @property
    def dimension(self) -> int:
        """The vector length the function returns."""
        return self._dimension

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text; ``InvalidArgument`` if the function returns vectors of another length."""
        result = self._function(texts)
        vectors = await result if inspect.isawaitable(result) else result
        vectors = [list(map(float, v)) for v in vectors]
        if len(vectors) != len(texts) or any(len(v) != self._dimension for v in vectors):
            raise InvalidArgument(f"the embedding function must return {len(texts)} vectors of {self._dimension}")
        return vectors


def check_embedding_client(client: object, what: str = "embedding_client") -> None:
    """``InvalidArgument`` unless ``client`` is an embedding client (an instance: a class has the same
    attributes) whose ``dimension`` is an integer from 1 to :data:`~ravi.kernel.values.MAX_DIMENSIONS`."""
    from ravi.kernel.llm import EmbeddingClient

    if isinstance(client, type) or not isinstance(client, EmbeddingClient):
        shown = f"the class {client.__name__}" if isinstance(client, type) else type(client).__name__
        raise InvalidArgument(
            f"{what} must be an EmbeddingClient, got {shown}", hint="pass an instance, e.g. HashingEmbeddingClient()"
        )
    dimension = client.dimension
    if not isinstance(dimension, int) or isinstance(dimension, bool) or dimension < 1:
        raise InvalidArgument(f"{what}.dimension must be an integer >= 1, got {dimension!r}")
    check_dimensions(dimension, what)


def check_embeddings(vectors: object, count: int, dimension: int) -> list[list[float]]:
    """What an embedding client returned for ``count`` texts, as ``count`` lists of ``dimension`` floats; the
    client is the caller's code, so its answer is input: anything else (not numbers, a text, too few or too many
    vectors, another dimension, NaN or an infinity) is ``InvalidArgument``, before anything is stored."""
    try:
        rows = [array("d", row) for row in vectors]  # type: ignore[attr-defined]
    except (TypeError, ValueError) as error:
        raise InvalidArgument(f"the embedding client returned vectors that are not lists of numbers: {error}") from None
    if len(rows) != count:
        raise InvalidArgument(f"the embedding client returned {len(rows)} vectors for {count} texts")
    for row in rows:
        if len(row) != dimension:
            raise InvalidArgument(f"embeddings must have {dimension} dimensions, got one of {len(row)}")
        if not all(map(math.isfinite, row)):
            raise InvalidArgument("embeddings must be finite numbers")
    return [row.tolist() for row in rows]


def check_measurable(vector: Sequence[float], what: str) -> None:
    """``InvalidArgument`` unless a cosine can be measured with ``vector`` in float32, where stores compare
    embeddings: a zero vector, or one whose squared length is past float32's range, has none
    (:func:`~ravi.kernel.values.check_length`). What a store would otherwise make of it differed: a score of 0.0
    in one, a direction it never had in another, NaN in a third."""
    check_length(math.fsum(x * x for x in vector), what)


__all__ = [
    "CallableEmbeddingClient",
    "HashingEmbeddingClient",
    "check_embedding_client",
    "check_embeddings",
    "check_measurable",
]
