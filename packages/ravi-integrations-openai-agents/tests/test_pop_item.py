"""``RaviSession.pop_item`` is atomic on the store: concurrent pops return different items, a pop never moves
another writer's items, and a failure loses nothing."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from ravi.agents.context import InMemoryHistoryProvider
from ravi.integrations.openai_agents import RaviSession
from ravi.kernel.errors import BackendUnavailable
from ravi.kernel.messages import ChatMessage


def said(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def answered(text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "role": "assistant",
        "id": f"msg-{text}",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


async def pops_race_each_other(session: RaviSession) -> None:
    """Ten concurrent pops of a session of ten items return the ten items, each once, and leave it empty."""
    items = [said("first"), *(answered(f"part {i}") for i in range(8)), said("last")]
    await session.add_items(items)
    popped = await asyncio.gather(*(session.pop_item() for _ in range(10)))
    assert sorted(map(str, popped)) == sorted(map(str, items)), "two pops returned the same item"
    assert await session.get_items() == []
    assert await session.pop_item() is None


async def a_pop_racing_add_items_moves_nothing(session: RaviSession) -> None:
    """A pop racing ``add_items`` removes one item; the batch it came from and the new items keep their order."""
    first = [said("question"), answered("one"), answered("two"), answered("three")]
    await session.add_items(first)
    later = [said("follow-up"), answered("reply")]
    popped, _ = await asyncio.gather(session.pop_item(), session.add_items(later))
    got = await session.get_items()
    if popped == first[-1]:
        assert got == [*first[:-1], *later], "the batch the pop rewrote moved after the new items"
    else:
        assert popped == later[-1]
        assert got == [*first, *later[:-1]]


class Yielding(InMemoryHistoryProvider):
    """The in-memory store with a pause before each call, where a server's round trip would let other tasks run
    (each call itself stays atomic)."""

    async def get_messages(self, *args: Any, **kwargs: Any) -> list[ChatMessage]:
        await asyncio.sleep(0)
        return await super().get_messages(*args, **kwargs)

    async def read_window(self, *args: Any, **kwargs: Any) -> Any:
        await asyncio.sleep(0)
        return await super().read_window(*args, **kwargs)

    async def append_many(self, *args: Any, **kwargs: Any) -> None:
        await asyncio.sleep(0)
        await super().append_many(*args, **kwargs)

    async def clear_run(self, *args: Any, **kwargs: Any) -> int:
        await asyncio.sleep(0)
        return await super().clear_run(*args, **kwargs)

    async def replace_last(self, *args: Any, **kwargs: Any) -> bool:
        await asyncio.sleep(0)
        return await super().replace_last(*args, **kwargs)


def test_concurrent_pops_return_different_items() -> None:
    asyncio.run(pops_race_each_other(RaviSession("s", Yielding())))


def test_a_pop_racing_add_items_moves_nothing() -> None:
    for _ in range(5):
        asyncio.run(a_pop_racing_add_items_moves_nothing(RaviSession("s", Yielding())))


class FailingReplace(InMemoryHistoryProvider):
    """Refuses every ``replace_last``, as a store whose server went away would."""

    async def replace_last(
        self,
        agent_id: str,
        *,
        session_id: str,
        message_id: str,
        messages: Sequence[ChatMessage] = (),
        run_id: str = "",
    ) -> bool:
        raise BackendUnavailable("the server went away")


def test_a_failed_pop_loses_nothing() -> None:
    async def main() -> None:
        session = RaviSession("s", FailingReplace())
        items = [said("question"), answered("one"), answered("two")]
        await session.add_items(items)
        with pytest.raises(BackendUnavailable):
            await session.pop_item()
        assert await session.get_items() == items

    asyncio.run(main())


class WithoutTailEditor:
    """A history store that lacks ``replace_last`` (a third party's): pops fall back to rewriting the batch."""

    def __init__(self) -> None:
        self.inner = InMemoryHistoryProvider()

    def __getattr__(self, name: str) -> Any:
        if name == "replace_last":
            raise AttributeError(name)
        return getattr(self.inner, name)


def test_pops_on_a_store_without_tail_editing_are_serialised_in_the_process() -> None:
    async def main() -> None:
        session = RaviSession("s", WithoutTailEditor())  # type: ignore[arg-type]
        await pops_race_each_other(session)

    asyncio.run(main())


class HeldWithoutTailEditor(WithoutTailEditor):
    """The same store, whose reads from one event loop wait until the test lets them through."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__()
        self.loop, self.gate, self.entered = loop, asyncio.Event(), asyncio.Event()

    async def get_messages(self, *args: Any, **kwargs: Any) -> list[ChatMessage]:
        if asyncio.get_running_loop() is self.loop:
            self.entered.set()
            await self.gate.wait()
        return await self.inner.get_messages(*args, **kwargs)


def test_a_pop_from_another_event_loop_is_not_refused_while_this_loops_pops_wait() -> None:
    """A store shared by threads that each run their own event loop: while one loop pops a session, with another
    pop of that loop waiting, a pop of the same session from a second loop runs. One lock served every loop: the
    second loop found it held by the first and raised ``RuntimeError``."""

    async def main() -> None:
        store = HeldWithoutTailEditor(asyncio.get_running_loop())
        session = RaviSession("s", store)  # type: ignore[arg-type]
        store.gate.set()
        await session.add_items([said("one"), said("two"), said("three")])
        store.gate.clear()
        pops = [asyncio.create_task(session.pop_item())]
        await store.entered.wait()  # the first pop holds the session's lock
        pops.append(asyncio.create_task(session.pop_item()))
        await asyncio.sleep(0)  # one step: the second pop reaches the lock (nothing before it awaits) and waits
        other = await asyncio.to_thread(asyncio.run, RaviSession("s", store).pop_item())  # type: ignore[arg-type]
        store.gate.set()
        popped = [other, *await asyncio.gather(*pops)]
        assert sorted(map(str, popped)) == sorted(map(str, [said("one"), said("two"), said("three")]))

    asyncio.run(main())


class SlottedWithoutTailEditor:
    """A third party's store that cannot be weakly referenced nor hashed (``__slots__``, and ``__eq__`` without
    ``__hash__``), and lacks ``replace_last``."""

    __slots__ = ("inner",)

    def __init__(self) -> None:
        self.inner = InMemoryHistoryProvider()

    def __eq__(self, other: object) -> bool:
        return other is self

    __hash__ = None  # type: ignore[assignment]

    def __getattr__(self, name: str) -> Any:
        if name == "replace_last":
            raise AttributeError(name)
        return getattr(self.inner, name)


def test_pops_on_a_store_that_cannot_be_weakly_referenced_are_serialised_too() -> None:
    """The locks of pops were kept in a dictionary keyed weakly by the store: such a store made ``pop_item`` raise
    ``TypeError``."""

    async def main() -> None:
        session = RaviSession("s", SlottedWithoutTailEditor())  # type: ignore[arg-type]
        await pops_race_each_other(session)

    asyncio.run(main())
