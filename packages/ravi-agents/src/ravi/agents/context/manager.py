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

from ravi.agents.context.compaction._keep import keep_newest, system_messages
from ravi.agents.context.compaction.token_budget import fits
from ravi.agents.context.functional import CompactionPolicy, compact, find_cut_point, should_compact
from ravi.agents.context.history import InMemoryHistoryProvider
from ravi.agents.context.models import SAFETY_MARGIN
from ravi.agents.storage.summaries import InMemorySummaryStore
from ravi.agents.tokens import DEFAULT_COUNTER
from ravi.kernel.errors import ConfigurationError, InvalidMessage
from ravi.kernel.llm import LLMClient, TokenCounter
from ravi.kernel.messages import ChatMessage
from ravi.kernel.storage import HistoryProvider


def _message(item: ChatMessage | Mapping[str, Any]) -> ChatMessage:
    if isinstance(item, ChatMessage):
        return item
    if isinstance(item, Mapping):
        return ChatMessage.from_openai(item)
    raise InvalidMessage(f"expected a ChatMessage or a dict, got {type(item).__name__}", field="message")


def provider_budget(provider: Any, *, safety_margin: int = SAFETY_MARGIN) -> int:
    """The input budget a model provider allows: context window - max output tokens - ``safety_margin``.

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
    return max(0, window - output - safety_margin)


class ContextManager:
    """One conversation behind the context-module contract, stored in a ``HistoryProvider``.

    ``get_messages`` returns the raw transcript, never compacted; ``get_messages_for_request`` returns what to
    send: when the transcript passes ``policy.trigger_ratio`` of the budget, everything but the newest
    ``policy.keep_recent`` messages becomes one summary (cached, so the same span is summarised once), and the
    result is trimmed to the budget by whole units if it still does not fit.
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
    ) -> None:
        self.history = history or InMemoryHistoryProvider()
        self.agent_id = agent_id
        self.session_id = session_id or uuid.uuid4().hex
        self.llm = llm
        self.policy = policy or CompactionPolicy()
        self.counter = counter or DEFAULT_COUNTER
        self.token_budget = token_budget
        self._summaries = InMemorySummaryStore()

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
        budget = token_budget
        if budget is None and provider is not None:
            budget = provider_budget(provider)
        if budget is None:
            budget = self.token_budget
        if (
            budget is not None
            and should_compact(window, budget, self.policy, counter=self.counter)
            and find_cut_point(window, self.policy.keep_recent) > 1  # 002: only when there is something to condense
        ):
            window = await compact(window, None, self.policy, self.llm, store=self._summaries)
            if not fits(window, budget, self.counter):
                count = self.counter.count_message
                allowance = budget - sum(map(count, system_messages(window)))
                window = keep_newest(window, count, max(0, allowance))
        return [m.to_openai(extras=False) for m in window]


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
