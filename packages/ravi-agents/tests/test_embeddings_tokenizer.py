"""The offline model's files (ravi-embeddings-wordllama) are WordLlama's own: the same table, and a tokenizer that
splits text into the same ids as WordLlama's Hugging Face tokenizer, so every embedding is the one WordLlama
gives. Checked against the installed wordllama and tokenizers (the dev environment's); skipped, saying so,
without them."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from ravi.agents.embeddings import StaticEmbeddingClient, offline_embeddings_installed

ROOT = Path(__file__).resolve().parents[3]
CONTROL_TEXT = ("<s>", "</s>", "<unk>")  # read as text by Ravi's tokenizer, as control tokens by WordLlama's

pytestmark = [
    pytest.mark.skipif(not offline_embeddings_installed(), reason="pip install 'ravi-agents[embeddings]'"),
    pytest.mark.skipif(
        importlib.util.find_spec("wordllama") is None or importlib.util.find_spec("tokenizers") is None,
        reason="the reference (wordllama and tokenizers) is not installed: the dev environment has it",
    ),
]


@pytest.fixture(scope="module")
def reference() -> tuple[object, np.ndarray]:
    """WordLlama's own tokenizer and table, read from the installed wordllama."""
    from safetensors.numpy import load_file
    from tokenizers import Tokenizer

    spec = importlib.util.find_spec("wordllama")
    assert spec is not None and spec.submodule_search_locations
    root = Path(next(iter(spec.submodule_search_locations)))
    tokenizer = Tokenizer.from_file(str(root / "tokenizers/l2_supercat_tokenizer_config.json"))
    tokenizer.no_padding()
    tokenizer.no_truncation()
    return tokenizer, load_file(str(root / "weights/l2_supercat_256.safetensors"))["embedding.weight"]


@pytest.fixture(scope="module")
def ours() -> object:
    import sentencepiece

    from ravi.embeddings import wordllama

    return sentencepiece.SentencePieceProcessor(model_file=str(wordllama.TOKENIZER))


def _documents() -> list[str]:
    texts = []
    for path in sorted((ROOT / "docs").rglob("*.md")) + sorted((ROOT / "packages/ravi-agents/src").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        texts += [text[i : i + 2_000] for i in range(0, len(text), 1_500)]
    return [text for text in texts if not any(control in text for control in CONTROL_TEXT)]


def test_the_table_is_wordllamas(reference: tuple[object, np.ndarray]) -> None:
    from ravi.embeddings import wordllama

    table = np.load(wordllama.TABLE, allow_pickle=False)
    assert table.dtype == np.float16 and table.shape == (32_000, wordllama.DIMENSIONS)
    assert np.array_equal(table, reference[1])


def test_the_documentation_and_code_split_into_wordllamas_ids(
    reference: tuple[object, np.ndarray], ours: object
) -> None:
    texts = _documents()
    assert len(texts) > 500
    theirs = [e.ids for e in reference[0].encode_batch(texts, add_special_tokens=False)]  # type: ignore[attr-defined]
    assert ours.encode(texts) == theirs  # type: ignore[attr-defined]


_SPACES = st.sampled_from([" ", "  ", "   ", "\t", "\n", "\n\n", "\u3000", "\u00a0", "▁", "▁▁"])
_WORDS = st.sampled_from(["the", "The", "puppy", "wedding", "naïve", "漢字", "🙂", "cello", "x9", "12345", "_-_", "'s"])


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.text(max_size=60), st.lists(st.one_of(_SPACES, _WORDS, st.text(max_size=3))).map("".join)))
@example("  [[context.pipeline.children]]")
@example("a\x00b\ud7ff\U0010ffff")
def test_any_text_splits_into_wordllamas_ids(reference: tuple[object, np.ndarray], ours: object, text: str) -> None:
    if any(control in text for control in CONTROL_TEXT):
        return
    [theirs] = reference[0].encode_batch([text], add_special_tokens=False)  # type: ignore[attr-defined]
    assert ours.encode(text) == theirs.ids  # type: ignore[attr-defined]


def test_control_tokens_written_in_a_message_are_read_as_text(ours: object) -> None:
    ids = ours.encode("a <s> b </s> c <unk>")  # type: ignore[attr-defined]
    assert not {0, 1, 2} & set(ids)
    assert ours.decode(ids) == "a <s> b </s> c <unk>"  # type: ignore[attr-defined]


def test_every_embedding_is_wordllamas(reference: tuple[object, np.ndarray]) -> None:
    tokenizer, table = reference
    texts = [*_documents()[:300], "", " ", "my sister's wedding by the sea", "🙂" * 5]
    encoded = tokenizer.encode_batch(texts, add_special_tokens=False)  # type: ignore[attr-defined]
    expected = np.zeros((len(texts), 256), dtype=np.float32)
    for row, e in zip(expected, encoded, strict=True):
        if e.ids:
            row[:] = table[e.ids].astype(np.float32).mean(axis=0)
    norms = np.linalg.norm(expected, axis=1, keepdims=True)
    expected /= np.where(norms == 0, 1.0, norms)
    assert np.allclose(StaticEmbeddingClient(256).embed_now(texts), expected, atol=1e-6)


def test_the_packaged_files_are_what_the_build_script_writes() -> None:
    sys.path.insert(0, str(ROOT / "scripts/embeddings"))
    try:
        import build_wordllama
    finally:
        sys.path.remove(str(ROOT / "scripts/embeddings"))
    assert build_wordllama.main(["--check"]) == 0


def test_one_model_shared_by_many_threads_embeds_as_one_thread_does() -> None:
    from concurrent.futures import ThreadPoolExecutor

    from ravi.agents.embeddings import offline_embedding_client

    client = offline_embedding_client()
    assert client is not None
    batches = [_documents()[i::16][:40] for i in range(16)]
    alone = [client.embed_now(batch) for batch in batches]
    with ThreadPoolExecutor(8) as pool:
        together = list(pool.map(client.embed_now, batches * 4))
    for i, vectors in enumerate(together):
        assert np.array_equal(vectors, alone[i % 16])
