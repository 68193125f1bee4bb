"""The ids relevant recall derives from a session's message ids stay within the limit every store holds."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from ravi.agents.context.recall_index import EmbeddingIndex
from ravi.agents.forget import collection_name, recall_collections
from ravi.agents.storage import InMemoryVectorStore
from ravi.agents.storage.embeddings import HashingEmbeddingClient
from ravi.kernel.agent import SessionContext
from ravi.kernel.errors import InvalidArgument
from ravi.kernel.messages import ChatMessage
from ravi.kernel.scope import new_generation
from ravi.kernel.values import MAX_ID_BYTES


async def test_messages_with_ids_at_the_limit_are_scored_in_every_generation() -> None:
    """A message's embedding is kept under its id and the session's generation: for ids of ``MAX_ID_BYTES`` bytes
    that is longer than a store holds (the store refused it), so it is kept under a digest of both, one per
    generation too."""
    ids = [f"{i}" + "\u00e9" * ((MAX_ID_BYTES - 1) // 2) + "x" for i in range(3)]
    assert {len(i.encode()) for i in ids} == {MAX_ID_BYTES}
    messages = [
        ChatMessage.user("the fern on my desk is dying", id=ids[0]),
        ChatMessage.assistant("water it less", id=ids[1]),
        ChatMessage.user("and the weekend plans?", id=ids[2]),
    ]
    vectors = InMemoryVectorStore()
    index = EmbeddingIndex(HashingEmbeddingClient(dimension=64), vectors)
    kept: list[set[str]] = []
    for generation in (new_generation(), new_generation()):
        scores = await index.scores(messages, "fern desk", SessionContext("agent", "s", generation=generation))
        assert max(scores, key=scores.__getitem__) == 0
        [collection] = await vectors.list_collections()
        kept.append({hit.id for hit in await vectors.search([1.0] * 64, collection=collection, limit=10)})
    assert [len(ids) for ids in kept] == [3, 3] and not kept[0] & kept[1]  # each message once, per generation
    assert all(len(i.encode()) <= MAX_ID_BYTES for i in kept[0] | kept[1])


def longest_prefix() -> str:
    """The longest collection prefix whose collections (``<prefix>-<digest>-messages``) a store holds."""
    room = MAX_ID_BYTES - len(collection_name("", "agent", "s")) - len("-messages")
    return "\u00e9" * (room // 2) + "x" * (room % 2)


async def test_a_collection_prefix_at_the_limit_keeps_every_collection() -> None:
    """The longest prefix that leaves every collection's name within ``MAX_ID_BYTES`` is taken and used."""
    prefix = longest_prefix()
    vectors = InMemoryVectorStore()
    index = EmbeddingIndex(HashingEmbeddingClient(dimension=64), vectors, collection_prefix=prefix)
    messages = [ChatMessage.user("the fern on my desk is dying"), ChatMessage.user("weekend plans")]
    assert await index.scores(messages, "fern", SessionContext("agent", "s"))
    assert await vectors.list_collections() == [collection_name(prefix, "agent", "s")]
    assert max(len(name.encode()) for name in recall_collections("agent", "s", prefix)) <= MAX_ID_BYTES


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("collection_prefix", "\u00e9"),  # appended to longest_prefix(): one byte too many
        ("collection_prefix", ""),
        ("collection_prefix", 5),
        ("collection_prefix", "bad\ud800"),
        ("limit", 0),
        ("limit", "3"),
        ("limit", True),
        ("min_score", float("nan")),
        ("min_score", "0.1"),
        ("sessions", 0),
        ("sessions", 2.0),
    ],
)
def test_an_embedding_index_refuses_options_it_cannot_use_when_made(option: str, value: object) -> None:
    """A collection prefix whose collections would pass ``MAX_ID_BYTES`` (or that is no text), a limit or a
    session count that is not an integer >= 1, a minimum score that is not a finite number: ``InvalidArgument``
    naming the option when the index is made, not a store's refusal of a collection (or a ``TypeError``) at the
    first window."""
    if option == "collection_prefix" and value == "\u00e9":
        value = longest_prefix() + "\u00e9"
    with pytest.raises(InvalidArgument, match=option):
        EmbeddingIndex(HashingEmbeddingClient(dimension=64), InMemoryVectorStore(), **{option: value})  # type: ignore[arg-type]


class _Counting(HashingEmbeddingClient):
    """Counts the texts it embeds."""

    embedded = 0

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.embedded += len(texts)
        return await super().embed(texts)


@pytest.mark.parametrize("generation", [new_generation(), None])
@pytest.mark.parametrize("crafted", ["ravi:progress", "sha256:" + "0" * 64])
async def test_a_message_id_never_names_another_record_of_the_index(crafted: str, generation: str | None) -> None:
    """Message ids are the caller's: one equal to the id the index keeps its progress under (or shaped like the
    digest it keeps a long id under) still names its own unit, so that unit is recalled and the progress record
    kept: the later searches embed only their query."""
    long_id = "L" * MAX_ID_BYTES
    client, first = _Counting(dimension=64), True
    index = EmbeddingIndex(client, InMemoryVectorStore())
    messages = [
        ChatMessage.user("the fern on my desk is dying", id=crafted),
        ChatMessage.assistant("water it less", id="a1"),
        ChatMessage.user("my cousin visits in june", id=long_id),
        ChatMessage.assistant("nice", id="a2"),
        ChatMessage.user("what about the plant?", id="q"),
    ]
    session = SessionContext("agent", "s", generation=generation)
    session.source, session.source_before = messages, 0
    for query, best in (("fern desk dying", crafted), ("cousin visits june", long_id), ("fern desk", crafted)):
        found = await index.search_units(session, query=query, before=10**9, limit=4)
        assert found is not None
        assert [m.id for m in found[0].messages] == [best], query
        assert client.embedded == (len(messages) + 1 if query == "fern desk dying" and first else 1)
        first, client.embedded = False, 0  # the later searches embed only the query: the index is kept
