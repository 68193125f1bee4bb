"""An embedding client is the caller's code: what it returns is checked like any other input. The in-memory
long-term memory and vector store refuse vectors that are not one list of finite numbers of the client's dimension
per text with ``InvalidArgument``, and keep nothing of the call."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

import pytest

from ravi.agents.context import InMemoryHistoryProvider
from ravi.agents.context.recall_index import EmbeddingIndex
from ravi.agents.storage import InMemoryLongTermMemory, InMemoryVectorStore
from ravi.kernel.embeddings import HashingEmbeddingClient
from ravi.kernel.errors import InvalidArgument
from ravi.kernel.messages import ChatMessage
from ravi.kernel.storage import Document

WRONG: dict[str, Callable[[Sequence[str]], object]] = {
    "not numbers": lambda texts: [["x"] * 4 for _ in texts],
    "several lengths": lambda texts: [[1.0] * (3 + i) for i, _ in enumerate(texts)],
    "another dimension": lambda texts: [[1.0] * 7 for _ in texts],
    "not finite": lambda texts: [[float("nan")] * 4 for _ in texts],
    "none": lambda texts: [],
    "one too many": lambda texts: [[1.0] * 4 for _ in [*texts, "more"]],
    "not a list": lambda texts: None,
}


class Answering:
    """An ``EmbeddingClient`` of four dimensions that answers what it is told to (rightly until ``wrong`` is set)."""

    dimension = 4

    def __init__(self) -> None:
        self.wrong: Callable[[Sequence[str]], object] | None = None

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if self.wrong is not None:
            return self.wrong(texts)  # type: ignore[return-value]
        return [[float(len(t)), 1.0, 0.0, 0.5] for t in texts]


@pytest.mark.parametrize("wrong", WRONG.values(), ids=WRONG.keys())
def test_long_term_memory_refuses_an_embedders_wrong_answer(wrong: Callable[[Sequence[str]], object]) -> None:
    _refused_and_nothing_lost(wrong)


def _refused_and_nothing_lost(wrong: Callable[[Sequence[str]], object]) -> None:
    """A save and a search whose embeddings are ``wrong``'s answer are refused; what was saved before stays."""

    async def run() -> None:
        client = Answering()
        memory = InMemoryLongTermMemory(embedding_client=client)
        kept = await memory.save("a", "the user likes tea")
        client.wrong = wrong
        with pytest.raises(InvalidArgument):
            await memory.save("a", "the user likes coffee")
        with pytest.raises(InvalidArgument):
            await memory.search("a", "tea")
        client.wrong = None
        assert [m.id for m in await memory.search("a", "tea")] == [kept]

    asyncio.run(run())


UNMEASURABLE = {"zero": [0.0] * 4, "past float32": [1e20] * 4, "below float32": [1e-30] * 4}


@pytest.mark.parametrize("vector", UNMEASURABLE.values(), ids=UNMEASURABLE.keys())
def test_long_term_memory_refuses_an_embedding_float32_cannot_measure(vector: list[float]) -> None:
    """A zero embedding, or one whose squared length is past float32's range, has no cosine: it scored 0.0 here
    and something else on Postgres. It is refused, as the vector stores refuse it."""
    _refused_and_nothing_lost(lambda texts: [vector for _ in texts])


@pytest.mark.parametrize("wrong", WRONG.values(), ids=WRONG.keys())
def test_vector_store_refuses_an_embedders_wrong_answer(wrong: Callable[[Sequence[str]], object]) -> None:
    async def run() -> None:
        client = Answering()
        store = InMemoryVectorStore(embedding_client=client)
        await store.add([Document(id="d1", text="tea")], collection="c")
        client.wrong = wrong
        with pytest.raises(InvalidArgument):
            await store.add([Document(id="d2", text="coffee"), Document(id="d3", text="milk")], collection="c")
        client.wrong = None
        assert [d.id for d in await store.get(["d1", "d2", "d3"], collection="c")] == ["d1"]

    asyncio.run(run())


@pytest.mark.parametrize("wrong", WRONG.values(), ids=WRONG.keys())
def test_recall_by_meaning_over_a_vector_store_refuses_an_embedders_wrong_answer(
    wrong: Callable[[Sequence[str]], object],
) -> None:
    """The index relevant recall keeps in a vector store: a wrong answer for the messages or for the request is
    refused with ``InvalidArgument`` (not a pydantic or unpacking error), and the index answers rightly after."""

    async def run() -> None:
        client = Answering()
        index = EmbeddingIndex(client, InMemoryVectorStore())
        history = [ChatMessage.user(f"turn {i} about tea") for i in range(5)]
        expected = await EmbeddingIndex(Answering(), InMemoryVectorStore()).scores(history, "tea")
        client.wrong = wrong
        with pytest.raises(InvalidArgument):
            await index.scores(history, "tea")
        client.wrong = None
        await index.scores(history[:2], "tea")  # the messages embedded
        client.wrong = lambda texts: wrong(texts) if texts == ["tea"] else [[1.0] * 4 for _ in texts]
        with pytest.raises(InvalidArgument):
            await index.scores(history[:2], "tea")
        client.wrong = None
        assert await index.scores(history, "tea") == expected

    asyncio.run(run())


class Dimensionless(Answering):
    def __init__(self, dimension: object) -> None:
        super().__init__()
        self.dimension = dimension  # type: ignore[assignment]


@pytest.mark.parametrize(
    "client",
    [HashingEmbeddingClient, Answering, Dimensionless(0), Dimensionless("4"), Dimensionless(True)],
    ids=["a class", "a class of one's own", "no dimensions", "dimension in a string", "dimension True"],
)
def test_a_class_for_an_embedding_client_or_one_without_a_dimension_is_refused(client: object) -> None:
    """A class has the attributes of its instances, so it looked like a client until its first use (forgetting
    the parentheses: ``embedding_client=HashingEmbeddingClient``) and then raised ``TypeError``."""

    async def run() -> None:
        history = InMemoryHistoryProvider()
        await history.append("a", ChatMessage.user("tea"), session_id="s")
        with pytest.raises(InvalidArgument):
            await history.search_hybrid(
                "a",
                session_id="s",
                query="tea",
                before=10**6,
                limit=3,
                embedder=client,
                model="m",  # type: ignore[arg-type]
            )

    asyncio.run(run())
    with pytest.raises(InvalidArgument):
        InMemoryLongTermMemory(embedding_client=client)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument):
        InMemoryVectorStore(embedding_client=client)  # type: ignore[arg-type]
