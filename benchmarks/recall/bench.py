"""Relevant recall versus recency on agent sessions: how many answers are still in the window.

For each of 120 questions asked at the end of a 300+ message session, the window is assembled at budgets of
2,000, 4,000 and 8,000 tokens by: a sliding window (the newest 40 messages, then trimmed to the budget), a
token budget (the newest units that fit), the summarising strategy (older part summarised, newest half of the
budget verbatim), and RelevantRecallStrategy (its defaults: words and meaning, in the process, from the
in-memory store, and from Postgres). The score is the share of questions whose answer is still in the window.
The same is asked again with the facts buried under 50,000 tokens of tool output. Targets: relevant recall at
4,000 tokens keeps at least twice as many answers as the best recency strategy, and does not drop when buried.
"""

from __future__ import annotations

import asyncio
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _table import console, table, verdict

from ravi.agents.context import (
    CompactionPipeline,
    RelevantRecallStrategy,
    SlidingWindowCompaction,
    SummarizationCompaction,
    TokenBudgetComposedStrategy,
    WindowRequest,
)
from ravi.agents.context.recall_index import message_text
from ravi.kernel.agent import CompactionStrategy
from ravi.kernel.messages import ChatMessage

try:
    from recall.dataset import build
except ImportError:  # run as a script from this directory
    from dataset import build  # type: ignore[no-redef]

BUDGETS = (2_000, 4_000, 8_000)

STRATEGIES: dict[str, Callable[[int], CompactionStrategy]] = {
    "sliding window (40) + trim": lambda b: CompactionPipeline(
        [SlidingWindowCompaction(40), TokenBudgetComposedStrategy([], b)]
    ),
    "token budget": lambda b: TokenBudgetComposedStrategy([], b),
    "summarising": lambda b: TokenBudgetComposedStrategy(
        [SummarizationCompaction(recent_token_budget=b // 2, min_old_tokens=0, max_summary_tokens=b // 4)], b
    ),
    "relevant recall (in the process)": lambda b: RelevantRecallStrategy(b),
}
BURIED = 50_000


async def score(make: Callable[[int], CompactionStrategy], budget: int, *, buried: int = 0) -> tuple[int, int]:
    hits = total = 0
    for session in build(buried=buried):
        made = make(budget)
        # one session per scenario: what its windows learn (an index, embeddings) is kept between questions
        pipeline = made if isinstance(made, CompactionPipeline) else CompactionPipeline([made])
        for q in session.questions:
            history = [*session.messages, ChatMessage.user(q.text, id=f"{q.fact_id}-question")]
            request = WindowRequest("bench", session.scenario, messages=history)
            window = (await pipeline.window(request)).messages
            text = "\n".join(message_text(m) for m in window if m.id != f"{q.fact_id}-question")
            hits += q.answer in text
            total += 1
    return hits, total


async def score_searched(history: Any, budget: int, label: str) -> tuple[int, int]:
    """Relevant recall that asks the store (``HistorySearcher``): each question is the last turn of a session of
    its own in ``history``, and the window is assembled from the newest part of it."""
    hits = total = 0
    for s, session in enumerate(build()):
        pipeline = CompactionPipeline([RelevantRecallStrategy(budget)])
        for k, q in enumerate(session.questions):
            sid = f"{label}-{budget}-{s}-{k}"
            question = ChatMessage.user(q.text, id=f"{q.fact_id}-question")
            await history.append_many("bench", [*session.messages, question], session_id=sid)
            window = (await pipeline.window(WindowRequest("bench", sid, history=history))).messages
            text = "\n".join(message_text(m) for m in window if m.id != question.id)
            hits += q.answer in text
            total += 1
    return hits, total


def searched_results() -> dict[str, dict[int, float]]:
    """The same figures for recall asked of the in-memory store (words and meaning, as in the process) and of
    Postgres (BM25 in SQL over its terms index, and meaning by pgvector)."""
    from postgres import server

    from ravi.agents.context import InMemoryHistoryProvider
    from ravi.capabilities.postgres import PostgresHistoryProvider

    async def run(history: Any, label: str) -> dict[int, float]:
        out = {}
        for budget in BUDGETS:
            hits, total = await score_searched(history, budget, label)
            out[budget] = hits / total
        if hasattr(history, "close"):
            await history.close()
        return out

    results = {"relevant recall (in-memory store search)": asyncio.run(run(InMemoryHistoryProvider(), "m"))}
    with server() as dsn:
        schema = f"recall_{uuid.uuid4().hex[:8]}"
        results["relevant recall (Postgres: terms index and pgvector)"] = asyncio.run(
            run(PostgresHistoryProvider(dsn, schema=schema), "p")
        )
    return results


def chart_recall(results: dict[str, dict[int, float]]) -> None:
    from _charts import figure, save

    fig, ax = figure("Answers still in the window at each budget: relevance against recency")
    for name, by_budget in results.items():
        ax.plot(BUDGETS, [100 * by_budget[b] for b in BUDGETS], "o-", label=name)
    ax.set_xscale("log")
    ax.set_xlabel("window budget (tokens)")
    ax.set_ylabel("answers in the window (%)")
    ax.legend(fontsize=7)
    save(fig, "recall-by-budget")


def main() -> None:
    results: dict[str, dict[int, float]] = {}
    total = 0
    for name, make in STRATEGIES.items():
        results[name] = {}
        for budget in BUDGETS:
            hits, total = asyncio.run(score(make, budget))
            results[name][budget] = hits / total
    results.update(searched_results())
    sessions = build()
    sizes = ", ".join(f"{s.scenario} {len(s.messages)}" for s in sessions)
    table(
        f"Answers still in the window, {total} questions over 4 sessions ({sizes} messages)",
        ["strategy", *(f"{b:,} tokens" for b in BUDGETS)],
        [(name, *(f"{r[b]:.0%}" for b in BUDGETS)) for name, r in results.items()],
    )
    chart_recall(results)
    recall = min(results[name][4_000] for name in results if name.startswith("relevant recall"))
    recency = ("sliding window (40) + trim", "token budget")
    best = max(results[name][4_000] for name in recency)
    met = recall >= 2 * best and recall > 0
    ratio = f"{recall / best:.1f}x" if best else "every answer vs none"
    console.print(
        f"target: relevant recall (each of its three rankings) at 4,000 tokens keeps >= 2x the answers of the "
        "best recency strategy "
        f"(sliding window, token budget): {recall:.0%} vs {best:.0%} ({ratio}), {verdict(met)}"
    )
    console.print(
        f"the summarising strategy keeps {results['summarising'][4_000]:.0%} here: the default extractive "
        "summariser keeps user turns first, and every fact of this dataset is a user turn\n"
    )
    buried: dict[str, dict[int, float]] = {}
    for name in ("token budget", "relevant recall (in the process)"):
        buried[name] = {}
        for budget in BUDGETS:
            hits, total = asyncio.run(score(STRATEGIES[name], budget, buried=BURIED))
            buried[name][budget] = hits / total
    table(
        f"The same questions, the facts buried under {BURIED:,} tokens of tool output",
        ["strategy", *(f"{b:,} tokens" for b in BUDGETS)],
        [(name, *(f"{r[b]:.0%}" for b in BUDGETS)) for name, r in buried.items()],
    )
    kept = buried["relevant recall (in the process)"][4_000]
    plain = results["relevant recall (in the process)"][4_000]
    console.print(
        f"target: buried, relevant recall at 4,000 tokens keeps as many: {kept:.0%} vs {plain:.0%}, "
        f"{verdict(kept >= plain)}\n"
    )


if __name__ == "__main__":
    main()
