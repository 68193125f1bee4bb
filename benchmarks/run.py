"""Run the benchmarks and print their figures: ``make bench`` (or ``python benchmarks/run.py [NAME ...]``).

These are measurements, not tests: they print what this machine does and whether each target is met.
"""

from __future__ import annotations

import importlib
import platform
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _table import console

BENCHMARKS = {
    "assembly": "Context assembly vs trim_messages",
    "stores": "In-memory vector search and graph neighbourhoods",
    "postgres": "Postgres history and pgvector on a real server",
    "redis_tier": "Redis history beside langchain-community on a real server",
    "hybrid_tier": "Appends to the hybrid history (Redis in front of Postgres), beside writing each tier in turn",
    "s3_age": "S3 blob throughput and AGE neighbourhoods on real servers",
    "recall.bench": "Relevant recall versus recency on long agent sessions",
    "recall.evidence": "Evidence recall on long two-person conversations beside a plain BM25 retriever",
    "recall.cost": "What relevant recall costs: warm windows, the offline embedding model",
    "cache": "Cache-stable windows with watermarks",
    "load": "Eight worker processes on one Postgres and one Redis, checked exactly",
    "lifecycle": "Eight processes append and read windows while others clear, clear_run and forget",
    "fit": "Windows that fit the model they are sent to: exact counters, the estimator, margins",
    "window": "Windows read from the newest part of a session, in memory, on Postgres and on Redis",
    "frameworks": "Ravi in each framework's agent loop beside the framework's own memory, 1,000 turns",
    "query": "Recall windows whose request is huge, in memory and on Postgres",
    "telemetry": "What tracing costs a window: none, off (the default) and on",
    "plans": "Warm Postgres windows before statistics, mid-burst, skewed and after VACUUM ANALYZE",
    "recall_postgres": "Warm relevant-recall windows on Postgres beside plain ones, and their statements",
}


def main(argv: list[str]) -> int:
    chosen = argv or list(BENCHMARKS)
    unknown = [name for name in chosen if name not in BENCHMARKS]
    if unknown:
        console.print(f"unknown benchmark(s): {', '.join(unknown)}; choose from {', '.join(BENCHMARKS)}")
        return 2
    console.print(
        f"[bold]Ravi benchmarks[/] on {platform.machine()}, Python {platform.python_version()}, "
        f"{platform.processor() or 'unknown CPU'}\n"
    )
    for name in chosen:
        console.rule(BENCHMARKS[name])
        importlib.import_module(name).main()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
