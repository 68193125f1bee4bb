from __future__ import annotations

import asyncio
import gc

import pytest

from ravi.kernel.loops import KeyedLocks, until_loop_ends


def test_one_loops_tasks_share_a_keys_lock_and_other_keys_do_not() -> None:
    locks = KeyedLocks[str]()

    async def main() -> None:
        order: list[str] = []

        entered = {name: asyncio.Event() for name in "abc"}
        release = asyncio.Event()

        async def write(key: str, name: str) -> None:
            async with locks(key):
                order.append(f"{name} in")
                entered[name].set()
                await release.wait()
                order.append(f"{name} out")

        tasks = [asyncio.create_task(write("s", n)) for n in ("a", "b")]
        other = asyncio.create_task(write("t", "c"))
        await entered["a"].wait()
        await entered["c"].wait()  # another key's task is in while "a" holds "s"
        assert sorted(order) == ["a in", "c in"]  # "b" waits for "a"
        assert locks("s") is locks("s") and locks("s") is not locks("t")
        release.set()
        await asyncio.gather(*tasks, other)
        assert order.index("a out") < order.index("b in")

    asyncio.run(main())


def test_each_event_loop_gets_its_own_lock() -> None:
    locks = KeyedLocks[str]()

    async def held_here() -> asyncio.Lock:
        lock = locks("s")
        await lock.acquire()
        return lock

    async def main() -> None:
        mine = await held_here()
        # another thread's loop takes the same key at once: a lock of its own, not this loop's held one
        theirs_was_free = await asyncio.to_thread(asyncio.run, _free(locks))
        assert theirs_was_free and mine.locked()
        mine.release()

    asyncio.run(main())


async def _free(locks: KeyedLocks[str]) -> bool:
    lock = locks("s")
    free = not lock.locked()
    async with lock:
        return free


def test_a_lock_no_task_holds_is_not_kept() -> None:
    locks = KeyedLocks[int]()

    async def main() -> None:
        for key in range(100):
            async with locks(key):
                pass

    asyncio.run(main())
    gc.collect()
    assert len(locks._locks) == 0


def test_a_resource_closes_once_on_its_own_loop_when_the_loop_ends() -> None:
    closed: list[asyncio.AbstractEventLoop] = []
    opened: list[asyncio.AbstractEventLoop] = []

    async def close() -> None:
        closed.append(asyncio.get_running_loop())

    async def open_one() -> object:
        opened.append(asyncio.get_running_loop())
        return until_loop_ends(close)

    handle = asyncio.run(open_one())
    assert closed == opened  # ran once, on the loop it was opened on, before that loop closed
    with asyncio.Runner() as runner:
        runner.run(open_one())
        assert len(closed) == 1  # the loop still runs
    assert closed == opened
    del handle


def test_closing_a_resource_early_closes_it_once() -> None:
    closed: list[str] = []

    async def close() -> None:
        closed.append("closed")

    async def main() -> None:
        handle = until_loop_ends(close)
        await handle.aclose()
        assert closed == ["closed"]
        await handle.aclose()

    asyncio.run(main())
    assert closed == ["closed"]  # not again as the loop ended


def test_a_resource_needs_a_running_loop() -> None:
    async def close() -> None:
        pass

    with pytest.raises(RuntimeError):
        until_loop_ends(close)
