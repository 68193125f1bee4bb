"""Printing and timing helpers shared by the benchmarks."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

console = Console(width=120)


def table(title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]], note: str | None = None) -> None:
    """Print a table of figures."""
    t = Table(title=title, title_justify="left")
    for c in columns:
        t.add_column(c, justify="right")
    for r in rows:
        t.add_row(*(str(x) for x in r))
    console.print(t)
    if note:
        console.print(note)
    console.print()


def median_ms(fn: Callable[[], Any], *, repeat: int) -> float:
    """Median wall time of ``fn`` in milliseconds over ``repeat`` runs."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def verdict(ok: bool) -> str:
    return "[green]met[/]" if ok else "[red]NOT met[/]"
