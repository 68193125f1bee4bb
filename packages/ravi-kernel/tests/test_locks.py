from __future__ import annotations

import asyncio
import gc

from ravi.kernel.locks import KeyedLocks


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
