"""The Redis history against langchain-community's RedisChatMessageHistory on the same server.

Append throughput in batches of 100, and reading a 10,000-message session: Ravi's ``get_prompt_window`` (the
agent-loop pipeline, warm: append one message, assemble again) and a cold full read, beside
``RedisChatMessageHistory.messages``. The server is ``RAVI_BENCH_REDIS_URL`` if set, else a local one.
Targets: at least 5x its append throughput and at least 5x its read speed.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import statistics
import time
import uuid
import warnings
from collections.abc import Iterator

from _history import history_figures
from _table import console, table, verdict
from assembly import to_langchain

from ravi.agents.demo import agentic_transcript
from ravi.capabilities.redis import RedisHistoryProvider
from ravi.kernel.messages import ChatMessage


@contextlib.contextmanager
def server() -> Iterator[str]:
    url = os.environ.get("RAVI_BENCH_REDIS_URL")
    if url:
        yield url
        return
    from ravi.capabilities.redis.local import LocalRedis

    with LocalRedis() as local:
        yield local.url


async def ravi(url: str, messages: list[ChatMessage]) -> dict[str, float]:
    prefix = f"bench{uuid.uuid4().hex[:8]}"
    return await history_figures(lambda: RedisHistoryProvider(url, prefix=prefix), messages)


def langchain(url: str, messages: list[ChatMessage]) -> dict[str, float]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from langchain_community.chat_message_histories import RedisChatMessageHistory

    lc = to_langchain(messages)
    history = RedisChatMessageHistory(str(uuid.uuid4()), url=url)
    start = time.perf_counter()
    for i in range(0, len(lc), 100):
        history.add_messages(lc[i : i + 100])
    append = len(lc) / (time.perf_counter() - start)
    reads = []
    for _ in range(5):
        t0 = time.perf_counter()
        history.messages  # noqa: B018 - the property is the read
        reads.append(time.perf_counter() - t0)
    return {"append": append, "read": statistics.median(reads) * 1000}


async def clear_run_stall(url: str, size: int = 200_000) -> tuple[float, float]:
    """``clear_run`` of one run (a tenth of the messages) on a ``size``-message session: its time, and the longest
    another client waited meanwhile for a ``PING`` (how long Redis was blocked), both in seconds."""
    import redis.asyncio as aioredis

    prefix = f"bench{uuid.uuid4().hex[:8]}"
    history = RedisHistoryProvider(url, prefix=prefix)
    for i in range(0, size, 2_000):
        batch = [ChatMessage.user(f"m{j} " + "x" * 100) for j in range(i, i + 2_000)]
        await history.append_many("agent", batch, session_id="s", run_id="r" if i % 20_000 == 0 else "")
    probe = aioredis.Redis.from_url(url)
    worst, done = 0.0, False

    async def ping() -> None:
        nonlocal worst
        while not done:
            start = time.perf_counter()
            await probe.ping()
            worst = max(worst, time.perf_counter() - start)

    pinger = asyncio.create_task(ping())
    start = time.perf_counter()
    await history.clear_run("agent", session_id="s", run_id="r")
    took = time.perf_counter() - start
    done = True
    await pinger
    await history.clear("agent", session_id="s")
    await history.aclose()
    await probe.aclose()
    return took, worst


def main() -> None:
    messages = agentic_transcript(10_000)
    with server() as url:
        ours = asyncio.run(ravi(url, messages))
        theirs = langchain(url, messages)
        took, stall = asyncio.run(clear_run_stall(url))
    append_ratio = ours["append"] / theirs["append"]
    read_ratio = theirs["read"] / ours["window"]
    table(
        "Redis history, 10,000-message agent session, same server",
        ["", "append (msgs/s, batches of 100)", "read (ms)", "get_prompt_window warm (ms)"],
        [
            (
                "Ravi RedisHistoryProvider",
                f"{ours['append']:,.0f}",
                f"{ours['cold_read']:.1f} (cold, whole)",
                f"{ours['window']:.2f}",
            ),
            (
                "langchain-community RedisChatMessageHistory",
                f"{theirs['append']:,.0f}",
                f"{theirs['read']:.1f} (.messages)",
                "-",
            ),
            (
                "ratio",
                f"{append_ratio:.1f}x",
                f"{theirs['read'] / ours['cold_read']:.1f}x cold",
                f"{read_ratio:.0f}x vs .messages",
            ),
        ],
    )
    console.print(f"target: >= 5x append throughput: {append_ratio:.1f}x, {verdict(append_ratio >= 5)}")
    console.print(f"target: >= 5x read speed (window vs .messages): {read_ratio:.0f}x, {verdict(read_ratio >= 5)}")
    console.print(
        f"clear_run of 20,000 of 200,000 messages: {took:.2f} s, Redis blocked at most {stall * 1000:.0f} ms "
        f"(one whole-session script used to block it 3.4 s): {verdict(stall < 0.5)}\n"
    )


if __name__ == "__main__":
    main()
