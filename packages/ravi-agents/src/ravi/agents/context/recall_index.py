"""Session indexes for relevant recall: which older messages matter for the current request.

An index is kept per session and grows with it: each window indexes only the messages appended since the
previous one (a history that changed in the middle, a cleared run, is indexed again from scratch).
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np

from ravi.agents.context.memo import PrefixMemo
from ravi.kernel.llm import EmbeddingClient
from ravi.kernel.messages import ChatMessage, TextBlock, ToolCallBlock, ToolResultBlock

_WORD = re.compile(r"[0-9a-zà-ÿ_]+(?:[-.][0-9a-zà-ÿ_]+)*", re.IGNORECASE)
STOPWORDS = frozenset(
    "a an and are as at be but by can could did do does for from had has have how i if in into is it its me my "
    "no not of on or our please so than that the their them then there these they this to us was we were what "
    "when where which who why will with would you your".split()
)


def message_text(message: ChatMessage, *, limit: int = 4_000) -> str:
    """The searchable text of a message: its text, tool calls and tool results (long results cut)."""
    parts: list[str] = []
    for block in message.content:
        if isinstance(block, TextBlock):
            parts.append(block.text)
        elif isinstance(block, ToolCallBlock):
            parts.append(f"{block.name} {' '.join(str(v) for v in block.arguments.values())}")
        elif isinstance(block, ToolResultBlock):
            parts.append(block.content[:limit])
    return " ".join(parts)


def terms(text: str) -> list[str]:
    """Lower-cased words without stop words; identifiers such as ``db-staging-3`` stay whole."""
    return [t for t in (w.lower() for w in _WORD.findall(text)) if t not in STOPWORDS]


@runtime_checkable
class RecallIndex(Protocol):
    """Scores the messages of a history against a query."""

    async def scores(self, history: Sequence[ChatMessage], query: str) -> dict[int, float]:
        """Message position to relevance (positive; absent means irrelevant), for the whole ``history``."""
        ...


@dataclass
class _Postings:
    size: int = 0
    lengths: list[int] = field(default_factory=list)
    postings: defaultdict[str, dict[int, int]] = field(default_factory=lambda: defaultdict(dict))


class BM25Index:
    """Okapi BM25 over the messages of each session (``k1``, ``b`` as usual): lexical, fast, no model.

    Example:
        >>> index = BM25Index()
    """

    def __init__(self, *, k1: float = 1.2, b: float = 0.75, sessions: int = 128) -> None:
        self.k1, self.b = k1, b
        self._memo: PrefixMemo[_Postings] = PrefixMemo(sessions)

    def _index(self, history: Sequence[ChatMessage]) -> _Postings:
        hit = self._memo.lookup(history)
        state = hit[1] if hit is not None else _Postings()
        for i in range(state.size, len(history)):
            words = Counter(terms(message_text(history[i])))
            state.lengths.append(sum(words.values()))
            for word, tf in words.items():
                state.postings[word][i] = tf
        state.size = len(history)
        self._memo.store(history, state)
        return state

    async def scores(self, history: Sequence[ChatMessage], query: str) -> dict[int, float]:
        """BM25 score of each message that shares a term with ``query``."""
        state = self._index(history)
        if not state.size:
            return {}
        n = state.size
        average = (sum(state.lengths) / n) or 1.0
        out: dict[int, float] = defaultdict(float)
        for word in set(terms(query)):
            posting = state.postings.get(word)
            if not posting:
                continue
            idf = math.log(1 + (n - len(posting) + 0.5) / (len(posting) + 0.5))
            for i, tf in posting.items():
                norm = tf + self.k1 * (1 - self.b + self.b * state.lengths[i] / average)
                out[i] += idf * tf * (self.k1 + 1) / norm
        return dict(out)


@dataclass
class _Vectors:
    size: int = 0
    rows: list[np.ndarray] = field(default_factory=list)


class EmbeddingIndex:
    """Cosine similarity of message embeddings to the query's, from any :class:`EmbeddingClient`.

    Embeddings are computed once per message, as the session grows. Pair it with a real embedding model when
    the request and the answer share meaning but not words.
    """

    def __init__(self, embedding_client: EmbeddingClient, *, sessions: int = 32, min_score: float = 0.1) -> None:
        self.client = embedding_client
        self.min_score = min_score
        self._memo: PrefixMemo[_Vectors] = PrefixMemo(sessions)

    async def scores(self, history: Sequence[ChatMessage], query: str) -> dict[int, float]:
        """Cosine similarity of each message to ``query`` (those above ``min_score``)."""
        hit = self._memo.lookup(history)
        state = hit[1] if hit is not None else _Vectors()
        if state.size < len(history):
            new = await self.client.embed([message_text(m) for m in history[state.size :]])
            for vector in new:
                v = np.asarray(vector, dtype=np.float32)
                state.rows.append(v / (float(np.linalg.norm(v)) or 1.0))
            state.size = len(history)
        self._memo.store(history, state)
        if not state.rows:
            return {}
        [q] = await self.client.embed([query])
        qv = np.asarray(q, dtype=np.float32)
        qv /= float(np.linalg.norm(qv)) or 1.0
        sims = np.stack(state.rows) @ qv
        return {i: float(s) for i, s in enumerate(sims) if s > self.min_score}


__all__ = ["STOPWORDS", "BM25Index", "EmbeddingIndex", "RecallIndex", "message_text", "terms"]
