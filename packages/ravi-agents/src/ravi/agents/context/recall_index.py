"""Session indexes for relevant recall: which older messages matter for the current request.

An index is kept per session and grows with it: each window indexes only the messages appended since the
previous one (a history that changed in the middle, a cleared run, is indexed again from scratch).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ravi.agents.context.memo import PrefixMemo
from ravi.agents.forget import collection_name, recall_collections
from ravi.kernel.agent import SessionContext, Slot
from ravi.kernel.embeddings import check_embeddings
from ravi.kernel.errors import InvalidArgument, InvalidMessage
from ravi.kernel.llm import EmbeddingClient
from ravi.kernel.messages import ChatMessage
from ravi.kernel.search import STOPWORDS, Bm25, UnitMatch, fold, message_text, terms, unit_end
from ravi.kernel.storage import Document, VectorStore
from ravi.kernel.tokens import stored_tokens
from ravi.kernel.values import MAX_ID_BYTES, check_text


@runtime_checkable
class RecallIndex(Protocol):
    """Scores the messages of a history against a query."""

    async def scores(self, history: Sequence[ChatMessage], query: str, session: SessionContext) -> dict[int, float]:
        """Message position to relevance (positive; absent means irrelevant), for the whole ``history``.

        What the index keeps about a session lives in ``session``'s state (see ``SessionContext``)."""
        ...


@runtime_checkable
class UnitIndex(Protocol):
    """A recall index that keeps a session in a store every process shares and finds its best older units
    there, so a window needs only the newest part of the session (the part the engine read).

    ``search_units`` first stores what the read adds to the index. It returns ``None`` when it needs messages
    older than the read (the index ends before it, or the session changed since): the engine then reads further
    back. Otherwise it returns the best whole units lying before offset ``before``, as stored, best first.
    """

    async def search_units(
        self, session: SessionContext, *, query: str, before: int, limit: int
    ) -> list[UnitMatch] | None:
        """The best units before ``before`` for ``query``, or ``None`` when older messages are needed."""
        ...


class BM25Index:
    """Okapi BM25 over the messages of each session (``k1``, ``b`` as usual): lexical, fast, no model.

    Example:
        >>> index = BM25Index()
    """

    def __init__(self, *, k1: float = 1.2, b: float = 0.75) -> None:
        self.k1, self.b = k1, b

    def _index(self, history: Sequence[ChatMessage], session: SessionContext) -> Bm25:
        memo = session.state.get(self, _BM25)
        hit = memo.lookup(history)
        state = hit[1] if hit is not None else Bm25(self.k1, self.b)
        state.extend(history)
        memo.store(history, state)
        return state

    async def scores(
        self, history: Sequence[ChatMessage], query: str, session: SessionContext | None = None
    ) -> dict[int, float]:
        """BM25 score of each message that shares a term with ``query`` (kept for ``session`` as it grows)."""
        session = session or SessionContext.standalone()
        return self._index(history, session).scores(query)


@dataclass
class _Indexed:
    size: int = 0  # messages of the session already embedded and stored


_BM25: Slot[PrefixMemo[Bm25]] = Slot("bm25.index", PrefixMemo)
"""The session's BM25 index and the history it was built from."""
_EMBEDDED: Slot[PrefixMemo[_Indexed]] = Slot("embedding.indexed", PrefixMemo)
"""How much of the history the session's in-process embedding index holds."""


_PROGRESS = "ravi:progress"
"""The document of a session's units collection that says how far the session is indexed."""


def _unit_of(text: str) -> tuple[ChatMessage, ...]:
    """A unit as the index stores it (a JSON list of messages), each message checked as a store's are."""
    try:
        items = json.loads(text)
    except (ValueError, RecursionError) as error:  # not JSON, or nested deeper than the parser goes
        raise InvalidMessage(f"a stored unit is not JSON: {error!r}", field="unit") from None
    if not isinstance(items, list):
        raise InvalidMessage("a stored unit is not a list of messages", field="unit")
    return tuple(ChatMessage.model_validate(item) for item in items)


def _progress(metadata: Any) -> dict[str, Any]:
    """A progress record's fields, or ``{}`` when it is not one this index wrote."""
    mark = {key: metadata.get(key) for key in ("embedded", "units", "offset", "last", "generation")}
    numbers = [mark[key] for key in ("embedded", "units", "offset")]
    if (
        all(isinstance(n, int) and not isinstance(n, bool) for n in numbers)
        and isinstance(mark["last"], str)
        and isinstance(mark["generation"], str | None)
    ):
        return mark
    return {}


class EmbeddingIndex:
    """Relevance by meaning: message embeddings from any :class:`EmbeddingClient`, kept in a
    :class:`~ravi.kernel.storage.VectorStore` (the session's store, or one in memory by default).

    Each session gets its own collection (``collection_prefix`` plus a digest of ``(agent_id, session_id)``);
    each message is embedded and stored once, as the session grows (messages without text are skipped), and a
    query asks the store for the ``limit`` closest. Pair it with a real embedding model when the request and the answer
    share meaning but not words.

    Given a shared store (pgvector, say), it is a :class:`UnitIndex`: inside an assembly pipeline it keeps each
    session in two collections of that store, the messages' embeddings (``<name>-messages``) and the units they
    belong to, as stored, with how far the session is indexed (``<name>-units``). A window then reads only the
    newest part of the session, whichever process serves it, and only messages not yet indexed are embedded.

    Example:
        >>> index = EmbeddingIndex(HashingEmbeddingClient(), PgVectorStore(dsn))  # doctest: +SKIP
    """

    def __init__(
        self,
        embedding_client: EmbeddingClient,
        vector_store: VectorStore | None = None,
        *,
        collection_prefix: str = "ravi-recall",
        limit: int = 50,
        min_score: float = 0.1,
        sessions: int = 32,
    ) -> None:
        _check_options(collection_prefix, limit, min_score, sessions)
        # A store of its own is only a cache: it keeps the collections of the last ``sessions`` sessions.
        self._owned = vector_store is None
        self._recent: OrderedDict[str, None] = OrderedDict()
        if vector_store is None:
            from ravi.agents.storage.vector import InMemoryVectorStore

            vector_store = InMemoryVectorStore()
        self.client = embedding_client
        self.store = vector_store
        self.collection_prefix = collection_prefix
        self.limit = limit
        self.min_score = min_score
        self._sessions = sessions

    def _collection(self, session: SessionContext) -> str:
        return collection_name(self.collection_prefix, session.agent_id, session.session_id)

    async def _touch(self, *collections: str) -> None:
        """Note the collections as used; a store of the index's own drops those of the least recent sessions (a
        shared store keeps every session's, and the index keeps no list of them)."""
        if not self._owned:
            return
        for collection in collections:
            self._recent[collection] = None
            self._recent.move_to_end(collection)
        while self._owned and len(self._recent) > self._sessions * len(collections):
            old, _ = self._recent.popitem(last=False)
            await self.store.delete_collection(old)

    async def clear_records(self, agent_id: str, session_id: str) -> int:
        """Delete the session's collections (its messages' embeddings and its units, as stored): what the index
        derived from a session that was cleared; returns how many collections there were."""
        removed = 0
        for collection in recall_collections(agent_id, session_id, self.collection_prefix):
            removed += bool(await self.store.delete_collection(collection))
            self._recent.pop(collection, None)
        return removed

    async def search_units(
        self, session: SessionContext, *, query: str, before: int, limit: int
    ) -> list[UnitMatch] | None:
        """The best whole units before offset ``before`` for ``query`` (:class:`UnitIndex`), after storing the
        messages of the read that the session's index lacks; ``None`` when that needs older messages."""
        start = session.source_before
        if start is None or not session.source:
            return None  # a read whose place in the session is unknown
        name = self._collection(session)
        messages_at, units_at = f"{name}-messages", f"{name}-units"
        generation = session.generation
        # every document has an id of its generation's (the progress record too): a window of a generation that
        # was cleared meanwhile neither reads nor overwrites a later generation's
        progress = await self.store.get([_progress_id(generation)], collection=units_at)
        mark = _progress(progress[0].metadata) if progress else {}
        if progress and (
            not mark  # not a progress record this index wrote: start afresh
            or min(mark["units"], mark["offset"]) < start  # indexed only up to a point before the read
            or session.offset(mark["last"]) != mark["offset"]  # the session changed
            or mark["generation"] != generation  # not this generation's record: nothing of another is used
        ):
            if session.partial:
                return None
            await self.store.delete_collection(messages_at)
            await self.store.delete_collection(units_at)
            mark = {}
        if not mark and session.partial:
            return None  # a session never indexed: from its start
        # only once the read suffices
        [q] = check_embeddings(await self.client.embed([query]), 1, self.client.dimension)
        vector = tuple(q)
        written = await self._extend(session, mark, vector, messages_at, units_at)
        if written and not await session.still_current():
            await self._erase(written, session.generation)  # cleared meanwhile: the clear erased the rest
        await self._touch(messages_at, units_at)
        best: dict[str, float] = {}  # by the id of the unit's document
        only = {"generation": generation} if generation is not None else None
        for hit in await self.store.search(vector, collection=messages_at, limit=self.limit, filter=only):
            unit = hit.metadata.get("unit")
            if hit.score > self.min_score and isinstance(unit, str):
                key = _scored_id(unit, generation)
                best[key] = max(best.get(key, hit.score), hit.score)
        found = []
        for doc in await self.store.get(list(best), collection=units_at):
            meta = doc.metadata
            if isinstance(meta.get("last"), int) and meta["last"] < before and meta.get("generation") == generation:
                unit_messages = _unit_of(doc.text)
                found.append(UnitMatch(best[doc.id], unit_messages, int(meta["offset"]), meta.get("after_system")))
        found.sort(key=lambda u: (-u.score, -u.offset))
        return found[:limit]

    async def _erase(self, written: dict[str, list[str]], generation: str | None) -> None:
        """Delete the documents written under ``generation`` that still hold it (a later generation may have
        written a document of the same id since)."""
        for collection, ids in written.items():
            stale = [
                d.id
                for d in await self.store.get(ids, collection=collection)
                if d.metadata.get("generation") == generation
            ]
            if stale:
                await self.store.delete(stale, collection=collection)

    async def _extend(
        self, session: SessionContext, mark: dict[str, Any], vector: tuple[float, ...], messages_at: str, units_at: str
    ) -> dict[str, list[str]]:
        """Store what the read adds to the index: the embeddings of the messages from the index's end on, each
        with the unit it belongs to, and the units from the newest one stored on (it may have grown), as stored;
        then the index's new end. Returns the ids written, by collection."""
        source, head, offset = session.source, session.source_head, session.offset
        generation = session.generation
        embedded, units_from = mark.get("embedded", -1), mark.get("units", -1)
        first = next((i for i in range(head, len(source)) if (offset(source[i].id) or 0) >= units_from), len(source))
        if first == len(source):
            return {}
        # the newest message that opens a unit: every unit before it is closed (no result can join it)
        opener = max((i for i in range(first, len(source)) if source[i].role not in ("tool", "system")), default=first)
        newest_system: list[str | None] = []  # the id of the newest system message before each position
        last: str | None = None
        for message in source:
            newest_system.append(last)
            if message.role == "system":
                last = message.id
        unit_of: dict[int, str | None] = {}
        units: list[Document] = []
        i = first
        while i < len(source):
            j = unit_end(source, i)
            standalone_system = source[i].role == "system"
            for k in range(i, j):
                unit_of[k] = None if standalone_system else source[i].id
            if not standalone_system:  # the newest unit too: rewritten on the next search, as it grows
                units.append(
                    Document(
                        id=_scored_id(source[i].id, generation),
                        content="[" + ",".join(m.model_dump_json() for m in source[i:j]) + "]",
                        embedding=vector,
                        metadata={
                            "offset": offset(source[i].id),
                            "last": offset(source[j - 1].id),
                            "after_system": newest_system[i],
                            "generation": session.generation,
                        },
                    )
                )
            i = j
        new = [
            (i, text)
            for i in range(first, len(source))
            if (offset(source[i].id) or 0) >= embedded and (text := message_text(source[i])).strip()
        ]
        fresh = {i for i, _ in new}
        # a message embedded earlier in the newest unit may belong to another unit now (a system message that
        # stood alone joins the tool group whose results arrived after it): its embedding is kept, its unit set
        moved = [
            i
            for i in range(first, len(source))
            if i not in fresh and (offset(source[i].id) or 0) < embedded and message_text(source[i]).strip()
        ]
        documents = []
        if moved:
            position = {_scored_id(source[i].id, generation): i for i in moved}
            for doc in await self.store.get(list(position), collection=messages_at):
                at = position[doc.id]
                if doc.metadata.get("unit") == unit_of.get(at):
                    continue
                if doc.embedding is None:  # a store that does not give embeddings back: embed it again
                    new.append((at, message_text(source[at])))
                    continue
                metadata = {**doc.metadata, "unit": unit_of.get(at)}
                documents.append(Document(id=doc.id, content=doc.content, embedding=doc.embedding, metadata=metadata))
        if new:
            vectors = check_embeddings(
                await self.client.embed([text for _, text in new]), len(new), self.client.dimension
            )
            documents += [
                Document(
                    id=_scored_id(source[i].id, generation),
                    embedding=tuple(v),
                    metadata={"unit": unit_of.get(i), "offset": offset(source[i].id), "generation": generation},
                )
                for (i, _), v in zip(new, vectors, strict=True)
            ]
        if documents:
            await self.store.upsert(documents, collection=messages_at)
        end = source[-1]
        end_offset = offset(end.id) or 0
        progress = {
            "embedded": end_offset + stored_tokens(end),
            "units": offset(source[opener].id),
            "last": end.id,
            "offset": end_offset,
            "generation": session.generation,
        }
        mark_id = _progress_id(generation)
        await self.store.upsert(
            [*units, Document(id=mark_id, embedding=vector, metadata=progress)], collection=units_at
        )
        return {messages_at: [d.id for d in documents], units_at: [*(u.id for u in units), mark_id]}

    async def scores(
        self, history: Sequence[ChatMessage], query: str, session: SessionContext | None = None
    ) -> dict[int, float]:
        """Cosine similarity to ``query`` of the ``limit`` closest messages (those above ``min_score``)."""
        if not history:
            return {}
        scope = session or SessionContext.standalone()
        collection = self._collection(scope)
        memo = scope.state.get(self, _EMBEDDED)
        hit = memo.lookup(history)
        generation = scope.generation
        if hit is None:  # a new session, or one that changed before its end: index it again from scratch
            if generation is not None and not await scope.still_current():
                return {}  # cleared since it was read: the collection is a later generation's to keep
            await self.store.delete_collection(collection)
            state = _Indexed()
        else:
            state = hit[1]
        new = [(i, message_text(history[i])) for i in range(state.size, len(history))]
        new = [(i, text) for i, text in new if text.strip()]
        if new:
            vectors = check_embeddings(
                await self.client.embed([text for _, text in new]), len(new), self.client.dimension
            )
            await self.store.upsert(
                [
                    Document(
                        id=_scored_id(history[i].id, generation),
                        embedding=tuple(v),
                        metadata={"position": i, "generation": generation},
                    )
                    for (i, _), v in zip(new, vectors, strict=True)
                ],
                collection=collection,
            )
        if new and not await scope.still_current():
            # cleared meanwhile: the clear erased the rest, and a later generation may have indexed since (the
            # same messages' ids, after replace_messages: each generation's documents have ids of their own, so
            # neither overwrites the other), so only what this window wrote is erased
            await self._erase({collection: [_scored_id(history[i].id, generation) for i, _ in new]}, generation)
            memo.clear()
            return {}
        state.size = len(history)
        memo.store(history, state)
        await self._touch(collection)
        [q] = check_embeddings(await self.client.embed([query]), 1, self.client.dimension)
        only = {"generation": generation} if generation is not None else None
        hits = await self.store.search(q, collection=collection, limit=self.limit, filter=only)
        return {int(h.metadata["position"]): h.score for h in hits if h.score > self.min_score}


def _check_options(prefix: object, limit: object, min_score: object, sessions: object) -> None:
    """``InvalidArgument`` naming the option unless ``prefix`` is non-empty text short enough that every
    collection named after it (``<prefix>-<digest>-messages`` the longest) holds at most
    :data:`~ravi.kernel.values.MAX_ID_BYTES` UTF-8 bytes, ``limit`` and ``sessions`` are integers >= 1 and
    ``min_score`` is a finite number."""
    if not isinstance(prefix, str) or not prefix:
        raise InvalidArgument(f"must be a non-empty string, got {prefix!r}", field="collection_prefix")
    check_text(prefix, "collection_prefix")
    longest = max(recall_collections("agent", "session", prefix), key=lambda name: len(name.encode()))
    room = MAX_ID_BYTES - (len(longest.encode()) - len(prefix.encode()))
    if len(prefix.encode()) > room:
        raise InvalidArgument(
            f"the collections named after it would pass MAX_ID_BYTES ({MAX_ID_BYTES} UTF-8 bytes): it may hold "
            f"at most {room} bytes, this one has {len(prefix.encode())}",
            field="collection_prefix",
            hint="use a shorter prefix",
        )
    for name, value in (("limit", limit), ("sessions", sessions)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InvalidArgument(f"must be an integer >= 1, got {value!r}", field=name)
    if isinstance(min_score, bool) or not isinstance(min_score, int | float) or not math.isfinite(min_score):
        raise InvalidArgument(f"must be a finite number, got {min_score!r}", field="min_score")


_RESERVED = ("ravi:", "sha256:")
"""How the ids of the index's own records start (the progress record, a digest): a document derived from a
message whose id starts so is kept under a digest, so no message id names one of them."""


def _scored_id(message_id: str, generation: str | None) -> str:
    """The id of a document the index derives from a message (its embedding, its unit) or of the session's
    progress record: one per generation of the session, so a window of an older generation never overwrites a
    later one's. One longer than a store keeps (:data:`~ravi.kernel.values.MAX_ID_BYTES`), or starting as the
    index's own records do (:data:`_RESERVED`), is kept under a digest of the message id and the generation."""
    scored = message_id if generation is None else f"{message_id}@{generation}"
    if len(scored.encode("utf-8", "surrogatepass")) <= MAX_ID_BYTES and not scored.startswith(_RESERVED):
        return scored
    return "sha256:" + hashlib.sha256(json.dumps([message_id, generation]).encode()).hexdigest()


def _progress_id(generation: str | None) -> str:
    """The id of the session's progress record in its units' collection (one per generation), which no
    document derived from a message has (:func:`_scored_id`)."""
    return _PROGRESS if generation is None else f"{_PROGRESS}@{generation}"


__all__ = [
    "STOPWORDS",
    "BM25Index",
    "EmbeddingIndex",
    "RecallIndex",
    "UnitIndex",
    "fold",
    "message_text",
    "terms",
]
