"""``StrategyContract``: the invariants every compaction strategy keeps, as property tests on random transcripts.

The same properties hold Ravi's own strategies. Subclass the contract and override ``strategy``, a fixture that
returns a factory: given a size ``n`` (0 to 30, drawn with the transcript) it builds the strategy, so the
properties run across its settings::

    class TestMyStrategy(StrategyContract):
        @pytest.fixture
        def strategy(self):
            return lambda n: MyStrategy(keep=n)
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ravi.conformance._base import ContractBase
from ravi.kernel.agent import CompactionStrategy, SessionContext, Strategy, as_strategy
from ravi.kernel.messages import SUMMARY_KEY, ChatMessage, ToolCallBlock
from ravi.kernel.storage import window_of
from ravi.kernel.tokens import stored_tokens

Factory = Callable[[int], Strategy | CompactionStrategy]

_ids = itertools.count()
_text = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=60) | st.sampled_from(
    ["", "ünïcödé ✓ 漢字 🚀", "x" * 700, "y" * 2_500]
)


def _id(prefix: str) -> str:
    return f"{prefix}{next(_ids)}"


@st.composite
def units(draw: st.DrawFn) -> list[ChatMessage]:
    """One unit of a transcript: a system, user or assistant message, or a tool group (an assistant message that
    calls 1 to 3 tools, its results in any order, sometimes with a system message among them)."""
    kind = draw(st.sampled_from(["system", "user", "assistant", "group", "group"]))
    if kind == "system":
        return [ChatMessage.system(draw(_text), id=_id("s"))]
    if kind == "user":
        return [ChatMessage.user(draw(_text), id=_id("u"))]
    if kind == "assistant":
        return [ChatMessage.assistant(draw(_text), id=_id("a"))]
    n = draw(st.integers(1, 3))
    calls = [ToolCallBlock(id=_id("c"), name="tool", arguments={"q": draw(_text)}) for _ in range(n)]
    thought = draw(st.none() | _text)
    out = [ChatMessage.assistant(thought, tool_calls=calls, id=_id("a"))]
    results = [ChatMessage.tool(c.id, draw(_text), is_error=draw(st.booleans()), id=_id("t")) for c in calls]
    results = draw(st.permutations(results))
    if draw(st.booleans()) and len(results) > 1:  # a system message in the middle of a tool group
        results.insert(1, ChatMessage.system(draw(_text), id=_id("s")))
    return out + results


transcripts = st.lists(units(), max_size=25).map(lambda us: [m for u in us for m in u])
"""Random, well-formed transcripts: up to 25 units, unicode text, long tool results, tool groups with their
results in any order and system messages among them."""

sizes = st.integers(0, 30)


def check_window(source: Sequence[ChatMessage], window: Sequence[ChatMessage]) -> None:
    """Assert that ``window`` keeps the invariants relative to ``source``: order kept, nothing invented but
    summaries (messages marked ``SUMMARY_KEY``), nothing twice, every system message kept verbatim, every tool
    call with its results and no result without its call, no result before its call."""
    position = {m.id: i for i, m in enumerate(source)}
    invented = [m.id for m in window if m.id not in position and SUMMARY_KEY not in m.metadata]
    assert not invented, f"messages neither in the source nor summaries: {invented}"
    kept = [m for m in window if m.id in position]
    indices = [position[m.id] for m in kept]
    assert indices == sorted(indices), "order changed"
    assert len(set(indices)) == len(indices), "a message appears twice"
    assert [m for m in source if m.role == "system"] == [m for m in kept if m.role == "system"], "system lost"
    calls_in_window = {c.id for m in kept for c in m.tool_calls}
    results_in_window = {m.tool_result.tool_call_id for m in kept if m.role == "tool" and m.tool_result}
    results_in_source = {m.tool_result.tool_call_id for m in source if m.role == "tool" and m.tool_result}
    assert results_in_window <= calls_in_window, "orphaned tool result"
    assert (calls_in_window & results_in_source) <= results_in_window, "tool call without its result"
    seen_calls: set[str] = set()
    for m in kept:
        seen_calls.update(c.id for c in m.tool_calls)
        if m.role == "tool" and m.tool_result:
            assert m.tool_result.tool_call_id in seen_calls, "result before its call"


def _run(strategy: Strategy, history: Sequence[ChatMessage], session: SessionContext | None = None) -> list[Any]:
    return asyncio.run(strategy.compact(history, session))


def _dumped(messages: Sequence[ChatMessage]) -> list[dict[str, Any]]:
    return [m.model_dump() for m in messages]


_PROPERTY = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


class StrategyContract(ContractBase):
    """Subclass and override the ``strategy`` fixture to return a factory of your strategy (see the module)."""

    contract_name: ClassVar[str] = "Strategy"

    @pytest.fixture
    def strategy(self) -> Factory:
        """Return ``lambda n: YourStrategy(...)``: a fresh strategy for a size ``n`` from 0 to 30."""
        raise NotImplementedError("override the 'strategy' fixture to return a factory of your strategy")

    def _built(self, factory: Factory, n: int) -> Strategy:
        return as_strategy(factory(n))

    def test_is_a_strategy(self, strategy: Factory) -> None:
        """The factory builds an object the engine can run: a ``Strategy``, or a plain object with ``compact``.

        Fix: return from the factory a subclass of ``Strategy`` of ``ravi.kernel.agent`` that implements ``async def
        compact(self, raw_history, session=None)``, or a plain object with ``async def compact(self, raw_history)``
        (``CompactionStrategy``), built, not its class.
        """
        built = strategy(1)
        assert isinstance(built, Strategy | CompactionStrategy), f"{type(built).__name__} has no compact(history)"

    def test_keeps_the_invariants(self, strategy: Factory) -> None:
        """A window never changes its source, keeps the order and every system message, keeps each tool call
        with its results, holds no message twice, and is the same for the same input.

        Troubleshooting: build new messages with ``message.model_copy(update=...)``, never change one in place; drop
        and keep whole units (``unit_end`` of ``ravi.kernel.search`` gives where one ends).
        """

        @_PROPERTY
        @given(history=transcripts, n=sizes)
        def check(history: list[ChatMessage], n: int) -> None:
            snapshot = _dumped(history)
            ids = [id(m) for m in history]
            window = _run(self._built(strategy, n), history)
            assert _dumped(history) == snapshot, "the source messages changed"
            assert [id(m) for m in history] == ids, "the source list changed"
            check_window(history, window)
            again = _run(self._built(strategy, n), history)
            assert _dumped(again) == _dumped(window), "not deterministic: the same input gave another window"

        check()

    def test_state_belongs_to_its_session(self, strategy: Factory) -> None:
        """One strategy object serving two sessions in turn gives each the windows a strategy of its own gives:
        nothing learnt about one session reaches the other.

        Troubleshooting: keep per-session state in ``session.state`` under a ``Slot`` (``ravi.kernel.agent``), never
        in ``self``.
        """

        @_PROPERTY
        @given(first=transcripts, second=transcripts, n=sizes)
        def check(first: list[ChatMessage], second: list[ChatMessage], n: int) -> None:
            shared = self._built(strategy, n)
            one, two = SessionContext("agent", "one"), SessionContext("agent", "two")
            alone_one, alone_two = self._built(strategy, n), self._built(strategy, n)
            mine_one, mine_two = SessionContext("agent", "one"), SessionContext("agent", "two")
            for end in sorted({len(first) // 2, len(first)}):
                one.read_from(first[:end])
                mine_one.read_from(first[:end])
                got = _run(shared, first[:end], one)
                assert _dumped(got) == _dumped(_run(alone_one, first[:end], mine_one)), "session one saw two's state"
                two.read_from(second)
                mine_two.read_from(second)
                got = _run(shared, second, two)
                assert _dumped(got) == _dumped(_run(alone_two, second, mine_two)), "session two saw one's state"

        check()

    def test_a_cut_partial_read_gives_the_whole_window(self, strategy: Factory) -> None:
        """For a strategy that declares ``suffix_determined``: on the newest part of a session (a windowed read,
        ``session.partial``), a window the strategy cut there (``cut_made``) without asking for older messages
        (``need_older``) is the window the whole session gives, so the engine may keep it.

        Troubleshooting: call ``session.need_older()`` whenever what you return could depend on messages before the
        part read.
        """
        if not self._built(strategy, 1).traits.suffix_determined:
            pytest.skip("the strategy does not declare suffix_determined: the engine always reads it whole")

        @_PROPERTY
        @given(history=transcripts, n=sizes, tokens=st.integers(0, 3_000))
        def check(history: list[ChatMessage], n: int, tokens: int) -> None:
            whole = _run(self._built(strategy, n), history)
            view = window_of(history, tokens)
            if view.complete:
                return
            session = SessionContext("agent", "s")
            session.read_from(view.messages, head=view.head, before=view.before)
            session.partial = True
            window = _run(self._built(strategy, n), view.messages, session)
            if session.bounded and not session.older_needed:
                assert _dumped(window) == _dumped(whole), "a window cut on a partial read differs from the whole's"

        check()

    def test_stored_counts_are_the_kernels(self) -> None:
        """The offsets a strategy sees (``session.offset``) are sums of ``ravi.kernel.tokens.stored_tokens``, one
        rule for every store and process."""
        messages = [ChatMessage.user("a" * 40), ChatMessage.user("b")]
        session = SessionContext("agent", "s")
        session.read_from(messages)
        assert session.offset(messages[1].id) == stored_tokens(messages[0])


__all__ = ["StrategyContract", "check_window", "sizes", "transcripts", "units"]
