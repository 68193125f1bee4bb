"""Relevant recall ranks once for the windows of one request: while an agent works through tool calls, the
ranking of the older units is kept in the session's state, within one generation of the session, and only while
the session grew by less than a sixteenth of the part ranked."""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ravi.agents.context import (
    CompactionPipeline,
    InMemoryHistoryProvider,
    RelevantRecallStrategy,
    ToolResultCompactionStrategy,
    WindowRequest,
)
from ravi.agents.context.compaction.relevant_recall import _Rankings
from ravi.kernel.messages import ChatMessage, ToolCallBlock
from ravi.kernel.tokens import stored_tokens

TOPICS = ["walrus", "staging", "invoice", "kettle", "harbour", "lantern", "orchard", "violin"]


class Searching(InMemoryHistoryProvider):
    """The in-memory store, noting each search it makes: the request and where the part searched ends."""

    def __init__(self) -> None:
        super().__init__()
        self.searches: list[tuple[str, int]] = []
        self.limits: list[int] = []

    async def search_hybrid(self, agent_id: str, *, session_id: str, query: str, before: int, **kw: Any) -> Any:
        self.searches.append((query, before))
        self.limits.append(kw["limit"])
        return await super().search_hybrid(agent_id, session_id=session_id, query=query, before=before, **kw)


def _session(n: int, tag: str = "", size: int = 20) -> list[ChatMessage]:
    messages = [ChatMessage.system("be brief")]
    for i in range(n):
        topic = TOPICS[i % len(TOPICS)]
        messages += [
            ChatMessage.user(f"{tag}question {i} about the {topic} " + "detail " * size),
            ChatMessage.assistant(f"{tag}answer {i}: the {topic} is fine " + "more " * size),
        ]
    return messages


def _step(i: int, size: int = 1) -> list[ChatMessage]:
    call = ToolCallBlock(id=f"loop-{i}", name="read_log", arguments={"page": i})
    return [ChatMessage.assistant(None, tool_calls=[call]), ChatMessage.tool(f"loop-{i}", f"page {i} " * size)]


def _pipeline(budget: int = 1_500, share: float | None = None) -> CompactionPipeline:
    strategy = RelevantRecallStrategy(budget, meaning=None, recall_share=share)
    return CompactionPipeline([ToolResultCompactionStrategy(), strategy])


def test_the_windows_of_one_request_share_its_rankings_and_are_those_of_a_fresh_ranking() -> None:
    """Twelve tool calls and results after one request: no part is searched twice for the same request and depth
    (the newest turns' start moves now and then, which changes the part ranked), fewer searches are made than
    windows, and each window is the window a pipeline with nothing kept makes of the same session."""

    async def main() -> list[tuple[str, int, int]]:
        store = Searching()
        await store.append_many("a", _session(300, size=60), session_id="s")
        await store.append_many("a", [ChatMessage.user("what did we say about the walrus?")], session_id="s")
        pipeline = _pipeline()
        request = WindowRequest("a", "s", history=store)
        await pipeline.window(request)
        mine: list[tuple[str, int, int]] = []
        for i in range(12):
            await store.append_many("a", _step(i), session_id="s")
            searched = len(store.searches)
            got = (await pipeline.window(request)).messages
            mine += [(*store.searches[k], store.limits[k]) for k in range(searched, len(store.searches))]
            assert got == (await _pipeline().window(request)).messages
        return mine

    mine = asyncio.run(main())
    assert len(mine) == len(set(mine)), mine
    assert len(mine) < 12, mine


def test_a_kept_ranking_is_ranked_again_once_the_session_grew_by_a_sixteenth() -> None:
    """Large tool results (shortened in the window) grow the stored session while the newest turns start at the
    request (they pass their tenth of the budget, and fit in the whole): a window uses the kept ranking only while
    what was appended since it was made is under a sixteenth of the part it ranks, and the same ranking is made
    again only once it is not."""

    async def main() -> tuple[Searching, list[tuple[int, int]]]:
        store = Searching()
        await store.append_many("a", _session(300), session_id="s")
        await store.append_many("a", [ChatMessage.user("what did we say about the walrus?")], session_id="s")
        pipeline = _pipeline(8_000, share=0.9)
        request = WindowRequest("a", "s", history=store)
        windows: list[tuple[int, int]] = []  # (stored tokens at the window, searches after it)
        for i in range(30):
            await store.append_many("a", _step(i, size=200), session_id="s")
            stored = sum(map(stored_tokens, await store.get_messages("a", session_id="s")))
            await pipeline.window(request)
            windows.append((stored, len(store.searches)))
        return store, windows

    store, windows = asyncio.run(main())
    made_at, kept, grown_again, searches = 0, (0, 0), 0, 0
    for stored, count in windows:
        if count == searches:  # the kept ranking served
            assert (stored - made_at) * _Rankings.GROWTH < kept[0], "a ranking grown out of date was used"
            continue
        assert count == searches + 1
        searches = count
        ranked = (store.searches[count - 1][1], store.limits[count - 1])
        if ranked == kept:  # the same part to the same depth
            assert (stored - made_at) * _Rankings.GROWTH >= ranked[0], "a ranking still up to date was made again"
            grown_again += 1
        made_at, kept = stored, ranked
    assert grown_again >= 2, "the session grew by a sixteenth at least twice: the ranking was made again"


def test_a_session_cleared_and_refilled_alike_is_ranked_again() -> None:
    """Another writer clears the session and stores one of the very same shape (the same request, the same
    sizes: the same offsets): the next window ranks the new messages, and holds nothing of the removed ones."""

    async def main() -> None:
        store = Searching()
        request_text = "what did we say about the walrus?"
        await store.append_many("a", [*_session(200, "old "), ChatMessage.user(request_text)], session_id="s")
        pipeline = _pipeline()
        request = WindowRequest("a", "s", history=store)
        for i in range(3):
            await store.append_many("a", _step(i), session_id="s")
            old = {m.id for m in (await pipeline.window(request)).messages}
        await store.clear("a", session_id="s")
        await store.append_many("a", [*_session(200, "new "), ChatMessage.user(request_text)], session_id="s")
        await store.append_many("a", _step(3), session_id="s")
        searches = len(store.searches)
        window = (await pipeline.window(request)).messages
        assert len(store.searches) == searches + 1
        assert not old & {m.id for m in window}
        assert not any(m.text.startswith("old ") for m in window)
        assert window == (await _pipeline().window(request)).messages

    asyncio.run(main())


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    topics=st.lists(st.sampled_from(TOPICS), min_size=1, max_size=120),
    steps=st.integers(1, 8),
    budget=st.integers(100, 1_200),
    meaning=st.booleans(),
    store=st.booleans(),
)
def test_a_request_at_work_recalls_what_a_ranking_up_to_the_cut_gives(
    topics: list[str], steps: int, budget: int, meaning: bool, store: bool
) -> None:
    """Without neighbours (``spread=0``), ranking a request at work up to the request and leaving out the newest
    turns before it recalls exactly what ranking up to the newest turns did, by words and by words and meaning,
    from the store and in the process, as the agent works."""
    from ravi.agents.context.compaction import relevant_recall
    from ravi.agents.storage.embeddings import HashingEmbeddingClient

    messages = [ChatMessage.system("be brief")]
    for i, topic in enumerate(topics):
        messages += [ChatMessage.user(f"note {i}: the {topic} " + "x " * (i % 7)), ChatMessage.assistant(f"ok {topic}")]
    # "note" is in every older user turn: more units match than a ranking holds
    messages.append(ChatMessage.user(f"which note was about the {topics[0]} and the {topics[-1]}?"))
    loop = [m for i in range(steps) for m in _step(i, size=1 + i % 5)]

    def pipeline() -> CompactionPipeline:
        client = HashingEmbeddingClient(dimension=32) if meaning else None
        return CompactionPipeline([RelevantRecallStrategy(budget, meaning=client, spread=0.0)])

    async def windows() -> list[list[ChatMessage]]:
        history = InMemoryHistoryProvider()
        await history.append_many("a", messages, session_id="s")
        made, out = pipeline(), []
        for k in range(0, len(loop), 2):
            await history.append_many("a", loop[k : k + 2], session_id="s")
            if store:
                out.append((await made.window(WindowRequest("a", "s", history=history))).messages)
            else:
                whole = await history.get_messages("a", session_id="s")
                out.append((await made.window(WindowRequest("a", "s", messages=whole))).messages)
        return out

    got = asyncio.run(windows())
    at_cut = relevant_recall._ranked_end
    try:
        relevant_recall._ranked_end = lambda history, cut, request: cut  # type: ignore[assignment]
        want = asyncio.run(windows())
    finally:
        relevant_recall._ranked_end = at_cut
    assert got == want
