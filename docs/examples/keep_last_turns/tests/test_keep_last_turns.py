"""``KeepLastTurns`` against the invariants every Ravi strategy keeps, and inside Ravi's engine."""

import pytest
from keep_last_turns import KeepLastTurns

from ravi.agents.context import CompactionPipeline, InMemoryHistoryProvider, WindowRequest
from ravi.conformance import StrategyContract
from ravi.kernel.messages import ChatMessage


class TestKeepLastTurns(StrategyContract):
    @pytest.fixture
    def strategy(self):
        return lambda n: KeepLastTurns(turns=n % 8)


@pytest.mark.asyncio
async def test_the_engine_reads_only_the_newest_turns():
    history = InMemoryHistoryProvider()
    turns = [m for i in range(500) for m in (ChatMessage.user(f"q{i}"), ChatMessage.assistant(f"a{i}"))]
    await history.append_many("agent", turns, session_id="s")
    pipeline = CompactionPipeline([KeepLastTurns(turns=3)])
    window = await pipeline.window(WindowRequest("agent", "s", history=history))
    assert [m.text for m in window.messages] == ["q497", "a497", "q498", "a498", "q499", "a499"]
    assert pipeline.reads_windows(history)
    assert KeepLastTurns(3).first_kept(pipeline.session("agent", "s")) is None  # state belongs to its owner
    assert pipeline.strategies[0].first_kept(pipeline.session("agent", "s")) == turns[-6].id
