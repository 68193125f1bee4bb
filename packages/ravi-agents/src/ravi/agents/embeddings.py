"""An offline embedding model: static word embeddings whose weights come inside their wheel.

``pip install 'ravi-agents[embeddings]'`` installs ``ravi-embeddings-wordllama``, a wheel of data holding
`WordLlama <https://github.com/dleemiller/WordLlama>`_'s 256-dimension token-embedding table (16 MB, distilled
from large language models) and its tokenizer as a SentencePiece model, and ``sentencepiece`` to read it. A
text's embedding is the mean of its tokens' rows, normalised: no network, no GPU, no model download, a thousand
messages in a fraction of a second on one core. The tokenizer splits text exactly as WordLlama's own does (the
Hugging Face ``tokenizers`` form, which would bring ``huggingface-hub`` and ``hf-xet``: 27 MB against
sentencepiece's 5.5), except that ``<s>``, ``</s>`` or ``<unk>`` written in a message is read as text.

It captures what words mean alike ("puppy" near "dog", "cello" near "instrument"), not the meaning of a whole
sentence the way a transformer does; relevant recall fuses it with the lexical ranking, where it helps most.
"""

from __future__ import annotations

import asyncio
import functools
import importlib.util
from collections.abc import Sequence
from typing import Any

from ravi.kernel.errors import ConfigurationError, InvalidArgument
from ravi.kernel.registry import install_command
from ravi.kernel.values import check_text

EXTRA = "embeddings"
INSTALL = install_command(f"ravi-agents[{EXTRA}]")
_INLINE = 64  # up to this many texts are embedded on the event loop; more in a worker thread


class StaticEmbeddingClient:
    """Embeddings from WordLlama's static model (``l2_supercat``, 256 dimensions), offline, on CPU: an
    :class:`~ravi.kernel.llm.EmbeddingClient`.

    Each text is cut to its first ``max_chars`` characters, tokenized, and embedded as the mean of its tokens'
    rows, normalised to unit length (a text without tokens gets a zero vector). ``dimension`` may be 64, 128 or
    256: the model was trained so that its leading dimensions stand alone.

    Raises:
        ConfigurationError: the ``embeddings`` extra is not installed (the message says how to install it).

    Example:
        >>> client = StaticEmbeddingClient()  # doctest: +SKIP
        >>> [vector] = await client.embed(["my sister's wedding by the sea"])  # doctest: +SKIP
    """

    def __init__(self, dimension: int = 256, *, max_chars: int = 2_000) -> None:
        if isinstance(dimension, bool) or not isinstance(dimension, int) or dimension not in (64, 128, 256):
            raise InvalidArgument(f"dimension must be 64, 128 or 256, got {dimension!r}")
        if isinstance(max_chars, bool) or not isinstance(max_chars, int) or max_chars < 1:
            raise InvalidArgument(f"max_chars must be an integer >= 1, got {max_chars!r}")
        self._table, self._tokenizer = _model()
        self._dimension = dimension
        self._max_chars = max_chars
        self.model = f"wordllama-l2_supercat-{dimension}"

    @property
    def dimension(self) -> int:
        """The vector length."""
        return self._dimension

    def embed_now(self, texts: Sequence[str]) -> Any:
        """The embeddings of ``texts`` as a NumPy array, one unit-length row per text (synchronous).

        Raises:
            InvalidArgument: ``texts`` is not a list of strings, or one holds a lone surrogate (not Unicode text).
        """
        import numpy as np

        if isinstance(texts, str) or not isinstance(texts, Sequence):
            raise InvalidArgument(f"texts must be a list of strings, got {type(texts).__name__}")
        for i, text in enumerate(texts):
            if not isinstance(text, str):
                raise InvalidArgument(f"texts to embed must be strings, got {type(text).__name__}")
            check_text(text, f"texts[{i}]")
        out = np.zeros((len(texts), self._dimension), dtype=np.float32)
        if not texts:
            return out
        encoded: list[list[int]] = self._tokenizer.encode([t[: self._max_chars] for t in texts], num_threads=1)
        lengths = np.fromiter((len(e) for e in encoded), dtype=np.int64, count=len(encoded))
        if lengths.sum():
            ids = np.concatenate([np.asarray(e, dtype=np.int64) for e in encoded if e])
            rows = self._table[ids, : self._dimension]
            starts = np.concatenate([[0], np.cumsum(lengths[lengths > 0])[:-1]])
            out[lengths > 0] = np.add.reduceat(rows, starts, axis=0) / lengths[lengths > 0, None]
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        return out / norms

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in order; many texts are embedded in a worker thread, off the event loop."""
        if isinstance(texts, Sequence) and not isinstance(texts, str) and len(texts) <= _INLINE:
            return self.embed_now(texts).tolist()  # type: ignore[no-any-return]
        return (await asyncio.to_thread(self.embed_now, texts)).tolist()  # type: ignore[no-any-return]

    def __repr__(self) -> str:
        return f"StaticEmbeddingClient(dimension={self._dimension})"


def offline_embeddings_installed() -> bool:
    """Whether the ``embeddings`` extra is installed (checked without importing it)."""
    return _found(_MODEL) and _found("sentencepiece")


@functools.cache
def offline_embedding_client() -> StaticEmbeddingClient | None:
    """The process's :class:`StaticEmbeddingClient` for recall (128 dimensions: on Ravi's recall benchmark they
    find what 256 find, in half the memory and time) when the ``embeddings`` extra is installed, else ``None``.
    The model is read once and shared (it is read-only)."""
    if not offline_embeddings_installed():
        return None
    return StaticEmbeddingClient(128)


_MODEL = "ravi.embeddings.wordllama"


def _found(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ImportError:  # a parent package is missing
        return False


@functools.cache
def _model() -> tuple[Any, Any]:
    """The token-embedding table (float32, vocabulary x 256) and the tokenizer, read from the installed package."""
    if not offline_embeddings_installed():
        raise ConfigurationError("the offline embedding model is not installed", hint=INSTALL)
    import numpy as np
    import sentencepiece

    from ravi.embeddings import wordllama

    try:
        table = np.load(wordllama.TABLE, allow_pickle=False).astype(np.float32)
        tokenizer = sentencepiece.SentencePieceProcessor(model_file=str(wordllama.TOKENIZER))
    except (OSError, ValueError, RuntimeError) as exc:
        raise ConfigurationError(
            f"the installed ravi-embeddings-wordllama package lacks readable model files ({exc})",
            hint=f"reinstall it: {INSTALL}",
        ) from exc
    if table.shape != (tokenizer.get_piece_size(), wordllama.DIMENSIONS):
        raise ConfigurationError(
            f"the offline model's table is {table.shape}, its tokenizer has {tokenizer.get_piece_size()} tokens",
            hint=f"reinstall it: {INSTALL}",
        )
    return table, tokenizer


__all__ = ["INSTALL", "StaticEmbeddingClient", "offline_embedding_client", "offline_embeddings_installed"]
