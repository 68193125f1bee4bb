"""The functional API: the building blocks other agent runtimes call directly.

Example:
    >>> import asyncio
    >>> policy = CompactionPolicy(trigger_ratio=0.8, keep_recent=2)
    >>> history = [ChatMessage.user("x" * 400) for _ in range(6)]
    >>> should_compact(history, token_budget=500, policy=policy)
    True
    >>> summary, *tail = asyncio.run(compact(history, policy=policy))
    >>> len(tail)
    2
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ravi.agents.context.compaction.summarization import INSTRUCTIONS, is_summary, write_summary
from ravi.agents.context.units import units_backward
from ravi.agents.tokens import DEFAULT_COUNTER
from ravi.kernel.cancel import CancelToken
from ravi.kernel.errors import InvalidArgument
from ravi.kernel.llm import LLMClient, TokenCounter
from ravi.kernel.messages import ChatMessage
from ravi.kernel.storage import SummaryStore


@dataclass(frozen=True)
class CompactionPolicy:
    """When to compact and what to keep.

    Attributes:
        trigger_ratio: Compact once the messages use more than this share of the token budget.
        keep_recent: Keep at least this many of the newest messages verbatim (more if a tool group straddles
            the line).
    """

    trigger_ratio: float = 0.8
    keep_recent: int = 8

    def __post_init__(self) -> None:
        if not 0 < self.trigger_ratio <= 1:
            raise InvalidArgument(f"trigger_ratio must be in (0, 1], got {self.trigger_ratio}")
        if self.keep_recent < 0:
            raise InvalidArgument(f"keep_recent must be >= 0, got {self.keep_recent}")


def estimate_context_tokens(messages: Sequence[ChatMessage], *, counter: TokenCounter | None = None) -> int:
    """Tokens the messages would take in a prompt (heuristic counter unless one is given)."""
    return (counter or DEFAULT_COUNTER).count_messages(messages)


def should_compact(
    messages: Sequence[ChatMessage],
    token_budget: int,
    policy: CompactionPolicy = CompactionPolicy(),
    *,
    counter: TokenCounter | None = None,
) -> bool:
    """Whether the messages use more than ``policy.trigger_ratio`` of ``token_budget``."""
    return estimate_context_tokens(messages, counter=counter) > policy.trigger_ratio * token_budget


def find_cut_point(messages: Sequence[ChatMessage], keep_recent: int) -> int:
    """The index where the kept tail starts: at most ``len - keep_recent``, moved back to a unit boundary so a
    tool call is never separated from its results. 0 means keep everything."""
    if keep_recent < 0:
        raise InvalidArgument(f"keep_recent must be >= 0, got {keep_recent}")
    target = len(messages) - keep_recent
    if target <= 0:
        return 0
    for start, _ in units_backward(messages):
        if start <= target:
            return start
    return 0


async def summarize(
    messages: Sequence[ChatMessage],
    llm: LLMClient | None = None,
    *,
    max_tokens: int = 800,
    instructions: str = INSTRUCTIONS,
    cancel: CancelToken | None = None,
    store: SummaryStore | None = None,
) -> ChatMessage:
    """One summary message of ``messages``; summaries among them are folded in, system messages skipped."""
    from ravi.agents.llm.extractive import ExtractiveSummarizer

    previous = [m for m in messages if is_summary(m)]
    fresh = [m for m in messages if m.role != "system" and not is_summary(m)]
    if not previous and not fresh:
        raise InvalidArgument("nothing to summarise")
    return await write_summary(
        llm or ExtractiveSummarizer(),
        previous,
        fresh,
        instructions=instructions,
        max_tokens=max_tokens,
        cancel=cancel,
        store=store,
    )


async def compact(
    messages: Sequence[ChatMessage],
    llm: LLMClient | None = None,
    policy: CompactionPolicy = CompactionPolicy(),
    *,
    cancel: CancelToken | None = None,
    store: SummaryStore | None = None,
) -> list[ChatMessage]:
    """``(summary, *tail)``: everything before :func:`find_cut_point` becomes one summary.

    System messages of the summarised part are never summarised away: they come first, before the summary.
    With nothing old enough to summarise, the messages are returned as they are.
    """
    cut = find_cut_point(messages, policy.keep_recent)
    old = messages[:cut]
    if not any(m.role != "system" for m in old):
        return list(messages)
    summary = await summarize(old, llm, cancel=cancel, store=store)
    return [*(m for m in old if m.role == "system"), summary, *messages[cut:]]


__all__ = ["CompactionPolicy", "compact", "estimate_context_tokens", "find_cut_point", "should_compact", "summarize"]
