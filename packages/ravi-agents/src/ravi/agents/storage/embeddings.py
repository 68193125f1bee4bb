"""Embedding clients: an offline default and a hook for real models."""

from __future__ import annotations

import inspect
import math
import re
import zlib
from collections.abc import Awaitable, Callable, Sequence

from ravi.kernel.errors import InvalidArgument

_WORD = re.compile(r"\w+", re.UNICODE)


class HashingEmbeddingClient:
    """Embeddings from hashed word and character n-grams: offline, deterministic, no model download.

    Each text becomes a signed bag of its words and their 3- to 5-character pieces, hashed into ``dimension``
    buckets and normalised, so texts that share words and word pieces (``"refund"``, ``"refunds"``) land close.
    It captures lexical overlap, not meaning: right for tests, demos and small deployments; plug a real model in
    through :class:`CallableEmbeddingClient` when paraphrases must match.

    Example:
        >>> import asyncio
        >>> [vector] = asyncio.run(HashingEmbeddingClient(dimension=8).embed(["hello"]))
        >>> len(vector)
        8
    """

    def __init__(self, dimension: int = 384) -> None:
        if dimension < 1:
            raise InvalidArgument(f"dimension must be >= 1, got {dimension}")
        self._dimension = dimension

    @property
    def dimension(self) -> int:
        """The vector length."""
        return self._dimension

    def embed_one(self, text: str) -> list[float]:
        """The embedding of one text (synchronous)."""
        vector = [0.0] * self._dimension
        for word in _WORD.findall(text.lower()):
            features = [word]
            padded = f"<{word}>"
            for n in (3, 4, 5):
                features.extend(padded[i : i + n] for i in range(len(padded) - n + 1))
            for j, feature in enumerate(features):
                h = zlib.crc32(feature.encode())
                weight = 2.0 if j == 0 else 1.0
                vector[h % self._dimension] += weight if (h >> 31) & 1 else -weight
        norm = math.sqrt(sum(x * x for x in vector))
        if norm == 0:
            vector[0] = 1.0  # empty text: a fixed unit vector, never a zero one
            return vector
        return [x / norm for x in vector]

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in order."""
        return [self.embed_one(t) for t in texts]


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


__all__ = ["CallableEmbeddingClient", "HashingEmbeddingClient"]
