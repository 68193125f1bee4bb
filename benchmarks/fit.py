"""Windows that fit the model they are sent to.

200 sessions of the fit corpus (``fit_corpus.py``, seed 7: prose, code, JSON tool output, logs, CJK and other
scripts, base64) are replayed through ``TokenBudgetComposedStrategy.from_model(model)`` with default settings:
a window after every fifth turn and at the end. Each window is counted exactly where a tokenizer exists (the
model's OpenAI encoding); for the other models the larger of the ``o200k_base`` and ``cl100k_base`` counts
stands in for the real tokenizer, and their margin (``MODEL_FAMILIES``) is part of the estimate.

Printed per model and counter: windows over the model's input room (window - output reserve), the mean use of
the budget by windows that had to be cut (real tokens / budget), and the p99 over- and under-count per message.
Targets: no window over; mean use >= 85% with the estimator and >= 95% with an exact counter.
"""

from __future__ import annotations

import asyncio

import numpy as np
from _table import console, table, verdict
from fit_corpus import sessions

from ravi.agents.context import TokenBudgetComposedStrategy
from ravi.agents.context.models import model_info
from ravi.agents.tokens import (
    DEFAULT_COUNTER,
    ConservativeTokenCounter,
    ExactTokenCounter,
)
from ravi.kernel.messages import ChatMessage

O200K, CL100K = ExactTokenCounter("o200k_base"), ExactTokenCounter("cl100k_base")


def stand_in(message: ChatMessage) -> int:
    """The real count where no tokenizer exists: the larger of the two OpenAI encodings."""
    return max(O200K.count_message(message), CL100K.count_message(message))


CASES = [  # (model, label, counter or None for the model's default, real count of a message)
    ("gpt-4o", "heuristic (before)", DEFAULT_COUNTER, O200K.count_message),
    ("gpt-4o", "estimator, against o200k", ConservativeTokenCounter(), O200K.count_message),
    ("gpt-4o", "estimator, against both", ConservativeTokenCounter(), stand_in),
    ("gpt-4o", "default: exact o200k", None, O200K.count_message),
    ("gpt-4.1", "default: exact o200k", None, O200K.count_message),
    ("claude-sonnet-4-5", "default: estimator x1.30", None, stand_in),
    ("gemini-2.5-pro", "default: estimator x1.10", None, stand_in),
    ("llama-3.1-70b-instruct", "default: estimator x1.05", None, stand_in),
]


def replay(corpus: list[list[ChatMessage]], model: str, counter, real) -> dict[str, float]:  # type: ignore[no-untyped-def]
    strategy = TokenBudgetComposedStrategy.from_model(model, counter=counter)
    used = strategy.own_counter
    assert used is not None
    info = model_info(model)
    room = info.context_window - info.max_output_tokens
    over, uses, errors, windows = 0, [], [], 0
    for messages in corpus:
        stops = sorted({*range(12, len(messages), 40), len(messages)})
        for stop in stops:
            history = messages[:stop]
            window = asyncio.run(strategy.compact(history))
            windows += 1
            size = sum(map(real, window))
            over += size > room
            if len(window) < len(history):
                uses.append(size / strategy.token_budget)
        for message in messages:
            exact = real(message)
            errors.append((used.count_message(message) - exact) / max(exact, 1))
    e = np.array(errors)
    return {
        "budget": strategy.token_budget,
        "windows": windows,
        "over": over,
        "cut": len(uses),
        "use": float(np.mean(uses)) if uses else float("nan"),
        "over_p99": float(np.quantile(e, 0.99)),
        "under_p99": float(np.quantile(-e, 0.99)),
        "undercounted": float((e < 0).mean()),
    }


def chart_fit(charted: list[tuple[str, dict[str, float]]]) -> None:
    from _charts import figure, save

    fig, ax = figure("Counting error per message (p99), and windows over the model's room")
    labels = [c[0] for c in charted]
    xs = range(len(labels))
    ax.bar([x - 0.2 for x in xs], [100 * c[1]["over_p99"] for c in charted], 0.4, label="p99 overcount (%)")
    ax.bar([x + 0.2 for x in xs], [100 * max(0.0, c[1]["under_p99"]) for c in charted], 0.4, label="p99 undercount (%)")
    for x, (_, f) in zip(xs, charted, strict=True):
        if f["over"]:
            ax.annotate(f"{f['over']:.0f} windows over", (x, 5), ha="center", fontsize=7, color="red")
    ax.set_xticks(list(xs), labels, fontsize=6, rotation=30, ha="right")
    ax.set_ylabel("% of the real count")
    ax.legend()
    save(fig, "fit-errors")


def main() -> None:
    corpus = [[m for _, m in s] for s in sessions(200, seed=7)]
    rows, verdicts, charted = [], [], []
    for model, label, counter, real in CASES:
        f = replay(corpus, model, counter, real)
        charted.append((f"{model}\n{label}", f))
        use = "n/a" if f["cut"] == 0 else f"{f['use']:.1%}"
        rows.append(
            (model, label, f"{f['budget']:,}", f"{f['over']} / {f['windows']}", f"{f['cut']}", use,
             f"{f['over_p99']:+.0%}", f"{max(0.0, f['under_p99']):.0%}", f"{f['undercounted']:.1%}")
        )  # fmt: skip
        if "before" not in label:
            goal = 0.95 if "exact" in label else 0.85
            scale = counter.scale if isinstance(counter, ConservativeTokenCounter) else 1.0
            if "x1." in label:
                scale = float(label.rsplit("x", 1)[1])
            verdicts.append((model, label, f["over"] == 0, f["use"] * scale if f["cut"] else None, goal))
    chart_fit(charted)
    table(
        "Windows from from_model(model) on 200 agent sessions",
        ["model", "counter", "budget", "windows over", "cut", "mean use", "p99 over", "p99 under", "undercounted"],
        rows,
        note=f"messages: {sum(map(len, corpus)):,}; 'cut': windows that dropped messages (the budget bound); "
        "for estimator rows of non-OpenAI models, use is against the stand-in count, so it includes their margin",
    )
    for model, label, ok, use, goal in verdicts:
        console.print(f"target: {model} ({label}): no window over the input room, {verdict(ok)}")
        if use is not None:
            console.print(
                f"target: {model} ({label}): mean use without the family margin >= {goal:.0%}: {use:.1%}, "
                f"{verdict(use >= goal)}"
            )
    console.print()


if __name__ == "__main__":
    main()
