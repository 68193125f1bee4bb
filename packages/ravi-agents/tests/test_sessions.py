"""State belongs to its session: what a strategy keeps is keyed by (agent_id, session_id), bounded, in one place,
and never inferred from the messages (two sessions may share a message)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from ravi.agents.context import (
    AgentContext,
    CompactionPipeline,
    ContextConfig,
    InMemoryHistoryProvider,
    RelevantRecallStrategy,
    SlidingWindowCompaction,
    TokenBudgetComposedStrategy,
    WindowRequest,
)
from ravi.agents.context.recall_index import EmbeddingIndex
from ravi.agents.context.session import SessionStates
from ravi.agents.storage import HashingEmbeddingClient
from ravi.kernel.agent import Slot
from ravi.kernel.errors import InvalidArgument
from ravi.kernel.messages import ChatMessage

SYSTEM = ChatMessage.system("You are the support agent. " * 5)  # one module-level prompt, shared by every session


def turn(session: str, i: int) -> list[ChatMessage]:
    return [ChatMessage.user(f"{session} question {i} " + "detail " * 12), ChatMessage.assistant(f"answer {i}")]


async def prefix_kept(sessions: list[str], turns: int, strategy_factory: object) -> dict[str, int]:
    """Run ``sessions`` interleaved through one AgentContext; per session, on how many turns the window's start
    stayed where it was the turn before (the prompt prefix a provider cache can reuse)."""
    context = AgentContext(ContextConfig(InMemoryHistoryProvider(), [strategy_factory()]))  # type: ignore[operator]
    kept = dict.fromkeys(sessions, 0)
    previous: dict[str, str] = {}
    for s in sessions:
        await context.add_message(s, SYSTEM)
    for i in range(turns):
        for s in sessions:
            await context.add_messages(s, turn(s, i))
            window = await context.get_prompt_window(s)
            first = next(m.id for m in window if m.role != "system")
            kept[s] += previous.get(s) == first
            previous[s] = first
    return kept


async def test_sessions_sharing_their_first_message_keep_their_own_watermarks() -> None:
    """Two sessions that start with the same system prompt used to share one watermark anchor: interleaved, the
    prefix was kept on 8 of 39 turns, against 33 of 39 for one session alone."""

    def strategy() -> TokenBudgetComposedStrategy:
        return TokenBudgetComposedStrategy(token_budget=300, low_watermark=0.5)

    alone = await prefix_kept(["a"], 40, strategy)
    together = await prefix_kept(["a", "b"], 40, strategy)
    assert together == {"a": alone["a"], "b": alone["a"]}
    assert alone["a"] >= 30


async def test_sliding_window_watermarks_are_per_session_too() -> None:
    def strategy() -> SlidingWindowCompaction:
        return SlidingWindowCompaction(max_messages=10, low_watermark=0.5)

    alone = await prefix_kept(["a"], 30, strategy)
    together = await prefix_kept(["a", "b", "c"], 30, strategy)
    assert together == {"a": alone["a"], "b": alone["a"], "c": alone["a"]}


async def test_an_embedding_index_embeds_each_message_once_per_session() -> None:
    """``EmbeddingIndex`` embedded 2,750 texts instead of 202 for 2 sessions of 50 turns."""
    embedded = 0

    class Counting(HashingEmbeddingClient):
        async def embed(self, texts: Sequence[str]) -> list[list[float]]:
            nonlocal embedded
            embedded += len(texts)
            return await super().embed(texts)

    index = EmbeddingIndex(Counting(dimension=32))
    context = AgentContext(
        ContextConfig(InMemoryHistoryProvider(), [RelevantRecallStrategy(token_budget=200, index=index)])
    )
    for s in ("a", "b"):
        await context.add_message(s, SYSTEM)
    queries = 0
    for i in range(50):
        for s in ("a", "b"):
            await context.add_messages(s, turn(s, i))
            before = embedded
            await context.get_prompt_window(s)
            queries += embedded > before
    stored = 2 * (1 + 2 * 50)  # every message of both sessions, once
    assert embedded <= stored + queries


async def test_the_configured_counter_is_every_strategys_counter() -> None:
    """``ContextConfig(counter=...)`` used to be stored and never read: strategies kept the heuristic counter."""

    class Thousand:
        def count_text(self, text: str) -> int:
            return 1_000

        def count_message(self, message: ChatMessage) -> int:
            return 1_000

        def count_messages(self, messages: Sequence[ChatMessage]) -> int:
            return 1_000 * len(messages)

    history = InMemoryHistoryProvider()
    plain = AgentContext(ContextConfig(history, [TokenBudgetComposedStrategy(token_budget=3_000)]))
    counted = AgentContext(
        ContextConfig(history, [TokenBudgetComposedStrategy(token_budget=3_000)], counter=Thousand())
    )
    await plain.add_messages("s", [ChatMessage.user(f"short {i}") for i in range(10)])
    assert len(await plain.get_prompt_window("s")) == 10
    assert len(await counted.get_prompt_window("s")) == 3


async def test_a_strategy_with_the_plain_signature_keeps_working() -> None:
    class KeepLastTwo:
        async def compact(self, history: Sequence[ChatMessage]) -> list[ChatMessage]:
            return list(history[-2:])

    pipeline = CompactionPipeline([KeepLastTwo(), SlidingWindowCompaction(max_messages=1)])
    context = AgentContext(ContextConfig(InMemoryHistoryProvider(), pipeline))
    await context.add_messages("s", [ChatMessage.user(str(i)) for i in range(5)])
    assert [m.text for m in await context.get_prompt_window("s")] == ["4"]


def test_session_state_is_bounded_least_recently_used_first() -> None:
    states = SessionStates(max_sessions=2)
    a = states.get("agent", "a")
    a.put("owner", Slot("x", int), 1)
    states.get("agent", "b")
    assert states.get("agent", "a") is a  # used again: now the most recent
    states.get("agent", "c")
    assert len(states) == 2
    assert states.get("agent", "a") is a
    assert len(states.get("agent", "b")) == 0  # dropped, made anew
    with pytest.raises(InvalidArgument):
        SessionStates(max_sessions=0)


def test_agents_with_the_same_session_id_do_not_share_state() -> None:
    pipeline = CompactionPipeline([])
    assert pipeline.session("a", "s").state is not pipeline.session("b", "s").state
    assert pipeline.session("a", "s").state is pipeline.session("a", "s").state


@pytest.mark.parametrize(
    ("fact", "question"),
    [
        ("Der Server steht in der Straße am Hafen, Gebäude 7.", "In welcher Strasse steht der Server?"),
        ("Le café du déploiement ouvre à neuf heures.", "Quand ouvre le cafe du deploiement?"),
        ("Η βάση δεδομένων βρίσκεται στον διακομιστή Άλφα.", "Πού βρίσκεται η βάση δεδομένων;"),
        ("База данных находится на сервере Альфа.", "Где находится база данных?"),
        ("数据库部署在北京的服务器上。", "数据库在哪里?"),
        ("データベースは東京のサーバーにあります。", "データベースはどこですか?"),
        ("데이터베이스는 서울 서버에 있습니다.", "데이터베이스는 어디에 있습니까?"),
    ],
)
async def test_relevant_recall_reads_any_script(fact: str, question: str) -> None:
    """Its tokenizer used to yield nothing for Greek, only an id for Russian and Chinese, and split "Straße"."""
    history = [SYSTEM, ChatMessage.user(fact)]
    history += [ChatMessage.user(f"filler {i} " + "lorem ipsum dolor " * 20) for i in range(15)]
    history.append(ChatMessage.user(question))
    strategy = RelevantRecallStrategy(token_budget=300, meaning=None)  # the words: what the tokenizer finds
    window = await strategy.compact(history)
    assert history[1] in window, "the fact in the question's own language was not recalled"
    assert history[8] not in window  # a turn far from the fact (its neighbour may come along)


async def test_a_cleared_session_starts_with_no_state_of_the_old_conversation() -> None:
    """A window's state belongs to the session's generation: after a clear (here by another provider object, as
    another process would), a new conversation reusing the old ids gets the window a fresh pipeline gives, not
    the old conversation's remembered start."""
    from ravi.agents.context import InMemoryHistoryProvider, SlidingWindowCompaction, WindowRequest

    store = InMemoryHistoryProvider()
    pipeline = CompactionPipeline([SlidingWindowCompaction(max_messages=10, low_watermark=0.5)])
    old = [ChatMessage.user(f"old {i}", id=f"m{i}") for i in range(14)]
    await store.append_many("agent", old, session_id="s")
    first = await pipeline.window(WindowRequest("agent", "s", history=store))
    assert first.messages[0].id == "m9"  # crossed the high watermark: down to the low one, start remembered
    await store.clear("agent", session_id="s")
    new = [ChatMessage.user(f"new {i}", id=f"m{i}") for i in range(12)]
    await store.append_many("agent", new, session_id="s")
    got = await pipeline.window(WindowRequest("agent", "s", history=store))
    fresh = await CompactionPipeline([SlidingWindowCompaction(max_messages=10, low_watermark=0.5)]).window(
        WindowRequest("agent", "s", history=store)
    )
    assert got.messages == fresh.messages


def test_a_window_holds_its_sessions_state_alone_and_a_dropped_one_is_not_kept() -> None:
    """Two windows of one session at once never share its state (the second starts from an empty one); the last
    to finish is kept; a state taken before the session was dropped is not kept when its window finishes."""
    states = SessionStates()
    first, lease = states.take("agent", "s")
    second, other = states.take("agent", "s")
    assert first is not second and states.find("agent", "s") is None
    states.give_back(lease, first)
    states.give_back(other, second)
    assert states.find("agent", "s") is second
    taken, lease = states.take("agent", "s")
    assert taken is second
    states.drop("agent", "s")
    states.give_back(lease, taken)
    assert states.find("agent", "s") is None
    _, lease = states.take("agent", "s")
    states.give_back(lease, None)  # a window that failed half-way keeps nothing
    assert states.find("agent", "s") is None


def test_a_window_of_turns_read_before_a_drop_keeps_nothing_and_leaves_the_kept_state() -> None:
    """A caller reads the session's epoch with the turns it gives; a drop between that read and the window's take
    gives the window an empty state it does not keep, and the state kept for the new transcript stays."""
    states = SessionStates(max_sessions=2)
    before = states.epoch("agent", "s")
    assert states.epoch("agent", "other") == before
    states.drop("agent", "s")
    after = states.epoch("agent", "s")
    assert after != before and states.epoch("agent", "other") == before
    fresh, lease = states.take("agent", "s", after)
    states.give_back(lease, fresh, [ChatMessage.user("new", id="new")])
    stale, old = states.take("agent", "s", before)
    assert stale is not fresh and states.find("agent", "s") is fresh  # the kept state is not taken from it
    states.give_back(old, stale, [ChatMessage.user("removed", id="removed")])
    assert states.find("agent", "s") is fresh
    assert [m.id for m in states.last_window("agent", "s")[0] or []] == ["new"]
    for k in range(20):  # epochs of sessions dropped long ago are trimmed; a trimmed one is never read back
        states.drop("agent", f"s{k}")
    assert states.epoch("agent", "s") not in (before, after)


@pytest.mark.parametrize("epoch", [-1, True, 1.5, "1"])
def test_a_window_request_refuses_a_bad_epoch(epoch: object) -> None:
    with pytest.raises(InvalidArgument, match="epoch"):
        WindowRequest("agent", "s", history=InMemoryHistoryProvider(), epoch=epoch)  # type: ignore[arg-type]


def test_a_window_request_without_a_session_refuses_an_epoch() -> None:
    with pytest.raises(InvalidArgument, match="epoch"):
        WindowRequest(messages=[ChatMessage.user("hi")], epoch=0)


@pytest.mark.parametrize("field", ["messages", "unsaved"])
def test_a_window_request_refuses_messages_that_are_not_chat_messages(field: str) -> None:
    """Given messages are checked when the request is made: an item of another kind was an AttributeError from
    inside the engine."""
    with pytest.raises(InvalidArgument, match=field):
        WindowRequest("agent", "s", **{"messages": [], field: [ChatMessage.user("hi"), "hi"]})  # type: ignore[arg-type]


async def test_window_of_refuses_messages_that_are_not_chat_messages() -> None:
    from ravi.agents.adapters import as_context, window_of

    with pytest.raises(InvalidArgument, match="messages"):
        await window_of(as_context(None), "s", [1])  # type: ignore[list-item]
