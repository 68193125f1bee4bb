"""``SelectiveToolCallCompactionStrategy``: keep the newest tool exchanges whole, fold the older ones away."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ravi.agents.context.memo import PrefixMemo
from ravi.agents.context.units import is_group, units, units_backward
from ravi.kernel.agent import SessionContext, Slot, Strategy, StrategyTraits
from ravi.kernel.messages import ChatMessage, ToolCallBlock
from ravi.kernel.values import check_count


@dataclass
class _State:
    cut: int
    folded: list[ChatMessage]


_FOLDED = "ravi.selective:folded"
_UNSET = object()
_MEMO: Slot[PrefixMemo[_State]] = Slot("selective_tool_call.folded", PrefixMemo)
"""The session's last input and what was folded of it."""


class SelectiveToolCallCompactionStrategy(Strategy):
    """Keep the newest ``keep_recent_groups`` tool-call groups whole; older groups lose their calls and results.

    A group is an assistant message that calls tools plus the messages carrying the results. In an older group
    the assistant's own text (its reasoning, its answer) stays, as a message with the same id and without the
    calls; if it said nothing but the calls, the message goes. The results go with their calls, so no pair is
    ever split. User turns and system messages are never touched. Cost: a growing session reuses what it
    folded before and reads only the new part.
    """

    traits = StrategyTraits(suffix_determined=True)
    """Whether a group is folded depends only on the groups after it."""

    def __init__(self, keep_recent_groups: int = 5) -> None:
        check_count(keep_recent_groups, "keep_recent_groups")
        self.keep_recent_groups = keep_recent_groups

    def _cut(self, history: Sequence[ChatMessage]) -> int:
        """Start of the oldest group still kept whole (0 when there are too few groups to fold any)."""
        if self.keep_recent_groups == 0:
            return len(history)
        seen = 0
        for span in units_backward(history):
            if is_group(history, span):
                seen += 1
                if seen == self.keep_recent_groups:
                    return span[0]
        return 0

    def _fold(self, history: Sequence[ChatMessage], start: int, stop: int) -> list[ChatMessage]:
        out: list[ChatMessage] = []
        for a, b in units(history, start, stop):
            if not is_group(history, (a, b)):
                out.extend(history[a:b])
                continue
            call = history[a]
            folded = call.memo.get(_FOLDED, _UNSET)
            if folded is _UNSET:  # folded once per message, whatever part of the session is being read
                kept = tuple(block for block in call.content if not isinstance(block, ToolCallBlock))
                folded = call.memo[_FOLDED] = call.model_copy(update={"content": kept}) if kept else None
            if folded is not None:
                out.append(folded)
            out.extend(m for m in history[a + 1 : b] if m.role == "system")
        return out

    async def compact(
        self, raw_history: Sequence[ChatMessage], session: SessionContext | None = None
    ) -> list[ChatMessage]:
        """``raw_history`` with every tool group older than the newest ``keep_recent_groups`` folded away."""
        memo = SessionContext.of(session, raw_history).state.get(self, _MEMO)
        cut = self._cut(raw_history)
        hit = memo.lookup(raw_history)
        if hit is not None and hit[1].cut <= cut and self.keep_recent_groups > 0:
            # unit starts never move as a history grows, so the old cut is still a unit boundary
            state = hit[1]
            folded = state.folded + self._fold(raw_history, state.cut, cut)
        else:
            folded = self._fold(raw_history, 0, cut)
        memo.store(raw_history, _State(cut, folded))
        return folded + list(raw_history[cut:])

    def __repr__(self) -> str:
        return f"SelectiveToolCallCompactionStrategy(keep_recent_groups={self.keep_recent_groups})"


__all__ = ["SelectiveToolCallCompactionStrategy"]
