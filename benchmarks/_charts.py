"""The benchmarks' figures as SVG charts (matplotlib), written into docs/images/bench/ for the performance page.

Every chart says the machine and the date it was measured on. SVG output is made reproducible (fixed element
ids, no creation date in the file), so a chart changes in git only when its figures do.
"""

from __future__ import annotations

import datetime
import platform
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

OUT = Path(__file__).resolve().parents[1] / "docs" / "images" / "bench"
plt.rcParams.update({"svg.hashsalt": "ravi", "svg.fonttype": "none", "font.size": 9})


def figure(title: str, *, panels: int = 1) -> tuple[Any, Any]:
    """A new chart with ``title``: its axes, or a list of ``panels`` axes side by side."""
    fig, axes = plt.subplots(1, panels, figsize=(7 if panels == 1 else 9, 4))
    fig.suptitle(title, fontsize=10)
    for ax in axes if panels > 1 else [axes]:
        ax.grid(True, which="both", alpha=0.3)
    return fig, axes


def save(fig: Any, name: str) -> Path:
    """Write the chart as ``docs/images/bench/<name>.svg``, with the machine and date in a footer."""
    OUT.mkdir(parents=True, exist_ok=True)
    where = f"{platform.machine()}, {platform.system()}, Python {platform.python_version()}"
    fig.text(0.99, 0.01, f"measured on {where}, {datetime.date.today():%Y-%m-%d}", ha="right", fontsize=7, alpha=0.7)
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    path = OUT / f"{name}.svg"
    fig.savefig(path, format="svg", metadata={"Date": None})
    plt.close(fig)
    return path


__all__ = ["figure", "save"]
