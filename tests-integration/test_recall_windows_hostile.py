"""Relevant recall windows of a warm engine against windows built cold, under hostile operation sequences on
every store: interleaved huge tool results and tiny turns, system messages in the middle, ``replace_last``,
``clear``, ``clear_run``, other sessions and agents sharing message ids, a second store object writing, tool
results stored apart from their calls (other turns and calls stored between, by either store object, and the
results of parallel calls split by a message), and budgets from below the newest turn to far above the session.
No window, of relevant recall or of a plain token budget, holds a tool result whose call is not before it."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, rule
from servers import Server
from tool_pairs import orphans, refusals

from ravi.agents.context import (
    CompactionPipeline,
    HybridHistoryProvider,
    InMemoryHistoryProvider,
    TokenBudgetComposedStrategy,
    WindowRequest,
)
from ravi.agents.context.compaction.relevant_recall import RelevantRecallStrategy
from ravi.agents.tokens import DEFAULT_COUNTER
from ravi.kernel.messages import ChatMessage, TextBlock, ToolCallBlock, ToolResultBlock

WORDS = ["cache", "deploy", "staging", "port", "walrus", "invoice", "zanzibar", "lunch", "Straße", "東京"]
SESSIONS = [("a", "s"), ("a", "t"), ("b", "s")]
BUDGETS = [0, 3, 40, 120, 250, 600, 1_200, 4_000, 100_000]
EXAMPLES = int(os.environ.get("RAVI_TEST_HOSTILE_EXAMPLES", "40"))
STEPS = int(os.environ.get("RAVI_TEST_HOSTILE_STEPS", "50"))

kinds = st.sampled_from(
    ["user"] * 4 + ["assistant"] * 3 + ["system", "tools", "tools", "bigtool", "huge", "tiny", "apart", "parallel"]
)
texts = st.lists(st.sampled_from(WORDS), min_size=0, max_size=6)


def grouped(history: list[ChatMessage]) -> set[str]:
    """The ids of the tool calls in ``history`` whose results all come right after them (only results and system
    messages between): those a window sends with their results or not at all. A call whose results were stored
    apart from it may be sent without them (decision 111)."""
    together: set[str] = set()
    apart: set[str] = set()
    for i, m in enumerate(history):
        for b in m.content:
            if isinstance(b, ToolResultBlock):
                j = i - 1
                while j >= 0 and history[j].role in ("tool", "system"):
                    j -= 1
                follows = j >= 0 and any(c.id == b.tool_call_id for c in history[j].tool_calls)
                (together if follows else apart).add(b.tool_call_id)
    return together - apart


def as_stored(message: ChatMessage, stored: ChatMessage) -> bool:
    """Whether a window's ``message`` is ``stored`` as it is, or without tool calls of it (a call no result
    answers, decision 113)."""
    kept = {c.id for c in message.tool_calls}
    content = tuple(b for b in stored.content if not isinstance(b, ToolCallBlock) or b.id in kept)
    return message == stored or message == stored.model_copy(update={"content": content})


def check_paired(window: list[ChatMessage], history: list[ChatMessage]) -> None:
    """No tool result without its call before it; a call whose results follow it is sent with them; nothing a
    provider refuses (a call without a result for each of its ids, a second result for one call)."""
    assert not orphans(window), f"a tool result without its call: {orphans(window)}"
    assert not refusals(window), refusals(window)
    calls = {c.id for m in window for c in m.tool_calls}
    results = {b.tool_call_id for m in window for b in m.content if isinstance(b, ToolResultBlock)}
    assert calls & grouped(history) <= results, "a tool call without its results"


def check_cache_window(window: list[ChatMessage], history: list[ChatMessage], budget: int) -> None:
    """What a cache-stable window keeps whatever it held before: the budget (when the system messages fit), every
    system message, no message twice, conversation order (results aside, which go right after their calls), tool
    calls with their results (a result never without its call before it; a call without its results taken out of
    its message), and the latest user turn when it is the newest message and fits beside the system messages."""
    ids = [m.id for m in window]
    assert len(ids) == len(set(ids)), "a message twice"
    where = {m.id: i for i, m in enumerate(history)}
    assert all(i in where for i in ids), "a message not in the session"
    assert all(as_stored(m, history[where[m.id]]) for m in window), (
        "a message as it was before the session was rewritten"
    )
    order = [where[m.id] for m in window if m.role != "tool"]  # only results move, up to their calls (111)
    assert order == sorted(order), "not in conversation order"
    assert {m.id for m in history if m.role == "system"} <= set(ids), "a system message missing"
    count = DEFAULT_COUNTER.count_message
    systems = sum(count(m) for m in history if m.role == "system")
    if systems <= budget:
        assert sum(count(m) for m in window) <= budget, "over budget"
    check_paired(window, history)
    if history and history[-1].role == "user" and systems + count(history[-1]) <= budget:
        assert history[-1].id in ids, "the request missing"


_OTHER_DIGITS = str.maketrans("0123456789", "1234567890")


def altered(message: ChatMessage) -> ChatMessage:
    """``message`` under the same id, role and size, with other text (a tool call or result as it was)."""
    if message.role == "tool" or message.tool_calls or not message.text:
        return message
    text = message.text.translate(_OTHER_DIGITS)  # the same number of digits: the same token counts
    return ChatMessage(id=message.id, role=message.role, content=[TextBlock(text=text)], created_at=message.created_at)


class Hostile(RuleBasedStateMachine):
    make_store: Callable[[], Any] = staticmethod(InMemoryHistoryProvider)
    second_store: Callable[[], Any] | None = None
    ranks_as_the_kernel = True  # the store's search gives the in-process index's ranking (Postgres: BM25 by SQL)

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.store = self.make_store()
        self.other = self.second_store() if self.second_store is not None else self.store
        self.n = 0
        self.pipeline: CompactionPipeline | None = None
        self.prefer = "relevance"
        self.budget = 0
        self.share: float | None = None
        self.plain: CompactionPipeline | None = None
        # per session: the results of calls stored already, to be stored later (after other messages)
        self.pending: dict[tuple[str, str], list[ChatMessage]] = {}

    def run(self, coroutine: Any) -> Any:
        return self.loop.run_until_complete(coroutine)

    def teardown(self) -> None:
        try:
            for agent, session in SESSIONS:
                self.run(self.store.clear(agent, session_id=session))
            for store in {id(self.store): self.store, id(self.other): self.other}.values():
                close = getattr(store, "aclose", None) or getattr(store, "close", None)
                if close is not None:
                    self.run(close())
        finally:
            self.loop.close()

    @initialize(
        budget=st.sampled_from(BUDGETS),
        prefer=st.sampled_from(["relevance", "cache"]),
        share=st.sampled_from([None, 0.3, 0.6]),
    )
    def start(self, budget: int, prefer: str, share: float | None) -> None:
        self.budget, self.prefer, self.share = budget, prefer, share
        self.pipeline = CompactionPipeline([self.strategy()])
        self.plain = CompactionPipeline([TokenBudgetComposedStrategy([], token_budget=budget)])

    def strategy(self) -> RelevantRecallStrategy:
        return RelevantRecallStrategy(
            self.budget,
            recall_share=self.share,
            meaning=None,
            prefer=self.prefer,  # type: ignore[arg-type]
        )

    def made(self, kind: str, words: list[str]) -> list[ChatMessage]:
        self.n += 1
        n = self.n
        text = " ".join(words) + f" turn {n}"
        mid = f"m{n % 23}-{n}"  # ids shared by every session and agent
        if kind in ("tools", "bigtool"):
            call = ToolCallBlock(id=f"c{n}", name="lookup", arguments={"q": text})
            return [
                ChatMessage.assistant(None, tool_calls=[call], id=mid),
                ChatMessage.tool(f"c{n}", (text + " ") * (400 if kind == "bigtool" else 2), id=f"{mid}-r"),
            ]
        if kind == "apart":  # a call, a user who spoke while the tool ran, its result
            call = ToolCallBlock(id=f"c{n}", name="lookup", arguments={"q": text})
            return [
                ChatMessage.assistant(None, tool_calls=[call], id=mid),
                ChatMessage.user(f"meanwhile {text}", id=f"{mid}-u"),
                ChatMessage.tool(f"c{n}", (text + " ") * 3, id=f"{mid}-r"),
            ]
        if kind == "parallel":  # two calls at once, their results split by a message from elsewhere
            calls = [ToolCallBlock(id=f"c{n}.{k}", name="lookup", arguments={"q": text}) for k in range(2)]
            return [
                ChatMessage.assistant(text, tool_calls=calls, id=mid),
                ChatMessage.tool(f"c{n}.0", (text + " ") * 3, id=f"{mid}-r0"),
                ChatMessage.user(f"meanwhile {text}", id=f"{mid}-u"),
                ChatMessage.tool(f"c{n}.1", (text + " ") * 3, id=f"{mid}-r1"),
            ]
        if kind == "huge":
            return [ChatMessage.user((text + " ") * 300, id=mid)]
        if kind == "tiny":
            return [ChatMessage.user("k", id=mid)]
        return [getattr(ChatMessage, kind)(text, id=mid)]

    @rule(
        where=st.sampled_from(SESSIONS),
        turns=st.lists(st.tuples(kinds, texts), min_size=1, max_size=8),
        run=st.sampled_from(["", "r1", "r2"]),
        theirs=st.booleans(),
    )
    def append(self, where: tuple[str, str], turns: list[tuple[str, list[str]]], run: str, theirs: bool) -> None:
        store = self.other if theirs else self.store
        batch = [m for kind, words in turns for m in self.made(kind, words)]
        self.run(store.append_many(where[0], batch, session_id=where[1], run_id=run))

    @rule(
        where=st.sampled_from(SESSIONS),
        words=texts,
        parallel=st.integers(1, 3),
        big=st.booleans(),
        theirs=st.booleans(),
    )
    def call(self, where: tuple[str, str], words: list[str], parallel: int, big: bool, theirs: bool) -> None:
        """Store an assistant message making ``parallel`` tool calls; their results are stored later, by
        :meth:`results`, after whatever other messages were stored meanwhile."""
        self.n += 1
        n, text = self.n, " ".join(words) + f" call {self.n}"
        calls = [ToolCallBlock(id=f"c{n}.{k}", name="lookup", arguments={"q": text}) for k in range(parallel)]
        store = self.other if theirs else self.store
        self.run(
            store.append(
                where[0], ChatMessage.assistant(None, tool_calls=calls, id=f"m{n % 23}-{n}"), session_id=where[1]
            )
        )
        size = 400 if big else 3
        self.pending.setdefault(where, []).extend(
            ChatMessage.tool(c.id, (text + " ") * size, id=f"m{n % 23}-{n}-r{k}") for k, c in enumerate(calls)
        )

    @rule(
        where=st.sampled_from(SESSIONS),
        split=st.one_of(st.none(), st.tuples(st.integers(1, 3), kinds, texts)),
        theirs=st.booleans(),
    )
    def results(self, where: tuple[str, str], split: tuple[int, str, list[str]] | None, theirs: bool) -> None:
        """Store the results of the session's calls made by :meth:`call` (after a clear: results of calls no
        longer stored), with ``split`` another message among them after the first few."""
        late = self.pending.pop(where, [])
        if not late:
            return
        store = self.other if theirs else self.store
        if split is None:
            self.run(store.append_many(where[0], late, session_id=where[1]))
            return
        at, kind, words = split
        self.run(store.append_many(where[0], late[:at], session_id=where[1]))
        self.run(store.append_many(where[0], self.made(kind, words), session_id=where[1]))
        if late[at:]:
            self.run(store.append_many(where[0], late[at:], session_id=where[1]))

    @rule(where=st.sampled_from(SESSIONS), kind=kinds, words=texts, theirs=st.booleans())
    def replace_last(self, where: tuple[str, str], kind: str, words: list[str], theirs: bool) -> None:
        store = self.other if theirs else self.store
        messages = self.run(store.get_messages(where[0], session_id=where[1]))
        if messages:
            self.run(
                store.replace_last(
                    where[0], session_id=where[1], message_id=messages[-1].id, messages=self.made(kind, words)
                )
            )

    @rule(where=st.sampled_from(SESSIONS), theirs=st.booleans())
    def clear(self, where: tuple[str, str], theirs: bool) -> None:
        store = self.other if theirs else self.store
        self.run(store.clear(where[0], session_id=where[1]))

    @rule(where=st.sampled_from(SESSIONS), theirs=st.booleans())
    def rewrite(self, where: tuple[str, str], theirs: bool) -> None:
        """Clear the session and write it again with the same ids and sizes, and other text in all but its newest
        message (the request stays), then assemble its window: what a window kept of the old one can only be told
        apart by its content."""
        store = self.other if theirs else self.store
        messages = self.run(store.get_messages(where[0], session_id=where[1]))
        self.run(store.clear(where[0], session_id=where[1]))
        if messages:
            again = [*map(altered, messages[:-1]), messages[-1]]
            self.run(store.append_many(where[0], again, session_id=where[1]))
        self.window(where, None, 1)

    @rule(where=st.sampled_from(SESSIONS), run=st.sampled_from(["r1", "r2"]), theirs=st.booleans())
    def clear_run(self, where: tuple[str, str], run: str, theirs: bool) -> None:
        store = self.other if theirs else self.store
        self.run(store.clear_run(where[0], session_id=where[1], run_id=run))

    @rule(where=st.sampled_from(SESSIONS), budget=st.sampled_from([None, *BUDGETS]), many=st.sampled_from([1, 1, 3]))
    def window(self, where: tuple[str, str], budget: int | None, many: int) -> None:
        assert self.pipeline is not None and self.plain is not None
        request = WindowRequest(where[0], where[1], history=self.store, budget=budget)

        async def windows() -> list[list[ChatMessage]]:
            got = await asyncio.gather(
                *(self.pipeline.window(request) for _ in range(many)),  # type: ignore[union-attr]
                self.plain.window(request),  # type: ignore[union-attr]
            )
            return [w.messages for w in got]

        *warm, plain = self.run(windows())
        history = self.run(self.store.get_messages(where[0], session_id=where[1]))
        limit = self.budget if budget is None else budget
        check_cache_window(plain, history, limit)  # a plain budget's window keeps all a cache-stable one does
        if self.prefer == "cache":
            for window in warm:
                check_cache_window(window, history, limit)
            return
        cold = self.run(CompactionPipeline([self.strategy()]).window(request)).messages
        whole = self.run(CompactionPipeline([self.strategy()]).window(WindowRequest(messages=history, budget=budget)))
        check_paired(cold, history)
        check_paired(whole.messages, history)
        for window in warm:
            assert [m.id for m in window] == [m.id for m in cold], "warm differs from a cold engine"
            assert window == cold
        if self.ranks_as_the_kernel:
            assert cold == whole.messages, "the store's window differs from the whole history's"

    @rule(
        where=st.sampled_from(SESSIONS),
        writes=st.lists(st.tuples(kinds, texts, st.booleans()), min_size=1, max_size=4),
        many=st.integers(1, 4),
        clears=st.booleans(),
    )
    def race(self, where: tuple[str, str], writes: list[tuple[str, list[str], bool]], many: int, clears: bool) -> None:
        """Windows of one session assembled while writers append (and one clears) in the same event loop; the
        next window, once they are done, is the cold one."""
        assert self.pipeline is not None
        request = WindowRequest(where[0], where[1], history=self.store)
        batches = [(self.other if theirs else self.store, self.made(kind, words)) for kind, words, theirs in writes]

        async def racing() -> None:
            jobs: list[Any] = [self.pipeline.window(request) for _ in range(many)]  # type: ignore[union-attr]
            jobs += [store.append_many(where[0], batch, session_id=where[1]) for store, batch in batches]
            if clears:
                jobs.append(self.other.clear(where[0], session_id=where[1]))
            await asyncio.gather(*jobs)

        self.run(racing())
        self.window(where, None, 1)


def run_hostile(machine: type[Hostile]) -> None:
    from hypothesis.stateful import run_state_machine_as_test

    run_state_machine_as_test(
        machine,
        settings=settings(
            max_examples=EXAMPLES,
            stateful_step_count=STEPS,
            deadline=None,
            suppress_health_check=list(HealthCheck),
        ),
    )


def test_in_memory_windows_survive_hostile_sequences() -> None:
    run_hostile(Hostile)


def test_hybrid_in_memory_windows_survive_hostile_sequences() -> None:
    class OnHybrid(Hostile):
        make_store = staticmethod(lambda: HybridHistoryProvider(InMemoryHistoryProvider(), InMemoryHistoryProvider()))
        ranks_as_the_kernel = False  # a plain search of words: no neighbours

    run_hostile(OnHybrid)


def test_postgres_windows_survive_hostile_sequences(postgres_server: Server, pg_schema: str) -> None:
    from ravi.capabilities.postgres import PostgresHistoryProvider

    class OnPostgres(Hostile):
        make_store = staticmethod(lambda: PostgresHistoryProvider(postgres_server.address, schema=pg_schema))
        second_store = staticmethod(lambda: PostgresHistoryProvider(postgres_server.address, schema=pg_schema))
        ranks_as_the_kernel = False

    run_hostile(OnPostgres)


def test_redis_windows_survive_hostile_sequences(redis_server: Server, redis_prefix: str) -> None:
    from ravi.capabilities.redis import RedisHistoryProvider

    class OnRedis(Hostile):
        make_store = staticmethod(lambda: RedisHistoryProvider(redis_server.address, prefix=redis_prefix))
        second_store = staticmethod(lambda: RedisHistoryProvider(redis_server.address, prefix=redis_prefix))

    run_hostile(OnRedis)


def test_hybrid_redis_postgres_windows_survive_hostile_sequences(
    postgres_server: Server, pg_schema: str, redis_server: Server, redis_prefix: str
) -> None:
    from ravi.capabilities.postgres import PostgresHistoryProvider
    from ravi.capabilities.redis import RedisHistoryProvider

    def hybrid() -> Any:
        return HybridHistoryProvider(
            RedisHistoryProvider(redis_server.address, prefix=redis_prefix),
            PostgresHistoryProvider(postgres_server.address, schema=pg_schema),
        )

    class OnHybrid(Hostile):  # one writer: two hybrid objects writing at once may order the tiers differently
        make_store = staticmethod(hybrid)
        ranks_as_the_kernel = False

    run_hostile(OnHybrid)
