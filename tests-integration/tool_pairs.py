"""What the tool-pair tests on the servers share: the check for results sent without their calls, and turns that
bury older ones so recall must reach back for them."""

from __future__ import annotations

from ravi.kernel.messages import ChatMessage, ToolResultBlock


def orphans(window: list[ChatMessage]) -> list[str]:
    """The ids of the tool results in ``window`` whose call is not in a message before them."""
    calls: set[str] = set()
    found = []
    for m in window:
        calls.update(c.id for c in m.tool_calls)
        found += [m.id for b in m.content if isinstance(b, ToolResultBlock) and b.tool_call_id not in calls]
    return found


def filler(turns: int = 60) -> list[ChatMessage]:
    """``turns`` plain questions and answers, which share no word with a request about a zebra migration."""
    return [
        m
        for i in range(turns)
        for m in (
            ChatMessage.user(f"plain question {i} " + "w " * 30, id=f"q{i}"),
            ChatMessage.assistant(f"plain answer {i} " + "v " * 30, id=f"r{i}"),
        )
    ]
