"""The array search index gives what the kernel's reference search gives: the same units, scores and order."""

from __future__ import annotations

import random
from itertools import accumulate

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ravi.agents.context.recall_postings import SessionPostings
from ravi.conformance.strategy import transcripts
from ravi.kernel.messages import ChatMessage, ToolCallBlock
from ravi.kernel.search import Bm25, match_units, spread
from ravi.kernel.tokens import stored_tokens

WORDS = "cache cold deploy staging invoice lunch error alpha beta gamma".split()


def _reference(history: list[ChatMessage], query: str, stop: int, limit: int, weight: float) -> list:
    index = Bm25()
    index.extend(history)
    before = list(accumulate(map(stored_tokens, history), initial=0))
    systems = [i for i, m in enumerate(history) if m.role == "system"]
    scores = spread(history, index.scores(query), stop=stop, weight=weight)
    return match_units(history, scores, before=before, systems=systems, stop=stop, limit=limit)


@settings(max_examples=150, deadline=None)
@given(history=transcripts, data=st.data())
def test_the_array_index_ranks_as_the_reference_search(history: list[ChatMessage], data: st.DataObject) -> None:
    """Built in two steps (a session that grew) or one, it finds the units BM25, ``spread`` and ``match_units``
    find, with the same scores, in the same order."""
    words = sorted({w for m in history for w in m.text.split()}) or ["x"]
    query = " ".join(data.draw(st.lists(st.sampled_from(words), min_size=1, max_size=3)))
    stop = data.draw(st.integers(0, len(history)))
    limit = data.draw(st.integers(1, 8))
    weight = data.draw(st.sampled_from([0.0, 0.5, 1.0]))
    index = SessionPostings()
    index.extend(history[: data.draw(st.integers(0, len(history)))])
    before = list(accumulate(map(stored_tokens, history), initial=0))
    got = index.search(history, query, stop=stop, limit=limit, before=before, spread=weight)
    assert got == _reference(history, query, stop, limit, weight)


def test_tool_groups_system_messages_and_ties_rank_as_the_reference_search() -> None:
    """Random sessions of tool groups (results arriving across searches), system messages among them, and many
    equal scores."""
    rng = random.Random(7)
    for _ in range(200):
        history: list[ChatMessage] = []
        index = SessionPostings()
        calls = 0
        for _ in range(rng.randint(1, 40)):
            text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 5))) or "ok"
            kind = rng.random()
            if kind < 0.15:
                history.append(ChatMessage.system(text))
            elif kind < 0.35:
                calls += 1
                history.append(ChatMessage.assistant(None, tool_calls=[ToolCallBlock(id=f"c{calls}", name=text)]))
            elif kind < 0.55 and calls:
                history.append(ChatMessage.tool(f"c{calls}", text))
            else:
                history.append(rng.choice([ChatMessage.user, ChatMessage.assistant])(text))
            if rng.random() < 0.3:
                query = " ".join(rng.sample(WORDS, 2))
                stop, limit, weight = rng.randint(0, len(history)), rng.randint(1, 6), rng.choice([0.0, 0.5])
                before = list(accumulate(map(stored_tokens, history), initial=0))
                got = index.search(history, query, stop=stop, limit=limit, before=before, spread=weight)
                assert got == _reference(history, query, stop, limit, weight)


@settings(max_examples=80, deadline=None)
@given(history=transcripts, data=st.data())
def test_units_by_any_scores_are_the_reference_units(history: list[ChatMessage], data: st.DataObject) -> None:
    """Ranked by any scores (a similarity to a request, say), the units are those ``match_units`` gives."""
    index = SessionPostings()
    index.extend(history)
    stop = data.draw(st.integers(0, len(history)))
    limit = data.draw(st.integers(1, 8))
    values = data.draw(st.lists(st.sampled_from([-0.5, 0.0, 0.25, 0.5, 1.0]), min_size=stop, max_size=stop))
    scores = np.asarray(values, dtype=np.float32)
    before = list(accumulate(map(stored_tokens, history), initial=0))
    systems = [i for i, m in enumerate(history) if m.role == "system"]
    expected = {i: float(scores[i]) for i in range(stop) if scores[i] > 0}
    got = index.units(history, scores, before=before, limit=limit)
    assert got == match_units(history, expected, before=before, systems=systems, stop=stop, limit=limit)


def test_terms_held_by_many_messages_rank_as_the_reference_search() -> None:
    """A term's postings start as lists and become arrays once it is common: sessions of 0 to 400 messages over
    ten words (each held by up to hundreds of messages), grown in several steps, search as the reference does."""
    rng = random.Random(11)
    for size in (0, 1, 63, 64, 65, 130, 400):
        history = [ChatMessage.user(" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 4)))) for _ in range(size)]
        index = SessionPostings()
        for cut in [*sorted(rng.sample(range(size + 1), k=min(3, size + 1))), size]:
            index.extend(history[:cut])
        before = list(accumulate(map(stored_tokens, history), initial=0))
        for query in ("cache", "cold deploy", "alpha beta gamma lunch"):
            got = index.search(history, query, stop=size, limit=8, before=before, spread=0.5)
            assert got == _reference(history, query, size, 8, 0.5)
