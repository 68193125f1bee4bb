"""Load: worker processes serve many sessions at once against one Postgres and one Redis.

Eight worker processes, each running 12 concurrent agent loops, serve 500 sessions (half on Postgres, half on
Redis) for two minutes. A turn picks a session at random (so several processes write to one session at
once), appends a user message and an assistant reply, and assembles the next window through the agent-loop
pipeline. At the end every session is read back whole by a fresh provider and checked exactly: every
acknowledged message is there once, and each loop's messages are in the order it wrote them.

Printed: turns per second, p50 and p99 window latency per backend, the largest worker's memory, and the
check. ``RAVI_BENCH_LOAD_SECONDS`` changes the duration, ``RAVI_BENCH_POSTGRES_DSN`` and
``RAVI_BENCH_REDIS_URL`` point at existing servers (else local ones are started).
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import random
import resource
import statistics
import time
import uuid
from collections.abc import Iterator
from typing import Any

from _history import pipeline
from _table import console, table, verdict

from ravi.agents.context import AgentContext, ContextConfig
from ravi.capabilities.postgres import PostgresHistoryProvider
from ravi.capabilities.redis import RedisHistoryProvider
from ravi.kernel.messages import ChatMessage

WORKERS = 8
LOOPS_PER_WORKER = 12
SESSIONS = 500


@contextlib.contextmanager
def servers() -> Iterator[tuple[str, str]]:
    dsn, url = os.environ.get("RAVI_BENCH_POSTGRES_DSN"), os.environ.get("RAVI_BENCH_REDIS_URL")
    with contextlib.ExitStack() as stack:
        if dsn is None:
            from ravi.capabilities.postgres.local import LocalPostgres

            dsn = stack.enter_context(LocalPostgres()).dsn
        if url is None:
            from ravi.capabilities.redis.local import LocalRedis

            url = stack.enter_context(LocalRedis()).url
        yield dsn, url


def provider(backend: str, dsn: str, url: str, scope: str) -> Any:
    if backend == "postgres":
        return PostgresHistoryProvider(dsn, schema=scope, max_size=LOOPS_PER_WORKER)
    return RedisHistoryProvider(url, prefix=scope)


def session_of(n: int) -> tuple[str, str]:
    return ("postgres" if n % 2 == 0 else "redis"), f"session-{n}"


async def serve(worker: int, dsn: str, url: str, scope: str, deadline: float) -> dict[str, Any]:
    contexts = {b: AgentContext(ContextConfig(provider(b, dsn, url, scope), pipeline())) for b in ("postgres", "redis")}
    written: dict[str, list[str]] = {}  # "loop:session" -> message ids in the order they were acknowledged
    latencies: dict[str, list[float]] = {"postgres": [], "redis": []}
    turns = 0

    async def loop(number: int) -> None:
        nonlocal turns
        rng = random.Random(worker * 1000 + number)
        name = f"w{worker}l{number}"
        while time.time() < deadline:
            backend, session = session_of(rng.randrange(SESSIONS))
            context = contexts[backend]
            user = ChatMessage.user(f"{name} asks " + "about the invoice " * rng.randrange(1, 40))
            reply = ChatMessage.assistant(f"{name} answers " + "the amount is right " * rng.randrange(1, 60))
            await context.add_messages(session, [user, reply])
            written.setdefault(f"{name}|{backend}|{session}", []).extend([user.id, reply.id])
            start = time.perf_counter()
            await context.get_prompt_window(session)
            latencies[backend].append(time.perf_counter() - start)
            turns += 1

    await asyncio.gather(*(loop(n) for n in range(LOOPS_PER_WORKER)))
    for context in contexts.values():
        await context.config.history.aclose()
    return {
        "written": written,
        "latencies": latencies,
        "turns": turns,
        "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def worker_main(worker: int, dsn: str, url: str, scope: str, deadline: float, results: Any) -> None:
    results.put((worker, asyncio.run(serve(worker, dsn, url, scope, deadline))))


async def check(dsn: str, url: str, scope: str, reports: list[dict[str, Any]]) -> tuple[int, list[str]]:
    """Read every session whole with fresh providers; return the messages checked and the problems found."""
    expected: dict[tuple[str, str], list[list[str]]] = {}
    for report in reports:
        for key, ids in report["written"].items():
            _, backend, session = key.split("|")
            expected.setdefault((backend, session), []).append(ids)
    problems, checked = [], 0
    readers = {b: provider(b, dsn, url, scope) for b in ("postgres", "redis")}
    for (backend, session), sequences in expected.items():
        stored = [m.id for m in await readers[backend].get_messages("agent", session_id=session)]
        wanted = {i for seq in sequences for i in seq}
        checked += len(stored)
        if len(stored) != len(set(stored)):
            problems.append(f"{backend} {session}: a message is stored twice")
        if set(stored) != wanted:
            problems.append(f"{backend} {session}: {len(wanted - set(stored))} lost, {len(set(stored) - wanted)} extra")
        position = {message_id: i for i, message_id in enumerate(stored)}
        for seq in sequences:
            places = [position.get(i, -1) for i in seq]
            if places != sorted(places):
                problems.append(f"{backend} {session}: a loop's messages are out of order")
    for reader in readers.values():
        await reader.aclose()
    return checked, problems


def main() -> None:
    seconds = float(os.environ.get("RAVI_BENCH_LOAD_SECONDS", "120"))
    with servers() as (dsn, url):
        scope = f"load_{uuid.uuid4().hex[:8]}"
        context = multiprocessing.get_context("spawn")
        results = context.Queue()
        deadline = time.time() + 5 + seconds  # the workers start together, after their imports
        processes = [
            context.Process(target=worker_main, args=(w, dsn, url, scope, deadline, results)) for w in range(WORKERS)
        ]
        for process in processes:
            process.start()
        reports = [results.get()[1] for _ in processes]
        for process in processes:
            process.join()
        checked, problems = asyncio.run(check(dsn, url, scope, reports))
    turns = sum(r["turns"] for r in reports)
    rows = []
    for backend in ("postgres", "redis"):
        samples = sorted(x for r in reports for x in r["latencies"][backend])
        p50 = statistics.median(samples) * 1000
        p99 = samples[int(len(samples) * 0.99) - 1] * 1000
        rows.append((backend, len(samples), f"{len(samples) / seconds:,.0f}", f"{p50:.2f}", f"{p99:.2f}"))
    table(
        f"{WORKERS} processes x {LOOPS_PER_WORKER} loops, {SESSIONS} sessions, {seconds:.0f} s",
        ["backend", "turns", "turns/s", "window p50 ms", "window p99 ms"],
        rows,
        note=(
            f"all: {turns / seconds:,.0f} turns/s ({2 * turns / seconds:,.0f} messages/s appended); "
            f"largest worker {max(r['max_rss_mb'] for r in reports):.0f} MB resident"
        ),
    )
    console.print(
        f"exact check of {checked:,} stored messages in {len({k for r in reports for k in r['written']}):,} "
        f"loop-session pairs: {verdict(not problems)}"
    )
    for problem in problems[:20]:
        console.print(f"  {problem}")


if __name__ == "__main__":
    main()
