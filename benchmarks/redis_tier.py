"""The Redis history against langchain-community's RedisChatMessageHistory on the same server (issue 6).

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


def main() -> None:
    messages = agentic_transcript(10_000)
    with server() as url:
        ours = asyncio.run(ravi(url, messages))
        theirs = langchain(url, messages)
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
    console.print(f"target: >= 5x read speed (window vs .messages): {read_ratio:.0f}x, {verdict(read_ratio >= 5)}\n")


if __name__ == "__main__":
    main()
