"""What the tool-pair tests on the servers share: the checks for results sent without their calls and for
everything else a provider refuses, and turns that bury older ones so recall must reach back for them."""

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


def refusals(window: list[ChatMessage]) -> list[str]:
    """What a provider refuses in ``window``: a result without its call before it, a result not right after its
    call's group, a second result for one call, and a call not followed by a result for each of its ids."""
    found = [f"result without its call: {i}" for i in orphans(window)]
    answered: set[str] = set()
    for i, m in enumerate(window):
        j, answers = i + 1, set()
        while j < len(window) and window[j].role in ("tool", "system"):
            if (result := window[j].tool_result) is not None:
                answers.add(result.tool_call_id)
            j += 1
        found += [f"call without its result: {c.id}" for c in m.tool_calls if c.id not in answers]
        if (result := m.tool_result) is not None:
            if result.tool_call_id in answered:
                found.append(f"a second result for {result.tool_call_id}: {m.id}")
            answered.add(result.tool_call_id)
            k = i - 1
            while k >= 0 and window[k].role in ("tool", "system"):
                k -= 1
            if k < 0 or result.tool_call_id not in {c.id for c in window[k].tool_calls}:
                found.append(f"a result not right after its call: {m.id}")
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
