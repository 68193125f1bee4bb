"""Kept recall rankings under a hostile session: a pipeline that keeps its rankings makes, window after window,
the window a pipeline with nothing kept makes of the same stored session, whatever happens between the windows
(tool calls and results, late results, system messages, new and repeated requests, unsaved turns, other budgets,
clears, removed runs, replaced last messages, forgotten sessions).

The sessions are made so that no ranking depends on the store's statistics: every user turn is one word (a topic)
and every other message holds none of them, so the messages a request matches all score alike, in any session
(the newer first), and the meaning ranking has no statistics. A kept ranking is then exact, and any difference
from a fresh window is an error of what was kept."""

from __future__ import annotations

import asyncio
import itertools

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from ravi.agents.context import CompactionPipeline, InMemoryHistoryProvider, RelevantRecallStrategy, WindowRequest
from ravi.agents.tokens import DEFAULT_COUNTER
from ravi.kernel.embeddings import HashingEmbeddingClient
from ravi.kernel.messages import ChatMessage, ToolCallBlock

TOPICS = ["walrus", "kettle", "harbour", "lantern", "orchard", "violin"]

OPS = st.sampled_from(
    ["step", "step", "step", "open", "late", "system", "request", "unsaved", "flush", "budget", "clear", "run",
     "replace", "forget"]
)  # fmt: skip


def _pipeline(budget: int, meaning: bool) -> CompactionPipeline:
    client = HashingEmbeddingClient(dimension=16) if meaning else None
    return CompactionPipeline([RelevantRecallStrategy(budget, meaning=client, spread=0.0)])


def _older(n: int, run: str) -> list[tuple[ChatMessage, str]]:
    out = [(ChatMessage.system("be brief"), run)]
    for i in range(n):
        out += [(ChatMessage.user(TOPICS[i % len(TOPICS)]), run), (ChatMessage.assistant("noted " * (1 + i % 4)), run)]
    return out


def _check(window: list[ChatMessage], budget: int) -> None:
    ids = [m.id for m in window]
    assert len(ids) == len(set(ids)), "a message twice in one window"
    spent = sum(DEFAULT_COUNTER.count_message(m) for m in window)
    systems = sum(DEFAULT_COUNTER.count_message(m) for m in window if m.role == "system")
    assert spent <= budget or spent == systems, "the window passes its budget"
    calls = {b.id for m in window if m.role == "assistant" for b in m.content if isinstance(b, ToolCallBlock)}
    for m in window:
        if m.role == "tool":
            assert m.tool_result is not None and m.tool_result.tool_call_id in calls, "a result without its call"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    ops=st.lists(OPS, min_size=1, max_size=40),
    size=st.integers(20, 160),
    budget=st.integers(60, 600),
    budgets=st.lists(st.integers(40, 900), min_size=1, max_size=4),
    meaning=st.booleans(),
    windowed=st.booleans(),
    seed=st.integers(0, 2**16),
)
# another writer stores a call (its tool running) while unsaved turns follow the stored ones
@example(ops=["step", "unsaved", "open"], size=20, budget=60, budgets=[40], meaning=False, windowed=True, seed=0)
def test_a_kept_ranking_gives_the_window_a_fresh_one_gives_whatever_happens_between_windows(
    ops: list[str], size: int, budget: int, budgets: list[int], meaning: bool, windowed: bool, seed: int
) -> None:
    async def main() -> None:
        store = InMemoryHistoryProvider()
        kept = _pipeline(budget, meaning)
        ids = itertools.count()
        run = "r0"
        runs = ["r0"]
        await _append(store, _older(size, run))
        await store.append_many("a", [ChatMessage.user(TOPICS[seed % len(TOPICS)])], session_id="s", run_id=run)
        unsaved: list[ChatMessage] = []
        open_calls: list[str] = []
        asked = budget
        for k, op in enumerate(ops):
            n = next(ids)
            if op == "step":
                call = ToolCallBlock(id=f"c{n}", name="read", arguments={"page": n})
                result = ChatMessage.tool(f"c{n}", f"page {n} " * (n % 9))
                await _append(store, [(ChatMessage.assistant(None, tool_calls=[call]), run), (result, run)])
            elif op == "open":  # a call whose result comes later, if ever
                call = ToolCallBlock(id=f"c{n}", name="read", arguments={"page": n})
                open_calls.append(f"c{n}")
                await _append(store, [(ChatMessage.assistant(None, tool_calls=[call]), run)])
            elif op == "late" and open_calls:
                await _append(store, [(ChatMessage.tool(open_calls.pop(0), f"late {n}"), run)])
            elif op == "system":
                await _append(store, [(ChatMessage.system(f"note {n}"), run)])
            elif op == "request":
                run = f"r{n}"
                runs.append(run)
                await _append(store, [(ChatMessage.user(TOPICS[(seed + n) % 3]), run)])
            elif op == "unsaved":
                call = ToolCallBlock(id=f"u{n}", name="read", arguments={"page": n})
                unsaved += [
                    ChatMessage.assistant(None, tool_calls=[call]),
                    ChatMessage.tool(f"u{n}", f"page {n} " * (n % 7)),
                ]
                if n % 3 == 0:
                    unsaved.append(ChatMessage.user(TOPICS[(seed + n) % 4]))
            elif op == "flush":
                await _append(store, [(m, run) for m in unsaved])
                unsaved = []
            elif op == "budget":
                asked = budgets[n % len(budgets)]
            elif op == "clear":
                await store.clear("a", session_id="s")
                unsaved, open_calls = [], []
                await _append(store, _older(size - k % 5, run))
                await _append(store, [(ChatMessage.user(TOPICS[seed % len(TOPICS)]), run)])
            elif op == "run" and len(runs) > 1:
                await store.clear_run("a", session_id="s", run_id=runs.pop())
                run = runs[-1]
            elif op == "replace":
                newest = (await store.get_messages("a", session_id="s"))[-1:]
                if newest and newest[0].role != "user":
                    await store.replace_last("a", session_id="s", message_id=newest[0].id, run_id=run)
            elif op == "forget":
                await store.forget("a", session_id="s")
                unsaved, open_calls = [], []
                runs, run = ["r0"], "r0"
                await _append(store, _older(size, run))
                await _append(store, [(ChatMessage.user(TOPICS[seed % len(TOPICS)]), run)])
            if windowed:
                request = WindowRequest("a", "s", history=store, unsaved=list(unsaved), budget=asked)
            else:
                whole = [*await store.get_messages("a", session_id="s")]
                generation = await store.generation("a", session_id="s")
                request = WindowRequest(
                    "a", "s", history=store, messages=whole, unsaved=list(unsaved), budget=asked, generation=generation
                )
            got = (await kept.window(request)).messages
            want = (await _pipeline(budget, meaning).window(request)).messages
            _check(got, asked)
            assert got == want, f"window {k} after {op!r}"

    async def _append(store: InMemoryHistoryProvider, messages: list[tuple[ChatMessage, str]]) -> None:
        for m, r in messages:
            await store.append_many("a", [m], session_id="s", run_id=r)

    asyncio.run(main())
