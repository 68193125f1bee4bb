"""After a clear, nothing derived from the removed messages can be read through any configured store: what the
strategies keep outside the history provider (recall units and embeddings in a vector store, summaries in a
summary store of their own) goes with the session."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Sequence

import pytest

from ravi.agents.context import (
    AgentContext,
    ChatMessage,
    ContextConfig,
    ContextManager,
    InMemoryHistoryProvider,
    RelevantRecallStrategy,
    SummarizationCompaction,
    TokenBudgetComposedStrategy,
)
from ravi.agents.context.recall_index import EmbeddingIndex
from ravi.agents.forget import recall_collections
from ravi.agents.storage import InMemorySummaryStore, InMemoryVectorStore
from ravi.agents.storage.embeddings import HashingEmbeddingClient
from ravi.kernel.agent import HistoryRetention, SessionContext, Strategy
from ravi.kernel.errors import BackendUnavailable, CompactionError, RaviError
from ravi.kernel.scope import Scope
from ravi.kernel.storage.vector import Document

SECRET = "My card number is 4111-1111-1111-1111."


async def fill(context: AgentContext, session_id: str) -> None:
    await context.add_message(session_id, ChatMessage.user(SECRET + " Noted. " * 50))
    for i in range(60):
        await context.add_message(session_id, ChatMessage.user(f"turn {i}: " + "lorem ipsum " * 30))
    await context.add_message(session_id, ChatMessage.user("What is my card number?"))
    await context.get_prompt_window(session_id)


async def held(vectors: InMemoryVectorStore, session_id: str) -> int:
    """How many documents the session's recall collections hold."""
    found = 0
    for name in recall_collections("agent", session_id):
        found += len(await vectors.search(tuple([0.1] * 64), collection=name, limit=1_000))
    return found


@pytest.mark.parametrize("where", ["meaning", "index"])
@pytest.mark.parametrize("how", ["clear", "replace"])
async def test_recall_units_in_a_vector_store_go_with_a_cleared_session(where: str, how: str) -> None:
    history, vectors = InMemoryHistoryProvider(), InMemoryVectorStore()
    index = EmbeddingIndex(HashingEmbeddingClient(dimension=64), vectors)
    strategy = RelevantRecallStrategy(2_000, **{where: index})  # type: ignore[arg-type]
    context = AgentContext(ContextConfig(history, [strategy]))
    await fill(context, "s")
    await fill(context, "other")
    assert await held(vectors, "s") and await held(vectors, "other")
    if how == "clear":
        await context.clear("s")
        assert await history.get_messages("agent", session_id="s") == []
    else:
        await context.replace_messages("s", [ChatMessage.user("a new start")])
    assert await held(vectors, "s") == 0  # the cleared card number is nowhere in the store
    assert await held(vectors, "other")  # another session's are kept
    await context.add_message("s", ChatMessage.user("and again " * 40))
    assert await context.get_prompt_window("s")  # the session goes on, indexed afresh


async def test_summaries_in_a_store_of_their_own_go_with_a_cleared_session() -> None:
    history, summaries = InMemoryHistoryProvider(), InMemorySummaryStore()
    summarizer = SummarizationCompaction(store=summaries, recent_token_budget=400, min_old_tokens=0)
    context = AgentContext(ContextConfig(history, [TokenBudgetComposedStrategy([summarizer], 1_000)]))
    await fill(context, "s")
    await fill(context, "other")
    assert await summaries.clear_summaries("nobody") == 0
    kept = dict(summaries._texts)
    assert {k[1] for k in kept} == {"s", "other"}
    await context.clear("s")
    assert {k[1] for k in summaries._texts} == {"other"}
    generation = next(k[2] for k in kept if k[1] == "s")
    span = next(k[3] for k in kept if k[1] == "s")
    assert await summaries.get_summary(Scope("agent", "s", generation), span) is None


async def test_a_context_manager_clear_takes_its_summaries_too() -> None:
    summaries = InMemorySummaryStore()
    manager = ContextManager(max_tokens=600, summaries=summaries, session_id="s", keep_recent=2)
    for i in range(40):
        await manager.add_message({"role": "user", "content": f"turn {i}: {SECRET} " + "lorem " * 40})
    await manager.get_messages_for_request()
    assert summaries._texts
    await manager.clear()
    assert not summaries._texts


class _Unreachable(Strategy):
    """A strategy whose records' store fails when they are erased."""

    def __init__(self, error: Exception | None) -> None:
        self.error = error

    async def compact(self, history: Sequence[ChatMessage], session: SessionContext | None = None) -> list[ChatMessage]:
        return list(history)

    async def clear_records(self, agent_id: str, session_id: str) -> int:
        if self.error is not None:
            raise self.error
        return 0


@pytest.mark.parametrize(
    ("error", "raised"),
    [(RuntimeError("store down"), CompactionError), (BackendUnavailable("store down"), BackendUnavailable)],
)
async def test_a_strategy_that_cannot_erase_leaves_the_others_to_erase_theirs(
    error: Exception, raised: type[RaviError]
) -> None:
    history, vectors = InMemoryHistoryProvider(), InMemoryVectorStore()
    index = EmbeddingIndex(HashingEmbeddingClient(dimension=64), vectors)
    failing = _Unreachable(error)
    context = AgentContext(ContextConfig(history, [failing, RelevantRecallStrategy(2_000, index=index)]))
    await fill(context, "s")
    assert await held(vectors, "s")
    with pytest.raises(raised):
        await context.clear("s")
    assert await history.get_messages("agent", session_id="s") == []
    assert await held(vectors, "s") == 0  # the recall units went, though the first strategy failed
    failing.error = None
    await context.clear("s")  # the store is back: clearing again finishes


@pytest.mark.parametrize("retention", [HistoryRetention.RUN, HistoryRetention.NONE])
@pytest.mark.parametrize("kept", ["recall", "summaries"])
async def test_the_turns_a_finished_run_leaves_out_leave_no_recall_units_or_summaries(
    retention: HistoryRetention, kept: str
) -> None:
    """Under retention RUN or NONE a finished run's turns are removed (or never stored): the recall units in a
    vector store and the summaries in a store of their own, which held them, go with them."""
    history, vectors, summaries = InMemoryHistoryProvider(), InMemoryVectorStore(), InMemorySummaryStore()
    recall = RelevantRecallStrategy(2_000, index=EmbeddingIndex(HashingEmbeddingClient(dimension=64), vectors))
    summarizer = SummarizationCompaction(store=summaries, recent_token_budget=400, min_old_tokens=0)
    strategy = recall if kept == "recall" else TokenBudgetComposedStrategy([summarizer], 1_000)
    context = AgentContext(ContextConfig(history, [strategy], retention=retention))
    await context.add_message("s", ChatMessage.user(SECRET + " Noted. " * 50), run_id="r1")
    for i in range(60):
        await context.add_message("s", ChatMessage.user(f"turn {i}: " + "lorem ipsum " * 30), run_id="r1")
    await context.add_message("s", ChatMessage.user("What is my card number?"), run_id="r1")
    await context.get_prompt_window("s")
    assert await held(vectors, "s") if kept == "recall" else summaries._texts
    await context.end_run("s", "r1")
    assert await held(vectors, "s") == 0
    assert not summaries._texts
    await context.add_message("s", ChatMessage.user("a new run " * 40), run_id="r2")
    assert await context.get_prompt_window("s")


class _ClearingDuring:
    """Clears the session the first time it is called for ``name``, as another task's clear would, in the middle
    of a window that has read the session's generation and not yet written what it derived."""

    def __init__(self, name: str) -> None:
        self.name, self.context = name, None
        self.fired = False

    async def fire(self, name: str) -> None:
        if name == self.name and not self.fired and self.context is not None:
            self.fired = True
            await self.context.clear("s")


class _SlowEmbeddings(HashingEmbeddingClient):
    def __init__(self, hook: _ClearingDuring) -> None:
        super().__init__(dimension=64)
        self.hook = hook

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        await self.hook.fire("embed" if len(texts) > 1 else "query")
        return await super().embed(texts)


@pytest.mark.parametrize("where", ["meaning", "index"])
@pytest.mark.parametrize("when", ["query", "embed"])
async def test_a_clear_during_a_recall_window_leaves_nothing_of_the_old_session_in_the_vector_store(
    when: str, where: str
) -> None:
    """A window that read the session before a clear and writes its units and embeddings after the clear erased
    the store's: what it wrote is erased too, so the cleared card number is nowhere."""
    hook = _ClearingDuring(when)
    history, vectors = InMemoryHistoryProvider(), InMemoryVectorStore()
    context = AgentContext(
        ContextConfig(
            history, [RelevantRecallStrategy(2_000, **{where: EmbeddingIndex(_SlowEmbeddings(hook), vectors)})]
        )
    )
    await context.add_message("s", ChatMessage.user(SECRET + " Noted. " * 50))
    for i in range(60):
        await context.add_message("s", ChatMessage.user(f"turn {i}: " + "lorem ipsum " * 30))
    await context.add_message("s", ChatMessage.user("What is my card number?"))
    hook.context = context  # type: ignore[assignment]
    await context.get_prompt_window("s")
    assert hook.fired
    assert await history.get_messages("agent", session_id="s") == []
    assert await held(vectors, "s") == 0
    await context.add_message("s", ChatMessage.user("a new start " * 40))
    assert await context.get_prompt_window("s")  # the session goes on


async def test_a_clear_during_a_summary_leaves_no_summary_of_the_old_session() -> None:
    """The model is summarising when the session is cleared: the summary it writes afterwards, of turns that are
    gone, is not kept in the summary store."""
    from ravi.agents.llm.function import CallableLLMClient

    hook = _ClearingDuring("complete")

    async def model(prompt: str) -> str:
        await hook.fire("complete")
        return "The user gave their card number 4111-1111-1111-1111."

    history, summaries = InMemoryHistoryProvider(), InMemorySummaryStore()
    summarizer = SummarizationCompaction(
        CallableLLMClient(model), store=summaries, recent_token_budget=400, min_old_tokens=0
    )
    context = AgentContext(ContextConfig(history, [TokenBudgetComposedStrategy([summarizer], 1_000)]))
    for i in range(60):
        await context.add_message("s", ChatMessage.user(f"turn {i}: {SECRET} " + "lorem ipsum " * 30))
    hook.context = context  # type: ignore[assignment]
    await context.get_prompt_window("s")
    assert hook.fired
    assert not summaries._texts


async def test_a_clear_while_the_index_embeds_a_history_leaves_no_embedding_of_it() -> None:
    """The in-process path of ``EmbeddingIndex.scores`` (a history passed whole): a clear while the messages
    are embedded leaves none of their embeddings in the store."""
    history, vectors = InMemoryHistoryProvider(), InMemoryVectorStore()
    hook = _ClearingDuring("embed")
    index = EmbeddingIndex(_SlowEmbeddings(hook), vectors)
    context = AgentContext(ContextConfig(history, [RelevantRecallStrategy(2_000, index=index)]))
    messages = [ChatMessage.user(SECRET), *(ChatMessage.user(f"turn {i}") for i in range(5))]
    await history.append_many("agent", messages, session_id="s")
    session = SessionContext(
        "agent", "s", history=history, generation=await history.generation("agent", session_id="s")
    )
    hook.context = context  # type: ignore[assignment]
    await index.scores(messages, "card number", session)
    assert hook.fired
    assert await held(vectors, "s") == 0
    hook.fired = True  # no more clears: the session, written again, is indexed afresh
    await history.append_many("agent", messages, session_id="s")
    session.generation = await history.generation("agent", session_id="s")
    assert await index.scores(messages, "card number", session)
    assert await held(vectors, "s") == len(messages)


async def test_a_context_manager_cleared_while_it_summarises_keeps_no_summary() -> None:
    from ravi.agents.llm.function import CallableLLMClient

    hook = _ClearingDuring("complete")
    manager: ContextManager | None = None

    async def model(prompt: str) -> str:
        if not hook.fired and manager is not None:
            hook.fired = True
            await manager.clear()
        return "The user gave their card number 4111-1111-1111-1111."

    summaries = InMemorySummaryStore()
    manager = ContextManager(
        max_tokens=600, summaries=summaries, session_id="s", keep_recent=2, llm=CallableLLMClient(model)
    )
    for i in range(40):
        await manager.add_message({"role": "user", "content": f"turn {i}: {SECRET} " + "lorem " * 40})
    await manager.get_messages_for_request()
    assert hook.fired
    assert not summaries._texts


class _NoGenerations:
    """A history provider with none of the optional abilities: no generations, no summaries."""

    def __init__(self) -> None:
        self.inner = InMemoryHistoryProvider()

    async def append(self, agent_id: str, message: ChatMessage, *, session_id: str, run_id: str = "") -> None:
        await self.inner.append(agent_id, message, session_id=session_id, run_id=run_id)

    async def append_many(
        self, agent_id: str, messages: Sequence[ChatMessage], *, session_id: str, run_id: str = ""
    ) -> None:
        await self.inner.append_many(agent_id, messages, session_id=session_id, run_id=run_id)

    async def get_messages(
        self, agent_id: str, *, session_id: str, limit: int | None = None, offset: int = 0
    ) -> list[ChatMessage]:
        return await self.inner.get_messages(agent_id, session_id=session_id, limit=limit, offset=offset)

    async def clear(self, agent_id: str, *, session_id: str) -> int:
        return await self.inner.clear(agent_id, session_id=session_id)

    async def clear_run(self, agent_id: str, *, session_id: str, run_id: str) -> int:
        return await self.inner.clear_run(agent_id, session_id=session_id, run_id=run_id)

    async def count_messages(self, agent_id: str, *, session_id: str) -> int:
        return await self.inner.count_messages(agent_id, session_id=session_id)


async def test_a_hybrid_provider_over_a_cold_tier_without_generations_or_summaries_has_neither() -> None:
    """It answered isinstance checks for ``SessionGeneration`` and ``SummaryStore`` and then raised a bare
    ``NotImplementedError``: a summarising window, or ``explain`` with a recall index, failed on it."""
    from ravi.agents.context.hybrid import HybridHistoryProvider
    from ravi.agents.llm.function import CallableLLMClient
    from ravi.kernel.storage import SessionGeneration, SummaryStore

    history = HybridHistoryProvider(InMemoryHistoryProvider(), _NoGenerations())  # type: ignore[arg-type]
    assert not isinstance(history, SessionGeneration) and not isinstance(history, SummaryStore)
    assert isinstance(history, HybridHistoryProvider) and type(history).__name__ == "HybridHistoryProvider"
    copied = copy.copy(history)  # made without its tiers, then given them
    assert copied.cold is history.cold and not isinstance(copied, SessionGeneration)
    full = HybridHistoryProvider(InMemoryHistoryProvider(), InMemoryHistoryProvider())
    assert isinstance(full, SessionGeneration) and isinstance(full, SummaryStore)
    summarizer = SummarizationCompaction(
        CallableLLMClient(lambda messages: "a summary"), recent_token_budget=400, min_old_tokens=0
    )
    index = EmbeddingIndex(HashingEmbeddingClient(dimension=64), InMemoryVectorStore())
    strategies: list[Strategy] = [
        TokenBudgetComposedStrategy([summarizer], 1_000),
        RelevantRecallStrategy(2_000, index=index),
    ]
    for strategy in strategies:
        context = AgentContext(ContextConfig(history, [strategy]))
        for i in range(60):
            await context.add_message("s", ChatMessage.user(f"turn {i}: " + "lorem ipsum " * 30))
        assert await context.get_prompt_window("s")
        assert (await context.explain("s")).messages
        await context.clear("s")


async def test_a_stale_window_of_the_index_erases_only_its_own_embeddings_not_the_new_generations() -> None:
    """A window of the old generation that wrote its embeddings after a ``replace_messages`` (the same ids, new
    text) deleted the session's whole collection, the new generation's embeddings with it: the new generation's
    windows, sure they had indexed them, found nothing of those messages again."""
    history, vectors = InMemoryHistoryProvider(), InMemoryVectorStore()
    hook = _ClearingDuring("embed")
    index = EmbeddingIndex(_SlowEmbeddings(hook), vectors)
    context = AgentContext(ContextConfig(history, [RelevantRecallStrategy(2_000, index=index)]))
    messages = [ChatMessage.user(SECRET), *(ChatMessage.user(f"turn {i}") for i in range(5))]
    again = [ChatMessage.user("My card is gone.").model_copy(update={"id": messages[0].id}), *messages[1:]]
    await history.append_many("agent", messages, session_id="s")
    old = SessionContext("agent", "s", history=history, generation=await history.generation("agent", session_id="s"))
    new = SessionContext("agent", "s", history=history)

    class _Replacing(_ClearingDuring):
        async def fire(self, name: str) -> None:
            if name == self.name and not self.fired:
                self.fired = True
                await context.replace_messages("s", again)
                new.generation = await history.generation("agent", session_id="s")
                assert await index.scores(again, "card", new)  # the new generation indexed in full

    hook = _Replacing("embed")
    index.client = _SlowEmbeddings(hook)
    await index.scores(messages, "card number", old)
    assert hook.fired
    assert await held(vectors, "s") == len(again)  # the new generation's, none of the old
    hits = await index.scores(again, "card", new)
    assert 0 in hits  # the new first message is still found
    stored = await vectors.get([m.id for m in again], collection=recall_collections("agent", "s")[0])
    assert all("4111" not in d.text for d in stored)


@pytest.mark.parametrize(
    ("second", "raised"),
    [(BackendUnavailable("vectors down"), BackendUnavailable), (RuntimeError("vectors down"), CompactionError)],
)
@pytest.mark.parametrize("how", ["context", "pipeline"])
async def test_every_store_that_fails_to_erase_is_named_the_first_as_the_cause(
    second: Exception, raised: type[RaviError], how: str
) -> None:
    """Only the first failure was raised: a second store that failed, and kept its records, went unsaid."""
    history, vectors = InMemoryHistoryProvider(), InMemoryVectorStore()
    index = EmbeddingIndex(HashingEmbeddingClient(dimension=64), vectors)
    first = BackendUnavailable("summaries down")
    failing = [_Unreachable(first), _Unreachable(second)]
    context = AgentContext(ContextConfig(history, [failing[0], RelevantRecallStrategy(2_000, index=index), failing[1]]))
    await fill(context, "s")
    clear = context.clear("s") if how == "context" else context.config.pipeline.clear_records("agent", "s")
    with pytest.raises(raised) as caught:
        await clear
    assert caught.value.__cause__ is first
    assert "summaries down" in str(caught.value) and "vectors down" in str(caught.value)
    assert await held(vectors, "s") == 0  # the store between them still erased its records
    for strategy in failing:
        strategy.error = None
    await context.clear("s")  # the stores are back: clearing again finishes


class _DownHistory(InMemoryHistoryProvider):
    async def clear(self, agent_id: str, *, session_id: str | None = None) -> int:
        raise BackendUnavailable("history down")


@pytest.mark.parametrize("how", ["context", "manager"])
async def test_a_history_that_cannot_clear_leaves_the_strategies_to_erase_theirs(how: str) -> None:
    """A failing history's clear stopped the clear: no strategy's store was asked."""
    summaries = InMemorySummaryStore()
    if how == "context":
        history, vectors = _DownHistory(), InMemoryVectorStore()
        index = EmbeddingIndex(HashingEmbeddingClient(dimension=64), vectors)
        failing = _Unreachable(BackendUnavailable("summaries down"))
        context = AgentContext(ContextConfig(history, [RelevantRecallStrategy(2_000, index=index), failing]))
        await fill(context, "s")
        with pytest.raises(BackendUnavailable) as caught:
            await context.clear("s")
        assert isinstance(caught.value.__cause__, BackendUnavailable)
        assert "history down" in str(caught.value.__cause__)
        assert "history down" in str(caught.value) and "summaries down" in str(caught.value)
        assert await held(vectors, "s") == 0
    else:
        manager = ContextManager(max_tokens=600, summaries=summaries, session_id="s", keep_recent=2)
        manager.history = _DownHistory()
        for i in range(40):
            await manager.add_message({"role": "user", "content": f"turn {i}: {SECRET} " + "lorem " * 40})
        await manager.get_messages_for_request()
        assert summaries._texts
        with pytest.raises(BackendUnavailable, match="history down"):
            await manager.clear()
        assert not summaries._texts


async def test_a_pipeline_refuses_a_bad_session_id_instead_of_clearing_nothing() -> None:
    """``clear_records(None, "s")`` erased nothing and answered 0, as if the session had no records."""
    from ravi.agents.context import CompactionPipeline
    from ravi.kernel.errors import InvalidArgument

    pipeline = CompactionPipeline([])
    for agent_id, session_id in ((None, "s"), ("a", None), ("a", ""), ("", "s"), (1, "s")):
        with pytest.raises(InvalidArgument):
            await pipeline.clear_records(agent_id, session_id)  # type: ignore[arg-type]
        with pytest.raises(InvalidArgument):
            pipeline.session(agent_id, session_id)  # type: ignore[arg-type]
        with pytest.raises(InvalidArgument):
            await pipeline.last_window(agent_id, session_id, history=None)  # type: ignore[arg-type]


class _GatedVectors(InMemoryVectorStore):
    """A vector store that holds the first window's ``what`` until ``release`` is set: ``"progress"``, its read
    of the index's progress record for the whole session (the second: a window reads the newest part of the
    session first, and a session never indexed is read whole), or ``"write"``, its first write of what it
    derived."""

    def __init__(self, what: str) -> None:
        super().__init__()
        self.what, self.calls = what, 0
        self.reached, self.release = asyncio.Event(), asyncio.Event()

    async def _hold(self) -> None:
        self.calls += 1
        if self.calls == (2 if self.what == "progress" else 1):
            self.reached.set()
            await self.release.wait()

    async def get(self, ids: Sequence[str], collection: str) -> list[Document]:
        if self.what == "progress" and collection.endswith("-units") and len(ids) == 1:
            await self._hold()
        return await super().get(ids, collection)

    async def upsert(self, documents: Sequence[Document], *, collection: str = "default") -> None:
        if self.what == "write":
            await self._hold()
        await super().upsert(documents, collection=collection)


class _CountedEmbeddings(HashingEmbeddingClient):
    def __init__(self) -> None:
        super().__init__(dimension=64)
        self.texts = 0

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.texts += len(texts)
        return await super().embed(texts)


@pytest.mark.parametrize("where", ["meaning", "index"])
@pytest.mark.parametrize("held", ["progress", "write"])
@pytest.mark.parametrize("how", ["clear", "replace"])
async def test_a_stale_window_leaves_the_new_generations_progress_record(where: str, held: str, how: str) -> None:
    """A window of the old generation that went on after a clear and a window of the new generation either
    deleted the session's collections (it read the new generation's progress record as a session that changed)
    or overwrote that record with its own and then erased it: the new generation's next window embedded the whole
    session again."""
    history, vectors, client = InMemoryHistoryProvider(), _GatedVectors(held), _CountedEmbeddings()
    index = EmbeddingIndex(client, vectors)
    context = AgentContext(ContextConfig(history, [RelevantRecallStrategy(2_000, **{where: index})]))  # type: ignore[arg-type]
    messages = [ChatMessage.user(f"turn {i}: " + "lorem ipsum " * 30) for i in range(60)]
    messages.append(ChatMessage.user("What did turn 7 say?"))
    await history.append_many("agent", messages, session_id="s")
    stale = asyncio.create_task(context.get_prompt_window("s"))  # the old generation's window
    await vectors.reached.wait()
    if how == "clear":
        await context.clear("s")
        await history.append_many("agent", messages, session_id="s")  # the same messages, the same ids
    else:
        await context.replace_messages("s", messages)
    assert await context.get_prompt_window("s")  # the new generation's window indexes the session
    vectors.release.set()
    assert isinstance(await stale, list)
    before = client.texts
    assert await context.get_prompt_window("s")
    assert client.texts - before <= 1  # the query alone: the session is still indexed
