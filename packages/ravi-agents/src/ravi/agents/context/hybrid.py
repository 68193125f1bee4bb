"""``HybridHistoryProvider``: a fast hot tier in front of a durable cold tier that holds everything."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import weakref
from bisect import bisect_left
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import replace
from itertools import accumulate, groupby
from typing import Any, Self, TypeVar, cast

from ravi.kernel.closing import Closeable
from ravi.kernel.errors import MessageConflict
from ravi.kernel.loops import KeyedLocks
from ravi.kernel.messages import ChatMessage
from ravi.kernel.scope import Scope
from ravi.kernel.search import Bm25, UnitMatch, match_units
from ravi.kernel.storage import (
    Forgetter,
    HistoryProvider,
    HistorySearcher,
    HistoryWindow,
    RunReader,
    SessionGeneration,
    StoredMessage,
    SummaryStore,
    TailEditor,
    WindowReader,
    check_append,
    check_forget,
    check_replace,
    check_search,
    replace_session,
    stored_body,
    window_of,
)
from ravi.kernel.storage.summaries import check_summary_scope
from ravi.kernel.tokens import stored_tokens
from ravi.kernel.values import check_count, check_page, check_scope

T = TypeVar("T")
_H = TypeVar("_H", bound="HybridHistoryProvider")

_READ_ATTEMPTS = 3
"""How many times a windowed read is made while the session is rewritten under it (see ``read_window``)."""

_PAGE = 1000
"""How many messages one round trip of a copy into the hot tier reads and writes (see ``_mirror``)."""

COPY_OF = "ravi.hybrid.copy-of"
"""The span id under which the hot tier keeps, beside its copy of a session (``SummaryStore``, under the hot tier's
generation), the cold tier's generation the copy is of (see ``HybridHistoryProvider``)."""

_KNOWN_COPIES = 4096
"""How many hot generations' tags a provider remembers (a tag never changes: see ``HybridHistoryProvider._tag``)."""


async def _generation(tier: HistoryProvider, agent_id: str, session_id: str) -> str | None:
    """The tier's generation of the session (``SessionGeneration``), ``None`` when it keeps none."""
    if isinstance(tier, SessionGeneration):
        return await tier.generation(agent_id, session_id=session_id)
    return None


async def _newest(tier: HistoryProvider, agent_id: str, session_id: str) -> tuple[str | None, list[ChatMessage]] | None:
    """The tier's generation and newest message, read at once (a window of no tokens), ``None`` when the tier
    cannot read windows."""
    if not isinstance(tier, WindowReader):
        return None
    window = await tier.read_window(agent_id, session_id=session_id, tokens=0)
    return window.generation, window.messages[-1:]


async def _nothing() -> list[ChatMessage]:
    return []


async def _none() -> None:
    return None


class _Writes:
    """The writes of one session that a provider has under way (``active``) and has finished (``done``): a read
    that overlapped one of them does not serve the hot tier (see ``HybridHistoryProvider._read``)."""

    __slots__ = ("__weakref__", "active", "done")

    def __init__(self) -> None:
        self.active = 0
        self.done = 0


def _nonempty(window: HistoryWindow, count: int) -> bool:
    """Whether a windowed read can be of a session of ``count`` (> 0) messages: it holds at least the newest."""
    return bool(window.messages)


_COLD_ABILITIES: tuple[tuple[type, tuple[str, ...]], ...] = (
    (SessionGeneration, ("generation",)),
    (SummaryStore, ("get_summary", "put_summary", "clear_summaries")),
)
"""The optional abilities a hybrid provider has only when its cold tier has them, and their methods."""


_VARIANTS: dict[tuple[type, tuple[str, ...]], type] = {}


def _lacking(cls: type[_H], names: tuple[str, ...]) -> type[_H]:
    """``cls`` without the methods ``names`` (each None: a protocol's isinstance check finds it absent), made
    once per class and set of names."""
    variant = _VARIANTS.get((cls, names))
    if variant is None:
        namespace = {"__module__": cls.__module__, "__qualname__": cls.__qualname__, **dict.fromkeys(names)}
        variant = _VARIANTS.setdefault((cls, names), type(cls.__name__, (cls,), namespace))
    return cast(type[_H], variant)


class HybridHistoryProvider(Closeable):
    """Two tiers behind one ``HistoryProvider``: writes go to the cold tier (durable) first, then the hot tier
    is brought up to it; reads return the whole transcript, from the hot tier when it holds the whole session
    (as many messages as the cold tier), else from the cold tier (a hot tier that expired the session, or that
    was added later).

    The hot tier is a copy of the cold one, made in the cold tier's order: after its cold write, an append
    copies to the hot tier the cold tier's messages from the hot tier's count on, with their run ids. Writers
    that share no lock (threads each running a loop, processes, other providers over the same tiers) thus leave
    both tiers in one order, and a hot tier that lost the session gets it back whole at the next write. This
    needs a cold tier that reads run ids (``RunReader``); over any other, each append writes the same messages
    to each tier, which such writers can leave in two orders.

    Reads are the transcript, never a bounded view: how much of it a window keeps is the pipeline's business
    (``HybridContext`` bounds it with a sliding window of ``max_total``). Windowed reads
    (``read_window``) are served by whichever tier serves the session, when that tier can read windows.

    The hot tier is a record derived from the cold one, kept for the cold tier's generation: when both tiers keep
    generations and the hot one keeps summaries (Redis, memory), the hot tier keeps beside its copy, under its own
    generation, the cold tier's generation the copy is of (the span :data:`COPY_OF`), and a read is served by the
    hot tier only while that is the cold tier's generation. So the cold tier may be changed directly, through a
    provider of its own (``ravi forget`` and ``ravi import``, a process that does not know the hot tier): a clear,
    ``clear_run``, ``replace_last``, ``forget`` or replaced session gives it a new generation, and the hot copy of
    the old one is served no more, whatever ids and count the new transcript has; the next write through a hybrid
    provider copies the session again. Appends made directly to the cold tier keep its generation and are copied
    by the next write, as always. Over tiers without these abilities, a change of the cold tier made around the
    hybrid provider is not seen (clear the hot tier too).

    The cold tier is the authority on what was derived: the session's generation (``SessionGeneration``) and its
    summaries (``SummaryStore``) are the cold tier's, and ``replace_last`` (``TailEditor``) is decided there
    first. A windowed read served by the hot tier carries the cold tier's generation, read before and after it
    (the read is made again when they differ), so a record derived from it is never kept under a newer
    generation than its messages, and offsets kept by generation are those of the messages read. Over a cold
    tier without generations (or summaries), the provider has none either: it is not a ``SessionGeneration``
    (or ``SummaryStore``), so strategies keep their records as they do over any such store.

    Example:
        >>> from ravi.agents.context import InMemoryHistoryProvider
        >>> history = HybridHistoryProvider(InMemoryHistoryProvider(), InMemoryHistoryProvider())
    """

    def __new__(cls, *args: Any, **kwargs: Any) -> Self:
        # The abilities the cold tier lacks are the provider's to lack: it is made of a subclass whose methods of
        # them are None, which isinstance checks find absent, so no caller reaches a method that can only fail.
        # (Called without the tiers, by copy or pickle, it is of the class asked: the state restored names them.)
        cold = kwargs["cold"] if "cold" in kwargs else args[1] if len(args) > 1 else None
        lacks = tuple(
            name
            for protocol, names in _COLD_ABILITIES
            if cold is not None and not isinstance(cold, protocol)
            for name in names
        )
        return super().__new__(_lacking(cls, lacks) if lacks else cls)

    def __init__(self, hot: HistoryProvider, cold: HistoryProvider) -> None:
        self.hot, self.cold = hot, cold
        self._locks = KeyedLocks[tuple[str, str]]()
        # the writes under way of each session read or written now (kept weakly, so sessions never accumulate)
        self._under_way: weakref.WeakValueDictionary[tuple[str, str], _Writes] = weakref.WeakValueDictionary()
        self._counting = threading.Lock()  # each step on them, for every thread; never held across an await
        # whether the hot copy is tagged with the cold generation it copies (see the class), and the tags known
        self._tagged = (
            isinstance(hot, SummaryStore)
            and isinstance(hot, SessionGeneration)
            and isinstance(cold, SessionGeneration)
            and isinstance(cold, RunReader)
        )
        self._copies: OrderedDict[tuple[str, str, str], str] = OrderedDict()

    def _writes(self, agent_id: str, session_id: str) -> asyncio.Lock:
        """The lock that makes each write of the session one step in both tiers, for the tasks of this event loop:
        two writers whose tier writes interleaved (A cold, B cold, B hot, A hot) left the tiers in different
        orders, and reads served by the hot tier in another order than the cold tier's. Writers on other loops
        (other threads) or in other processes take no part in it (see :mod:`ravi.kernel.loops`)."""
        return self._locks((agent_id, session_id))

    def _writes_of(self, agent_id: str, session_id: str) -> _Writes:
        """The session's writes under way in this provider (whatever the thread), made when there is none. The
        scope is checked first: it keys them (and the session's lock), and a list raised a bare ``TypeError``."""
        check_scope(agent_id=agent_id, session_id=session_id)
        with self._counting:
            writes = self._under_way.get((agent_id, session_id))
            if writes is None:
                writes = self._under_way[(agent_id, session_id)] = _Writes()
            return writes

    @contextlib.asynccontextmanager
    async def _writing(self, agent_id: str, session_id: str) -> AsyncIterator[None]:
        """One write of the session: its lock (``_writes``) held, and counted as under way while it runs, so that
        this provider's reads of the session meanwhile go to the cold tier (see :meth:`_read`)."""
        writes = self._writes_of(agent_id, session_id)
        async with self._writes(agent_id, session_id):
            with self._counting:
                writes.active += 1
            try:
                yield
            finally:
                with self._counting:
                    writes.active -= 1
                    writes.done += 1

    async def _read(
        self,
        agent_id: str,
        session_id: str,
        read: Callable[[HistoryProvider], Awaitable[T]],
        holds: Callable[[T, int], bool] | None = None,
        cold_generation: str | None = None,
    ) -> T:
        """``read(tier)`` of the hot tier when it holds the whole session (as many messages as the cold tier),
        else of the cold one. Both counts and the hot read go out at once: a session the hot tier serves costs
        one round trip's wait, not three. ``holds(result, count)`` says whether the hot read is of a session of
        ``count`` messages; when it is not, the hot tier changed between its count and its read (another writer
        emptied or replaced it), and the cold tier is read instead.

        A read that overlaps a write of the session by this provider (under way when the read starts, or started
        or finished before it ends) reads the cold tier: such a write changes the cold tier first and the hot one
        after, and in between the hot tier still holds what the cold tier no longer does, often as many
        messages (a replaced transcript, a replaced newest message), which no count tells apart.

        Over tagged tiers (see the class), the hot read is served only when the hot copy is tagged with the cold
        tier's generation: ``cold_generation`` when the caller read it before (and checks it after), else read
        beside the counts."""
        writes = self._writes_of(agent_id, session_id)
        with self._counting:
            quiet, done = not writes.active, writes.done
        if not quiet:
            return await read(self.cold)
        hot_generation, cold_read, hot_count, cold_count, hot_read = await asyncio.gather(
            _generation(self.hot, agent_id, session_id) if self._tagged else _none(),
            _generation(self.cold, agent_id, session_id) if self._tagged and cold_generation is None else _none(),
            self.hot.count_messages(agent_id, session_id=session_id),
            self.cold.count_messages(agent_id, session_id=session_id),
            read(self.hot),
        )
        if cold_generation is not None:
            cold_read = cold_generation
        with self._counting:
            quiet = not writes.active and writes.done == done
        served = quiet and hot_count and hot_count == cold_count and (holds is None or holds(hot_read, hot_count))
        # a hot copy of another cold generation (the cold tier changed around this provider) is not served
        if served and (not self._tagged or await self._tag(agent_id, session_id, hot_generation) == cold_read):
            return hot_read
        return await read(self.cold)

    async def _tag(self, agent_id: str, session_id: str, hot_generation: str | None) -> str | None:
        """The cold generation the hot tier's copy of the session is of, as kept beside it in ``hot_generation``
        (``None``: none kept). A tag, once kept, never changes (the first one kept for a span stays, and a
        generation is never repeated), so each is read once."""
        if not hot_generation:
            return None
        key = (agent_id, session_id, hot_generation)
        with self._counting:
            known = self._copies.get(key)
        if known is not None:
            return known
        tag = await cast(SummaryStore, self.hot).get_summary(Scope(agent_id, session_id, hot_generation), COPY_OF)
        if tag is not None:
            self._known(key, tag)
        return tag

    def _known(self, key: tuple[str, str, str], tag: str) -> None:
        with self._counting:
            self._copies[key] = tag
            self._copies.move_to_end(key)
            while len(self._copies) > _KNOWN_COPIES:
                self._copies.popitem(last=False)

    async def _put_tag(self, agent_id: str, session_id: str, hot_generation: str, cold_generation: str) -> None:
        """Keep beside the hot copy of ``hot_generation`` that it is a copy of ``cold_generation``: refused by the
        hot tier once its generation changed, and not kept when another copy kept a tag first (then that one is
        read)."""
        if not (hot_generation and cold_generation):
            return
        scope = Scope(agent_id, session_id, hot_generation)
        await cast(SummaryStore, self.hot).put_summary(scope, COPY_OF, cold_generation)

    async def _read_window(
        self, agent_id: str, session_id: str, tokens: int, cold_generation: str | None = None
    ) -> HistoryWindow:
        """A windowed read of the tier that serves the session (see :meth:`_read`). A windowed read cannot show
        by itself that it is of the whole session: a hot tier that lost the session and got part of it back
        (another writer's copy under way) between its count and its read gives the newest part of a shorter
        prefix. So the cold tier's newest message is read beside the counts, and the hot tier's window is served
        only when it ends with that very message."""

        async def read(tier: HistoryProvider) -> HistoryWindow:
            if isinstance(tier, WindowReader):
                return await tier.read_window(agent_id, session_id=session_id, tokens=tokens)
            return window_of(await tier.get_messages(agent_id, session_id=session_id), tokens)

        if not isinstance(self.cold, WindowReader):
            return await self._read(agent_id, session_id, read, _nonempty, cold_generation)
        newest: list[ChatMessage] = []

        async def read_hot_or_cold(tier: HistoryProvider) -> HistoryWindow:
            if tier is not self.hot:
                return await read(tier)
            window, cold_newest = await asyncio.gather(read(tier), _newest(self.cold, agent_id, session_id))
            newest[:] = cold_newest[1] if cold_newest is not None else []
            return window

        return await self._read(
            agent_id,
            session_id,
            read_hot_or_cold,
            lambda window, count: bool(window.messages) and window.messages[-1:] == newest,
            cold_generation,
        )

    async def append(self, agent_id: str, message: ChatMessage, *, session_id: str, run_id: str = "") -> None:
        """Write to the cold tier, then the hot one."""
        await self.append_many(agent_id, [message], session_id=session_id, run_id=run_id)

    async def append_many(
        self, agent_id: str, messages: Sequence[ChatMessage], *, session_id: str, run_id: str = ""
    ) -> int | None:
        """Write to the cold tier (durable first), then bring the hot tier up to it: copy what the hot tier lacks,
        in the cold tier's order, with the cold tier's run ids (see :meth:`_mirror`). A cold tier that cannot
        read run ids (not a ``RunReader``) gets the older way: the same messages appended to each tier, which
        writers sharing no lock (other loops, other processes) can leave in two orders. Returns how many messages
        the cold tier stored, as it says."""
        async with self._writing(agent_id, session_id):
            if not isinstance(self.cold, RunReader) or not messages:  # an empty batch has nothing to copy
                added = await self.cold.append_many(agent_id, messages, session_id=session_id, run_id=run_id)
                await self._followed(
                    agent_id, session_id, self.hot.append_many(agent_id, messages, session_id=session_id, run_id=run_id)
                )
                return added
            # The hot tier's generation is read before its count (see _mirror), alongside the cold write.
            added, hot_before = await asyncio.gather(
                self.cold.append_many(agent_id, messages, session_id=session_id, run_id=run_id),
                _generation(self.hot, agent_id, session_id),
            )
            await self._mirror(agent_id, session_id, self.cold, hot_before)
            return added

    async def _mirror(
        self, agent_id: str, session_id: str, cold: RunReader, hot_before: str | None, trusted: bool = False
    ) -> None:
        """Copy to the hot tier the cold tier's messages from the hot tier's count on, in the cold tier's order.

        The hot tier stays a prefix of the cold one: each copy appends a contiguous stretch of the cold tier, in
        order, from a count read off the hot tier, and every ``HistoryProvider`` ignores a message the session
        already holds. So a message lands only once those before it in the cold tier are there, whichever
        writers copy at once; when the two counts are equal, so are the tiers. The copy goes page by page
        (:data:`_PAGE` messages), the hot count read again before each page, so a hot tier that lost the
        session (it expired, or was added later) gets it back whole, and writers re-warming it at once skip
        what another has copied.

        What a copy cannot see by itself is a removal landing in the middle of it: a hot tier cleared after its
        count was read (the stretch then lands at the start of an empty session), or a cold session cleared or
        rewritten after it was read (the stretch is of the old session). Both tiers' generations, read before
        and after, tell: a changed cold generation drops the hot session (reads go to the cold tier, the next
        write copies it again); a changed hot generation, when the copy started past the hot tier's start, has
        the hot tier compared with the cold one's start, and dropped unless it is a prefix (a stretch copied
        from the start in one append is a prefix whatever the hot tier held; one copied in several, one per run,
        is not: a hot tier emptied between two of them got the later ones at its start). And a hot tier whose
        message before the stretch is not the cold tier's (it holds more than the cold tier, or another
        session's messages that a removal it missed left there) is stale: it is dropped and copied again from
        the start.

        Over tagged tiers (see the class), a hot copy that is not tagged with the cold tier's generation is of
        another generation (the cold tier was changed around this provider): it is dropped and copied again from
        the start; one without a tag (a copy under way elsewhere, or made before tags were kept) is kept only when
        it is the start of the cold tier. A copy that saw both generations hold (or began with an empty hot tier)
        is then tagged. ``trusted``: the caller saw the hot copy tagged with the cold generation just before its
        own edit of both tiers (``replace_last``), which the copy then stands for.
        """
        cold_before, hot_count, tag = await asyncio.gather(
            _generation(self.cold, agent_id, session_id),
            self.hot.count_messages(agent_id, session_id=session_id),
            self._tag(agent_id, session_id, hot_before) if self._tagged else _none(),
        )
        copied = past_start = dropped = False
        known = not self._tagged or trusted or not hot_count or tag == cold_before
        if not known and (tag is not None or not await self._hot_is_prefix(agent_id, session_id, cold)):
            await self.hot.clear(agent_id, session_id=session_id)  # a copy of another generation of the session
            hot_before = await _generation(self.hot, agent_id, session_id)
            hot_count, dropped = 0, True
        while True:
            start = max(hot_count - 1, 0)  # the message before the stretch comes too: the seam
            page, seam = await asyncio.gather(
                cold.get_stored(agent_id, session_id=session_id, offset=start, limit=_PAGE + 1),
                self.hot.get_messages(agent_id, session_id=session_id, offset=start, limit=1)
                if hot_count
                else _nothing(),
            )
            if hot_count and (not page or seam != [page[0].message]):
                if dropped:  # the tiers changed under this copy twice: the next write tries again
                    return
                await self.hot.clear(agent_id, session_id=session_id)
                hot_before = await _generation(self.hot, agent_id, session_id)
                hot_count, dropped = 0, True
                continue
            stretch = page[1:] if hot_count else page
            past_start = past_start or (hot_count > 0 and bool(stretch))
            for run, group in groupby(stretch, key=lambda stored: stored.run_id):
                batch = [stored.message for stored in group]
                past_start = past_start or copied  # a later group lands past the start, wherever the hot tier is
                if not await self._followed(
                    agent_id, session_id, self.hot.append_many(agent_id, batch, session_id=session_id, run_id=run)
                ):
                    return  # the hot tier changed under the copy and was dropped: the next write copies again
                copied = True
            if len(page) <= _PAGE:
                break
            hot_count = await self.hot.count_messages(agent_id, session_id=session_id)
        if not copied and (not self._tagged or (tag == cold_before and not trusted)):
            return
        hot_after, cold_after = await asyncio.gather(
            _generation(self.hot, agent_id, session_id), _generation(self.cold, agent_id, session_id)
        )
        stray = cold_after != cold_before  # the stretch may be of the old cold session
        if copied and not stray and hot_after != hot_before and past_start:  # it may have landed in an emptied one
            stray = not await self._hot_is_prefix(agent_id, session_id, cold)
        if stray and copied:
            await self.hot.clear(agent_id, session_id=session_id)
        elif self._tagged and not stray and hot_after and (hot_after == hot_before or not hot_before):
            await self._put_tag(agent_id, session_id, hot_after, cold_after or "")

    async def _followed(self, agent_id: str, session_id: str, write: Awaitable[object]) -> bool:
        """Await ``write``, a write of the hot tier after the cold tier's; ``False`` when the hot tier refused it
        for holding another message under one of its ids (``MessageConflict``), which the cold tier did not:
        another writer changed the hot tier under this one (a replacement reusing an id, say). The hot tier is
        then dropped (reads go to the cold tier, the next write copies it), and the write that the cold tier took
        does not fail as though it had been refused."""
        try:
            await write
        except MessageConflict:
            await self.hot.clear(agent_id, session_id=session_id)
            return False
        return True

    async def _hot_is_prefix(self, agent_id: str, session_id: str, cold: RunReader) -> bool:
        """Whether the hot tier's session, read whole, is the start of the cold tier's (read after it)."""
        held = await self.hot.get_messages(agent_id, session_id=session_id)
        start = await cold.get_stored(agent_id, session_id=session_id, limit=len(held))
        return held == [stored.message for stored in start]

    async def get_messages(
        self, agent_id: str, *, session_id: str, limit: int | None = None, offset: int = 0
    ) -> list[ChatMessage]:
        """The transcript, oldest first, paged by ``offset`` and ``limit``."""
        check_scope(agent_id=agent_id, session_id=session_id)
        check_page(limit, offset)
        return await self._read(
            agent_id,
            session_id,
            lambda tier: tier.get_messages(agent_id, session_id=session_id, limit=limit, offset=offset),
            lambda read, count: len(read) == max(0, min(count - offset, count if limit is None else limit)),
        )

    async def read_window(self, agent_id: str, *, session_id: str, tokens: int) -> HistoryWindow:
        """The windowed read, from the tier that serves the session (``WindowReader``)."""
        check_scope(agent_id=agent_id, session_id=session_id)
        check_count(tokens, "tokens")

        if not isinstance(self.cold, SessionGeneration):
            return replace(await self._read_window(agent_id, session_id, tokens), generation=None)
        # The cold tier's generation, read before and after the read (a window the hot tier served carries the
        # hot tier's own token, which names nothing here). The same token on both sides means nothing was removed
        # or renumbered in between (a generation is never repeated), so the read is of that generation, as a
        # reader that keeps offsets by generation needs; otherwise the read is made again. A session rewritten
        # on every attempt gets its last read under the older generation: newer messages under an older
        # generation, whose derived records are refused, never older messages under a newer one.
        after = await self.cold.generation(agent_id, session_id=session_id)
        for _ in range(_READ_ATTEMPTS):
            generation = after  # read before this attempt's read
            window = await self._read_window(agent_id, session_id, tokens, generation)
            after = await self.cold.generation(agent_id, session_id=session_id)
            if after == generation:
                break
        return replace(window, generation=generation)

    async def search_units(
        self, agent_id: str, *, session_id: str, query: str, before: int, limit: int
    ) -> list[UnitMatch]:
        """The search (``HistorySearcher``) of the tier that serves the session, when that tier can search; else
        of the cold tier; else BM25 over the session read whole. A search of the hot tier that finds nothing is
        made again of the cold tier (the hot tier may have lost the session after it was counted)."""
        check_scope(agent_id=agent_id, session_id=session_id)
        check_search(query, before, limit)
        cold = self.cold
        if isinstance(cold, HistorySearcher) and not isinstance(self.hot, HistorySearcher):
            # the cold tier searches whichever tier serves the session: no need to count them (Redis over Postgres)
            return await cold.search_units(agent_id, session_id=session_id, query=query, before=before, limit=limit)

        async def search(tier: HistoryProvider) -> list[UnitMatch]:
            if not isinstance(tier, HistorySearcher):
                tier = self.cold
            if isinstance(tier, HistorySearcher):
                return await tier.search_units(agent_id, session_id=session_id, query=query, before=before, limit=limit)
            messages = await tier.get_messages(agent_id, session_id=session_id)
            index = Bm25()
            index.extend(messages)
            offsets = list(accumulate(map(stored_tokens, messages), initial=0))
            stop = bisect_left(offsets, before, hi=len(messages))
            systems = [i for i, m in enumerate(messages) if m.role == "system"]
            scores = index.scores(query)
            return match_units(messages, scores, before=offsets, systems=systems, stop=stop, limit=limit)

        # a hot tier that found nothing may have lost the session after its count (an expiry, another writer's
        # drop): the cold tier is searched then, as it is when the hot tier does not hold the session
        return await self._read(agent_id, session_id, search, lambda found, count: bool(found))

    async def get_stored(
        self, agent_id: str, *, session_id: str, limit: int | None = None, offset: int = 0
    ) -> list[StoredMessage]:
        """The cold tier's messages with their run ids (``RunReader``): it holds the whole transcript.

        Raises:
            NotImplementedError: the cold tier cannot read run ids.
        """
        if not isinstance(self.cold, RunReader):
            raise NotImplementedError(f"{type(self.cold).__name__} (the cold tier) cannot read run ids")
        return await self.cold.get_stored(agent_id, session_id=session_id, limit=limit, offset=offset)

    async def clear(self, agent_id: str, *, session_id: str) -> int:
        """Clear both tiers; returns what the cold tier held."""
        async with self._writing(agent_id, session_id):
            await self.hot.clear(agent_id, session_id=session_id)
            return await self.cold.clear(agent_id, session_id=session_id)

    async def forget(self, agent_id: str, *, session_id: str | None = None) -> int:
        """Erase the session (every session of the agent when ``session_id`` is ``None``) from the hot tier, then
        from the cold one, which names the sessions a second run finds (``Forgetter``); returns what the cold
        tier removed.

        Raises:
            NotImplementedError: a tier cannot forget (nothing is removed).
        """
        check_forget(agent_id, session_id)
        for tier, name in ((self.hot, "hot"), (self.cold, "cold")):
            if not isinstance(tier, Forgetter):
                raise NotImplementedError(f"{type(tier).__name__} (the {name} tier) cannot forget")
        if session_id is None:  # every session of the agent: the tiers name them, no lock can be taken first
            await self.hot.forget(agent_id)  # type: ignore[attr-defined]
            return await self.cold.forget(agent_id)  # type: ignore[attr-defined,no-any-return]
        async with self._writing(agent_id, session_id):
            await self.hot.forget(agent_id, session_id=session_id)  # type: ignore[attr-defined]
            return await self.cold.forget(agent_id, session_id=session_id)  # type: ignore[attr-defined,no-any-return]

    async def clear_run(self, agent_id: str, *, session_id: str, run_id: str) -> int:
        """Clear the run in both tiers; returns what the cold tier removed."""
        async with self._writing(agent_id, session_id):
            await self.hot.clear_run(agent_id, session_id=session_id, run_id=run_id)
            return await self.cold.clear_run(agent_id, session_id=session_id, run_id=run_id)

    async def replace_last(
        self,
        agent_id: str,
        *,
        session_id: str,
        message_id: str,
        messages: Sequence[ChatMessage] = (),
        run_id: str = "",
    ) -> bool:
        """``replace_last`` (``TailEditor``): the cold tier decides. Over a cold tier that reads run ids, the hot
        tier gives up its newest message first and is then brought up to the cold tier as after an append (see
        :meth:`_replace_last_then_copy`).

        Over any other cold tier, the cold tier is edited, then the hot one. A hot tier that cannot follow (it
        lacks the ability, or its newest message is another one) drops the session, so reads go to the cold tier
        until the hot one holds the whole session again. Another writer (another process) may replace or edit the
        session in both tiers between this one's cold and hot edits, leaving the message edited newest in the hot
        tier again (a replacement reusing it): the hot tier's edit then lands on the other writer's transcript,
        which the cold tier holds unedited. So the cold tier's newest message and generation (``WindowReader``,
        ``SessionGeneration``) are read after its edit and again after the hot tier's: the hot tier is dropped
        unless both times they are the edit's last message and one generation."""
        check_replace(agent_id, session_id, message_id, messages, run_id)
        if not isinstance(self.cold, TailEditor):
            raise NotImplementedError(f"{type(self.cold).__name__} (the cold tier) cannot replace_last")
        async with self._writing(agent_id, session_id):
            if isinstance(self.cold, RunReader):
                return await self._replace_last_then_copy(agent_id, session_id, message_id, messages, run_id)
            done = await self.cold.replace_last(
                agent_id, session_id=session_id, message_id=message_id, messages=messages, run_id=run_id
            )
            if not done:
                return False
            edited = await _newest(self.cold, agent_id, session_id) if isinstance(self.hot, WindowReader) else None
            try:
                followed = isinstance(self.hot, TailEditor) and await self.hot.replace_last(
                    agent_id, session_id=session_id, message_id=message_id, messages=messages, run_id=run_id
                )
            except MessageConflict:  # the hot tier holds another message under one of the ids (see _followed)
                followed = False
            if followed and edited is not None:
                # the edit's last message is the newest; with none, the hot tier's newest after its edit is
                newest = (
                    [messages[-1]] if messages else ((await _newest(self.hot, agent_id, session_id)) or (None, []))[1]
                )
                still = await _newest(self.cold, agent_id, session_id)
                followed = edited == still and list(map(stored_body, edited[1])) == list(map(stored_body, newest))
            if not followed:
                await self.hot.clear(agent_id, session_id=session_id)
            return True

    async def _replace_last_then_copy(
        self, agent_id: str, session_id: str, message_id: str, messages: Sequence[ChatMessage], run_id: str
    ) -> bool:
        """``replace_last`` over a cold tier that reads run ids: the hot tier gives up its newest message first,
        the cold tier decides, and the hot tier is brought up to it as after an append (:meth:`_mirror`).

        While the cold tier changes the message, the hot tier holds one message fewer, so no reader (of any
        process) counts the tiers equal and is served the replaced message; a writer that stops in between
        leaves the hot tier a prefix of the cold one, which serves no read and the next write completes. A hot
        tier whose newest message is another (it is behind, or stale) is dropped instead, and copied again. When
        the cold tier refuses the edit (the message is no longer its newest), the copy puts the message back."""
        trusted = False
        if self._tagged:  # the hot copy was of the cold generation this edit starts from (see _mirror)
            hot_now, cold_now = await asyncio.gather(
                _generation(self.hot, agent_id, session_id), _generation(self.cold, agent_id, session_id)
            )
            trusted = bool(cold_now) and await self._tag(agent_id, session_id, hot_now) == cold_now
        taken = isinstance(self.hot, TailEditor) and await self.hot.replace_last(
            agent_id, session_id=session_id, message_id=message_id, run_id=run_id
        )
        if not taken:
            await self.hot.clear(agent_id, session_id=session_id)
        hot_before = await _generation(self.hot, agent_id, session_id)
        cold = self.cold
        assert isinstance(cold, TailEditor) and isinstance(cold, RunReader)
        done = await cold.replace_last(
            agent_id, session_id=session_id, message_id=message_id, messages=messages, run_id=run_id
        )
        await self._mirror(agent_id, session_id, cold, hot_before, trusted and taken)
        return done

    async def replace_session(
        self, agent_id: str, messages: Sequence[ChatMessage], *, session_id: str, run_id: str = ""
    ) -> int:
        """Put ``messages`` in place of the session's transcript (``SessionReplacer``): the hot tier is emptied,
        the cold tier replaced (atomically when it is a ``SessionReplacer``,
        :func:`~ravi.kernel.storage.replace_session`), and the hot tier brought up to it as an append does
        (:meth:`_mirror`). Returns what the cold tier held.

        The hot tier is emptied first: one that still held the old transcript once the cold tier held the new one
        served it to readers of other providers (other processes), which counted as many messages in each tier.
        A reader that counted the hot tier before it was emptied and read it after gets a read that does not hold
        what the count said, and reads the cold tier (see :meth:`_read`). The copy is of what the cold tier
        holds, not of the batch: another writer (another process) may have replaced the session again in
        between, and the copy's checks of both generations drop a hot tier that such a writer changed under it.
        """
        check_append(agent_id, session_id, run_id, messages)
        async with self._writing(agent_id, session_id):
            await self.hot.clear(agent_id, session_id=session_id)
            removed = await replace_session(self.cold, agent_id, messages, session_id=session_id, run_id=run_id)
            if not messages:
                return removed
            if isinstance(self.cold, RunReader):
                hot_before = await _generation(self.hot, agent_id, session_id)
                await self._mirror(agent_id, session_id, self.cold, hot_before)
            else:
                await self._followed(
                    agent_id, session_id, self.hot.append_many(agent_id, messages, session_id=session_id, run_id=run_id)
                )
            return removed

    async def generation(self, agent_id: str, *, session_id: str) -> str:
        """The cold tier's generation of the session (``SessionGeneration``)."""
        check_scope(agent_id=agent_id, session_id=session_id)
        if not isinstance(self.cold, SessionGeneration):
            raise NotImplementedError(f"{type(self.cold).__name__} (the cold tier) keeps no generations")
        return await self.cold.generation(agent_id, session_id=session_id)

    def _summaries(self) -> SummaryStore:
        if not isinstance(self.cold, SummaryStore):
            raise NotImplementedError(f"{type(self.cold).__name__} (the cold tier) keeps no summaries")
        return self.cold

    async def get_summary(self, scope: Scope, span_id: str) -> str | None:
        """The cold tier's summary of the span in ``scope`` (``SummaryStore``)."""
        check_summary_scope(scope)
        return await self._summaries().get_summary(scope, span_id)

    async def put_summary(self, scope: Scope, span_id: str, text: str) -> bool:
        """Keep the summary in the cold tier, under its generation of the session."""
        check_summary_scope(scope)
        return await self._summaries().put_summary(scope, span_id, text)

    async def clear_summaries(self, agent_id: str, *, session_id: str | None = None) -> int:
        """Remove the session's summaries from the cold tier."""
        return await self._summaries().clear_summaries(agent_id, session_id=session_id)

    async def list_sessions(self, agent_id: str, *, limit: int = 100) -> list[str]:
        """The cold tier's sessions (it holds every one), when it can list them."""
        lister = getattr(self.cold, "list_sessions", None)
        if lister is None:
            raise NotImplementedError(f"{type(self.cold).__name__} cannot list sessions")
        return list(await lister(agent_id, limit=limit))

    async def count_messages(self, agent_id: str, *, session_id: str) -> int:
        """Messages in the cold tier (the full transcript)."""
        return await self.cold.count_messages(agent_id, session_id=session_id)

    async def aclose(self) -> None:
        """Close both tiers."""
        for tier in (self.hot, self.cold):
            closer = getattr(tier, "aclose", None) or getattr(tier, "close", None)
            if closer is not None:
                result = closer()
                if hasattr(result, "__await__"):
                    await result


__all__ = ["HybridHistoryProvider"]
