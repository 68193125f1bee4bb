"""``SummarizationCompaction``: replace the older part of the window with one summary message."""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Sequence
from typing import Any, cast

from ravi.agents.context.compaction._keep import TAIL_CUT
from ravi.agents.context.session import counter_of
from ravi.agents.telemetry import log_failure_once
from ravi.agents.tokens import DEFAULT_COUNTER, check_counter
from ravi.kernel.agent import CompactionEvent, EventBus, SessionContext, Slot, Strategy, StrategyTraits
from ravi.kernel.cancel import CancelledByToken, CancelToken, check_cancel
from ravi.kernel.errors import CompactionError, ConfigurationError, InvalidArgument
from ravi.kernel.llm import LLMClient, TokenCounter
from ravi.kernel.messages import SUMMARY_KEY, ChatMessage, TextBlock, ThinkingBlock, ToolCallBlock, ToolResultBlock
from ravi.kernel.scope import Scope
from ravi.kernel.storage import SummaryStore
from ravi.kernel.tokens import stored_tokens
from ravi.kernel.values import check_count, check_instance

_log = logging.getLogger(__name__)

SUMMARY_HEADING = "[condensed earlier context]"
"""002: the heading of every summary turn."""

SUMMARY_PREFIX = SUMMARY_HEADING + "\n"

INSTRUCTIONS = (
    "You condense conversations between a user and an AI agent. Write a summary of the transcript you are given "
    "that lets the agent carry on without it: the user's goals and requests, decisions made, facts learned "
    "(names, numbers, paths, identifiers), tool calls that matter and their outcomes, errors met, and what is "
    "still open. If a previous summary is given, fold it in: the result must replace it. Be concise and factual."
)


def is_summary(message: ChatMessage) -> bool:
    """Whether ``message`` is a summary written by :class:`SummarizationCompaction`."""
    return SUMMARY_KEY in message.metadata


def render_transcript(messages: Sequence[ChatMessage], *, max_result_chars: int = 2_000) -> str:
    """A plain-text rendering of ``messages`` for a summariser: one entry per message."""
    lines: list[str] = []
    for m in messages:
        for block in m.content:
            if isinstance(block, TextBlock) and block.text:
                lines.append(f"{m.role}: {block.text}")
            elif isinstance(block, ToolCallBlock):
                args = json.dumps(dict(block.arguments), ensure_ascii=False, separators=(",", ":"))
                lines.append(f"assistant called {block.name}({args})")
            elif isinstance(block, ToolResultBlock):
                label = "tool error" if block.is_error else "tool result"
                content = block.content
                if len(content) > max_result_chars:
                    content = content[:max_result_chars] + f" [{len(block.content) - max_result_chars} chars more]"
                lines.append(f"{label}: {content}")
            elif isinstance(block, ThinkingBlock):
                continue
    return "\n".join(lines)


def span_id(covered: Sequence[str]) -> str:
    """The id of the summary of the messages with ids ``covered``: the same span always gives the same id."""
    return "summary-" + hashlib.sha256("\x1f".join(covered).encode()).hexdigest()[:24]


def summary_prompt(
    previous: Sequence[ChatMessage], fresh: Sequence[ChatMessage], instructions: str
) -> list[ChatMessage]:
    """The messages sent to the model: instructions, then the previous summary and the transcript to fold in."""
    parts = []
    if previous:
        body = "\n".join(p.text.removeprefix(SUMMARY_PREFIX) for p in previous)
        parts.append(f"Previous summary:\n{body}")
    parts.append(f"Transcript:\n{render_transcript(fresh)}")
    return [ChatMessage.system(instructions), ChatMessage.user("\n\n".join(parts))]


async def write_summary(
    llm: LLMClient,
    previous: Sequence[ChatMessage],
    fresh: Sequence[ChatMessage],
    *,
    instructions: str = INSTRUCTIONS,
    max_tokens: int = 800,
    cancel: CancelToken | None = None,
    store: SummaryStore | None = None,
    scope: Scope | None = None,
    key: str | None = None,
) -> ChatMessage:
    """One summary message covering the ``previous`` summaries and the ``fresh`` messages after them.

    Its id is ``key`` when given, else :func:`span_id` of the covered ids; with ``store`` and the session's
    ``scope`` (and no ``key``) the text is kept there under that span of that session, so the same span is
    summarised once. Errors of the model call propagate; callers decide whether a failure may break the request.

    Raises:
        CancelledByToken: ``cancel`` was cancelled before the model was called.
        CompactionError: the model answered with no text for a transcript that has some (a reasoning model that
            spent ``max_tokens`` before answering, say): an empty summary would stand for those messages.
    """
    if key is None:
        key = span_id([m.id for m in previous] + [m.id for m in fresh])
    else:
        store = None
    if scope is None:
        store = None  # a summary is kept only for the session it was derived from
    text = await store.get_summary(scope, key) if store is not None and scope is not None else None
    if text is None:
        if cancel is not None:
            cancel.raise_if_cancelled()  # a caller that has cancelled pays for no call, whatever the client does
        text = await llm.complete(summary_prompt(previous, fresh, instructions), max_tokens=max_tokens, cancel=cancel)
        if not text.strip() and _has_text(previous, fresh):
            raise CompactionError(
                f"the model wrote an empty summary of {len(fresh)} messages; they were not replaced",
                hint="check the model's answer: a reasoning model may spend max_tokens before it writes any text",
            )
        if store is not None and scope is not None:
            await store.put_summary(scope, key, text)
    first = next((p.metadata[SUMMARY_KEY].get("first") for p in previous), None) or (fresh[0].id if fresh else None)
    covers: dict[str, Any] = {
        "first": first,
        "last": fresh[-1].id if fresh else next((p.metadata[SUMMARY_KEY].get("last") for p in previous), None),
        "count": len(fresh) + sum(int(p.metadata[SUMMARY_KEY].get("count", 0)) for p in previous),
        "replaces": [p.id for p in previous],
    }
    last = fresh[-1] if fresh else previous[-1]
    return ChatMessage(
        id=key,
        role="user",
        content=(TextBlock(text=SUMMARY_PREFIX + text.strip()),),
        metadata={SUMMARY_KEY: covers},
        created_at=last.created_at,
    )


def _has_text(previous: Sequence[ChatMessage], fresh: Sequence[ChatMessage]) -> bool:
    """Whether the summarised span says anything: a previous summary's text, or a line of the transcript."""
    return any(p.text.removeprefix(SUMMARY_PREFIX).strip() for p in previous) or bool(render_transcript(fresh).strip())


def check_llm(llm: object, what: str = "llm") -> None:
    """``ConfigurationError`` unless ``llm`` is ``None`` or an :class:`~ravi.kernel.llm.LLMClient` (an object with
    ``async complete(messages, *, max_tokens=None, cancel=None) -> str``); the message names the argument
    ``what``."""
    if llm is not None and not isinstance(llm, LLMClient):
        raise ConfigurationError(
            f"{what} must be an LLMClient with an async complete(messages) method, got {type(llm).__name__}",
            hint="use OpenAICompatibleClient(model), CallableLLMClient(function) for your own model call, "
            "or leave it out for the extractive summariser",
        )


def check_instructions(instructions: object) -> None:
    """``InvalidArgument`` unless ``instructions`` (what the summariser tells the model) is text that says
    something: not ``None``, not another type, not empty or blank."""
    if not isinstance(instructions, str):
        raise InvalidArgument(f"must be text, got {type(instructions).__name__}", field="instructions")
    if not instructions.strip():
        raise InvalidArgument("must tell the model what to write, got blank text", field="instructions")


def check_summary_store(store: object) -> None:
    """``ConfigurationError`` unless ``store`` is ``None`` or a :class:`~ravi.kernel.storage.SummaryStore` (an
    instance: a class has its instances' methods, so it passes the protocol's check)."""
    check_instance(
        store,
        SummaryStore,
        "store must be a SummaryStore or None",
        "InMemorySummaryStore(), or a history store Ravi ships (each keeps summaries)",
    )


class KeepsSummaries:
    """Where a summarising strategy keeps its summaries: ``store`` when one was given, else the session's history
    provider when it keeps summaries (they then go with the transcript when it is cleared), else a store in this
    process's memory, made at the first need and kept with the strategy."""

    store: SummaryStore | None = None
    _own_store: SummaryStore | None = None

    def summaries(self, session: SessionContext) -> SummaryStore:
        """The store of ``session``'s summaries."""
        if self.store is not None:
            return self.store
        if isinstance(session.history, SummaryStore):
            return session.history
        if self._own_store is None:
            from ravi.agents.storage.summaries import InMemorySummaryStore

            self._own_store = InMemorySummaryStore()
        return self._own_store

    async def kept_current(self, session: SessionContext) -> None:
        """After writing a summary of ``session``: when the session was cleared since the engine read it, the
        clear has erased its summaries already, so the one just written, of turns that are gone, is erased with
        the session's others in that store (a history provider that keeps summaries refuses it by itself)."""
        store = self.summaries(session)
        if store is not cast(object, session.history) and not await session.still_current():
            await store.clear_summaries(session.agent_id, session_id=session.session_id)

    async def clear_records(self, agent_id: str, session_id: str) -> int:
        """Delete the session's summaries from the store given, or the one kept in this process (those the history
        provider keeps go with its ``clear``)."""
        removed = 0
        for store in dict.fromkeys(s for s in (self.store, self._own_store) if s is not None):
            removed += await store.clear_summaries(agent_id, session_id=session_id)
        return removed


class SummarizationCompaction(KeepsSummaries, Strategy):
    """Summarise the older part of the window into one summary message, keeping the newest
    ``recent_token_budget`` tokens verbatim.

    Walking from the newest end, whole units are kept while they fit ``recent_token_budget``; the older part
    (system messages aside, which stay before the summary) is summarised by ``llm`` once it holds at least
    ``min_old_tokens`` stored tokens. The summary is a ``user`` message whose metadata ``"ravi.summary"`` says
    what it covers (``first`` and ``last`` message ids, ``count``, and the summary it ``replaces``).

    The summary moves forward in steps (a rolling summary): its end sits on a checkpoint, the first message whose
    offset in the session (the stored tokens before it) reaches a multiple of ``update_tokens`` (a quarter of
    ``recent_token_budget`` unless given), moved back to a whole unit. Between checkpoints the window keeps the
    same summary, so its prefix stays byte-identical and the model is not called; at the next checkpoint the
    previous summary and the messages after it are folded into a new one (a summary is updated, never stacked).
    The window therefore holds up to ``update_tokens`` (and a unit) more verbatim than ``recent_token_budget``.

    Each summary is a derived record kept in ``store`` under a key made of the session and its checkpoint, so
    any process finds it by key instead of reading and summarising the session again: with a history provider
    that reads windows (``WindowReader``), a window costs the newest part of the session and one summary
    fetched by key, and the session is read whole only to write its first summary (or when no earlier summary
    is found within 8 checkpoints).

    If the model call fails the input is returned unchanged and a ``summarization_failed`` event is emitted: a
    failed summary never breaks the request. A cancelled ``cancel_token`` raises ``CancelledByToken``.
    """

    lookback = 8
    """How many earlier checkpoints are looked up for a summary to fold forward before summarising afresh."""

    def __init__(
        self,
        llm: LLMClient | None = None,
        recent_token_budget: int = 4_000,
        min_old_tokens: int = 1_000,
        *,
        max_summary_tokens: int = 800,
        counter: TokenCounter | None = None,
        cancel_token: CancelToken | None = None,
        instructions: str = INSTRUCTIONS,
        store: SummaryStore | None = None,
        update_tokens: int | None = None,
    ) -> None:
        check_count(recent_token_budget, "recent_token_budget")
        check_count(min_old_tokens, "min_old_tokens")
        check_count(max_summary_tokens, "max_summary_tokens")
        if max_summary_tokens == 0:
            raise InvalidArgument("max_summary_tokens must be > 0")
        if update_tokens is not None and (
            not isinstance(update_tokens, int) or isinstance(update_tokens, bool) or update_tokens < 1
        ):
            raise InvalidArgument(f"update_tokens must be an integer >= 1, got {update_tokens!r}")
        check_llm(llm)
        check_counter(counter)
        check_cancel(cancel_token, "cancel_token")
        check_instructions(instructions)
        check_summary_store(store)
        if llm is None:
            from ravi.agents.llm.extractive import ExtractiveSummarizer

            llm = ExtractiveSummarizer()
        self.llm = llm
        self.recent_token_budget = recent_token_budget
        self.min_old_tokens = min_old_tokens
        self.max_summary_tokens = max_summary_tokens
        self.update_tokens = update_tokens if update_tokens is not None else max(1, recent_token_budget // 4)
        self.own_counter = counter
        self.cancel_token = cancel_token
        self.instructions = instructions
        self.events = EventBus()
        self.store = store

    @property
    def traits(self) -> StrategyTraits:  # type: ignore[override]
        """Its window depends only on the newest part of the session and the stored summaries (on a partial read
        it asks for older messages whenever it needs them, ``SessionContext.need_older``), and it keeps summaries
        under the session's scope."""
        return StrategyTraits(suffix_determined=True, derives_records=True, counter=self.own_counter)

    @property
    def counter(self) -> TokenCounter:
        """The counter named at construction (the default one when none was)."""
        return self.own_counter or DEFAULT_COUNTER

    async def compact(
        self, raw_history: Sequence[ChatMessage], session: SessionContext | None = None
    ) -> list[ChatMessage]:
        """The window with its older part replaced by one summary (or ``raw_history`` itself if too little is old)."""
        counter = counter_of(self.own_counter, session, DEFAULT_COUNTER)
        own = SessionContext.of(session, raw_history)
        partial = own.partial
        if not raw_history:
            return []
        if session is None or (not partial and own.offset(raw_history[-1].id) is None):
            own.read_from(raw_history)  # called on its own: ``raw_history`` is the session
        cut = own.state.get(self, TAIL_CUT).cut(raw_history, counter.count_message, self.recent_token_budget)
        if cut == 0:
            if partial:
                own.need_older()  # all read is kept verbatim: what lies before the read may be old enough
            return list(raw_history)
        offset = own.offset
        end = _end_offset(raw_history, cut, offset)
        step = self.update_tokens
        b = None if end is None else _checkpoint(raw_history, cut, end // step * step, offset, partial)
        if b is None:
            own.need_older()
            return list(raw_history)
        if b == 0:
            if partial:
                own.need_older()  # the checkpoint is the read's first message: what lies before it is old
            return list(raw_history)
        at = end if b == len(raw_history) else offset(raw_history[b].id)
        if end is None or at is None:  # messages this strategy cannot place (made by an earlier strategy)
            if partial:
                own.need_older()
                return list(raw_history)
            return await self._whole(raw_history, cut, counter, own)  # summarise all that is older, as one span
        systems = [m for m in raw_history[:b] if m.role == "system"]
        old_tokens = at - sum(map(stored_tokens, systems))
        if old_tokens <= 0 or old_tokens < self.min_old_tokens:
            return list(raw_history)
        key = _chain_key(own, at, raw_history[b].id if b < len(raw_history) else "")
        memo = own.state.get(self, _KEPT)
        summary = memo.message if memo.key == key else await self._stored(own, key)
        if summary is None:
            summary = await self._write(raw_history, b, step, offset, partial, own, counter, key)
            if summary is None:
                return list(raw_history)
        memo.key, memo.message = key, summary
        if partial:
            own.cut_made()  # the window starts at the checkpoint: what is older is in the summary
        return [*systems, summary, *raw_history[b:]]

    async def _write(
        self,
        history: Sequence[ChatMessage],
        b: int,
        step: int,
        offset: Callable[[str], int | None],
        partial: bool,
        own: SessionContext,
        counter: TokenCounter,
        key: str,
    ) -> ChatMessage | None:
        """The summary ending at checkpoint ``b``: the nearest earlier summary found by key, folded forward with
        the messages after it, else everything before ``b`` summarised afresh. ``None`` when older messages are
        needed (asked of the session) or the model failed (an event says so)."""
        previous: list[ChatMessage] = []
        start = 0
        at, looked = b, 0
        while looked < self.lookback:
            last = next((i for i in range(at - 1, -1, -1) if history[i].role != "system"), None)
            mark = None if last is None else offset(history[last].id)
            if last is None or mark is None or mark < step:
                break  # the session's start (or an unplaced message) is reached: summarise from there
            earlier = _checkpoint(history, at, mark // step * step, offset, partial)
            if earlier is None:
                own.need_older()
                return None
            placed = offset(history[earlier].id)
            if earlier == 0 or placed is None:
                break
            at = earlier
            found = await self._stored(own, _chain_key(own, placed, history[at].id))
            looked += 1
            if found is not None:
                previous, start = [found], at
                break
        if not previous:
            if partial:
                own.need_older()  # the first summary covers the whole session before the checkpoint
                return None
            previous = [m for m in history[:b] if is_summary(m)]
        fresh = [m for m in history[start:b] if m.role != "system" and not is_summary(m)]
        summary = await self._summarise(previous, fresh, history, counter, key=key)
        if summary is None:
            return None
        scope = own.scope
        if scope is None:
            return summary  # no session to keep it for
        await self.summaries(own).put_summary(scope, key, summary.model_dump_json())
        await self.kept_current(own)
        return await self._stored(own, key) or summary  # the first one stored wins, in every process

    async def _summarise(
        self,
        previous: Sequence[ChatMessage],
        fresh: Sequence[ChatMessage],
        history: Sequence[ChatMessage],
        counter: TokenCounter,
        *,
        key: str | None = None,
        store: SummaryStore | None = None,
        scope: Scope | None = None,
    ) -> ChatMessage | None:
        """:func:`write_summary`; ``None`` (and a ``summarization_failed`` event) when the model call fails."""
        token = self.cancel_token
        if token is not None:
            token.raise_if_cancelled()
        try:
            return await write_summary(
                self.llm,
                previous,
                fresh,
                instructions=self.instructions,
                max_tokens=self.max_summary_tokens,
                cancel=token,
                store=store,
                scope=scope,
                key=key,
            )
        except CancelledByToken:
            raise
        except Exception as error:
            log_failure_once(_log, f"the summariser of {type(self).__name__}", error)  # else only an event says so
            if self.events:
                self.events.emit(
                    CompactionEvent(
                        "summarization_failed", list(history), strategy=repr(self), error=error, counter=counter
                    )
                )
            return None

    async def _stored(self, session: SessionContext, key: str) -> ChatMessage | None:
        scope = session.scope
        if scope is None:
            return None
        text = await self.summaries(session).get_summary(scope, key)
        if text is None:
            return None
        try:
            return ChatMessage.model_validate_json(text)
        except ValueError:
            return None

    async def _whole(
        self, history: Sequence[ChatMessage], cut: int, counter: TokenCounter, session: SessionContext
    ) -> list[ChatMessage]:
        """The older part summarised whole, for inputs this strategy cannot place in their session."""
        old = history[:cut]
        previous = [m for m in old if is_summary(m)]
        fresh = [m for m in old if m.role != "system" and not is_summary(m)]
        if not fresh or counter.count_messages(fresh) < self.min_old_tokens:
            return list(history)
        summary = await self._summarise(
            previous, fresh, history, counter, store=self.summaries(session), scope=session.scope
        )
        if summary is None:
            return list(history)
        await self.kept_current(session)
        head = [m for m in old if m.role == "system"]
        return [*head, summary, *history[cut:]]

    def __repr__(self) -> str:
        return (
            f"SummarizationCompaction(recent_token_budget={self.recent_token_budget}, "
            f"min_old_tokens={self.min_old_tokens})"
        )


class _Kept:
    """The last summary a session's window used, by key (saves the store a round trip per window)."""

    key: str | None = None
    message: ChatMessage | None = None


_KEPT: Slot[_Kept] = Slot("summarization.kept", _Kept)


def _chain_key(session: SessionContext, at: int, message_id: str) -> str:
    """The key (and message id) of the session's summary of everything before the checkpoint at offset ``at``, the
    message ``message_id`` (in the session's generation: each session and generation gets ids of its own)."""
    scope = session.scope
    raw = json.dumps(["rolling", scope.key() if scope else "", at, message_id], ensure_ascii=False)
    return "summary-" + hashlib.sha256(raw.encode()).hexdigest()[:24]


def _end_offset(history: Sequence[ChatMessage], cut: int, offset: Callable[[str], int | None]) -> int | None:
    """The offset of the first message kept verbatim (of the end of the session when none is)."""
    if cut < len(history):
        return offset(history[cut].id)
    last = history[-1]
    at = offset(last.id)
    return None if at is None else at + stored_tokens(last)


def _checkpoint(
    history: Sequence[ChatMessage], end: int, mark: int, offset: Callable[[str], int | None], partial: bool
) -> int | None:
    """Where the part of ``history[:end]`` from offset ``mark`` on begins: the first non-system message at or past
    ``mark``, moved back past tool results to a whole unit. ``None`` when that is not decided by the part read
    (the walk reached the start of a partial read)."""
    j = end
    while j > 0:
        previous = history[j - 1]
        if previous.role != "system":
            at = offset(previous.id)
            if at is None or at < mark:
                break
        j -= 1
    if partial and (j == 0 or offset(history[j - 1].id) is None):
        return None
    k = j
    while k < end and history[k].role == "system":
        k += 1
    if k < len(history) and history[k].role == "tool":  # a tool result stays with its call
        j = k
        while j > 0 and history[j].role in ("tool", "system"):
            j -= 1
        return j
    return k


__all__ = [
    "INSTRUCTIONS",
    "KeepsSummaries",
    "SUMMARY_HEADING",
    "SUMMARY_KEY",
    "SummarizationCompaction",
    "check_instructions",
    "check_llm",
    "check_summary_store",
    "is_summary",
    "render_transcript",
    "span_id",
    "summary_prompt",
    "write_summary",
]
