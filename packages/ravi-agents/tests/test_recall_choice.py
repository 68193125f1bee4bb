"""How relevant recall chooses from a ranking: a choice that goes on where it stopped chooses what one pass over
the whole ranking chooses, and a ranking whose best units repeat one another is ranked deeper, so the room they
leave is spent on the units that follow."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ravi.agents.context import CompactionPipeline, RelevantRecallStrategy, WindowRequest
from ravi.agents.context.compaction.relevant_recall import _Choice, _Units
from ravi.agents.context.recall_request import read_request
from ravi.agents.tokens import DEFAULT_COUNTER
from ravi.kernel.messages import ChatMessage
from ravi.kernel.search import UnitMatch

WORDS = ["deploy", "cache", "port", "walrus", "Maya", "invoice", "staging", "the", "a", "failed"]


def _ranking(texts: list[list[str]]) -> list[UnitMatch]:
    """One single-message unit per text, best first (identical and near-identical texts repeat one another)."""
    return [
        UnitMatch(float(len(texts) - k), (ChatMessage.user(" ".join(words) or "-", id=f"m{k}"),), k * 10, None)
        for k, words in enumerate(texts)
    ]


@settings(max_examples=200, deadline=None)
@given(
    texts=st.lists(st.lists(st.sampled_from(WORDS), max_size=8), max_size=40),
    split=st.integers(0, 40),
    room=st.integers(0, 400),
    annotate=st.booleans(),
)
def test_a_choice_that_goes_on_chooses_what_one_pass_chooses(
    texts: list[list[str]], split: int, room: int, annotate: bool
) -> None:
    """``take`` of a ranking's first units and then of the rest gives the units, in the order and with the labels,
    that one ``take`` of the whole ranking gives; the ones passed over as repeats are the same too."""
    ranking = _ranking(texts)
    request = read_request([ChatMessage.user("what failed in the deploy?")])
    whole_repeats: list[UnitMatch] = []
    whole = _Choice(annotate, room, DEFAULT_COUNTER, request, _Units()).take(ranking, whole_repeats)
    choice = _Choice(annotate, room, DEFAULT_COUNTER, request, _Units())
    repeats: list[UnitMatch] = []
    choice.take(ranking[:split], repeats)
    assert choice.take(ranking[split:], repeats) == whole
    assert repeats == whole_repeats


async def test_a_ranking_whose_best_units_repeat_one_another_is_ranked_deeper() -> None:
    """The newest 80 older turns all say the same thing about the deploy, and the request's words are theirs;
    older still, 40 turns tell different deploys. A ranking of the best few dozen units holds only the repeated
    turn, which is recalled once (the newest turns fill their share of the window); the room it leaves is spent
    on the units ranked after them."""
    older = [ChatMessage.user(f"deploy {k} of the walrus service finished", id=f"told-{k}") for k in range(40)]
    older += [ChatMessage.user("the deploy failed again", id=f"again-{k}") for k in range(80)]
    filler = " ".join(["the numbers of the quarter were filed as before"] * 4)
    recent = [ChatMessage.assistant(f"noted, item {k}: {filler}", id=f"recent-{k}") for k in range(60)]
    history = [*older, *recent, ChatMessage.user("why did the deploy fail?", id="request")]
    strategy = RelevantRecallStrategy(2_000, meaning=None)
    window = (await CompactionPipeline([strategy]).window(WindowRequest("a", "s", messages=history))).messages
    ids = [m.id for m in window]
    assert sum(i.startswith("again-") for i in ids) == 1
    assert sum(i.startswith("told-") for i in ids) >= 10
