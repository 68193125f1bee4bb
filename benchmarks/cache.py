"""Cache-stable windows: how often a window starts with the previous one, and what that saves.

A 500-call agent session is replayed; before each model call the window is assembled by a plain strategy and by
its cache-stable twin at the same maximum size: the watermarked sliding window and token budget, and relevant
recall with ``prefer="cache"`` beside its default (``prefer="relevance"``), both after the tool-result
compaction a pipeline puts first. A turn keeps the prefix when its window starts with the previous window,
message for message (byte-identical once serialised). Providers bill a repeated prompt prefix at a cached price;
we count tokens billed at full price (not in the previous window's prefix) and at cached price (in it), and the
cost at a cached price of 10% of the full one. Targets: watermarked windows keep the prefix on at least 90% of
turns; with recall on, at least 80%.
"""

from __future__ import annotations

import asyncio
import json

from _table import console, table, verdict

from ravi.agents.context import (
    CompactionPipeline,
    RelevantRecallStrategy,
    SlidingWindowCompaction,
    TokenBudgetComposedStrategy,
    ToolResultCompactionStrategy,
    WindowRequest,
)
from ravi.agents.demo import model_calls
from ravi.agents.tokens import DEFAULT_COUNTER
from ravi.kernel.agent import CompactionStrategy, Strategy
from ravi.kernel.messages import ChatMessage

CACHED_PRICE = 0.10
TURNS = 500


def serialised(messages: list[ChatMessage]) -> list[str]:
    return [json.dumps(m.to_openai(extras=False), sort_keys=True) for m in messages]


async def replay(strategy: CompactionPipeline | CompactionStrategy | Strategy) -> dict[str, float]:
    # one session: what its windows remember is kept between calls
    pipeline = strategy if isinstance(strategy, CompactionPipeline) else CompactionPipeline([strategy])
    history: list[ChatMessage] = []
    previous: list[str] = []
    kept = turns = full = cached = 0
    seed = 21
    while turns < TURNS:
        for batch in model_calls(seed, requests=40):
            *arrived, reply = batch
            history.extend(arrived)
            window = (await pipeline.window(WindowRequest("bench", "replay", messages=history))).messages
            current = serialised(window)
            tokens = [DEFAULT_COUNTER.count_message(m) for m in window]
            common = 0
            while common < min(len(previous), len(current)) and previous[common] == current[common]:
                common += 1
            if turns and common == len(previous):
                kept += 1
            cached += sum(tokens[:common])
            full += sum(tokens[common:])
            previous = current
            history.append(reply)
            turns += 1
            if turns >= TURNS:
                break
        seed += 1
    return {
        "kept": kept / (TURNS - 1),
        "full": full,
        "cached": cached,
        "total": full + cached,
        "cost": full + CACHED_PRICE * cached,
    }


PLAIN, STABLE = "plain", "cache-stable"
TARGETS = {
    "sliding window, 60 messages": 0.9,
    "token budget, 16,000 tokens": 0.9,
    "relevant recall, 16,000 tokens": 0.8,
}


def pairs() -> list[tuple[str, Strategy | CompactionPipeline, Strategy | CompactionPipeline]]:
    """(name, plain, cache-stable) at the same maximum window size."""
    return [
        ("sliding window, 60 messages", SlidingWindowCompaction(60), SlidingWindowCompaction(60, low_watermark=0.5)),
        (
            "token budget, 16,000 tokens",
            TokenBudgetComposedStrategy([ToolResultCompactionStrategy()], 16_000),
            TokenBudgetComposedStrategy([ToolResultCompactionStrategy()], 16_000, low_watermark=0.6),
        ),
        (
            "relevant recall, 16,000 tokens",
            CompactionPipeline([ToolResultCompactionStrategy(), RelevantRecallStrategy(16_000)]),
            CompactionPipeline([ToolResultCompactionStrategy(), RelevantRecallStrategy(16_000, prefer="cache")]),
        ),
    ]


def chart_cache(charted: list[tuple[str, str, float, float]]) -> None:
    from _charts import figure, save

    fig, (stable, billed) = figure("Prompt-cache stability and billed tokens, plain against cache-stable", panels=2)
    names = sorted({c[0] for c in charted})
    width = 0.38
    for k, label in enumerate((PLAIN, STABLE)):
        kept = [next(c[2] for c in charted if c[0] == n and c[1] == label) for n in names]
        cost = [next(c[3] for c in charted if c[0] == n and c[1] == label) for n in names]
        xs = [i + (k - 0.5) * width for i in range(len(names))]
        stable.bar(xs, [100 * x for x in kept], width, label=label)
        billed.bar(xs, cost, width, label=label)
    for ax, ylabel in ((stable, "turns keeping the prefix (%)"), (billed, "billed tokens (full-price equivalent)")):
        ax.set_xticks(range(len(names)), names, rotation=15, fontsize=7)
        ax.set_ylabel(ylabel)
        ax.legend(fontsize=7)
    save(fig, "cache-stability")


def main() -> None:
    rows = []
    verdicts = []
    charted: list[tuple[str, str, float, float]] = []
    for name, plain, marked in pairs():
        for label, strategy in ((PLAIN, plain), (STABLE, marked)):
            r = asyncio.run(replay(strategy))
            charted.append((name, label, r["kept"], r["cost"]))
            rows.append(
                (
                    name,
                    label,
                    f"{r['kept']:.0%}",
                    f"{r['total']:,.0f}",
                    f"{r['full']:,.0f}",
                    f"{r['cached']:,.0f}",
                    f"{r['cost']:,.0f}",
                )
            )
            if label == STABLE:
                verdicts.append((name, r["kept"]))
    table(
        f"Prompt-cache stability over a {TURNS}-call agent session (cached tokens at {CACHED_PRICE:.0%} price)",
        [
            "strategy",
            "",
            "turns keeping the prefix",
            "input tokens",
            "at full price",
            "at cached price",
            "cost (full-price tokens)",
        ],
        rows,
    )
    chart_cache(charted)
    for name, share in verdicts:
        target = TARGETS[name]
        console.print(
            f"target: cache-stable {name} keeps the previous prefix on >= {target:.0%} of turns: {share:.0%}, "
            f"{verdict(share >= target)}"
        )
    console.print()


if __name__ == "__main__":
    main()
