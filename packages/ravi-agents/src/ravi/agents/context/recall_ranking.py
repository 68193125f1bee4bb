"""Where relevant recall's rankings come from: the session's store (pushed down: BM25 or full text, and the
store's embeddings), a shared index, or the process.

Each source gives the same rankings for the same session: units by their words (BM25 with each match's
neighbours scored, :func:`~ravi.kernel.search.spread`), and units by their meaning (cosine similarity of message
embeddings), each best first. :mod:`recall_fusion` fuses them.
"""

from __future__ import annotations

import logging
import weakref
from bisect import bisect_left
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import cast

from ravi.agents.context.meaning import MessageVectors, meaning_units
from ravi.agents.context.recall_index import RecallIndex, UnitIndex
from ravi.agents.context.session import SessionRewritten
from ravi.agents.context.units import units
from ravi.kernel.agent import SessionContext, Slot
from ravi.kernel.errors import ConfigurationError, InvalidArgument, PermissionDenied
from ravi.kernel.llm import EmbeddingClient
from ravi.kernel.messages import ChatMessage
from ravi.kernel.protocols import conforms
from ravi.kernel.search import UnitMatch, match_units, spread
from ravi.kernel.storage import HistorySearcher, HybridSearcher, SessionGeneration, VectorStore
from ravi.kernel.tokens import stored_tokens

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Meaning:
    """How recall ranks by meaning: with an embedding client (its embeddings kept by the session's store when it
    can, else in the process), or with an index of its own (an ``EmbeddingIndex`` on a shared vector store)."""

    client: EmbeddingClient | None = None
    model: str = ""
    index: RecallIndex | UnitIndex | None = None
    optional: bool = False
    """Whether recall goes on by words where the store cannot rank by meaning (``meaning="auto"``)."""
    unable: weakref.WeakSet[object] = field(default_factory=weakref.WeakSet, compare=False, repr=False)
    """The stores found unable to rank by meaning (optional meaning only: asked once per store and process)."""


def resolve_meaning(meaning: object, index: object) -> Meaning | None:
    """The meaning ranking a strategy's ``meaning=`` option names: ``"auto"`` (the offline model of the
    ``embeddings`` extra when it is installed and ``index`` does not already rank by meaning), ``"offline"`` (that
    model, required: ``ConfigurationError`` when it is not installed), ``None`` or ``"none"`` (words only), an
    :class:`~ravi.kernel.llm.EmbeddingClient`, or a recall index (the strings are those of a ``ravi.toml``)."""
    from ravi.agents.context.recall_index import EmbeddingIndex

    if meaning is None or meaning == "none":
        return None
    if isinstance(meaning, str):
        if meaning not in ("auto", "offline"):
            raise InvalidArgument(
                "meaning must be 'auto', 'offline', 'none' (or None), an EmbeddingClient or a recall index, "
                f"got {meaning!r}"
            )
        from ravi.agents.embeddings import INSTALL, offline_embedding_client

        client = offline_embedding_client()
        if meaning == "offline" and client is None:
            raise ConfigurationError("meaning='offline' needs the offline embedding model", hint=INSTALL)
        if isinstance(index, EmbeddingIndex) and meaning == "auto":
            return None
        return None if client is None else Meaning(client, client.model, optional=meaning == "auto")
    if isinstance(meaning, EmbeddingClient):
        name = getattr(meaning, "model", None)
        model = name if isinstance(name, str) and name else f"{type(meaning).__qualname__}-{meaning.dimension}"
        return Meaning(meaning, model)
    if isinstance(meaning, RecallIndex | UnitIndex):
        return Meaning(index=meaning)
    raise InvalidArgument(
        f"meaning must be 'auto', None, an EmbeddingClient or a recall index, got {type(meaning).__name__}"
    )


def meaning_setting(value: object, vectors: Callable[[], VectorStore] | None = None) -> object:
    """What ``RelevantRecallStrategy(meaning=...)`` gets for a ``meaning`` setting: ``"auto"`` (the offline model
    when installed), ``"offline"`` (the offline model, required), ``"none"`` (words only), or ``"vector"`` (the
    offline model's embeddings kept in the ``[vector]`` store that ``vectors()`` builds, pgvector say).

    Raises:
        ConfigurationError: another value, or the offline model is asked for and not installed.
    """
    from ravi.agents.embeddings import INSTALL, offline_embedding_client

    if value == "auto":
        return "auto"
    if value == "none":
        return None
    if value in ("offline", "vector"):
        client = offline_embedding_client()
        if client is None:
            raise ConfigurationError(f"meaning = {value!r} needs the offline embedding model", hint=INSTALL)
        if value == "offline":
            return client
        if vectors is None:
            raise ConfigurationError("meaning = 'vector' needs a [vector] store")
        from ravi.agents.context.recall_index import EmbeddingIndex

        return EmbeddingIndex(client, vectors(), collection_prefix="ravi-recall")
    raise ConfigurationError(
        f"meaning must be 'auto', 'offline', 'vector' or 'none', got {value!r}",
        hint="see the relevant_recall options in docs/configuration.md",
    )


def pushed_down(meaning: Meaning | None) -> bool:
    """Whether ``meaning`` can be ranked without reading the whole session: by the store (a client, when the
    store is a ``HybridSearcher``), by a shared index (a ``UnitIndex``), or not at all."""
    return meaning is None or meaning.client is not None or conforms(meaning.index, UnitIndex)


async def store_rankings(
    provider: HistorySearcher,
    session: SessionContext,
    query: str,
    before: int,
    *,
    limit: int,
    weight: float,
    meaning: Meaning | None,
) -> list[list[UnitMatch]] | None:
    """The rankings of the session's older units (before offset ``before``) from its store: one call when the
    store is a :class:`~ravi.kernel.storage.HybridSearcher` (words and, with a client, meaning), else its plain
    search; a shared meaning index adds its own. ``None`` when that index needs older messages than were read."""
    agent, sid = session.agent_id, session.session_id
    rankings: list[list[UnitMatch]] = []
    client = meaning.client if meaning is not None else None
    if conforms(provider, HybridSearcher):
        hybrid = cast(HybridSearcher, provider)
        if meaning is not None and meaning.optional and provider in meaning.unable:
            client = None
        try:
            found = await hybrid.search_hybrid(
                agent,
                session_id=sid,
                query=query,
                before=before,
                limit=limit,
                spread=weight,
                embedder=client,
                model=meaning.model if meaning is not None and client is not None else "",
            )
        except (ConfigurationError, PermissionDenied) as error:
            if client is None or meaning is None or not meaning.optional:
                raise
            # meaning="auto" uses meaning where it can be had: this store cannot (pgvector missing, say)
            log.warning("recall ranks by words on %s, which cannot rank by meaning: %s", type(provider).__name__, error)
            meaning.unable.add(provider)
            client = None
            found = await hybrid.search_hybrid(
                agent, session_id=sid, query=query, before=before, limit=limit, spread=weight
            )
        rankings.append(found.lexical)
        if client is not None:
            rankings.append(found.meaning[: meaning_limit(limit)])
    else:
        rankings.append(await provider.search_units(agent, session_id=sid, query=query, before=before, limit=limit))
    await _still_read(provider, session)
    if meaning is not None and isinstance(meaning.index, UnitIndex):
        units = await meaning.index.search_units(session, query=query, before=before, limit=meaning_limit(limit))
        if units is None:
            return None
        rankings.append(units)
    return rankings


async def _still_read(provider: HistorySearcher, session: SessionContext) -> None:
    """Raise :class:`~ravi.agents.context.session.SessionRewritten` when the session is no longer in the
    generation its messages were read in (``session.generation``). The search ran after the read: a ``clear``,
    ``clear_run``, ``replace_last`` or ``forget`` in between (from any process) made it a search of another
    session, whose units would sit in the window beside messages the change removed, and whose offsets are not
    those of the read. Generations are never repeated, so the same one read after the search means none changed
    between the read and it."""
    if session.generation is None or not conforms(provider, SessionGeneration):
        return
    now = await cast(SessionGeneration, provider).generation(session.agent_id, session_id=session.session_id)
    if now != session.generation:
        raise SessionRewritten(session.agent_id, session.session_id)


def meaning_limit(limit: int) -> int:
    """How many units the meaning ranking contributes: half the words' (its deep ranks are mostly noise)."""
    return max(1, limit // 2)


@dataclass
class _Local:
    """What the process keeps of a session it ranks itself: the messages it was built from, the stored tokens
    before each, the positions of the system messages, and the messages' embeddings (by model)."""

    messages: list[ChatMessage] = field(default_factory=list)
    before: list[int] = field(default_factory=lambda: [0])
    systems: list[int] = field(default_factory=list)
    vectors: dict[str, MessageVectors] = field(default_factory=dict)

    def update(self, history: Sequence[ChatMessage]) -> None:
        """Keep what holds for the part ``history`` shares with the messages seen before (a growing session
        shares all of them; one whose newest turns changed, all but those), and extend it to ``history``."""
        same = _common_prefix(self.messages, history)
        if same < len(self.messages):
            del self.messages[same:], self.before[same + 1 :]
            self.systems = [i for i in self.systems if i < same]
            for vectors in self.vectors.values():
                vectors.truncate(same)
        for i in range(same, len(history)):
            message = history[i]
            if message.role == "system":
                self.systems.append(i)
            self.before.append(self.before[-1] + stored_tokens(message))
            self.messages.append(message)


def _common_prefix(old: Sequence[ChatMessage], new: Sequence[ChatMessage]) -> int:
    """How many leading messages ``old`` and ``new`` share (the same objects, or equal ones): the whole of
    ``old`` is checked at C speed first, then the shared length is found by halving."""
    n = min(len(old), len(new))
    if list(new[:n]) == old[:n]:
        return n
    low, high = 0, n  # old[:low] == new[:low], and they differ before ``high``
    while high - low > 1:
        mid = (low + high) // 2
        if list(new[:mid]) == old[:mid]:
            low = mid
        else:
            high = mid
    return low if high - low == 1 and old[low] != new[low] else high


def _by_units(
    history: Sequence[ChatMessage], scores: dict[int, float], local: _Local, cut: int, limit: int
) -> list[UnitMatch]:
    """The units of ``history[:cut]`` by the best score of their messages (any system message inside a tool
    group counts; one standing alone is never a match), best first, the newer first among equals."""
    ranked = []
    for start, end in units(history, 0, cut):
        if history[start].role == "system":
            continue
        score = max((scores.get(i, 0.0) for i in range(start, end)), default=0.0)
        if score > 0:
            ranked.append((score, start, end))
    ranked.sort(key=lambda r: (-r[0], -r[1]))
    out = []
    for score, start, end in ranked[:limit]:
        k = bisect_left(local.systems, start)
        anchor = history[local.systems[k - 1]].id if k else None
        out.append(UnitMatch(score, tuple(history[start:end]), local.before[start], anchor))
    return out


_LOCAL: Slot[_Local] = Slot("relevant_recall.local", _Local)
"""What the process keeps of a session it ranks itself."""


class LocalRankings:
    """Rankings computed in the process over a whole history, the same as a store's: kept per session and
    extended with the messages appended since the last window (a history whose newest turns changed keeps what
    it shares with the last one)."""

    def local(self, history: Sequence[ChatMessage], session: SessionContext) -> _Local:
        """The session's :class:`_Local`, brought up to ``history``."""
        state = session.state.get(self, _LOCAL)
        state.update(history)
        return state

    async def rankings(
        self,
        history: Sequence[ChatMessage],
        query: str,
        cut: int,
        *,
        session: SessionContext,
        index: RecallIndex,
        limit: int,
        weight: float,
        meaning: Meaning | None,
    ) -> list[list[UnitMatch]]:
        """The rankings of the units of ``history[:cut]`` for ``query``: by ``index`` (its scores, with each
        match's neighbours scored ``weight`` times), and by ``meaning``."""
        local = self.local(history, session)
        scores = await index.scores(history, query, session)
        if isinstance(index, UnitIndex):
            # an index that also ranks in a shared store ranks the same way here: a unit by its best message,
            # a system message inside a tool group included, and no neighbours
            rankings = [_by_units(history, scores, local, cut, limit)]
        else:
            spread_scores = spread(history, scores, stop=cut, weight=weight)
            found = match_units(
                history, spread_scores, before=local.before, systems=local.systems, stop=cut, limit=limit
            )
            rankings = [found]
        if meaning is None:
            return rankings
        wanted = meaning_limit(limit)
        if meaning.client is not None:
            vectors = local.vectors.get(meaning.model)
            if vectors is None:
                vectors = local.vectors[meaning.model] = MessageVectors(meaning.model)
            await vectors.extend(history, meaning.client)
            [vector] = await meaning.client.embed([query])
            similar = vectors.similarity(vector, cut)
            rankings.append(
                meaning_units(history, similar, before=local.before, systems=local.systems, stop=cut, limit=wanted)
            )
        elif isinstance(meaning.index, RecallIndex):
            near = await meaning.index.scores(history, query, session)
            rankings.append(_by_units(history, near, local, cut, wanted))
        return rankings


__all__ = [
    "LocalRankings",
    "Meaning",
    "meaning_limit",
    "meaning_setting",
    "pushed_down",
    "resolve_meaning",
    "store_rankings",
]
