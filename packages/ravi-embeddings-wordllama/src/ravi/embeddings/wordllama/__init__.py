"""WordLlama's ``l2_supercat`` static token embeddings and their tokenizer, as data files.

``TABLE`` is a NumPy array file (32,000 tokens by 256 dimensions, float16) and ``TOKENIZER`` a SentencePiece
model that splits text into the table's token ids. ``ravi.agents.embeddings.StaticEmbeddingClient`` reads them;
nothing here imports anything.
"""

from pathlib import Path

_HERE = Path(__file__).parent

NAME = "wordllama-l2_supercat"
"""The model's name; a client's ``model`` is this name and its dimension (``wordllama-l2_supercat-128``)."""
DIMENSIONS = 256
"""The table's width; the model was trained so that its leading 64 or 128 dimensions stand alone."""
TABLE = _HERE / "l2_supercat_256.npy"
"""The token-embedding table: ``numpy.load(TABLE)`` is a (32000, 256) float16 array, row i for token id i."""
TOKENIZER = _HERE / "l2_supercat.model"
"""The tokenizer, a SentencePiece model file: ``SentencePieceProcessor(model_file=str(TOKENIZER))``."""

__all__ = ["DIMENSIONS", "NAME", "TABLE", "TOKENIZER"]
