"""The invariants every strategy and pipeline keeps, as one checking function."""

from __future__ import annotations

from collections.abc import Sequence

from ravi.agents.context.compaction.summarization import is_summary
from ravi.kernel.messages import ChatMessage


def check_window(source: Sequence[ChatMessage], window: Sequence[ChatMessage]) -> None:
    """Assert the window keeps the invariants relative to its source."""
    position = {m.id: i for i, m in enumerate(source)}
    kept = [m for m in window if not is_summary(m)]
    # order kept, nothing invented (summaries aside), nothing duplicated
    indices = [position[m.id] for m in kept]
    assert indices == sorted(indices), "order changed"
    assert len(set(indices)) == len(indices), "a message appears twice"
    # system messages kept, verbatim
    assert [m for m in source if m.role == "system"] == [m for m in kept if m.role == "system"], "system lost"
    # tool pairs travel together
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
