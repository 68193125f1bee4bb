"""``ContextManager``: Ravi behind the context-module contract that agent runtimes mount.

A runtime that speaks this contract (``add_message``, ``get_messages_for_request``, ``get_messages``,
``set_messages``, ``clear``, and a module-level ``mount(coordinator, config)``) uses Ravi unchanged, with
OpenAI-style dicts in and out. amplifier-core discovers it through the ``amplifier.modules`` entry point
``context-ravi``.
"""

from __future__ import annotations

import inspect
import logging
import uuid
from collections.abc import Mapping, Sequence
from contextvars import ContextVar
from typing import Any

from ravi.agents.context.chat_dicts import from_chat_dict, to_chat_dict
from ravi.agents.context.compaction.token_budget import TokenBudgetComposedStrategy
from ravi.agents.context.functional import CompactionPolicy, PolicyCompactionStrategy
from ravi.agents.context.history import InMemoryHistoryProvider
from ravi.agents.context.manifest import Window
from ravi.agents.context.pipeline import CompactionPipeline, WindowRequest, clear_session
from ravi.agents.tokens import DEFAULT_COUNTER, tool_tokens
from ravi.kernel.agent import CompactionEvent, EventBus, Listener
from ravi.kernel.errors import ConfigurationError, InvalidArgument, InvalidMessage
from ravi.kernel.llm import LLMClient, TokenCounter
from ravi.kernel.messages import ChatMessage
from ravi.kernel.storage import HistoryProvider, SummaryStore, replace_session
from ravi.kernel.values import check_scope

logger = logging.getLogger(__name__)

MODULE_NAME = "context-ravi"
"""The name amplifier-core knows this module by (its ``amplifier.modules`` entry point)."""

PRE_COMPACT = "context:pre_compact"
POST_COMPACT = "context:post_compact"
EVENTS = (PRE_COMPACT, POST_COMPACT)
"""The events a ``ContextManager`` emits through its hooks when a request needs compacting."""

PROVIDER_SAFETY_MARGIN = 1_000
"""Tokens a provider's budget keeps free below its hard limit (``context_window - max_output_tokens - 1000``)."""


def _message(item: ChatMessage | Mapping[str, Any]) -> ChatMessage:
    if isinstance(item, ChatMessage):
        return item
    if isinstance(item, Mapping):
        return from_chat_dict(item)
    raise InvalidMessage(f"expected a ChatMessage or a dict, got {type(item).__name__}", field="message")


def provider_budget(
    provider: Any,
    *,
    safety_margin: int = PROVIDER_SAFETY_MARGIN,
    tools: Sequence[Any] = (),
    reserve: int = 0,
    counter: TokenCounter | None = None,
) -> int:
    """The input budget a model provider allows: context window - max output tokens - the tool definitions the
    requests carry (``tools``, counted with ``counter``) - ``reserve`` - ``safety_margin`` (1,000).

    The provider may expose ``get_info()`` (amplifier's providers do, with the numbers in ``defaults``), ``info``
    or ``model_info``, or carry the two numbers itself, as attributes or mapping keys (``context_window``,
    ``max_output_tokens``).

    Raises:
        ConfigurationError: ``get_info()`` failed, or the provider does not give both numbers.
    """
    info: Any = provider
    for name in ("get_info", "info", "model_info"):
        value = getattr(provider, name, None)
        if value is not None:
            try:
                info = value() if callable(value) else value
            except Exception as error:  # a provider's own failure: report it as unusable, keep its message
                raise ConfigurationError(
                    f"{type(provider).__name__}.{name}() failed: {error!r}",
                    hint="pass token_budget=... to get_messages_for_request",
                ) from error
            break

    def pick(*names: str) -> int | None:
        nested = info.get("defaults") if isinstance(info, Mapping) else getattr(info, "defaults", None)
        for source in (info, nested):
            for n in names:
                value = source.get(n) if isinstance(source, Mapping) else getattr(source, n, None)
                if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                    return value
        return None

    window, output = pick("context_window", "max_context_tokens"), pick("max_output_tokens")
    if window is None or output is None:
        missing = " and ".join(n for n, v in (("context_window", window), ("max_output_tokens", output)) if v is None)
        raise ConfigurationError(
            f"cannot tell the {missing} of {type(provider).__name__}",
            hint="pass token_budget=... to get_messages_for_request",
        )
    if not isinstance(reserve, int) or isinstance(reserve, bool) or reserve < 0:
        raise InvalidArgument(f"reserve must be an integer >= 0, got {reserve!r}")
    return max(0, window - output - tool_tokens(tools, counter or DEFAULT_COUNTER) - reserve - safety_margin)


class ContextManager:
    """One conversation behind the context-module contract, stored in a ``HistoryProvider``.

    ``get_messages`` returns the raw transcript, never compacted; ``get_messages_for_request`` returns what to
    send, assembled by the engine every face shares (a ``CompactionPipeline``, with its events and manifest).
    The budget is the request's ``token_budget``, else the provider's (:func:`provider_budget`), else
    ``max_tokens``. When the transcript passes (001: strictly above) ``compaction_threshold`` of the budget,
    everything but the newest ``keep_recent`` messages becomes one summary (``PolicyCompactionStrategy``, kept in
    ``summaries``, else beside the history, so the same span is summarised once), a
    ``TokenBudgetComposedStrategy`` trims the result to the budget by whole units if it still does not fit, tool
    results whose call is not in the window are dropped (001), and ``context:pre_compact`` (the counts of the
    messages compaction read) and ``context:post_compact`` (the window's counts) are emitted through ``hooks``, in
    that order, once the window is assembled. A summary the model fails to write never fails the request: the
    window is trimmed to the budget without it and a ``summarization_failed`` event goes to :meth:`subscribe`'s
    listeners. The engine reads only the newest part of the session when the store can read windows. Compaction
    is a view: the stored transcript never changes.

    Messages are ``ChatMessage`` objects or chat dicts (the ``developer`` role and amplifier's content blocks
    included); a dict is given back exactly as it was added (see :mod:`ravi.agents.context.chat_dicts`).
    """

    def __init__(
        self,
        *,
        history: HistoryProvider | None = None,
        agent_id: str = "agent",
        session_id: str | None = None,
        max_tokens: int = 100_000,
        compaction_threshold: float = 0.8,
        keep_recent: int = 8,
        llm: LLMClient | None = None,
        counter: TokenCounter | None = None,
        summaries: SummaryStore | None = None,
        tools: Sequence[Any] = (),
        reserve: int = 0,
        hooks: Any = None,
    ) -> None:
        if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens <= 0:
            raise InvalidArgument(f"max_tokens must be a positive integer, got {max_tokens!r}", field="max_tokens")
        if (
            isinstance(compaction_threshold, bool)
            or not isinstance(compaction_threshold, int | float)
            or not 0 < compaction_threshold <= 1
        ):
            raise InvalidArgument(
                f"compaction_threshold must be in (0, 1], got {compaction_threshold!r}", field="compaction_threshold"
            )
        if history is not None and not isinstance(history, HistoryProvider):
            raise ConfigurationError(
                f"history must be a HistoryProvider, got {type(history).__name__}",
                hint="to pick a backend by name, set [history] backend = ... in ravi.toml (or RAVI_HISTORY__BACKEND)"
                " and leave history out",
            )
        check_scope(agent_id=agent_id)
        if session_id is not None:
            check_scope(session_id=session_id)  # an empty id is refused, not replaced by one no resume finds
        if isinstance(tools, str | bytes | Mapping) or not isinstance(tools, Sequence):
            raise InvalidArgument(
                f"tools must be a list of tool definitions, got {type(tools).__name__}", field="tools"
            )
        if not isinstance(reserve, int) or isinstance(reserve, bool) or reserve < 0:
            raise InvalidArgument(f"reserve must be an integer >= 0, got {reserve!r}", field="reserve")
        self.history = history or InMemoryHistoryProvider()
        self.agent_id = agent_id
        self.session_id = uuid.uuid4().hex if session_id is None else session_id
        self.max_tokens = max_tokens
        self.policy = CompactionPolicy(trigger_ratio=float(compaction_threshold), keep_recent=keep_recent)
        self.llm = llm
        self.counter = counter or DEFAULT_COUNTER
        self.summaries = summaries
        self.tools = list(tools)
        self.reserve = reserve
        self.hooks = hooks
        self.events = EventBus()
        self.resumed = False
        self._warned: set[str] = set()
        conductor = PolicyCompactionStrategy(max_tokens, self.policy, llm, store=summaries, above=True)
        self.pipeline = CompactionPipeline(
            [conductor, TokenBudgetComposedStrategy([], max_tokens)], counter=self.counter, max_sessions=4
        )
        """The engine that assembles this conversation's windows (one, whatever each request's budget)."""
        self.pipeline.subscribe(self.events.emit)
        self.pipeline.subscribe(_collect)

    @property
    def compaction_threshold(self) -> float:
        """The share of the budget past which a request is compacted."""
        return self.policy.trigger_ratio

    def subscribe(self, listener: Listener) -> Any:
        """Call ``listener(event)`` for every compaction event; returns a function that unsubscribes it."""
        return self.events.subscribe(listener)

    def _budget(self, token_budget: int | None, provider: Any) -> int:
        if token_budget is not None:
            if not isinstance(token_budget, int) or isinstance(token_budget, bool) or token_budget < 0:
                raise InvalidArgument(f"token_budget must be an integer >= 0, got {token_budget!r}")
            return token_budget
        if provider is not None:
            try:
                return provider_budget(provider, tools=self.tools, reserve=self.reserve, counter=self.counter)
            except ConfigurationError as error:
                kind = type(provider).__name__
                if kind not in self._warned:  # once per provider type: an orchestrator asks on every turn
                    self._warned.add(kind)
                    logger.warning("%s; using max_tokens=%d", error.message, self.max_tokens)
        return self.max_tokens

    async def _emit(self, event: str, data: dict[str, Any]) -> None:
        emit = getattr(self.hooks, "emit", None)
        if emit is None:
            return
        result = emit(event, data)
        if inspect.isawaitable(result):
            await result

    async def add_message(self, message: ChatMessage | Mapping[str, Any]) -> None:
        """Append one message (a ``ChatMessage`` or a chat dict).

        Raises:
            InvalidMessage: the message has no or an unknown role, or a malformed field; nothing is stored.
        """
        await self.history.append(self.agent_id, _message(message), session_id=self.session_id)

    async def get_messages(self) -> list[dict[str, Any]]:
        """The raw transcript, never compacted: each dict as it was added (a ``ChatMessage`` comes back with its
        id and metadata, so ``set_messages`` restores it exactly)."""
        stored = await self.history.get_messages(self.agent_id, session_id=self.session_id)
        return [to_chat_dict(m) for m in stored]

    async def set_messages(self, messages: Sequence[ChatMessage | Mapping[str, Any]]) -> None:
        """Replace the transcript (to resume a saved conversation); nothing is changed if any item is invalid.
        Atomic on every store Ravi ships (``SessionReplacer``): a concurrent reader sees the old transcript or the
        new one, and a failure leaves the old one.

        When :func:`mount` found this session already stored (a resumed session), the first call is ignored:
        the store's transcript is complete, where a runtime's saved copy may lack its system and developer
        messages.
        """
        if isinstance(messages, str | bytes | Mapping) or not isinstance(messages, Sequence):
            raise InvalidArgument(
                f"set_messages takes a list of messages, got {type(messages).__name__}", field="messages"
            )
        if self.resumed:
            self.resumed = False
            logger.info("session %s resumed from the store; set_messages ignored once", self.session_id)
            return
        parsed = [_message(m) for m in messages]
        await replace_session(self.history, self.agent_id, parsed, session_id=self.session_id)
        await self.pipeline.clear_records(self.agent_id, self.session_id)  # derived from the old transcript

    async def clear(self) -> None:
        """Forget the conversation, and what its compaction derived from it (summaries in the ``summaries``
        store), every store asked even after one failed (as :meth:`AgentContext.clear
        <ravi.agents.context.AgentContext.clear>`)."""
        self.resumed = False
        await clear_session(self.history, self.pipeline, self.agent_id, self.session_id)

    async def get_messages_for_request(
        self, token_budget: int | None = None, provider: Any = None
    ) -> list[dict[str, Any]]:
        """The messages to send now, within the budget, in conversation order, tool calls with their results: a
        tool result whose call is not among them (nor stored before it) is never sent, nor a second result for one
        call, nor a call some of whose results were never stored (or not yet: the tool still runs), which is
        taken out of its message (decision 113).

        The budget is ``token_budget``, else the one ``provider`` allows (:func:`provider_budget`, falling back
        to ``max_tokens`` when the provider cannot say), else ``max_tokens``.
        """
        window = await self._window(token_budget, provider, explain=False)
        return [to_chat_dict(m, request=True) for m in window.messages]

    async def explain_request(self, token_budget: int | None = None, provider: Any = None) -> Window:
        """What ``get_messages_for_request`` would send, with the manifest of every stored message."""
        return await self._window(token_budget, provider, explain=True)

    async def _window(self, token_budget: int | None, provider: Any, *, explain: bool) -> Window:
        budget = self._budget(token_budget, provider)
        request = WindowRequest(self.agent_id, self.session_id, history=self.history, budget=budget, explain=explain)
        seen: list[CompactionEvent] = []
        token = _SEEN.set(seen)
        try:
            window = await self.pipeline.window(request)
        finally:
            _SEEN.reset(token)
        # 001's "a result whose call is not sent is never sent" is the engine's (decision 111)
        if not any(e.kind == "strategy_applied" and e.changed for e in seen):
            return window
        read = next((e for e in seen if e.kind == "pre_compact"), None)
        if read is not None:
            await self._emit(PRE_COMPACT, {"message_count": read.message_count, "token_count": read.tokens})
        sent = window.messages
        await self._emit(POST_COMPACT, {"message_count": len(sent), "token_count": self.counter.count_messages(sent)})
        return window


_OPTIONS = {
    "max_tokens": "the budget when neither the request nor the provider gives one (100000)",
    "compaction_threshold": "compact past this share of the budget (0.8)",
    "keep_recent": "messages kept verbatim when compacting (8)",
    "agent_id": "the agent the transcript is stored under ('agent')",
    "session_id": "the session it is stored under (the coordinator's session id)",
    "history": "a HistoryProvider; by default the [history] store of ravi.toml / RAVI_HISTORY__*",
    "llm": "an LLMClient that writes summaries (else an extractive summary)",
    "counter": "a TokenCounter (else the heuristic)",
}


async def mount(coordinator: Any, config: Mapping[str, Any] | None = None) -> ContextManager:
    """Build a :class:`ContextManager` from ``config`` and mount it on ``coordinator`` as ``"context"``.

    ``config`` is a module's mount config: ``max_tokens`` (default 100,000), ``compaction_threshold`` (0.8),
    ``keep_recent`` (8), ``agent_id``, ``session_id`` (default: the coordinator's), and ``history``, ``llm``,
    ``counter`` as objects. Without ``history`` the transcript goes to the store Ravi's settings name
    (``ravi.toml`` or ``RAVI_HISTORY__BACKEND``; in memory by default), so a Postgres or Redis store is a
    configuration change. A session the store already holds is resumed (see ``set_messages``). A store built
    from the settings is closed by the coordinator's cleanup (``register_cleanup``: a Postgres or Redis pool is
    released when the session ends); a ``history`` given in ``config`` is the caller's to close.

    On an amplifier coordinator the manager emits ``context:pre_compact`` / ``context:post_compact`` through
    ``coordinator.hooks`` and registers them on the ``observability.events`` channel.

    Raises:
        ConfigurationError: an unknown key, naming the ones accepted.
        InvalidArgument: a value out of range.
    """
    if config is not None and not isinstance(config, Mapping):
        raise ConfigurationError(
            f"the mount config must be a mapping of options, got {type(config).__name__}",
            hint="config: {max_tokens: 100000, compaction_threshold: 0.8}",
        )
    options = dict(config or {})
    unknown = set(options) - set(_OPTIONS)
    if unknown:
        accepted = "; ".join(f"{k}: {v}" for k, v in _OPTIONS.items())
        raise ConfigurationError(f"unknown context options: {', '.join(sorted(unknown))}", hint=f"accepted: {accepted}")
    built = "history" not in options
    if built:
        from ravi.agents.settings import build_store

        options["history"] = build_store("history")
    options.setdefault("session_id", getattr(coordinator, "session_id", None) or None)  # none: one of its own
    manager = ContextManager(hooks=getattr(coordinator, "hooks", None), **options)
    if await manager.history.count_messages(manager.agent_id, session_id=manager.session_id):
        manager.resumed = True
    close = getattr(manager.history, "aclose", None)
    cleanup = getattr(coordinator, "register_cleanup", None)
    if built and callable(close) and callable(cleanup):  # the store mount opened closes with the coordinator
        cleanup(close)
    attach = getattr(coordinator, "mount", None)
    if callable(attach):
        result = attach("context", manager)
        if inspect.isawaitable(result):
            await result
    register = getattr(coordinator, "register_contributor", None)
    if callable(register):
        register("observability.events", MODULE_NAME, lambda: list(EVENTS))
    return manager


_SEEN: ContextVar[list[CompactionEvent] | None] = ContextVar("ravi_context_manager_events", default=None)
"""The engine's events of the window being assembled in this task (a manager's hooks are told of compaction once
the window is made)."""


def _collect(event: CompactionEvent) -> None:
    seen = _SEEN.get()
    if seen is not None:
        seen.append(event)


__all__ = ["EVENTS", "MODULE_NAME", "PROVIDER_SAFETY_MARGIN", "ContextManager", "mount", "provider_budget"]
