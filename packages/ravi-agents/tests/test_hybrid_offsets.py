"""Offsets a warm window keeps over the two-tier history agree with a fresh window's over the same read."""

from __future__ import annotations

from collections.abc import Sequence

from ravi.agents.context import HybridHistoryProvider, InMemoryHistoryProvider
from ravi.kernel.agent.context import SessionContext, SessionState
from ravi.kernel.messages import ChatMessage
from ravi.kernel.storage.history import HistoryWindow
from ravi.kernel.tokens import stored_tokens


class _RewrittenAfterGeneration(InMemoryHistoryProvider):
    """A cold tier on which another writer rewrites the session (clears it and stores part of it again, with the
    same ids) right after a reader took the session's generation: the interleaving of two processes."""

    def __init__(self) -> None:
        super().__init__()
        self.rewrite: tuple[HybridHistoryProvider, Sequence[ChatMessage]] | None = None

    async def generation(self, agent_id: str, *, session_id: str) -> str:
        generation = await super().generation(agent_id, session_id=session_id)
        if self.rewrite is not None:
            history, kept = self.rewrite
            self.rewrite = None
            await history.clear(agent_id, session_id=session_id)
            await history.append_many(agent_id, kept, session_id=session_id)
        return generation


def _offset(view: HistoryWindow, state: SessionState, message_id: str) -> int | None:
    session = SessionContext("a", "s", generation=view.generation, state=state)
    messages = list(view.messages)
    session.read_from(messages, head=view.head, before=view.before if not view.complete else 0, stored=len(messages))
    return session.offset(message_id)


async def test_a_session_rewritten_between_the_generation_and_the_read_is_placed_as_a_fresh_window_places_it() -> None:
    cold = _RewrittenAfterGeneration()
    history = HybridHistoryProvider(InMemoryHistoryProvider(), cold)
    first, second, third = (ChatMessage.user(text * 40) for text in ("alpha ", "beta ", "gamma "))
    await history.append_many("a", [first, second, third], session_id="s")
    warm = SessionState()
    view = await history.read_window("a", session_id="s", tokens=10**6)
    assert _offset(view, warm, third.id) == stored_tokens(first) + stored_tokens(second)

    cold.rewrite = (history, [second, third])  # the first message goes; the others keep their ids
    view = await history.read_window("a", session_id="s", tokens=10**6)
    assert [m.id for m in view.messages] == [second.id, third.id]
    fresh = _offset(view, SessionState(), third.id)
    assert fresh == stored_tokens(second)
    assert _offset(view, warm, third.id) == fresh


class _RewrittenOnEveryRead(InMemoryHistoryProvider):
    """A cold tier whose session another writer clears and fills again after every generation a reader takes
    (the writer's own appends read generations too: those start no rewrite and are not counted)."""

    def __init__(self) -> None:
        super().__init__()
        self.history: HybridHistoryProvider | None = None
        self.taken: list[str] = []
        self.rewriting = False

    async def generation(self, agent_id: str, *, session_id: str) -> str:
        generation = await super().generation(agent_id, session_id=session_id)
        if self.history is not None and not self.rewriting:
            self.taken.append(generation)
            self.rewriting = True
            try:
                await self.history.clear(agent_id, session_id=session_id)
                rewrite = ChatMessage.user(f"rewrite {len(self.taken)}")
                await self.history.append(agent_id, rewrite, session_id=session_id)
            finally:
                self.rewriting = False
        return generation


async def test_a_session_rewritten_under_every_read_is_read_under_the_generation_taken_before_the_read() -> None:
    """The reads give up after a few attempts with newer messages under an older generation (whose derived
    records are refused), never older messages under a newer one."""
    cold = _RewrittenOnEveryRead()
    history = HybridHistoryProvider(InMemoryHistoryProvider(), cold)
    await history.append("a", ChatMessage.user("hello"), session_id="s")
    cold.history = HybridHistoryProvider(history.hot, cold)  # another writer: a lock of its own
    view = await history.read_window("a", session_id="s", tokens=10**6)
    assert 2 < len(cold.taken) < 10
    assert view.generation == cold.taken[-2]  # taken before the last read; the last one was taken after it
    assert [m.text for m in view.messages] == [f"rewrite {len(cold.taken) - 1}"]
