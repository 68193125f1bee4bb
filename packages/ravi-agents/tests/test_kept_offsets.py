"""Offsets kept across reads: a window placed from the offsets earlier reads of the session kept gives every message
the offset a fresh walk of its read gives, whatever happened to the session between the reads."""

from __future__ import annotations

import asyncio

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ravi.agents.context import InMemoryHistoryProvider
from ravi.kernel.agent import SessionContext, SessionState
from ravi.kernel.messages import ChatMessage
from ravi.kernel.storage import HistoryWindow
from ravi.kernel.tokens import stored_tokens

POOL = 40
SESSIONS = ("one", "two")


def _pool(sizes: list[int], roles: list[str]) -> dict[str, ChatMessage]:
    """The messages sessions are written with, by id; both sessions take theirs from it, so they share ids."""
    pool: dict[str, ChatMessage] = {}
    for n, (size, role) in enumerate(zip(sizes, roles, strict=True)):
        text, message_id = "w" * size or "x", f"m{n}"
        if role == "system":
            pool[message_id] = ChatMessage.system(text, id=message_id)
        elif role == "assistant":
            pool[message_id] = ChatMessage.assistant(text, id=message_id)
        elif role == "tool":
            pool[message_id] = ChatMessage.tool(f"call-{n}", text, id=message_id)
        else:
            pool[message_id] = ChatMessage.user(text, id=message_id)
    return pool


_IDS = st.lists(st.integers(0, POOL - 1), max_size=3)
_OPS = st.one_of(
    st.tuples(st.just("append"), st.sampled_from(SESSIONS), st.lists(st.integers(0, POOL - 1), min_size=1, max_size=6)),
    st.tuples(st.just("read"), st.sampled_from(SESSIONS), _IDS),
    st.tuples(st.just("stale"), st.sampled_from(SESSIONS), st.just([])),
    st.tuples(st.just("append"), st.sampled_from(SESSIONS), st.lists(st.integers(0, POOL - 1), min_size=1, max_size=3)),
    st.tuples(st.just("read"), st.sampled_from(SESSIONS), _IDS),
    st.tuples(st.just("replace_last"), st.sampled_from(SESSIONS), st.lists(st.integers(0, POOL - 1), max_size=2)),
    st.tuples(st.just("clear"), st.sampled_from(SESSIONS), st.just([])),
)


def _context(name: str, view: HistoryWindow, unsaved: list[ChatMessage], state: SessionState | None) -> SessionContext:
    """A window's session as the engine sets it up for ``view``: with ``state``, the offsets found are kept (the
    read is the store's, with its generation); without, every offset is walked from the read's head."""
    own = SessionState() if state is None else state
    session = SessionContext("agent", name, generation=view.generation, state=own)
    messages = [*view.messages, *unsaved]
    stored = len(view.messages) if state is not None else None
    if view.complete:
        session.read_from(messages, stored=stored)
    else:
        session.read_from(messages, head=view.head, before=view.before, stored=stored)
    return session


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    sizes=st.lists(st.integers(0, 300), min_size=POOL, max_size=POOL),
    roles=st.lists(st.sampled_from(["user", "user", "assistant", "tool", "system"]), min_size=POOL, max_size=POOL),
    ops=st.lists(_OPS, min_size=3, max_size=30),
    data=st.data(),
)
def test_kept_offsets_equal_a_fresh_walk_of_each_read(
    sizes: list[int], roles: list[str], ops: list[tuple[str, str, list[int]]], data: st.DataObject
) -> None:
    """Over random appends, ``replace_last``, clears, partial and whole reads, reads held back while the session
    changed (a slower window), and unsaved messages after a read, of two sessions that share message ids, each
    with its own state: ``SessionContext.offset`` with the kept offsets equals a fresh walk, for every id asked
    (messages of the read, of its head, of the other session, of an older generation, unknown), in any order."""
    pool = _pool(sizes, roles)
    history = InMemoryHistoryProvider()
    states = {name: SessionState() for name in SESSIONS}
    views: dict[str, list[HistoryWindow]] = {name: [] for name in SESSIONS}

    async def run() -> None:
        for op, name, picks in ops:
            held = await history.get_messages("agent", session_id=name)
            if op == "append":
                await history.append_many("agent", [pool[f"m{n}"] for n in picks], session_id=name)
                continue
            if op == "replace_last":
                if held:
                    fresh = [pool[f"m{n}"] for n in picks if all(m.id != f"m{n}" for m in held)]
                    await history.replace_last("agent", session_id=name, message_id=held[-1].id, messages=fresh)
                continue
            if op == "clear":
                await history.clear("agent", session_id=name)
                continue
            if op == "stale":
                if not views[name]:
                    continue
                view = data.draw(st.sampled_from(views[name]), label="stale view")
                unsaved: list[ChatMessage] = []
            else:
                total = sum(map(stored_tokens, held))
                tokens = data.draw(st.integers(0, total + 8), label="tokens")
                view = await history.read_window("agent", session_id=name, tokens=tokens)
                views[name].append(view)
                ids = {m.id for m in view.messages}
                unsaved = list({f"m{n}": pool[f"m{n}"] for n in picks if f"m{n}" not in ids}.values())
            kept = _context(name, view, unsaved, states[name])
            fresh_walk = _context(name, view, unsaved, None)
            asked = data.draw(st.permutations([*pool, "unknown"]), label="asked")
            for message_id in asked:
                assert kept.offset(message_id) == fresh_walk.offset(message_id), (op, name, message_id)

    asyncio.run(run())


def test_a_warm_read_places_its_messages_from_the_offsets_kept() -> None:
    """A second read of the same generation answers the offset of a message the first read placed from what
    that read kept, without walking from its head; a read of another generation keeps nothing of the first."""

    async def run() -> None:
        history = InMemoryHistoryProvider()
        messages = [ChatMessage.user(f"turn {i} " + "w" * i, id=f"t{i}") for i in range(200)]
        await history.append_many("agent", messages, session_id="s")
        state = SessionState()
        view = await history.read_window("agent", session_id="s", tokens=10_000_000)
        first = _context("s", view, [], state)
        assert first.offset("t150") == sum(map(stored_tokens, messages[:150]))
        await history.append_many("agent", [ChatMessage.user("next", id="t200")], session_id="s")
        view = await history.read_window("agent", session_id="s", tokens=10_000_000)
        second = _context("s", view, [], state)
        assert second.offset("t150") == first.offset("t150")
        assert second._scanned == 0  # not walked from the head: placed from the kept offsets
        await history.clear("agent", session_id="s")
        await history.append_many("agent", messages[150:], session_id="s")
        view = await history.read_window("agent", session_id="s", tokens=10_000_000)
        third = _context("s", view, [], state)
        assert third.offset("t150") == 0  # a new generation: the kept offsets of the old one are not used

    asyncio.run(run())
