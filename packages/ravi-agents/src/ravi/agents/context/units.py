"""Units: the pieces a window may keep or drop without breaking tool pairs.

A unit is either one message, or an assistant message that makes tool calls together with the run of tool (and
system) messages right after it, which carry the results. Strategies keep or drop whole units, so a window
never holds a tool result without its call, nor a call without its results.

The same rule is applied forwards (:func:`units`) and backwards (:func:`units_backward`), so a strategy that
only needs the newest end of a long history never reads the rest.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from ravi.kernel.messages import ChatMessage, DocumentBlock, ImageBlock, TextBlock, ToolCallBlock
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
    """``messages`` as a provider takes them: each tool call followed by one result for each of its ids.

    A result stored apart from its call (other messages came between them) is moved up to just after the call's
    group; a result whose call is not among the messages before it, and a second result for one call (a retried
    tool, two writers), are left out: of the results for a call, the first is sent. A call no result in
    ``messages`` answers (its result never stored, or not yet: the tool still runs) is taken out of its message, a
    copy (the stored message is untouched), and a message left with nothing said (no text, image or document) is
    left out. Every other message keeps its place; a list already so is returned as it is (copied)."""
    calls: dict[str, int] = {}  # each call id: where its (newest) call is
    asked: dict[int, list[str]] = {}  # each message that calls tools: the ids it calls
    answered: set[tuple[int, str]] = set()  # the calls given a result: where each is, and its id
    apart: dict[int, list[ChatMessage]] = {}  # the results to put after the group of the call at each position
    moved: set[int] = set()  # the positions of the results moved or left out
    opener = -1  # where the call of the group being read is (-1: none)
    for j, m in enumerate(messages):
        role = m.role
        if role == "tool":
            result = m.tool_result
            at = calls.get(result.tool_call_id) if result is not None else None
            if at is None or result is None or (at, result.tool_call_id) in answered:
                moved.add(j)  # no call before it, or its call has its result already
                continue
            answered.add((at, result.tool_call_id))
            if at != opener:
                moved.add(j)
                apart.setdefault(at, []).append(m)
            continue
        if role == "system":
            continue
        opener = -1
        if role == "assistant":
            for block in m.content:
                if isinstance(block, ToolCallBlock):
                    calls[block.id] = opener = j
                    asked.setdefault(j, []).append(block.id)
    unanswered = {j: ids for j, called in asked.items() if (ids := {c for c in called if (j, c) not in answered})}
    if not moved and not unanswered:
        return list(messages)
    out: list[ChatMessage] = []
    waiting: list[ChatMessage] = []  # the moved results of the group being written
    for j, m in enumerate(messages):
        if waiting and m.role not in ("tool", "system"):
            out.extend(waiting)
            waiting = []
        if j in moved:
            continue
        if j in unanswered:
            kept = without_calls(m, unanswered[j])
            if kept is None:
                continue
            m = kept
        out.append(m)
        waiting = apart.get(j, waiting)
    out.extend(waiting)
    return out


def without_calls(message: ChatMessage, ids: set[str]) -> ChatMessage | None:
    """A copy of ``message`` without its tool calls ``ids``, or ``None`` when nothing it says is left (no text,
    image, document or other call: a thinking block or an empty text alone is no turn)."""
    content = tuple(b for b in message.content if not (isinstance(b, ToolCallBlock) and b.id in ids))
    if not any(
        isinstance(b, ImageBlock | DocumentBlock | ToolCallBlock) or (isinstance(b, TextBlock) and b.text)
        for b in content
    ):
        return None
    return message.model_copy(update={"content": content})


__all__ = ["Span", "pair_results", "is_group", "opens_group", "unit_end", "units", "units_backward", "without_calls"]
