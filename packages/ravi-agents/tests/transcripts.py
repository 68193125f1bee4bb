"""Hypothesis strategies for random, well-formed transcripts (shared by the agents tests)."""

from __future__ import annotations

import itertools

from hypothesis import strategies as st

from ravi.kernel.messages import ChatMessage, ToolCallBlock

_ids = itertools.count()
text = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=60) | st.sampled_from(
    ["", "ünïcödé ✓ 漢字 🚀", "x" * 700, "y" * 2_500]
)


def _id(prefix: str) -> str:
    return f"{prefix}{next(_ids)}"


@st.composite
def units(draw: st.DrawFn) -> list[ChatMessage]:
    kind = draw(st.sampled_from(["system", "user", "assistant", "group", "group"]))
    if kind == "system":
        return [ChatMessage.system(draw(text), id=_id("s"))]
    if kind == "user":
        return [ChatMessage.user(draw(text), id=_id("u"))]
    if kind == "assistant":
        return [ChatMessage.assistant(draw(text), id=_id("a"))]
    n = draw(st.integers(1, 3))
    calls = [ToolCallBlock(id=_id("c"), name="tool", arguments={"q": draw(text)}) for _ in range(n)]
    thought = draw(st.none() | text)
    out = [ChatMessage.assistant(thought, tool_calls=calls, id=_id("a"))]
    results = [ChatMessage.tool(c.id, draw(text), is_error=draw(st.booleans()), id=_id("t")) for c in calls]
    results = draw(st.permutations(results))
    if draw(st.booleans()) and len(results) > 1:  # a system message in the middle of a tool group
        results.insert(1, ChatMessage.system(draw(text), id=_id("s")))
    return out + results


transcripts = st.lists(units(), max_size=25).map(lambda us: [m for u in us for m in u])
