"""How ``ConservativeTokenCounter``'s prices were fitted: ``python benchmarks/fit_calibrate.py``.

On 120 sessions of the fit corpus (seed 11; the fit benchmark replays other sessions, seed 7), each message's
texts are cut into the estimator's segments; the price of each kind is a non-negative least-squares fit of the
larger of the ``o200k_base`` and ``cl100k_base`` counts (weighted by 1/sqrt(count), so long and short messages
both matter). Then the margin ``ceil(raw * scale + floor)`` is chosen, on a grid, as the one that uses the most
room while no more than 0.8% of messages are undercounted. Prints the prices and the margin.
"""

from __future__ import annotations

import numpy as np
from fit_corpus import sessions

from ravi.agents.tokens import _HUMP, _SEGMENT, ExactTokenCounter
from ravi.kernel.tokens import block_texts

KINDS = ["cjk", "base64", "escape", "word", "hump", "digits", "greek", "cyrillic", "hebrew", "arabic", "indic",
         "other", "newline", "space", "punct", "text"]  # fmt: skip


def features(text: str) -> list[float]:
    f = dict.fromkeys(KINDS, 0.0)
    f["text"] = 1.0
    for match in _SEGMENT.finditer(text):
        kind = match.lastgroup
        assert kind is not None
        if kind == "word":
            f["hump"] += len(_HUMP.findall(match.group()))
        f[kind] += len(match.group()) if kind in ("base64", "cyrillic") else 1
    return [f[k] for k in KINDS]


def nonnegative_fit(x: np.ndarray, y: np.ndarray, weight: np.ndarray) -> np.ndarray:
    xw, yw = x * weight[:, None], y * weight
    active = list(range(x.shape[1]))
    while True:
        w, *_ = np.linalg.lstsq(xw[:, active], yw, rcond=None)
        if (w >= 0).all():
            break
        active = [a for a, v in zip(active, w, strict=True) if v > 0]
    full = np.zeros(x.shape[1])
    full[active] = w
    return full


def main() -> None:
    o200k, cl100k = ExactTokenCounter("o200k_base"), ExactTokenCounter("cl100k_base")
    texts = ["".join(t for b in m.content for t in block_texts(b)) for s in sessions(120, seed=11) for _, m in s]
    exact = np.array([max(o200k.count_text(t), cl100k.count_text(t)) for t in texts], dtype=float)
    x = np.array([features(t) for t in texts])
    prices = nonnegative_fit(x, exact, 1 / np.sqrt(np.maximum(exact, 1)))
    raw = x @ prices
    best = (0.0, 1.0, 0)
    for scale in np.arange(1.0, 1.4, 0.01):
        for floor in range(40):
            estimate = np.ceil(raw * scale + floor)
            if (estimate >= exact).mean() >= 0.992 and exact.sum() / estimate.sum() > best[0]:
                best = (exact.sum() / estimate.sum(), float(scale), floor)
    for kind, price in zip(KINDS, prices, strict=True):
        print(f"{kind:9} {price:.3f}")
    print(f"margin: ceil(raw * {best[1]:.2f} + {best[2]}), room used {best[0]:.1%} on {len(texts)} messages")


if __name__ == "__main__":
    main()
