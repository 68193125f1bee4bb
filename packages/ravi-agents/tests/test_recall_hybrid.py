"""Relevant recall's parts: reading the request, fusing rankings, labelling recalled turns, ranking by meaning, the
offline embedding model, and the in-memory store's hybrid search."""

from __future__ import annotations

import asyncio
import os
from datetime import UTC, date, datetime, timedelta
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ravi.agents.context import CompactionPipeline, InMemoryHistoryProvider, RelevantRecallStrategy, WindowRequest
from ravi.agents.context.meaning import MessageVectors, meaning_units
from ravi.agents.context.recall_annotation import annotated, label
from ravi.agents.context.recall_fusion import NearDuplicates, Unit, fuse, signature, unit_of
from ravi.agents.context.recall_request import Request, _read, read_request, recall_share
from ravi.agents.embeddings import StaticEmbeddingClient, offline_embeddings_installed
from ravi.conformance.strategy import transcripts
from ravi.kernel.embeddings import HashingEmbeddingClient
from ravi.kernel.errors import ConfigurationError, InvalidArgument
from ravi.kernel.messages import ChatMessage, ToolCallBlock
from ravi.kernel.search import UnitMatch, match_units
from ravi.kernel.tokens import stored_tokens

AT = datetime(2023, 6, 10, 12, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "share"),
    [
        ("When did Maya adopt her dog?", 0.85),
        ("What did we decide in March 2023?", 0.85),
        ("What is my order number?", 0.75),
        ("Why?", 0.25),
        ("ok, do it", 0.25),
        ("Deploy the staging build and run the tests", 0.4),
    ],
)
def test_the_share_for_older_turns_follows_the_request(text: str, share: float) -> None:
    assert recall_share(_read(text, AT, working=False)) == share


def test_while_the_agent_works_on_a_request_the_newest_turns_come_first() -> None:
    from ravi.kernel.messages import ToolCallBlock

    call = ChatMessage.assistant(None, tool_calls=[ToolCallBlock(id="c", name="grep")])
    history = [ChatMessage.user("When did the deploy fail last week?"), call, ChatMessage.tool("c", "...")]
    request = read_request(history)
    assert request.working and recall_share(request) == 0.25


def test_a_huge_request_is_read_at_its_ends_as_its_search_terms_are() -> None:
    """A pasted megabyte used to be scanned by every pattern of the reader on each window (0.4 s for 120,000
    words); what a request asks is at its ends, where its search terms come from too."""
    paste = " ".join(f"w{i:06d}" for i in range(120_000))
    middle = paste[: len(paste) // 2] + " in March 2023 " + paste[len(paste) // 2 :]
    asked = _read(middle + " What did Maya do in May 2023?", AT, working=False)
    assert asked.period == (date(2023, 5, 1), date(2023, 5, 31)) and asked.question and asked.past
    assert _read(middle, AT, working=False).period is None  # the middle of the paste is not read
    assert _read("in March 2023 " + paste, AT, working=False).period == (date(2023, 3, 1), date(2023, 3, 31))


@pytest.mark.parametrize(
    ("text", "period"),
    [
        ("What did Maya do in March 2023?", (date(2023, 3, 1), date(2023, 3, 31))),
        ("what happened on 8 May?", (date(2023, 5, 8), date(2023, 5, 8))),
        ("anything in 2022?", (date(2022, 1, 1), date(2022, 12, 31))),
        ("What did I say in September?", (date(2022, 9, 1), date(2022, 9, 30))),
        ("What did we cook yesterday?", (date(2023, 6, 9), date(2023, 6, 9))),
        ("I may go", None),
    ],
)
def test_a_request_names_the_days_it_asks_about(text: str, period: tuple[date, date] | None) -> None:
    assert _read(text, AT, working=False).period == period


def _unit(offset: int, day: date | None = None, text: str = "x") -> UnitMatch:
    when = datetime(day.year, day.month, day.day, tzinfo=UTC) if day else AT
    return UnitMatch(1.0, (ChatMessage.user(text, created_at=when),), offset)


def _fuse_by_definition(rankings: list[list[UnitMatch]], request: Request, k: int = 60) -> list[UnitMatch]:
    """Reciprocal rank fusion written out: each unit's ``1 / (k + rank)`` added up ranking by ranking, the period's
    and the order's rankings added, sorted by score, then offset."""
    fused: dict[int, float] = {}
    units: dict[int, UnitMatch] = {}
    for ranking in rankings:
        for rank, match in enumerate(ranking, 1):
            fused[match.offset] = fused.get(match.offset, 0.0) + 1.0 / (k + rank)
            units.setdefault(match.offset, match)
    if request.period is not None:
        first, last = request.period
        days = {o: units[o].messages[0].created_at.date() for o in units}
        inside = [o for o, day in days.items() if first <= day <= last]
        after = [o for o, day in days.items() if last < day <= last + timedelta(days=7)]
        by_score = sorted(inside, key=lambda o: (-fused[o], -o)) + sorted(after, key=lambda o: (-fused[o], -o))
        for rank, offset in enumerate(by_score, 1):
            fused[offset] += 1.0 / (k + rank)
    oldest_first = request.order == "first"
    if request.order is not None and len(units) > 1:
        for rank, offset in enumerate(sorted(units, reverse=not oldest_first), 1):
            fused[offset] += 1.0 / (k + rank)
    ranked = sorted(units, key=lambda o: (-fused[o], o if oldest_first else -o))
    return [UnitMatch(fused[o], units[o].messages, o, units[o].after_system) for o in ranked]


@settings(max_examples=200, deadline=None)
@given(
    rankings=st.lists(st.lists(st.integers(0, 400), max_size=300, unique=True), max_size=3),
    order=st.sampled_from([None, "newest", "first"]),
    period=st.booleans(),
)
def test_fusion_gives_the_scores_and_order_of_its_definition(
    rankings: list[list[int]], order: str | None, period: bool
) -> None:
    """Rankings of up to 300 units over few offsets (so many share a score), with or without a period and an
    order: the same units, scores (to the bit) and order as the definition."""
    units = {o: _unit(o, date(2023, 3, 1) + timedelta(days=o % 12)) for ranking in rankings for o in ranking}
    matches = [[units[o] for o in ranking] for ranking in rankings]
    request = Request("q", order=order, period=(date(2023, 3, 3), date(2023, 3, 5)) if period else None)  # type: ignore[arg-type]
    assert fuse(matches, request) == _fuse_by_definition(matches, request)


def test_fusion_by_rank_puts_first_what_both_rankings_place_high() -> None:
    a, b, c, d = _unit(10), _unit(20), _unit(30), _unit(40)
    fused = fuse([[a, b, c], [c, d, b]], Request("q"))
    assert [u.offset for u in fused] == [30, 20, 10, 40]  # c and b in both; c higher on average, newer on a tie
    assert fused[0].score == pytest.approx(1 / 63 + 1 / 61)


def test_a_named_period_and_a_question_about_now_raise_the_matching_units() -> None:
    march, may = _unit(10, date(2023, 3, 5)), _unit(20, date(2023, 5, 1))
    plain = fuse([[may, march]], Request("q"))
    assert [u.offset for u in plain] == [20, 10]
    dated = fuse([[may, march]], Request("q", period=(date(2023, 3, 1), date(2023, 3, 31))))
    assert [u.offset for u in dated] == [10, 20]
    newest = fuse([[march, may]], Request("q", order="newest"))
    assert [u.offset for u in newest] == [20, 10]
    first = fuse([[may, march]], Request("q", order="first"))
    assert [u.offset for u in first] == [10, 20]


def test_a_unit_told_just_after_a_period_ranks_after_those_inside_and_before_the_rest() -> None:
    inside, told, later = _unit(10, date(2023, 3, 20)), _unit(20, date(2023, 4, 3)), _unit(30, date(2023, 4, 20))
    fused = fuse([[later, told, inside]], Request("q", period=(date(2023, 3, 1), date(2023, 3, 31))))
    assert [u.offset for u in fused] == [10, 20, 30]


@settings(max_examples=100, deadline=None)
@given(
    rankings=st.lists(st.lists(st.integers(0, 40), unique=True, max_size=12), max_size=3),
    days=st.lists(st.integers(0, 120), min_size=41, max_size=41),
    period=st.one_of(st.none(), st.tuples(st.integers(0, 120), st.integers(0, 30))),
)
def test_fusion_keeps_every_unit_found_once(
    rankings: list[list[int]], days: list[int], period: tuple[int, int] | None
) -> None:
    start = date(2023, 1, 1)
    units = {o: _unit(o, start + timedelta(days[o])) for r in rankings for o in r}
    named = None if period is None else (start + timedelta(period[0]), start + timedelta(period[0] + period[1]))
    fused = fuse([[units[o] for o in r] for r in rankings], Request("q", period=named))
    assert sorted(u.offset for u in fused) == sorted(units)
    assert [u.score for u in fused] == sorted((u.score for u in fused), reverse=True)


def test_a_question_about_a_month_recalls_what_the_person_said_then() -> None:
    start = datetime(2023, 1, 1, 18, tzinfo=UTC)
    chat = ["Maya, lovely weather today!", "Work was busy, Maya.", "Dinner was pasta again, Maya."]
    history = [
        ChatMessage.user(chat[i % 3], name="Maya" if i % 2 else "Sam", created_at=start + timedelta(hours=12 * i))
        for i in range(240)
    ]
    told = start + timedelta(days=74)  # 16 March 2023
    history[148] = ChatMessage.user(
        (
            "I ran my first half marathon on Sunday, the last mile along the river was hard but the crowd carried "
            "me all the way to the finish line and my legs still ache today."
        ),
        name="Maya",
        created_at=told,
    )
    history.append(ChatMessage.user("What did Maya do in March 2023?", name="Sam", created_at=start + timedelta(160)))
    window = asyncio.run(RelevantRecallStrategy(1_000, meaning=None).compact(history))
    assert history[148].id in {m.id for m in window}


def test_room_left_by_a_ranking_of_repeats_goes_to_the_units_ranked_after_them() -> None:
    start = datetime(2023, 1, 1, tzinfo=UTC)
    evidence = ChatMessage.user(
        "On Tuesday evenings I go to a pottery class at the community centre, we throw bowls and mugs from clay.",
        name="Maya",
        created_at=start,
    )
    cheers = [ChatMessage.user("Wow, pottery!", name="Sam", created_at=start + timedelta(hours=i)) for i in range(120)]
    filler = [
        ChatMessage.user(f"turn {i}: the weather was grey and the bus was late", created_at=start + timedelta(days=9))
        for i in range(80)
    ]
    history = [evidence, *cheers, *filler, ChatMessage.user("Anything new with pottery?", name="Sam")]
    window = asyncio.run(RelevantRecallStrategy(600, meaning=None, annotate=False).compact(history))
    ids = {m.id for m in window}
    assert evidence.id in ids  # ranked after every cheer, all but one of which repeat it
    assert sum(m.text == "Wow, pottery!" for m in window) == 1


def test_a_unit_that_says_again_what_one_held_says_is_a_near_duplicate() -> None:
    seen = NearDuplicates()
    seen.add([ChatMessage.tool("c", "build failed: 3 errors in src/app.py line 10 and line 12")])
    assert seen.repeats([ChatMessage.tool("d", "build failed: 3 errors in src/app.py line 10 and line 12")])
    assert seen.repeats([ChatMessage.tool("d", "Build failed: 3 errors in src/app.py line 10 and line 12!")])
    assert not seen.repeats([ChatMessage.tool("d", "tests passed: 120 in 4 s, no warnings at all today")])


def test_a_restated_fact_typed_with_other_unicode_forms_is_a_near_duplicate() -> None:
    """Words compare as the search folds them: a precomposed and a decomposed accent, full-width letters and a
    German sharp s spelt out are the same words."""
    seen = NearDuplicates()
    seen.add([ChatMessage.user("We moved to the caf\u00e9 on Stra\u00dfe 9 near the old ＰＯＳＴ office")])
    assert seen.repeats([ChatMessage.user("we moved to the cafe\u0301 on STRASSE 9 near the old post office")])
    assert not seen.repeats([ChatMessage.user("the build on the ci runner failed again with three new errors")])


def _repeats_pairwise(held: list[frozenset[str]], texts: set[tuple[str, ...]], unit: tuple, threshold: float) -> bool:
    """The definition: the same texts, or (short units) a Jaccard similarity of at least ``threshold`` with a
    held short unit, compared with each in turn."""
    mine_texts, mine = unit[0], unit[1]
    if not any(t.strip() for t in mine_texts):
        return False
    if mine_texts in texts:
        return True
    if not 4 <= len(mine) <= NearDuplicates.SHORT:
        return False
    return any(len(mine & other) / len(mine | other) >= threshold for other in held if len(other) >= 4)


def _compared(texts: tuple[str, ...], words: frozenset[str]) -> Unit:
    return Unit(texts, words, signature(words))


def test_near_duplicates_at_the_threshold_are_those_of_the_pairwise_definition() -> None:
    """Every pair of units of 0 to 30 consecutive words starting at one of the first three words of a
    vocabulary (so every ratio of sizes and of shared words near each threshold occurs), one held and one asked,
    and units of up to 210 words: ``repeats`` says what the comparison says."""
    vocabulary = [f"w{i}" for i in range(240)]
    spans = [(start, size) for start in range(3) for size in (*range(31), 150, 160, 187, 188, 200, 201, 210)]
    units = [_compared((" ".join(vocabulary[a : a + n]),), frozenset(vocabulary[a : a + n])) for a, n in spans]
    for threshold in (0.8, 0.5, 0.75, 1.0, 0.3, 0.001, 0.0):
        for held in units:
            seen = NearDuplicates(threshold)
            seen.add([], held)
            short = [held[1]] if 4 <= len(held[1]) <= NearDuplicates.SHORT else []
            for asked in units:
                expected = _repeats_pairwise(short, {held[0]}, asked, threshold)
                assert seen.repeats([], asked) == expected


@pytest.mark.parametrize("threshold", ["0.55", "0.81", "0.57", "0.8", "0.7", "0.35"])
def test_a_jaccard_similarity_exactly_at_a_decimal_threshold_is_a_near_duplicate(threshold: str) -> None:
    """A unit of ``s`` of another's ``u`` words has a similarity of exactly ``s / u``: at or above the threshold
    as written (0.55 as 55 of 100 words) it is a near duplicate, below it not, whatever the rounding of
    ``0.55 * 100`` (55.00000000000001)."""
    vocabulary = [f"w{i}" for i in range(NearDuplicates.SHORT)]
    exact = Fraction(threshold)
    for u in range(4, NearDuplicates.SHORT + 1):
        seen = NearDuplicates(float(threshold))
        seen.add([], _compared(("held",), frozenset(vocabulary[:u])))
        for s in range(4, u + 1):
            asked = _compared((f"asked {s}",), frozenset(vocabulary[:s]))
            assert seen.repeats([], asked) == (Fraction(s, u) >= exact), (s, u)


@pytest.mark.parametrize("threshold", ["0.8", None, -0.1, 1.5, float("nan"), float("inf"), True])
def test_a_near_duplicate_threshold_outside_0_to_1_is_refused(threshold: object) -> None:
    """A Jaccard similarity lies in [0, 1]: any other threshold (or one that is not a number) is a mistake, told
    at once rather than as a ``TypeError`` at the first comparison or a check that silently passes everything or
    nothing."""
    with pytest.raises(InvalidArgument):
        NearDuplicates(threshold)  # type: ignore[arg-type]


@settings(max_examples=200, deadline=None)
@given(
    sizes=st.lists(st.one_of(st.integers(0, 12), st.integers(0, 210)), min_size=1, max_size=24),
    data=st.data(),
    threshold=st.sampled_from([0.8, 0.5, 0.75, 1.0, 0.3, 0.001, 0.0]),
)
def test_near_duplicates_are_those_of_the_pairwise_definition(
    sizes: list[int], data: st.DataObject, threshold: float
) -> None:
    """Units of 0 to 210 consecutive words of a vocabulary, starting near its start (so many pairs lie at or
    near the threshold), held and asked in any order: ``repeats`` says what comparing with every held unit
    says."""
    vocabulary = [f"w{i}" for i in range(240)]
    seen = NearDuplicates(threshold)
    held: list[frozenset[str]] = []
    texts: set[tuple[str, ...]] = set()
    for size in sizes:
        start = data.draw(st.integers(0, min(4, len(vocabulary) - size)))
        words = frozenset(vocabulary[start : start + size])
        unit = _compared(((" ".join(sorted(words)) or data.draw(st.sampled_from(["", " "]))),), words)
        assert seen.repeats([], unit) == _repeats_pairwise(held, texts, unit, threshold)
        if data.draw(st.booleans()):
            seen.add([], unit)
            texts.add(unit[0])
            if 4 <= len(words) <= NearDuplicates.SHORT:
                held.append(words)


@settings(max_examples=100, deadline=None)
@given(sizes=st.lists(st.integers(0, 260), min_size=1, max_size=12), data=st.data())
def test_a_long_units_words_are_not_kept_and_near_duplicates_are_unchanged(
    sizes: list[int], data: st.DataObject
) -> None:
    """A unit of more than ``SHORT`` distinct words is never compared by its words, so ``unit_of`` keeps no set
    for it (what recall keeps per unit stays small); near-duplicate answers from ``unit_of`` are those of the
    pairwise definition over the units' full word sets."""
    vocabulary = [f"w{i}" for i in range(300)]
    seen = NearDuplicates()
    held: list[frozenset[str]] = []
    texts: set[tuple[str, ...]] = set()
    for size in sizes:
        start = data.draw(st.integers(0, 4))
        words = vocabulary[start : start + size]
        messages = [ChatMessage.tool("c", " ".join(words))] if words else [ChatMessage.tool("c", " ")]
        unit = unit_of(messages)
        full = frozenset(words)
        assert unit[1] == (full if len(full) <= NearDuplicates.SHORT else frozenset())
        assert seen.repeats(messages, unit) == _repeats_pairwise(held, texts, (unit[0], full), 0.8)
        if data.draw(st.booleans()):
            seen.add(messages, unit)
            texts.add(unit[0])
            if 4 <= len(full) <= NearDuplicates.SHORT:
                held.append(full)


@settings(max_examples=300, deadline=None)
@given(
    first=st.frozensets(st.text(min_size=1, max_size=6), max_size=260),
    second=st.frozensets(st.text(min_size=1, max_size=6), max_size=260),
    shared=st.frozensets(st.text(min_size=1, max_size=6), max_size=260),
)
def test_signatures_never_bound_the_shared_words_below_their_number(
    first: frozenset[str], second: frozenset[str], shared: frozenset[str]
) -> None:
    """The bound ``NearDuplicates`` takes from two signatures is never below the words the sets share, whatever
    the words (sets of up to 520 words in 256 bits, so most bits are set by several words)."""
    a, b = first | shared, second | shared
    mark_a, mark_b = signature(a), signature(b)
    most = min(len(a) - (mark_a & ~mark_b).bit_count(), len(b) - (mark_b & ~mark_a).bit_count())
    assert most >= len(a & b)


def test_a_recalled_turn_says_its_day_and_sender_and_keeps_its_id() -> None:
    old = ChatMessage.user("We adopted a puppy yesterday!", name="Maya", created_at=datetime(2023, 5, 8, tzinfo=UTC))
    labelled = annotated(old, date(2023, 6, 10))
    assert labelled.text == "[8 May 2023] Maya: We adopted a puppy yesterday!"
    assert labelled.id == old.id and labelled.name == old.name and old.text == "We adopted a puppy yesterday!"
    assert annotated(old, date(2023, 5, 8)).text == "Maya: We adopted a puppy yesterday!"
    prefixed = old.model_copy(update={"content": ChatMessage.user("Maya: hi").content})
    assert label(prefixed, date(2023, 5, 8)) == ""
    result = ChatMessage.tool("c", "result")
    assert annotated(result, date(2020, 1, 1)) is result


def test_a_labelled_turn_is_the_message_its_constructor_builds_with_a_memo_of_its_own() -> None:
    """The labelled copy is built without checking it again: it equals, field for field and as JSON, the
    message the constructor builds from the labelled text, and keeps its own token counts."""
    old = ChatMessage.user("Lunch at noon?", name="Ana", created_at=datetime(2023, 5, 8, tzinfo=UTC))
    old.memo["tokens:heuristic"] = 99
    copy = annotated(old, date(2023, 6, 10))
    built = ChatMessage.user("[8 May 2023] Ana: Lunch at noon?", id=old.id, name="Ana", created_at=old.created_at)
    assert copy == built and copy.model_dump_json() == built.model_dump_json()
    assert "tokens:heuristic" not in copy.memo and old.memo["tokens:heuristic"] == 99
    assert annotated(old, date(2023, 6, 10)) is copy


def test_a_window_with_labels_still_meets_its_budget() -> None:
    start = datetime(2023, 1, 1, tzinfo=UTC)
    history = [
        ChatMessage.user(f"turn {i} about the garden and the weather", name="Sam", created_at=start + timedelta(i))
        for i in range(200)
    ]
    history.append(ChatMessage.user("What did Sam say about the garden?", name="Maya"))
    strategy = RelevantRecallStrategy(500)
    window = asyncio.run(strategy.compact(history))
    from ravi.agents.tokens import DEFAULT_COUNTER

    assert DEFAULT_COUNTER.count_messages(window) <= 500
    recalled = [m for m in window[:-1] if m.text.startswith("[")]
    assert recalled and all("Sam: turn" in m.text for m in recalled)


@settings(max_examples=60, deadline=None)
@given(history=transcripts, data=st.data())
def test_ranking_by_meaning_is_the_reference_ranking_of_the_similarities(history: list, data: st.DataObject) -> None:
    """Looking only at the best messages gives the units :func:`match_units` gives over every similarity."""
    if not history:
        return
    client = HashingEmbeddingClient(dimension=16)
    vectors = MessageVectors("hashing-16")
    asyncio.run(vectors.extend(history, client))
    [query] = asyncio.run(client.embed([data.draw(st.sampled_from(["x", "tool", "ünï", "0"]))]))
    stop = data.draw(st.integers(0, len(history)))
    limit = data.draw(st.integers(1, 8))
    before = [0]
    for m in history:
        before.append(before[-1] + len(m.text))
    systems = [i for i, m in enumerate(history) if m.role == "system"]
    similar = vectors.similarity(query, stop)
    got = meaning_units(history, similar, before=before, systems=systems, stop=stop, limit=limit)
    scores = {i: float(similar[i]) for i in range(stop) if similar[i] > 0}
    assert got == match_units(history, scores, before=before, systems=systems, stop=stop, limit=limit)


def test_embeddings_of_a_growing_history_are_computed_once_and_truncated_when_it_changes() -> None:
    class Counting(HashingEmbeddingClient):
        def __init__(self) -> None:
            super().__init__(dimension=8)
            self.calls: list[int] = []

        async def embed(self, texts):  # type: ignore[no-untyped-def]
            self.calls.append(len(texts))
            return await super().embed(texts)

    client = Counting()
    vectors = MessageVectors("m")
    history = [ChatMessage.user(f"m{i}") for i in range(300)]
    asyncio.run(vectors.extend(history[:100], client))
    asyncio.run(vectors.extend(history, client))
    assert client.calls == [100, 200] and vectors.size == 300
    vectors.truncate(50)
    asyncio.run(vectors.extend(history, client))
    assert client.calls[-1] == 250 and vectors.size == 300
    with pytest.raises(InvalidArgument):
        vectors.similarity([1.0, 2.0], 10)


class _CountingEmbedder(HashingEmbeddingClient):
    """Hashed embeddings that count the texts embedded."""

    def __init__(self) -> None:
        super().__init__(dimension=16)
        self.texts: list[str] = []

    async def embed(self, texts):  # type: ignore[no-untyped-def]
        self.texts += texts
        return await super().embed(texts)


def _tool_step(i: int) -> list[ChatMessage]:
    call = ToolCallBlock(id=f"call-{i}", name="read_log", arguments={"page": i})
    return [ChatMessage.assistant(tool_calls=[call]), ChatMessage.tool(f"call-{i}", f"page {i} of the deploy log")]


def test_a_tool_loop_reuses_the_units_found_by_meaning_until_the_older_part_moves() -> None:
    """The same request over the same older messages: the request is not embedded again and the units are those
    a provider that never searched finds; a moved boundary ranks again."""
    history = InMemoryHistoryProvider()
    topics = ("deploy", "billing", "cache", "schema", "refund")
    older = [ChatMessage.user(f"turn {i} about the {topics[i % 5]} service") for i in range(60)]
    asyncio.run(history.append_many("a", [*older, ChatMessage.user("what broke the deploy?")], session_id="s"))
    embedder = _CountingEmbedder()

    async def search(
        provider: InMemoryHistoryProvider, before: int, limit: int, client: _CountingEmbedder = embedder
    ) -> list[UnitMatch]:
        found = await provider.search_hybrid(
            "a",
            session_id="s",
            query="what broke the deploy?",
            before=before,
            limit=limit,
            embedder=client,
            model="m",
        )
        return found.meaning

    async def fresh(before: int, limit: int) -> list[UnitMatch]:
        provider = InMemoryHistoryProvider()
        await provider.append_many("a", await history.get_messages("a", session_id="s"), session_id="s")
        return await search(provider, before, limit, _CountingEmbedder())

    boundary = 40 * 8  # the stored tokens before the newest turns
    first = asyncio.run(search(history, boundary, 6))
    embedded = len(embedder.texts)
    for i, limit in enumerate((6, 7, 9, 12)):
        asyncio.run(history.append_many("a", _tool_step(i), session_id="s"))
        again = asyncio.run(search(history, boundary, limit))
        assert len(embedder.texts) == embedded  # neither the request nor the new messages were embedded
        assert again == asyncio.run(fresh(boundary, limit))
    assert first == again[:6]
    moved = asyncio.run(search(history, boundary + 40, 6))
    assert len(embedder.texts) > embedded and moved == asyncio.run(fresh(boundary + 40, 6))


_CALL = ToolCallBlock(id="c1", name="read_log", arguments={"service": "deploy"})


@pytest.mark.parametrize(
    ("group", "result"),
    [
        # a tool call whose results end at the boundary is a unit before it; another result takes it past it
        (
            [ChatMessage.assistant(tool_calls=[_CALL]), ChatMessage.tool("c1", "the deploy log, part one")],
            "the deploy log, part two",
        ),
        # a system message between a call and its results belongs to the call's group: with the boundary just
        # after it, the call is a unit before it until its result comes
        (
            [ChatMessage.assistant("reading the deploy log", tool_calls=[_CALL]), ChatMessage.system("be brief")],
            "the deploy log",
        ),
    ],
    ids=["results", "system message"],
)
def test_a_tool_call_whose_results_grow_past_the_boundary_leaves_the_units_found_by_meaning(
    group: list[ChatMessage], result: str
) -> None:
    """A tool call's unit found before the boundary is no longer found there once a result takes the unit past
    it, as a provider that never searched finds."""
    history = InMemoryHistoryProvider()
    turns = [ChatMessage.user(f"turn {i} about billing") for i in range(8)]
    asyncio.run(history.append_many("a", [*turns, *group], session_id="s"))
    boundary = sum(stored_tokens(m) for m in [*turns, *group])

    async def search(provider: InMemoryHistoryProvider) -> list[UnitMatch]:
        found = await provider.search_hybrid(
            "a",
            session_id="s",
            query="the deploy log",
            before=boundary,
            limit=4,
            embedder=_CountingEmbedder(),
            model="m",
        )
        return found.meaning

    assert any(m.messages[0].id == group[0].id for m in asyncio.run(search(history)))
    asyncio.run(history.append("a", ChatMessage.tool("c1", result), session_id="s"))
    again = asyncio.run(search(history))
    same = InMemoryHistoryProvider()
    asyncio.run(same.append_many("a", asyncio.run(history.get_messages("a", session_id="s")), session_id="s"))
    assert again == asyncio.run(search(same))
    assert all(m.messages[0].id != group[0].id for m in again)


@settings(max_examples=100, deadline=None)
@given(
    steps=st.lists(
        st.tuples(
            st.integers(0, 3),
            st.one_of(st.sampled_from([-1, -2]), st.integers(0, 400)),
            st.integers(1, 12),
            st.integers(0, 2),
        )
    )
)
def test_units_found_by_meaning_are_those_a_fresh_provider_finds(steps: list[tuple[int, int, int, int]]) -> None:
    """Appends (plain turns, tool calls whose results come later, system messages, also between a call and its
    results), clears and searches of any boundary (-1: the last search's, with its request, as in a tool loop;
    -2: the session's end), limit and request, in any order: every search by meaning finds what a provider
    holding the same messages and never searched before finds."""
    history = InMemoryHistoryProvider()
    embedder = _CountingEmbedder()
    queries = ("deploy failed", "billing refund", "cache")
    open_call: int | None = None

    async def meaning(provider: InMemoryHistoryProvider, query: str, before: int, limit: int) -> list[UnitMatch]:
        found = await provider.search_hybrid(
            "a", session_id="s", query=query, before=before, limit=limit, embedder=embedder, model="m"
        )
        return found.meaning

    async def run() -> None:
        nonlocal open_call
        last = (0, 0)
        for n, (kind, boundary, limit, query) in enumerate(steps):
            if kind == 0:
                await history.append("a", ChatMessage.user(f"{queries[n % 3]} turn {n}"), session_id="s")
            elif kind == 1 and open_call is None:
                call = ToolCallBlock(id=f"c{n}", name="look", arguments={"n": n})
                opener = ChatMessage.assistant(f"{queries[n % 3]} call", tool_calls=[call])
                await history.append("a", opener, session_id="s")
                open_call = n
            elif kind == 1:
                await history.append("a", ChatMessage.tool(f"c{open_call}", f"{queries[n % 3]} result"), session_id="s")
            elif kind == 2:
                open_call = None
                if n % 5 == 0:
                    await history.clear("a", session_id="s")
            elif kind == 3:
                await history.append("a", ChatMessage.system(f"{queries[n % 3]} note {n}"), session_id="s")
            if boundary == -2:
                boundary = sum(map(stored_tokens, await history.get_messages("a", session_id="s")))
            before, q = last if boundary == -1 else (boundary, query)
            last = (before, q)
            got = await meaning(history, queries[q], before, limit)
            same = InMemoryHistoryProvider()
            held = await history.get_stored("a", session_id="s")
            for stored in held:
                await same.append("a", stored.message, session_id="s", run_id=stored.run_id)
            assert got == await meaning(same, queries[q], before, limit)

    asyncio.run(run())


class _Misbehaving(HashingEmbeddingClient):
    """Hashed embeddings, except for the texts it was told to answer wrongly."""

    def __init__(self, answer: object, when: str = "", dimension: int = 8) -> None:
        super().__init__(dimension=dimension)
        self.answer, self.when = answer, when

    async def embed(self, texts):  # type: ignore[no-untyped-def]
        if self.answer is not None and (not self.when or self.when in texts):
            return self.answer(texts) if callable(self.answer) else self.answer
        return await super().embed(texts)


@pytest.mark.parametrize(
    ("answer", "when"),
    [
        (lambda texts: [["x"] * 8 for _ in texts], ""),  # not numbers
        (lambda texts: [[1.0] * (3 + i) for i, _ in enumerate(texts)], ""),  # of several lengths
        (lambda texts: [[float("nan")] * 8 for _ in texts], ""),  # not finite
        (lambda texts: [[1.0] * 8 for _ in texts] + [[1.0] * 8], ""),  # one too many
        ([], "what broke?"),  # none for the request
        ([[1.0] * 8, [1.0] * 8], "what broke?"),  # two for the request
        ([[float("inf")] * 8], "what broke?"),
        (None, ""),  # well-behaved, but with twice the dimensions the model's embeddings have
    ],
)
def test_an_embedder_that_answers_wrongly_gets_a_typed_error_and_loses_nothing(answer: object, when: str) -> None:
    """What an embedding client returns is the caller's code: vectors that are not lists of finite numbers of
    its dimension, one per text, or vectors of another dimension than those held under the same model, are
    refused with ``InvalidArgument``; the session and its search by meaning with a right client are unchanged."""
    history = InMemoryHistoryProvider()
    turns = [ChatMessage.user(f"turn {i} about the deploy") for i in range(6)]
    asyncio.run(history.append_many("a", turns, session_id="s"))

    async def search(client: HashingEmbeddingClient) -> list[UnitMatch]:
        found = await history.search_hybrid(
            "a", session_id="s", query="what broke?", before=10**6, limit=3, embedder=client, model="m"
        )
        return found.meaning

    if answer is None:  # the model's embeddings are held first
        asyncio.run(search(_Misbehaving(None)))
        asyncio.run(history.append("a", ChatMessage.user("the deploy broke"), session_id="s"))
    wrong = _Misbehaving(answer, when, dimension=16 if answer is None else 8)
    with pytest.raises(InvalidArgument):
        asyncio.run(search(wrong))
    held = asyncio.run(history.get_messages("a", session_id="s"))
    assert held[: len(turns)] == turns
    same = InMemoryHistoryProvider()
    asyncio.run(same.append_many("a", held, session_id="s"))
    fresh = same.search_hybrid(
        "a", session_id="s", query="what broke?", before=10**6, limit=3, embedder=_Misbehaving(None), model="m"
    )
    assert asyncio.run(search(_Misbehaving(None))) == asyncio.run(fresh).meaning


needs_model = pytest.mark.skipif(not offline_embeddings_installed(), reason="pip install 'ravi-agents[embeddings]'")


@needs_model
def test_the_offline_model_embeds_without_the_network() -> None:
    """The model comes from the installed wheel: embedding works with the hub offline, vectors are unit-length
    and deterministic, and words that mean alike land closer than unrelated ones."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    client = StaticEmbeddingClient()
    texts = ["we adopted a puppy", "my new dog is great", "the quarterly tax return", ""]
    vectors = np.array(asyncio.run(client.embed(texts)))
    assert vectors.shape == (4, 256)
    assert np.allclose(np.linalg.norm(vectors[:3], axis=1), 1.0, atol=1e-5) and not vectors[3].any()
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2]
    assert np.array_equal(vectors, np.array(asyncio.run(client.embed(texts))))
    assert StaticEmbeddingClient(64).dimension == 64
    with pytest.raises(InvalidArgument):
        StaticEmbeddingClient(100)


@needs_model
@pytest.mark.parametrize("dimension", [64.0, 128.0, True, "64", None])
def test_the_offline_model_refuses_a_dimension_that_is_not_one_of_its_sizes(dimension: object) -> None:
    """A dimension of 64.0 equals 64, so it was taken, and every embedding then failed with numpy's
    TypeError."""
    with pytest.raises(InvalidArgument, match="dimension must be 64, 128 or 256"):
        StaticEmbeddingClient(dimension)  # type: ignore[arg-type]


@needs_model
def test_the_offline_model_refuses_text_that_is_not_unicode_by_name() -> None:
    """A lone surrogate cannot be tokenized (nor stored): InvalidArgument naming where, not the tokenizer's
    TypeError; a NUL or a text longer than ``max_chars`` embeds."""
    client = StaticEmbeddingClient(64)
    with pytest.raises(InvalidArgument, match="lone surrogate") as refused:
        client.embed_now(["fine", "a\ud800b"])
    assert refused.value.field == "texts[1]"
    assert client.embed_now(["\x00", "x" * 100_000]).shape == (2, 64)


@needs_model
def test_the_default_recall_ranks_by_meaning_with_the_offline_model() -> None:
    strategy = RelevantRecallStrategy(300)
    assert strategy.meaning is not None and strategy.meaning.model == "wordllama-l2_supercat-128"
    assert RelevantRecallStrategy(300, meaning=None).meaning is None


def test_meaning_takes_the_values_a_ravi_toml_gives_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """The configuration page says a ``relevant_recall`` entry's keys are the strategy's options, and a
    ``ravi.toml`` writes ``meaning = "offline"`` (the offline model, required) or ``"none"`` (words only): the same
    strings work in Python, and ``"offline"`` without the model says what to install."""
    assert RelevantRecallStrategy(300, meaning="none").meaning is None
    if offline_embeddings_installed():
        strategy = RelevantRecallStrategy(300, meaning="offline")
        assert strategy.meaning is not None and strategy.meaning.model == "wordllama-l2_supercat-128"
    from ravi.agents import embeddings

    monkeypatch.setattr(embeddings, "offline_embedding_client", lambda: None)  # as without the extra
    with pytest.raises(ConfigurationError, match="offline embedding model") as raised:
        RelevantRecallStrategy(300, meaning="offline")
    assert "pip install" in (raised.value.hint or "")
    assert RelevantRecallStrategy(300, meaning="auto").meaning is None
    with pytest.raises(InvalidArgument, match="'none'"):
        RelevantRecallStrategy(300, meaning="words")


def test_the_in_memory_store_searches_by_words_with_neighbours_and_by_meaning() -> None:
    async def main() -> None:
        store = InMemoryHistoryProvider()
        messages = [ChatMessage.user(f"chat {i}") for i in range(40)]
        messages[20:20] = [ChatMessage.user("any tips for the fern?"), ChatMessage.assistant("water it less")]
        await store.append_many("a", messages, session_id="s")
        plain = await store.search_units("a", session_id="s", query="fern", before=10**9, limit=5)
        found = await store.search_hybrid("a", session_id="s", query="fern", before=10**9, limit=5)
        assert found.lexical == plain and found.meaning == []
        spread = await store.search_hybrid("a", session_id="s", query="fern", before=10**9, limit=5, spread=0.5)
        assert [u.messages[0].id for u in spread.lexical] == [messages[20].id, messages[21].id, messages[19].id]
        client = HashingEmbeddingClient(dimension=32)
        both = await store.search_hybrid(
            "a", session_id="s", query="water less", before=10**9, limit=3, embedder=client, model="h"
        )
        assert both.meaning[0].messages[0].id == messages[21].id
        await store.clear_run("a", session_id="s", run_id="")
        gone = await store.search_hybrid(
            "a", session_id="s", query="water less", before=10**9, limit=3, embedder=client, model="h"
        )
        assert gone.meaning == [] and gone.lexical == []
        with pytest.raises(InvalidArgument):
            await store.search_hybrid("a", session_id="s", query="q", before=1, limit=1, spread=2.0)
        with pytest.raises(InvalidArgument):
            await store.search_hybrid("a", session_id="s", query="q", before=1, limit=1, embedder=client)

    asyncio.run(main())


def test_a_fresh_pipeline_on_the_in_memory_store_reads_only_the_window_with_meaning() -> None:
    """Words and meaning both come from the store: the first window of a long session reads its newest part."""
    from .doubles import Recording

    async def main() -> None:
        store = Recording()
        messages = [ChatMessage.user(f"turn {i} " + "x" * 200) for i in range(3_000)]
        messages[40:40] = [ChatMessage.user("the staging host is zanzibar-7")]
        messages.append(ChatMessage.user("which host is staging?"))
        await store.append_many("a", messages, session_id="s")
        pipeline = CompactionPipeline([RelevantRecallStrategy(2_000, meaning=HashingEmbeddingClient(32))])
        window = (await pipeline.window(WindowRequest("a", "s", history=store))).messages
        assert store.whole == 0 and store.windowed < 200
        assert messages[40].id in {m.id for m in window}

    asyncio.run(main())


def test_meaning_looks_back_over_the_newest_messages_before_the_window(monkeypatch: pytest.MonkeyPatch) -> None:
    """The in-memory store compares the request with the newest ``MEANING_LOOKBACK`` messages before the window,
    as Postgres does; the words still reach the whole session."""
    import ravi.agents.context.meaning as meaning

    monkeypatch.setattr(meaning, "MEANING_LOOKBACK", 50)

    async def main() -> None:
        store = InMemoryHistoryProvider()
        messages = [
            ChatMessage.user("the walrus sleeps on the ice"),
            *(ChatMessage.user(f"turn {i}") for i in range(100)),
        ]
        await store.append_many("a", messages, session_id="s")
        client = HashingEmbeddingClient(dimension=32)
        found = await store.search_hybrid(
            "a", session_id="s", query="walrus", before=10**9, limit=3, embedder=client, model="h"
        )
        assert found.lexical[0].messages[0] == messages[0]
        assert all(u.messages[0] != messages[0] for u in found.meaning)

    asyncio.run(main())


@settings(max_examples=40, deadline=None)
@given(
    turns=st.lists(
        st.tuples(st.integers(0, 3), st.sampled_from(["Maya", "Sam"]), st.sampled_from(["park", "cello", "trip"])),
        min_size=1,
        max_size=120,
    ),
    month=st.integers(1, 12),
    budget=st.integers(60, 1_500),
)
def test_a_window_for_a_period_meets_its_budget_in_order_without_repeats(
    turns: list[tuple[int, str, str]], month: int, budget: int
) -> None:
    from ravi.agents.tokens import DEFAULT_COUNTER

    day = datetime(2023, 1, 1, tzinfo=UTC)
    history = []
    for k, (gap, name, word) in enumerate(turns):
        day += timedelta(days=gap)
        history.append(ChatMessage.user(f"turn {k}: the {word} again", name=name, created_at=day))
    month_name = date(2023, month, 1).strftime("%B")
    history.append(ChatMessage.user(f"What did Maya do in {month_name} 2023?", name="Sam", created_at=day))
    window = asyncio.run(RelevantRecallStrategy(budget, meaning=None).compact(history))
    ids = [m.id for m in window]
    assert len(ids) == len(set(ids))
    where = {m.id: k for k, m in enumerate(history)}
    assert [where[i] for i in ids] == sorted(where[i] for i in ids)
    assert window[-1].id == history[-1].id
    if DEFAULT_COUNTER.count_message(history[-1]) <= budget:
        assert DEFAULT_COUNTER.count_messages(window) <= budget
