"""The units relevant recall's search finds on Postgres, pinned: for fixed sessions and requests, the ranked units
(their messages, order, scores, offsets and the system message each is placed after) are those recorded in
``recall_pinned.json``, which the three-statement search (the ranked search, the neighbours' lookup, the fetch of
the bordering units) gave when it was recorded.

The sessions hold spread neighbours and bordering units, tool calls with their results (a match in a result, a
result with no call), system messages between and inside tool groups, searches before a cut and with every limit
from 1 up, and sessions cleared, replaced and refilled. Each search is made twice: the second is served from the
messages the provider keeps parsed, and must give the same units.

The in-memory provider ranks by a different BM25 (term frequencies, and each message's length against the whole
session's average) and spreads a match's score to the messages beside it rather than to the units beside its unit,
so its rankings are not these; what both hold to is the conformance suite's ``HybridSearcherContract``.

Recorded with ``python tests-integration/test_postgres_recall_pinned.py`` (a local server from the wheel); record
again only for a change meant to rank differently.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from servers import Server

from ravi.capabilities.postgres import PostgresHistoryProvider
from ravi.kernel.messages import ChatMessage, ToolCallBlock
from ravi.kernel.search import UnitMatch

PINNED = Path(__file__).with_name("recall_pinned.json")
_AT = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
_WORDS = ["fern", "moss", "walrus", "lunch", "fern fern", "deploy", "index error", "moss walrus fern"]


def _message(kind: str, text: str, ident: str) -> ChatMessage:
    if kind == "call":
        calls = [ToolCallBlock(id=f"c-{ident}", name="look", arguments={"q": text})]
        return ChatMessage(role="assistant", content=calls, id=ident, created_at=_AT)
    if kind == "tool":
        return ChatMessage.tool(f"c-{ident}", text, id=ident, created_at=_AT)
    make = {"user": ChatMessage.user, "assistant": ChatMessage.assistant, "system": ChatMessage.system}[kind]
    return make(text, id=ident, created_at=_AT)


def _generated(seed: int, n: int, prefix: str) -> list[ChatMessage]:
    """A session of ``n`` turns of any kind in any order (calls, results with or without a call, system messages
    anywhere), each holding a few of a handful of words, so matches border matches."""
    rng = random.Random(seed)
    kinds = ["user", "assistant", "call", "tool", "tool", "system"]
    out = []
    for i in range(n):
        words = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(0, 3)))
        filler = " ".join(f"w{rng.randrange(40)}" for _ in range(rng.randint(0, 6)))
        out.append(_message(rng.choice(kinds), f"{words} {filler} n{i}".strip(), f"{prefix}{i}"))
    return out


def _agentic(n: int) -> list[ChatMessage]:
    from ravi.agents.demo import agentic_transcript

    return [m.model_copy(update={"id": f"t{i}", "created_at": _AT}) for i, m in enumerate(agentic_transcript(n))]


def _key(units: list[UnitMatch]) -> list[list[Any]]:
    """Each unit as its first and last message's ids, its length (a unit is a stretch of its session), score,
    offset and the system message it is placed after."""
    return [
        [u.messages[0].id, u.messages[-1].id, len(u.messages), float(f"{u.score:.13g}"), u.offset, u.after_system]
        for u in units
    ]


Search = tuple[str, int, int, float]
"""A request, the offset searched before, the limit, and the spread (-1: ``search_units``, and ``search_hybrid``
with spread 0, which must find the same)."""


def _searches(queries: list[str], offsets: list[int], limits: list[int]) -> Iterator[Search]:
    for query in queries:
        for before in offsets:
            for limit in limits:
                for spread in (-1.0, 0.5, 1.0):
                    yield query, before, limit, spread


async def _run(history: PostgresHistoryProvider, session: str, searches: list[Search]) -> list[Any]:
    out = []
    for query, before, limit, spread in searches:
        found = []
        for _ in range(2):  # the second is served from the messages kept parsed
            if spread < 0:
                units = await history.search_units("a", session_id=session, query=query, before=before, limit=limit)
                hybrid = await history.search_hybrid("a", session_id=session, query=query, before=before, limit=limit)
                assert hybrid.lexical == units, f"{session} {query!r}: spread 0 is not search_units"
            else:
                hybrid = await history.search_hybrid(
                    "a", session_id=session, query=query, before=before, limit=limit, spread=spread
                )
                units = hybrid.lexical
            found.append(units)
        assert found[0] == found[1], f"{session} {query!r}: a search served from kept messages found other units"
        out.append([query, before, limit, spread, _key(found[0])])
    return out


def _offsets(messages: list[ChatMessage], cuts: list[int]) -> list[int]:
    from ravi.kernel.tokens import stored_tokens

    totals = [0]
    for m in messages:
        totals.append(totals[-1] + stored_tokens(m))
    return sorted({totals[min(c, len(messages))] for c in cuts} | {10**9})


async def _cases(history: PostgresHistoryProvider) -> dict[str, list[Any]]:
    """Every pinned case's searches and the units each found."""
    out: dict[str, list[Any]] = {}
    for seed in range(16):
        messages = _generated(seed, 8 + seed * 3, f"g{seed}-")
        session = f"generated-{seed}"
        await history.append_many("a", messages, session_id=session)
        offsets = _offsets(messages, [len(messages) // 2, len(messages) - 3])
        out[session] = await _run(
            history, session, list(_searches(["fern moss", "walrus lunch index"], offsets, [1, 4, 40]))
        )
    agentic = _agentic(2_000)
    await history.append_many("a", agentic, session_id="agentic")
    out["agentic"] = await _run(
        history,
        "agentic",
        list(
            _searches(
                ["what happened with the deploy of service 7?", "read_log timeout"],
                _offsets(agentic, [1_500]),
                [1, 24, 96],
            )
        ),
    )
    # cleared and refilled: the second transcript reuses the first's ids and numbers, with other words
    first, second = _generated(101, 60, "r"), _generated(202, 45, "r")
    await history.append_many("a", first, session_id="refilled")
    before_clear = await _run(history, "refilled", list(_searches(["fern moss"], [10**9], [5, 40])))
    await history.clear("a", session_id="refilled")
    await history.append_many("a", second, session_id="refilled")
    after = await _run(history, "refilled", list(_searches(["fern moss", "walrus"], [10**9], [5, 40])))
    await history.replace_session("a", first[:30], session_id="refilled")
    replaced = await _run(history, "refilled", list(_searches(["fern moss", "walrus"], [10**9], [5, 40])))
    await history.append_many("a", second[30:], session_id="refilled")
    grown = await _run(history, "refilled", list(_searches(["fern moss", "walrus"], [10**9], [5, 40])))
    out["refilled"] = before_clear + after + replaced + grown
    return out


def _same(got: Any, pinned: Any, where: str) -> None:
    """``got`` equals ``pinned``, scores within a relative 1e-9 (they are pinned to 13 significant digits)."""
    if isinstance(pinned, float) and isinstance(got, float):
        assert abs(got - pinned) <= 1e-9 * max(1.0, abs(pinned)), f"{where}: {got!r} != {pinned!r}"
        return
    if isinstance(pinned, list):
        assert isinstance(got, list) and len(got) == len(pinned), f"{where}: {got!r} != {pinned!r}"
        for i, (g, p) in enumerate(zip(got, pinned, strict=True)):
            _same(g, p, f"{where}[{i}]")
        return
    assert got == pinned, f"{where}: {got!r} != {pinned!r}"


async def test_the_ranked_units_are_the_pinned_ones(postgres_server: Server, pg_schema: str) -> None:
    """Every case's searches find exactly the pinned units, in the pinned order, with the pinned scores."""
    pinned = json.loads(PINNED.read_text())
    history = PostgresHistoryProvider(postgres_server.address, schema=pg_schema)
    try:
        got = json.loads(json.dumps(await _cases(history)))
    finally:
        await history.close()
    assert sorted(got) == sorted(pinned)
    for case, searches in pinned.items():
        assert len(got[case]) == len(searches), case
        for found, expected in zip(got[case], searches, strict=True):
            _same(found, expected, f"{case} {expected[:4]}")
    assert sum(len(s[4]) for searches in pinned.values() for s in searches) > 2_000  # the cases find many units


def _record() -> None:
    from ravi.capabilities.postgres.local import LocalPostgres

    async def record(dsn: str) -> dict[str, list[Any]]:
        history = PostgresHistoryProvider(dsn, schema="pinned")
        try:
            return await _cases(history)
        finally:
            await history.destroy()
            await history.close()

    with LocalPostgres() as server:
        PINNED.write_text(json.dumps(asyncio.run(record(server.dsn)), separators=(",", ":")) + "\n")


if __name__ == "__main__":
    _record()
