"""Lifecycle load: eight worker processes append and read windows while others clear, clear_run and forget.

Six writer processes, each with four concurrent loops, append two-message turns to 40 sessions (half on Postgres,
half on Redis; each turn is a run of its own, so ``clear_run`` removes exactly one turn) and read the session's
window after each (``read_window``, what assembly reads, through the providers' caches). Two remover processes
meanwhile pick sessions at random and ``clear_run`` one of their runs (found with ``get_stored``), ``clear`` them
or ``forget`` them. Every process logs what it did, with the wall-clock times each call started and returned.

Afterwards a checker reads the logs and every session (fresh providers) and counts:

* acknowledged appends whose messages are stored exactly once, those removed by a removal that could have
  removed them (a ``clear`` or ``forget`` of the session that returned after the append started, a ``clear_run``
  of its run), and those lost (missing without such a removal: must be 0) or stored twice (must be 0);
* windows, and windows that held a removed message: one acknowledged before a removal of it started, read by a
  window that started after the removal returned (must be 0).

``RAVI_BENCH_LIFECYCLE_SECONDS`` changes the duration (60 s), ``RAVI_BENCH_POSTGRES_DSN`` and
``RAVI_BENCH_REDIS_URL`` point at existing servers (else local ones are started).
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import random
import tempfile
import time
import uuid
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from _table import console, table, verdict
from load import provider, servers

from ravi.kernel.messages import ChatMessage

WRITERS = 6
REMOVERS = 2
LOOPS = 4
SESSIONS = 40
WINDOW_TOKENS = 1_500
AGENT = "agent"


def session_of(n: int) -> tuple[str, str]:
    return ("postgres" if n % 2 == 0 else "redis"), f"session-{n}"


async def write(worker: int, dsn: str, url: str, scope: str, deadline: float, log: Path) -> None:
    stores = {b: provider(b, dsn, url, scope) for b in ("postgres", "redis")}
    with log.open("w") as out:

        async def loop(number: int) -> None:
            rng = random.Random(worker * 1_000 + number)
            turn = 0
            while time.time() < deadline:
                backend, session = session_of(rng.randrange(SESSIONS))
                history = stores[backend]
                run = f"w{worker}l{number}t{turn}"
                turn += 1
                batch = [
                    ChatMessage.user(f"{run} asks " + "about the invoice " * rng.randrange(1, 30)),
                    ChatMessage.assistant(f"{run} answers " + "the amount is right " * rng.randrange(1, 40)),
                ]
                ids = [m.id for m in batch]
                started = time.time()
                out.write(json.dumps({"op": "try", "b": backend, "s": session, "run": run, "ids": ids}) + "\n")
                await history.append_many(AGENT, batch, session_id=session, run_id=run)
                out.write(
                    json.dumps(
                        {
                            "op": "append",
                            "b": backend,
                            "s": session,
                            "run": run,
                            "ids": ids,
                            "t0": started,
                            "t1": time.time(),
                        }
                    )
                    + "\n"
                )
                started = time.time()
                window = await history.read_window(AGENT, session_id=session, tokens=WINDOW_TOKENS)
                out.write(
                    json.dumps(
                        {
                            "op": "window",
                            "b": backend,
                            "s": session,
                            "ids": [m.id for m in window.messages],
                            "t0": started,
                            "t1": time.time(),
                        }
                    )
                    + "\n"
                )

        await asyncio.gather(*(loop(n) for n in range(LOOPS)))
    for history in stores.values():
        await history.aclose()


async def remove(worker: int, dsn: str, url: str, scope: str, deadline: float, log: Path) -> None:
    stores = {b: provider(b, dsn, url, scope) for b in ("postgres", "redis")}
    rng = random.Random(-worker)
    with log.open("w") as out:
        while time.time() < deadline:
            backend, session = session_of(rng.randrange(SESSIONS))
            history = stores[backend]
            roll = rng.random()
            started = time.time()
            if roll < 0.6:
                stored = await history.get_stored(AGENT, session_id=session)
                runs = sorted({s.run_id for s in stored})
                if not runs:
                    continue
                run = rng.choice(runs)
                started = time.time()
                count = await history.clear_run(AGENT, session_id=session, run_id=run)
                entry = {"op": "clear_run", "run": run}
            elif roll < 0.8:
                count, entry = await history.clear(AGENT, session_id=session), {"op": "clear"}
            else:
                count, entry = await history.forget(AGENT, session_id=session), {"op": "forget"}
            entry |= {"b": backend, "s": session, "removed": count, "t0": started, "t1": time.time()}
            out.write(json.dumps(entry) + "\n")
            await asyncio.sleep(rng.uniform(0.05, 0.25))  # pacing: a removal now and then, not a flood
    for history in stores.values():
        await history.aclose()


def worker_main(worker: int, dsn: str, url: str, scope: str, start: Any, deadline: Any, log: str) -> None:
    """Run one worker from when every worker is ready (its imports done) until the shared deadline."""
    job = write if worker < WRITERS else remove
    start.wait()  # every worker ready: the parent sets the deadline
    start.wait()
    asyncio.run(job(worker, dsn, url, scope, deadline.value, Path(log)))


def read_logs(paths: list[Path]) -> list[dict[str, Any]]:
    entries = []
    for path in paths:
        for line in path.read_text().splitlines():
            if line.strip():
                entries.append(json.loads(line))
    return entries


async def check(dsn: str, url: str, scope: str, entries: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """The counts of each backend (see the module's docstring)."""
    appends = [e for e in entries if e["op"] == "append"]
    tried = {i for e in entries if e["op"] == "try" for i in e["ids"]}
    removals: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for e in entries:
        if e["op"] in ("clear", "clear_run", "forget"):
            removals[e["b"], e["s"]].append(e)
    readers = {b: provider(b, dsn, url, scope) for b in ("postgres", "redis")}
    stored: dict[tuple[str, str], Counter[str]] = {}
    for n in range(SESSIONS):
        backend, session = session_of(n)
        stored[backend, session] = Counter(m.id for m in await readers[backend].get_messages(AGENT, session_id=session))
    for reader in readers.values():
        await reader.aclose()

    counts: dict[str, Counter[str]] = {b: Counter() for b in ("postgres", "redis")}
    acknowledged: dict[str, tuple[str, float]] = {}  # message id -> (run, acknowledged at)
    for e in appends:
        key, count = (e["b"], e["s"]), counts[e["b"]]
        count["appends"] += 1
        for message_id in e["ids"]:
            acknowledged[message_id] = (e["run"], e["t1"])
        held = [stored[key][i] for i in e["ids"]]
        removable = any(r["t1"] >= e["t0"] and (r["op"] != "clear_run" or r["run"] == e["run"]) for r in removals[key])
        if all(h == 1 for h in held):
            count["present once"] += 1
        elif any(h > 1 for h in held):
            count["stored twice"] += 1
        elif removable:
            count["removed"] += 1
        else:
            count["lost"] += 1
    for key, held in stored.items():
        counts[key[0]]["unknown ids"] += sum(1 for i in held if i not in tried)
    for e in entries:
        if e["op"] == "window":
            count = counts[e["b"]]
            count["windows"] += 1
            gone = False
            for r in removals[e["b"], e["s"]]:
                if r["t1"] >= e["t0"]:
                    continue  # not yet returned when the read started
                for message_id in e["ids"]:
                    run, acked = acknowledged.get(message_id, ("", float("inf")))
                    if acked < r["t0"] and (r["op"] != "clear_run" or r["run"] == run):
                        gone = True
            count["windows holding a removed message"] += gone
    for e in entries:
        if e["op"] in ("clear", "clear_run", "forget"):
            counts[e["b"]][e["op"]] += 1
    return {b: dict(c) for b, c in counts.items()}


def main() -> None:
    seconds = float(os.environ.get("RAVI_BENCH_LIFECYCLE_SECONDS", "60"))
    with servers() as (dsn, url), tempfile.TemporaryDirectory() as logs:
        scope = f"life_{uuid.uuid4().hex[:8]}"
        context = multiprocessing.get_context("spawn")
        start, deadline = context.Barrier(WRITERS + REMOVERS + 1), context.Value("d", 0.0)
        paths = [Path(logs) / f"worker-{w}.jsonl" for w in range(WRITERS + REMOVERS)]
        processes = [
            context.Process(target=worker_main, args=(w, dsn, url, scope, start, deadline, str(paths[w])))
            for w in range(WRITERS + REMOVERS)
        ]
        for process in processes:
            process.start()
        start.wait()  # the workers start together, after their imports
        deadline.value = time.time() + seconds
        start.wait()
        for process in processes:
            process.join()
        failed = [w for w, p in enumerate(processes) if p.exitcode != 0]
        counts = asyncio.run(check(dsn, url, scope, read_logs(paths)))
    columns = [
        "appends",
        "present once",
        "removed",
        "lost",
        "stored twice",
        "windows",
        "windows holding a removed message",
        "clear",
        "clear_run",
        "forget",
    ]
    table(
        f"{WRITERS} writer and {REMOVERS} remover processes, {SESSIONS} sessions, {seconds:.0f} s",
        ["backend", *columns],
        [(b, *(f"{c.get(k, 0):,}" for k in columns)) for b, c in counts.items()],
        note="removed: acknowledged appends a clear, clear_run or forget of theirs could remove, and did",
    )
    good = not failed and all(
        c.get("appends", 0) > 0
        and c.get("lost", 0) == 0
        and c.get("stored twice", 0) == 0
        and c.get("windows holding a removed message", 0) == 0
        and c.get("unknown ids", 0) == 0
        for c in counts.values()
    )
    console.print(
        f"every acknowledged append present once unless deliberately removed, no window holding a removed "
        f"message: {verdict(good)}" + (f" (workers {failed} failed)" if failed else "")
    )


if __name__ == "__main__":
    main()
