"""``ContextManager``: Ravi behind the context-module contract that agent runtimes mount.

A runtime that speaks this contract (``add_message``, ``get_messages_for_request``, ``get_messages``,
``set_messages``, ``clear``, and a module-level ``mount(coordinator, config)``) uses Ravi unchanged, with
OpenAI-style dicts in and out.
"""

from __future__ import annotations

import inspect
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from ravi.agents.context.compaction.token_budget import TokenBudgetComposedStrategy
from ravi.agents.context.events import EventBus, Listener
from ravi.agents.context.functional import CompactionPolicy, PolicyCompactionStrategy
from ravi.agents.context.history import InMemoryHistoryProvider
from ravi.agents.context.manifest import Window
from ravi.agents.context.models import SAFETY_MARGIN
from ravi.agents.context.pipeline import CompactionPipeline
from ravi.agents.storage.summaries import InMemorySummaryStore
from ravi.agents.tokens import DEFAULT_COUNTER, tool_tokens
from ravi.kernel.errors import ConfigurationError, InvalidArgument, InvalidMessage
from ravi.kernel.llm import LLMClient, TokenCounter
from ravi.kernel.messages import ChatMessage
from ravi.kernel.storage import HistoryProvider, SummaryStore


def _message(item: ChatMessage | Mapping[str, Any]) -> ChatMessage:
    if isinstance(item, ChatMessage):
        return item
    if isinstance(item, Mapping):
        return ChatMessage.from_openai(item)
    raise InvalidMessage(f"expected a ChatMessage or a dict, got {type(item).__name__}", field="message")


def provider_budget(
    provider: Any,
    *,
    safety_margin: int = SAFETY_MARGIN,
    tools: Sequence[Any] = (),
    reserve: int = 0,
    counter: TokenCounter | None = None,
) -> int:
    """The input budget a model provider allows: context window - max output tokens - the tool definitions the
    requests carry (``tools``, counted with ``counter``) - ``reserve`` - ``safety_margin``.

    The provider may expose ``get_info()``, ``info`` or ``model_info``, or carry the two numbers itself, as
    attributes or mapping keys (``context_window``, ``max_output_tokens``).
    """
    info: Any = provider
    for name in ("get_info", "info", "model_info"):
        value = getattr(provider, name, None)
        if value is not None:
            info = value() if callable(value) else value
            break

    def pick(*names: str) -> int | None:
        nested = info.get("defaults") if isinstance(info, Mapping) else getattr(info, "defaults", None)
        for source in (info, nested):
            for n in names:
                value = source.get(n) if isinstance(source, Mapping) else getattr(source, n, None)
                if isinstance(value, int):
                    return value
        return None

    window = pick("context_window", "max_context_tokens")
    if window is None:
        raise ConfigurationError(
            f"cannot tell the context window of {type(provider).__name__}",
            hint="pass token_budget=... to get_messages_for_request",
        )
    output = pick("max_output_tokens", "max_tokens") or 0
    if not isinstance(reserve, int) or reserve < 0:
        raise InvalidArgument(f"reserve must be an integer >= 0, got {reserve!r}")
    return max(0, window - output - tool_tokens(tools, counter or DEFAULT_COUNTER) - reserve - safety_margin)


class ContextManager:
    """One conversation behind the context-module contract, stored in a ``HistoryProvider``.

    ``get_messages`` returns the raw transcript, never compacted; ``get_messages_for_request`` returns what to
    send, assembled by the engine every face shares (a ``CompactionPipeline``, with its events and manifest):
    when the transcript passes ``policy.trigger_ratio`` of the budget, everything but the newest
    ``policy.keep_recent`` messages becomes one summary (``PolicyCompactionStrategy``, kept in ``summaries`` so
    the same span is summarised once), and a ``TokenBudgetComposedStrategy`` trims the result to the budget by
    whole units if it still does not fit. A budget from a ``provider`` reserves ``tools`` and ``reserve`` too.
    """

    def __init__(
        self,
        *,
        history: HistoryProvider | None = None,
        agent_id: str = "agent",
        session_id: str | None = None,
        llm: LLMClient | None = None,
        policy: CompactionPolicy | None = None,
        counter: TokenCounter | None = None,
        token_budget: int | None = None,
        summaries: SummaryStore | None = None,
        tools: Sequence[Any] = (),
        reserve: int = 0,
    ) -> None:
        self.history = history or InMemoryHistoryProvider()
        self.agent_id = agent_id
        self.session_id = session_id or uuid.uuid4().hex
        self.llm = llm
        self.policy = policy or CompactionPolicy()
        self.counter = counter or DEFAULT_COUNTER
        self.token_budget = token_budget
        self.summaries = summaries or InMemorySummaryStore()
        self.tools = list(tools)
        self.reserve = reserve
        self.events = EventBus()
        self._pipelines: dict[int, CompactionPipeline] = {}

    def subscribe(self, listener: Listener) -> Any:
        """Call ``listener(event)`` for every compaction event; returns a function that unsubscribes it."""
        return self.events.subscribe(listener)

    def pipeline(self, budget: int) -> CompactionPipeline:
        """The pipeline that assembles windows within ``budget`` (one per budget, kept)."""
        pipeline = self._pipelines.get(budget)
        if pipeline is None:
            conductor = PolicyCompactionStrategy(budget, self.policy, self.llm, store=self.summaries)
            pipeline = CompactionPipeline(
                [conductor, TokenBudgetComposedStrategy([], budget)], counter=self.counter, max_sessions=16
            )
            pipeline.subscribe(self.events.emit)
            if len(self._pipelines) >= 8:  # budgets that vary call by call: keep the last few
                self._pipelines.pop(next(iter(self._pipelines)))
            self._pipelines[budget] = pipeline
        return pipeline

    def _budget(self, token_budget: int | None, provider: Any) -> int | None:
        if token_budget is not None:
            return token_budget
        if provider is not None:
            return provider_budget(provider, tools=self.tools, reserve=self.reserve, counter=self.counter)
        return self.token_budget

    async def add_message(self, message: ChatMessage | Mapping[str, Any]) -> None:
        """Append one message (a ``ChatMessage`` or an OpenAI-style dict)."""
        await self.history.append(self.agent_id, _message(message), session_id=self.session_id)

    async def get_messages(self) -> list[dict[str, Any]]:
        """The raw transcript as dicts (with ids and metadata, so ``set_messages`` restores it exactly)."""
        stored = await self.history.get_messages(self.agent_id, session_id=self.session_id)
        return [m.to_openai() for m in stored]

    async def set_messages(self, messages: Sequence[ChatMessage | Mapping[str, Any]]) -> None:
        """Replace the transcript (to resume a saved conversation); nothing is changed if any item is invalid."""
        parsed = [_message(m) for m in messages]
        await self.history.clear(self.agent_id, session_id=self.session_id)
        await self.history.append_many(self.agent_id, parsed, session_id=self.session_id)

    async def clear(self) -> None:
        """Forget the conversation."""
        await self.history.clear(self.agent_id, session_id=self.session_id)

    async def get_messages_for_request(
        self, token_budget: int | None = None, provider: Any = None
    ) -> list[dict[str, Any]]:
        """The messages to send now, as dicts a chat endpoint accepts.

        The budget is ``token_budget``, else the one ``provider`` allows (:func:`provider_budget`), else the one
        given at construction; with none, the transcript is sent whole.
        """
        window = await self.history.get_messages(self.agent_id, session_id=self.session_id)
        budget = self._budget(token_budget, provider)
        if budget is not None:
            pipeline = self.pipeline(budget)
            window = await pipeline.compact(window, pipeline.session(self.agent_id, self.session_id))
        return [m.to_openai(extras=False) for m in window]

    async def explain_request(self, token_budget: int | None = None, provider: Any = None) -> Window:
        """What ``get_messages_for_request`` would send, with the manifest of every stored message."""
        from ravi.agents.context.manifest import ManifestBuilder

        stored = await self.history.get_messages(self.agent_id, session_id=self.session_id)
        budget = self._budget(token_budget, provider)
        if budget is None:
            return ManifestBuilder(stored).build(list(stored))
        pipeline = self.pipeline(budget)
        return await pipeline.explain(stored, pipeline.session(self.agent_id, self.session_id))


async def mount(coordinator: Any, config: Mapping[str, Any] | None = None) -> ContextManager:
    """Build a :class:`ContextManager` from ``config`` and mount it on ``coordinator`` as ``"context"``.

    ``config`` keys: ``agent_id``, ``session_id``, ``token_budget``, ``trigger_ratio``, ``keep_recent``, and
    ``history`` (a ``HistoryProvider``). The coordinator's ``mount(name, module)`` may be sync or async.
    """
    options = dict(config or {})
    policy = CompactionPolicy(
        trigger_ratio=float(options.pop("trigger_ratio", 0.8)), keep_recent=int(options.pop("keep_recent", 8))
    )
    allowed = {"agent_id", "session_id", "token_budget", "history", "llm", "counter"}
    unknown = set(options) - allowed
    if unknown:
        raise ConfigurationError(
            f"unknown context options: {', '.join(sorted(unknown))}",
            hint=f"expected some of: {', '.join(sorted(allowed | {'trigger_ratio', 'keep_recent'}))}",
        )
    manager = ContextManager(policy=policy, **options)
    attach = getattr(coordinator, "mount", None)
    if callable(attach):
        result = attach("context", manager)
        if inspect.isawaitable(result):
            await result
    return manager


__all__ = ["ContextManager", "mount", "provider_budget"]
