"""The ids relevant recall derives from a session's message ids stay within the limit every store holds."""

from __future__ import annotations

from ravi.agents.context.recall_index import EmbeddingIndex
from ravi.agents.storage import InMemoryVectorStore
from ravi.agents.storage.embeddings import HashingEmbeddingClient
from ravi.kernel.agent import SessionContext
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
