"""Write ravi-embeddings-wordllama's data files from an installed WordLlama.

``python scripts/embeddings/build_wordllama.py`` (in the dev environment, which has wordllama and safetensors)
rewrites, in ``packages/ravi-embeddings-wordllama/src/ravi/embeddings/wordllama/``:

* ``l2_supercat_256.npy``: WordLlama's ``l2_supercat_256.safetensors`` table, the same float16 values;
* ``l2_supercat.model``: its tokenizer (a Hugging Face ``tokenizers`` BPE: Llama 2's vocabulary, merges and byte
  fallback) as a SentencePiece BPE model. SentencePiece merges the adjacent pair whose merged piece scores highest;
  ``tokenizers`` merges the pair ranked first in its merge list. Each piece is scored minus the rank of the first
  merge that makes it, so both merge in the same order; the pieces that no merge makes (single characters, bytes,
  control tokens) keep their ids. ``packages/ravi-agents/tests/test_embeddings_tokenizer.py`` checks that the two
  split text into the same ids.

``--check`` writes nothing and exits 1 when the files in the package differ from what would be written.
"""

from __future__ import annotations

import importlib.util
import io
import json
import struct
import sys
from pathlib import Path

import numpy as np

PACKAGE = Path(__file__).resolve().parents[2] / "packages/ravi-embeddings-wordllama/src/ravi/embeddings/wordllama"


def wordllama_files() -> tuple[Path, Path]:
    """The installed WordLlama's table and tokenizer files."""
    spec = importlib.util.find_spec("wordllama")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("wordllama is not installed (make setup installs it with the dev tools)")
    root = Path(next(iter(spec.submodule_search_locations)))
    return root / "weights/l2_supercat_256.safetensors", root / "tokenizers/l2_supercat_tokenizer_config.json"


def table_bytes(weights: Path) -> bytes:
    from safetensors.numpy import load_file

    table = load_file(str(weights))["embedding.weight"]
    assert table.dtype == np.float16 and table.shape == (32_000, 256), (table.dtype, table.shape)
    out = io.BytesIO()
    np.save(out, table, allow_pickle=False)
    return out.getvalue()


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # a negative int32 is written as its 64-bit two's complement, as protobuf does
    out = bytearray()
    while True:
        low, value = value & 0x7F, value >> 7
        out.append(low | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _field(number: int, value: int | float | str | bytes) -> bytes:
    """One protocol-buffers field: a varint (int, bool, enum), a float32 or a length-delimited string/message."""
    if isinstance(value, float):
        return _varint(number << 3 | 5) + struct.pack("<f", value)
    if isinstance(value, int):
        return _varint(number << 3) + _varint(value)
    data = value.encode("utf-8") if isinstance(value, str) else value
    return _varint(number << 3 | 2) + _varint(len(data)) + data


# sentencepiece_model.proto: ModelProto.pieces = 1, trainer_spec = 2, normalizer_spec = 3; SentencePiece.piece = 1,
# score = 2, type = 3 (NORMAL 1, UNKNOWN 2, CONTROL 3, BYTE 6); TrainerSpec.model_type = 3 (BPE 2),
# vocab_size = 4, byte_fallback = 35, unk_id..pad_id = 40..43; NormalizerSpec.name = 1, add_dummy_prefix = 3,
# remove_extra_whitespaces = 4, escape_whitespaces = 5. Written directly: sentencepiece's generated module needs
# a newer protobuf runtime than the workspace pins.
NORMAL, UNKNOWN, CONTROL, BYTE, BPE = 1, 2, 3, 6, 2


def tokenizer_bytes(config: Path) -> bytes:
    spec = json.loads(config.read_text(encoding="utf-8"))
    bpe = spec["model"]
    assert bpe["type"] == "BPE" and bpe["byte_fallback"] and spec["pre_tokenizer"] is None
    pieces = sorted(bpe["vocab"].items(), key=lambda item: item[1])
    assert [i for _, i in pieces] == list(range(len(pieces)))
    assert [piece for piece, _ in pieces[:3]] == [bpe["unk_token"], "<s>", "</s>"]
    first_rank: dict[str, int] = {}
    for rank, merge in enumerate(bpe["merges"]):
        left, right = merge.split(" ") if isinstance(merge, str) else merge
        first_rank.setdefault(left + right, rank)
    model = bytearray()
    for piece, i in pieces:
        if i == 0:
            kind, score = UNKNOWN, 0.0
        elif i < 3:
            kind, score = CONTROL, 0.0
        elif len(piece) == 6 and piece.startswith("<0x") and piece.endswith(">"):
            kind, score = BYTE, 0.0
        else:
            kind, score = NORMAL, -float(first_rank.get(piece, len(first_rank) + i))
        model += _field(1, _field(1, piece) + _field(2, score) + _field(3, kind))
    trainer = _field(3, BPE) + _field(4, len(pieces)) + _field(35, 1)
    trainer += _field(40, 0) + _field(41, 1) + _field(42, 2) + _field(43, -1)
    model += _field(2, trainer)
    # Prepend "▁" and write every space as "▁", nothing else: the Hugging Face normalizer's two steps.
    model += _field(3, _field(1, "identity") + _field(3, 1) + _field(4, 0) + _field(5, 1))
    return bytes(model)


def main(argv: list[str]) -> int:
    weights, config = wordllama_files()
    wanted = {
        PACKAGE / "l2_supercat_256.npy": table_bytes(weights),
        PACKAGE / "l2_supercat.model": tokenizer_bytes(config),
    }
    if "--check" in argv:
        stale = [path.name for path, data in wanted.items() if not path.is_file() or path.read_bytes() != data]
        print("up to date" if not stale else f"differ: {', '.join(stale)}")
        return 1 if stale else 0
    for path, data in wanted.items():
        path.write_bytes(data)
        print(f"wrote {path} ({len(data):,} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
