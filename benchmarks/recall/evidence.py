"""Evidence recall on long two-person conversations: Ravi beside recency and a plain BM25 turn retriever.

Each question of ``conversations.py`` is appended to its conversation as the newest user turn; a window is
assembled at 1,000, 2,000 and 4,000 tokens; the score is the share of the question's evidence turns present in
the window (by id), averaged over questions. Beside Ravi:

* recency: the newest turns that fit;
* plain BM25 over single turns: every older turn scored by Okapi BM25 against the question (words lower-cased,
  nothing else), the best kept until the budget is spent, a quarter of it given to the newest turns first.

Seeds below 100 are for developing Ravi; the held-out split (seeds 100 to 109) is what the tables report.
``python benchmarks/recall/evidence.py [--split dev|held-out] [--kinds]``.
"""

from __future__ import annotations

import asyncio
import math
import re
import sys
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _table import console, table, verdict

from ravi.agents.context import (
    CompactionPipeline,
    RelevantRecallStrategy,
    TokenBudgetComposedStrategy,
    WindowRequest,
)
from ravi.agents.tokens import DEFAULT_COUNTER
from ravi.kernel.messages import ChatMessage

try:
    from recall.conversations import HELD_OUT_SEEDS, TRAIN_SEEDS, Conversation, corpus
except ImportError:  # run as a script from this directory
    from conversations import HELD_OUT_SEEDS, TRAIN_SEEDS, Conversation, corpus  # type: ignore[no-redef]

BUDGETS = (1_000, 2_000, 4_000)
Window = Callable[[list[ChatMessage], int], Awaitable[list[ChatMessage]]]


def _words(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


def plain_bm25(history: Sequence[ChatMessage], budget: int, *, newest_share: float = 0.25) -> list[ChatMessage]:
    """The reference: the newest turns in a quarter of the budget, then the older turns BM25 ranks best against
    the request (the last turn) until the budget is spent; in conversation order."""
    count = DEFAULT_COUNTER.count_message
    request = history[-1]
    left = budget - count(request)
    keep = {len(history) - 1}
    recent = newest_share * budget - count(request)
    i = len(history) - 2
    while i >= 0 and count(history[i]) <= recent:
        recent -= count(history[i])
        left -= count(history[i])
        keep.add(i)
        i -= 1
    docs = [Counter(_words(m.text)) for m in history[: i + 1]]
    n = len(docs) or 1
    avg = sum(sum(d.values()) for d in docs) / n or 1.0
    df: Counter[str] = Counter()
    for d in docs:
        df.update(d.keys())
    query = _words(request.text)
    scored = []
    for j, d in enumerate(docs):
        length = sum(d.values())
        score = 0.0
        for term in query:
            tf = d.get(term, 0)
            if tf:
                idf = math.log(1 + (n - df[term] + 0.5) / (df[term] + 0.5))
                score += idf * tf * 2.5 / (tf + 1.5 * (0.25 + 0.75 * length / avg))
        if score > 0:
            scored.append((score, j))
    for _, j in sorted(scored, key=lambda s: (-s[0], -s[1])):
        if count(history[j]) <= left:
            keep.add(j)
            left -= count(history[j])
    return [history[j] for j in sorted(keep)]


async def recency(history: list[ChatMessage], budget: int) -> list[ChatMessage]:
    return await TokenBudgetComposedStrategy([], budget).compact(history)


async def reference(history: list[ChatMessage], budget: int) -> list[ChatMessage]:
    return plain_bm25(history, budget)


def ravi(**options: object) -> Window:
    """Ravi's relevant recall with ``options``: a pipeline per budget, a session per conversation (as an
    application has: what the session's windows learn, its index and embeddings, is kept between questions)."""
    pipelines: dict[int, CompactionPipeline] = {}

    async def window(history: list[ChatMessage], budget: int) -> list[ChatMessage]:
        if budget not in pipelines:
            pipelines[budget] = CompactionPipeline([RelevantRecallStrategy(budget, **options)])  # type: ignore[arg-type]
        request = WindowRequest("bench", history[0].id, messages=history)
        return (await pipelines[budget].window(request)).messages

    return window


def question_turn(conversation: Conversation, k: int) -> ChatMessage:
    q = conversation.questions[k]
    fields: dict[str, object] = {"id": f"q{conversation.seed}-{k}"}
    if conversation.style.endswith(", dated") and conversation.asked_at is not None and k % 2 == 0:
        fields["created_at"] = conversation.asked_at  # else asked "now", as an importer may leave it
    return ChatMessage.user(q.text, **fields)


async def score(make: Window, data: list[Conversation], budget: int) -> tuple[float, dict[str, float]]:
    """Mean evidence recall over the questions, overall and by kind."""
    by_kind: defaultdict[str, list[float]] = defaultdict(list)
    for conversation in data:
        for k, q in enumerate(conversation.questions):
            history = [*conversation.messages, question_turn(conversation, k)]
            window = await make(history, budget)
            ids = {m.id for m in window}
            by_kind[q.kind].append(sum(e in ids for e in q.evidence) / len(q.evidence))
    every = [x for xs in by_kind.values() for x in xs]
    return sum(every) / len(every), {kind: sum(xs) / len(xs) for kind, xs in sorted(by_kind.items())}


def systems() -> dict[str, Window]:
    return {
        "recency": recency,
        "plain BM25 over single turns (25% newest)": reference,
        "Ravi relevant recall (defaults)": ravi(),
        "Ravi, words only (meaning=None)": ravi(meaning=None),
        "Ravi, no labels (annotate=False)": ravi(annotate=False),
    }


def run(data: list[Conversation], chosen: dict[str, Window], kinds: bool = False) -> dict[str, dict[int, float]]:
    results: dict[str, dict[int, float]] = {}
    rows = []
    for name, make in chosen.items():
        results[name] = {}
        detail = []
        for budget in BUDGETS:
            overall, by_kind = asyncio.run(score(make, data, budget))
            results[name][budget] = overall
            detail.append(by_kind)
        rows.append((name, *(f"{results[name][b]:.2f}" for b in BUDGETS)))
        if kinds:
            for kind in detail[0]:
                rows.append((f"  {kind}", *(f"{d[kind]:.2f}" for d in detail)))
    questions = sum(len(c.questions) for c in data)
    tokens = [DEFAULT_COUNTER.count_messages(c.messages) for c in data]
    table(
        f"Evidence recall, {len(data)} conversations ({min(tokens):,}-{max(tokens):,} tokens), {questions} questions",
        ["retriever", *(f"{b:,} tokens" for b in BUDGETS)],
        rows,
    )
    return results


def main(argv: Sequence[str] = ()) -> None:
    split = "dev" if "--split=dev" in argv or "dev" in argv else "held-out"
    data = corpus(TRAIN_SEEDS if split == "dev" else HELD_OUT_SEEDS)
    results = run(data, systems(), kinds="--kinds" in argv)
    ours = results["Ravi relevant recall (defaults)"]
    base = results["plain BM25 over single turns (25% newest)"]
    ahead = all(ours[b] > base[b] for b in BUDGETS)
    console.print(
        f"target: Ravi ahead of the plain BM25 turn retriever at every budget ({split} split): {verdict(ahead)}; "
        f"at 2,000 tokens >= 0.80: {ours[2_000]:.2f}, {verdict(ours[2_000] >= 0.8)}\n"
    )


if __name__ == "__main__":
    main(sys.argv[1:])
