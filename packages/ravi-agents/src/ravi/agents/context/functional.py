"""The functional API (002's runtime memory engine): the building blocks other agent runtimes call directly.

``estimate_context_tokens`` prices a history, ``should_compact`` decides, ``find_cut_point`` finds the tool-safe
boundary, ``summarize`` distils the prefix into one user turn headed ``[condensed earlier context]``, and
``compact`` does all of it: ``(summary, *tail)``.

Example:
    >>> import asyncio
    >>> policy = CompactionPolicy(trigger_ratio=0.8, keep_recent=2)
    >>> history = [ChatMessage.user("x" * 400) for _ in range(6)]
    >>> should_compact(history, 500, policy)
    True
    >>> summary, *tail = asyncio.run(compact(history, None, policy))
    >>> len(tail)
    2
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ravi.agents.context.compaction.summarization import (
    INSTRUCTIONS,
    SUMMARY_HEADING,
    KeepsSummaries,
    check_instructions,
    check_llm,
    check_summary_store,
    is_summary,
    write_summary,
)
from ravi.agents.context.units import pair_results
from ravi.agents.telemetry import log_failure_once
from ravi.agents.tokens import DEFAULT_COUNTER, check_counter
from ravi.kernel.agent import CompactionEvent, EventBus, SessionContext, Strategy, StrategyTraits
from ravi.kernel.cancel import CancelledByToken, CancelToken, check_cancel
from ravi.kernel.errors import ConfigurationError, InvalidArgument
from ravi.kernel.llm import LLMClient, TokenCounter
from ravi.kernel.messages import ChatMessage
from ravi.kernel.scope import Scope
from ravi.kernel.storage import SummaryStore
from ravi.kernel.tokens import message_chars
from ravi.kernel.values import check_count, check_items, check_share

_log = logging.getLogger(__name__)


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
        check_share(self.trigger_ratio, "trigger_ratio")
        check_count(self.keep_recent, "keep_recent")


CHARS_PER_TOKEN = 4
"""Characters per token in :func:`estimate_context_tokens`."""

TURN_OVERHEAD_TOKENS = 4
"""Tokens added per message for its role and framing in :func:`estimate_context_tokens`."""

DEFAULT_POLICY = CompactionPolicy(trigger_ratio=0.8, keep_recent=8)
"""Condense at 80% of the window, keep the 8 most recent messages verbatim."""


def estimate_context_tokens(messages: Sequence[ChatMessage], *, counter: TokenCounter | None = None) -> int:
    """A coarse token estimate of ``messages`` (002): the characters of every block (text and thinking, a tool
    call's name and compact JSON arguments, a tool result's output, an image's base64 payload), divided by
    :data:`CHARS_PER_TOKEN` rounding up, plus :data:`TURN_OVERHEAD_TOKENS` per message. With ``counter``, that
    counter's count instead.

    Raises:
        InvalidArgument: ``messages`` is not a sequence of ``ChatMessage`` objects.
        ConfigurationError: ``counter`` is not a ``TokenCounter``.
    """
    check_items(messages, ChatMessage, "messages")
    check_counter(counter)
    if counter is not None:
        return counter.count_messages(messages)
    chars = sum(map(message_chars, messages))
    return math.ceil(chars / CHARS_PER_TOKEN) + TURN_OVERHEAD_TOKENS * len(messages)


def _window(model: Any) -> int:
    """The context window a ``model`` argument gives: an int, an object with ``context_window``, or a model name."""
    if isinstance(model, bool):
        raise InvalidArgument(f"model must be a context window, a model with context_window or a name, got {model!r}")
    if isinstance(model, int):
        return model
    if isinstance(model, str):
        from ravi.agents.context.models import model_info

        return model_info(model).context_window
    window = getattr(model, "context_window", None)
    if isinstance(window, int) and not isinstance(window, bool):
        return window
    raise InvalidArgument(
        f"model must be a context window (int), a model with context_window or a model name, got {model!r}"
    )


def should_compact(
    messages: Sequence[ChatMessage],
    model: Any = None,
    cfg: CompactionPolicy | None = None,
    *,
    token_budget: int | None = None,
    policy: CompactionPolicy | None = None,
    counter: TokenCounter | None = None,
) -> bool:
    """Whether the estimate reaches ``context_window * trigger_ratio`` (002).

    ``model`` is the window as an int, anything with a ``context_window`` (a ``ModelInfo``), or a model name from
    the model table; ``cfg`` defaults to :data:`DEFAULT_POLICY`. A non-positive window gives ``False``.
    (``token_budget=`` and ``policy=`` are the older names of ``model`` and ``cfg``: give each once.)

    Raises:
        InvalidArgument: ``messages`` that are not ``ChatMessage`` objects, a bad ``model``, a ``cfg`` that is not
            a ``CompactionPolicy``, or an argument given under both its names.
        ConfigurationError: ``counter`` is not a ``TokenCounter``.
    """
    if model is not None and token_budget is not None:
        raise InvalidArgument("token_budget is the older name of model: give one of them", field="token_budget")
    window = _window(token_budget if model is None else model)
    chosen = _policy(cfg, policy)
    tokens = estimate_context_tokens(messages, counter=counter)
    return window > 0 and tokens >= window * chosen.trigger_ratio


def _policy(cfg: object, policy: object) -> CompactionPolicy:
    """The policy ``cfg`` (or its older name ``policy``) gives, :data:`DEFAULT_POLICY` for none; ``InvalidArgument``
    for one that is not a ``CompactionPolicy``, or two different ones."""
    for name, value in (("cfg", cfg), ("policy", policy)):
        if value is not None and not isinstance(value, CompactionPolicy):
            raise InvalidArgument(f"must be a CompactionPolicy or None, got {type(value).__name__}", field=name)
    if cfg is not None and policy is not None and cfg != policy:
        raise InvalidArgument("policy is the older name of cfg: give one of them", field="policy")
    chosen = cfg if cfg is not None else policy
    return chosen if isinstance(chosen, CompactionPolicy) else DEFAULT_POLICY


def find_cut_point(messages: Sequence[ChatMessage], keep_recent: int) -> int:
    """The index of the first message that survives verbatim (002).

    The tail nominally starts at ``len - keep_recent``; the boundary then moves forward (shrinking the tail)
    while the first kept message is a tool result, or a system message among a call's results (more results
    follow it), so a call and its results are never split. 0 means condense nothing; ``len`` means condense
    everything (``keep_recent=0``).

    Raises:
        InvalidArgument: ``messages`` is not a sequence of ``ChatMessage`` objects, or ``keep_recent`` < 0.
    """
    check_items(messages, ChatMessage, "messages")
    check_count(keep_recent, "keep_recent")  # a bool is refused, as CompactionPolicy refuses it
    cut = max(0, len(messages) - keep_recent)
    if cut == 0:
        return 0
    n = len(messages)
    while cut < n:
        ahead = cut
        while ahead < n and messages[ahead].role == "system":
            ahead += 1
        if ahead == n or messages[ahead].role != "tool":
            break
        cut = ahead + 1
    return cut


async def summarize(
    messages: Sequence[ChatMessage],
    llm: LLMClient | None = None,
    *,
    max_tokens: int = 800,
    instructions: str = INSTRUCTIONS,
    cancel: CancelToken | None = None,
    store: SummaryStore | None = None,
    scope: Scope | None = None,
) -> ChatMessage:
    """One summary message of ``messages``; summaries among them are folded in, system messages skipped.

    With ``store`` the summary is kept there for the session ``scope`` names (a
    :class:`~ravi.kernel.scope.Scope`: agent, session and generation), so the same span of the same session is
    summarised once; two sessions never share a summary, even when their message ids are equal.

    Raises:
        InvalidArgument: nothing to summarise, ``messages`` that are not ``ChatMessage`` objects, a
            ``max_tokens`` that is not an integer > 0, ``instructions`` that are not text or are blank, a
            ``cancel`` that is not a ``CancelToken``, a ``scope`` that is not a ``Scope``, or ``store`` without
            ``scope``.
        ConfigurationError: ``llm`` is not an :class:`~ravi.kernel.llm.LLMClient`, or ``store`` not a
            ``SummaryStore``.
        CancelledByToken: ``cancel`` was cancelled before the model was called.
    """
    from ravi.agents.llm.extractive import ExtractiveSummarizer

    check_items(messages, ChatMessage, "messages")
    check_llm(llm)
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens <= 0:
        raise InvalidArgument(f"must be an integer > 0, got {max_tokens!r}", field="max_tokens")
    check_instructions(instructions)
    check_cancel(cancel)
    _check_store(store, scope)
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
        scope=scope,
    )


def _check_store(store: SummaryStore | None, scope: Scope | None) -> None:
    """``store`` a ``SummaryStore`` or ``None``, ``scope`` a ``Scope`` or ``None``, and a scope with a store."""
    check_summary_store(store)
    if scope is not None and not isinstance(scope, Scope):
        raise InvalidArgument(
            f"must be a Scope(agent_id, session_id, generation) or None, got {type(scope).__name__}",
            field="scope",
            hint="from ravi.kernel.scope import Scope",
        )
    if store is not None and not isinstance(scope, Scope):
        raise InvalidArgument(
            "store= keeps summaries per session: pass scope=Scope(agent_id, session_id, generation) with it",
            field="scope",
            hint="from ravi.kernel.scope import Scope",
        )


async def compact(
    messages: Sequence[ChatMessage],
    model: Any = None,
    cfg: CompactionPolicy | None = None,
    invoke: LLMClient | None = None,
    *,
    llm: LLMClient | None = None,
    policy: CompactionPolicy | None = None,
    cancel: CancelToken | None = None,
    store: SummaryStore | None = None,
    scope: Scope | None = None,
) -> list[ChatMessage]:
    """``(summary, *tail)`` (002): everything before :func:`find_cut_point` becomes one summary turn.

    ``model`` is accepted for the documented signature and not used; ``cfg`` defaults to :data:`DEFAULT_POLICY`;
    ``invoke`` is the model client that writes the summary (the offline extractive summariser when none). A tool
    result of the tail whose call was summarised (it was stored apart from its call) is left out.
    System messages of the summarised part are never summarised away: they come first, before the summary.
    Every output is one a provider takes, as the engine's windows are (:func:`~ravi.agents.context.units.pair_results`):
    each call followed by one result for each of its ids, a result stored apart moved up to its call, a second
    result for one call left out, a call no result answers taken out of a copy of its message. When the cut is at
    0 nothing is summarised and only that is done, so it is safe to call unconditionally. The given messages are
    never changed.
    (``llm=`` and ``policy=`` are the older names of ``invoke`` and ``cfg``.) With ``store``, the summary is kept
    for the session ``scope`` names (see :func:`summarize`).

    Raises:
        InvalidArgument: ``messages`` that are not ``ChatMessage`` objects, a ``cfg`` that is not a
            ``CompactionPolicy`` (or different ones as ``cfg`` and ``policy``), a ``cancel`` that is not a
            ``CancelToken``, a ``scope`` that is not a ``Scope``, or ``store`` without ``scope``.
        ConfigurationError: ``invoke`` is not an :class:`~ravi.kernel.llm.LLMClient`, different clients are
            given as ``invoke`` and ``llm``, or ``store`` is not a ``SummaryStore``.
    """
    check_items(messages, ChatMessage, "messages")
    if isinstance(model, LLMClient) and invoke is None and llm is None:  # the older order: compact(messages, llm)
        model, invoke = None, model
    del model
    chosen = _policy(cfg, policy)
    check_llm(invoke, "invoke")
    check_llm(llm)
    if invoke is not None and llm is not None and invoke is not llm:
        raise ConfigurationError(
            "compact was given both invoke and llm: they name the same model client",
            hint="pass it once, as invoke (llm is its older name)",
        )
    check_cancel(cancel)
    _check_store(store, scope)
    cut = find_cut_point(messages, chosen.keep_recent)
    old = messages[:cut]
    if cut <= 0 or not any(m.role != "system" for m in old):
        return pair_results(messages)
    summary = await summarize(old, invoke or llm, cancel=cancel, store=store if scope else None, scope=scope)
    # as the engine sends a window: a result stored apart from its call is moved up to it, or left out when its
    # call is summarised; a second result for one call is left out, and a call no result answers is taken out
    return pair_results([*(m for m in old if m.role == "system"), summary, *messages[cut:]])


class PolicyCompactionStrategy(KeepsSummaries, Strategy):
    """The 002 conductor as a pipeline strategy: when the window reaches ``policy.trigger_ratio`` of
    ``token_budget`` (passes it, with ``above=True``, as 001's context manager has it) and the cut is past 1,
    everything before :func:`find_cut_point` becomes one summary turn, as :func:`compact` makes it.
    ``ContextManager`` runs it before a ``TokenBudgetComposedStrategy``, so its windows get the pipeline's events and
    manifest.

    Each summary is a derived record of the session, kept in ``store`` (else in the session's history provider
    when it keeps summaries, else in this process) under the session's scope and the message it ends before, so
    any process finds it by key. The next window folds the previous summary forward with the messages after it
    (002's ``summarize`` folds summaries in), so a window costs the newest part of the session and a short model
    call; the session is read whole only to write its first summary.

    If the summary cannot be written (the model call fails) the window is returned unchanged and a
    ``summarization_failed`` event is emitted, as ``SummarizationCompaction`` does: a failed summary never breaks
    the request. A cancelled ``CancelToken`` still raises ``CancelledByToken``.

    Example:
        >>> strategy = PolicyCompactionStrategy(8_000, CompactionPolicy(keep_recent=6))
    """

    lookback = 64
    """How many messages before the cut are looked up for an earlier summary to fold forward."""

    def __init__(
        self,
        token_budget: int,
        policy: CompactionPolicy | None = None,
        llm: LLMClient | None = None,
        *,
        store: SummaryStore | None = None,
        counter: TokenCounter | None = None,
        above: bool = False,
    ) -> None:
        if not isinstance(token_budget, int) or isinstance(token_budget, bool) or token_budget < 0:
            raise InvalidArgument(f"token_budget must be an integer >= 0, got {token_budget!r}")
        chosen = _policy(None, policy)
        check_llm(llm)
        check_summary_store(store)
        check_counter(counter)
        if not isinstance(above, bool):
            raise InvalidArgument(f"must be True or False, got {above!r}", field="above")
        self.token_budget = token_budget
        self.policy = chosen
        self.llm = llm
        self.store = store
        self.own_counter = counter
        self.above = above
        self.events = EventBus()

    @property
    def traits(self) -> StrategyTraits:  # type: ignore[override]
        """Its window depends on the newest ``keep_recent`` messages and the stored summary before them, and it
        keeps summaries under the session's scope."""
        return StrategyTraits(
            suffix_determined=True, read_hint=self.token_budget, counter=self.own_counter, derives_records=True
        )

    def triggered(self, history: Sequence[ChatMessage], session: SessionContext) -> bool:
        """Whether ``history`` passes the trigger (reaches it, unless ``above``) for ``session``'s budget."""
        counter = self.own_counter or session.counter or DEFAULT_COUNTER
        budget = session.budget_for(self.token_budget)
        if budget <= 0:
            return False
        tokens = estimate_context_tokens(history, counter=counter)
        limit = budget * self.policy.trigger_ratio
        return tokens > limit if self.above else tokens >= limit

    async def compact(
        self, raw_history: Sequence[ChatMessage], session: SessionContext | None = None
    ) -> list[ChatMessage]:
        """``raw_history``, or its summary and newest turns once it passes the trigger."""
        session = SessionContext.of(session, raw_history)
        if not self.triggered(raw_history, session):
            if session.partial:
                session.need_older()  # the whole session may pass the trigger
            return list(raw_history)
        cut = find_cut_point(raw_history, self.policy.keep_recent)
        older = raw_history[:cut]
        if not any(m.role != "system" for m in older):
            if session.partial:
                session.need_older()  # the cut lies before the part read
            return list(raw_history)
        if not session.partial and cut <= 1:  # 002: only when there is something to condense
            return list(raw_history)
        try:
            summary = await self._summary(raw_history, cut, session)
        except CancelledByToken:
            raise
        except Exception as error:  # a failed summary never breaks the request: the budget trims the window
            log_failure_once(_log, f"the summariser of {type(self).__name__}", error)
            counter = self.own_counter or session.counter or DEFAULT_COUNTER
            if self.events:
                self.events.emit(
                    CompactionEvent(
                        "summarization_failed", list(raw_history), strategy=repr(self), error=error, counter=counter
                    )
                )
            return list(raw_history)
        if summary is None:
            session.need_older()
            return list(raw_history)
        if session.partial:
            session.cut_made()  # everything before the cut is in the summary
        return [*(m for m in older if m.role == "system"), summary, *raw_history[cut:]]

    async def _summary(self, history: Sequence[ChatMessage], cut: int, session: SessionContext) -> ChatMessage | None:
        """The summary of everything in the session before ``history[cut]``: stored, or the nearest stored one
        before it folded forward, or (on a whole read) written afresh. ``None`` when older messages are needed."""
        scope = session.scope
        if scope is None:  # no session to keep it for: summarise what is given
            return await summarize(history[:cut], self.llm)
        store = self.summaries(session)
        key = _span_key(session, history, cut)
        if key is None:
            return None if session.partial else await summarize(history[:cut], self.llm)
        done = _summary_message(await store.get_summary(scope, key))
        if done is not None:
            return done
        previous: list[ChatMessage] = []
        start = 0
        looked = 0
        for p in range(cut - 1, -1, -1):
            if looked >= self.lookback:
                break
            if history[p].role == "system":
                continue
            earlier = _span_key(session, history, p)
            if earlier is None:
                break
            looked += 1
            found = _summary_message(await store.get_summary(scope, earlier))
            if found is not None:
                previous, start = [found], p
                break
        if not previous and session.partial:
            return None  # the first summary covers the whole session before the cut
        fresh = [m for m in history[start:cut] if m.role != "system" and not is_summary(m)]
        summary = await write_summary(self.llm or _extractive(), previous, fresh, key=key)
        await store.put_summary(scope, key, summary.model_dump_json())
        await self.kept_current(session)
        # the first one stored wins, in every process
        return _summary_message(await store.get_summary(scope, key)) or summary

    def __repr__(self) -> str:
        return f"PolicyCompactionStrategy(token_budget={self.token_budget}, policy={self.policy!r})"


def _extractive() -> LLMClient:
    from ravi.agents.llm.extractive import ExtractiveSummarizer

    return ExtractiveSummarizer()


def _span_key(session: SessionContext, history: Sequence[ChatMessage], cut: int) -> str | None:
    """The key of the session's summary of everything before ``history[cut]`` (by its offset and id), or ``None``
    when that message cannot be placed in the session."""
    at = session.offset(history[cut].id) if cut < len(history) else None
    if at is None:
        return None
    scope = session.scope
    raw = json.dumps(["conductor", scope.key() if scope else "", at, history[cut].id], ensure_ascii=False)
    return "summary-" + hashlib.sha256(raw.encode()).hexdigest()[:24]


def _summary_message(text: str | None) -> ChatMessage | None:
    """A stored summary message, or ``None`` for none (or one that does not parse)."""
    if text is None:
        return None
    try:
        return ChatMessage.model_validate_json(text)
    except ValueError:
        return None


__all__ = [
    "CHARS_PER_TOKEN",
    "DEFAULT_POLICY",
    "SUMMARY_HEADING",
    "TURN_OVERHEAD_TOKENS",
    "CompactionPolicy",
    "PolicyCompactionStrategy",
    "compact",
    "estimate_context_tokens",
    "find_cut_point",
    "should_compact",
    "summarize",
]
