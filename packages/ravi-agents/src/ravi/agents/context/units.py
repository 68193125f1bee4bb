"""Units: the pieces a window may keep or drop without breaking tool pairs.

A unit is either one message, or an assistant message that makes tool calls together with the run of tool (and
system) messages right after it, which carry the results. Strategies keep or drop whole units, so a window
never holds a tool result without its call, nor a call without its results.

The same rule is applied forwards (:func:`units`) and backwards (:func:`units_backward`), so a strategy that
only needs the newest end of a long history never reads the rest.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from ravi.kernel.messages import ChatMessage, ToolCallBlock
from ravi.kernel.search import opens_group, unit_end

Span = tuple[int, int]
"""A half-open index range ``[start, end)``."""


def units(messages: Sequence[ChatMessage], start: int = 0, stop: int | None = None) -> list[Span]:
    """The units of ``messages[start:stop]``, oldest first (``start`` must be a unit boundary)."""
    stop = len(messages) if stop is None else stop
    spans: list[Span] = []
    i = start
    while i < stop:
        j = unit_end(messages, i, stop)
        spans.append((i, j))
        i = j
    return spans


def units_backward(messages: Sequence[ChatMessage], stop: int | None = None) -> Iterator[Span]:
    """The units of ``messages[:stop]``, newest first, reading only as far back as the caller iterates."""
    j = len(messages) if stop is None else stop
    while j > 0:
        last = messages[j - 1]
        if last.role == "tool":
            k = j - 1
            while k > 0 and messages[k - 1].role in ("tool", "system"):
                k -= 1
            if k > 0 and opens_group(messages[k - 1]):
                yield (k - 1, j)
                j = k - 1
                continue
            yield (j - 1, j)  # an orphan result stands alone
            j -= 1
        else:
            yield (j - 1, j)
            j -= 1


def is_group(messages: Sequence[ChatMessage], span: Span) -> bool:
    """Whether the unit ``span`` is a tool-call group."""
    return opens_group(messages[span[0]])


def pair_results(messages: Sequence[ChatMessage]) -> list[ChatMessage]:
    """``messages`` with each tool result right after its call: a result stored apart from its call (other
    messages came between them) is moved up to just after the call's group, and a result whose call is not among
    the messages before it is left out. Every other message keeps its place; a list already so is returned as it
    is (copied)."""
    calls: dict[str, int] = {}  # each call id: where its call is
    apart: dict[int, list[ChatMessage]] = {}  # the results to put after the group of the call at each position
    moved: set[int] = set()  # the positions of the results moved or left out
    opener = -1  # where the call of the group being read is (-1: none)
    for j, m in enumerate(messages):
        role = m.role
        if role == "tool":
            result = m.tool_result
            at = calls.get(result.tool_call_id) if result is not None else None
            if at != opener:
                moved.add(j)
                if at is not None:
                    apart.setdefault(at, []).append(m)
            continue
        if role == "system":
            continue
        opener = -1
        if role == "assistant":
            for block in m.content:
                if isinstance(block, ToolCallBlock):
                    calls[block.id] = opener = j
    if not moved:
        return list(messages)
    out: list[ChatMessage] = []
    waiting: list[ChatMessage] = []  # the moved results of the group being written
    for j, m in enumerate(messages):
        if waiting and m.role not in ("tool", "system"):
            out.extend(waiting)
            waiting = []
        if j in moved:
            continue
        out.append(m)
        waiting = apart.get(j, waiting)
    out.extend(waiting)
    return out


__all__ = ["Span", "pair_results", "is_group", "opens_group", "unit_end", "units", "units_backward"]
