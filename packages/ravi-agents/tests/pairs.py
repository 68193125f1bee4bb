"""Tool-pair checks shared by the agents tests (the tests keep their own copy of the rule on purpose: one that
called the engine's would pass whatever the engine did)."""

from __future__ import annotations

from collections.abc import Sequence

from ravi.kernel.messages import ChatMessage


def orphans(window: Sequence[ChatMessage]) -> list[str]:
    """The ids of the tool results in ``window`` whose call is not in a message before them."""
    calls: set[str] = set()
    found = []
    for m in window:
        calls.update(c.id for c in m.tool_calls)
        result = m.tool_result
        if m.role == "tool" and result is not None and result.tool_call_id not in calls:
            found.append(m.id)
    return found
