"""``RaviChatCompletionContext``: an AutoGen ``ChatCompletionContext`` kept in Ravi, whose window is Ravi's."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from autogen_core.model_context import ChatCompletionContext
from autogen_core.models import LLMMessage

from ravi.agents.context import AgentContext, ContextConfig, InMemoryHistoryProvider
from ravi.integrations.autogen.convert import from_ravi, to_ravi
from ravi.kernel.errors import InvalidArgument
from ravi.kernel.messages import ChatMessage
from ravi.kernel.values import check_scope


class RaviChatCompletionContext(ChatCompletionContext):
    """The model context of an AutoGen agent (``AssistantAgent(..., model_context=...)``), kept in a Ravi history
    store: ``add_message`` appends to the session, ``get_messages`` is the window the configured pipeline
    assembles (within its budget, function calls with their results), and the stored transcript is never
    changed by it. ``save_state`` names the session; ``load_state`` returns to it (or, given the messages of
    another context's state, stores them as this session's transcript).

    Example:
        >>> from ravi.agents.context import ContextConfig, TokenBudgetComposedStrategy
        >>> config = ContextConfig.default()
        >>> context = RaviChatCompletionContext(config, session_id="s1")
    """

    def __init__(
        self,
        context: AgentContext | ContextConfig | None = None,
        *,
        session_id: str,
        initial_messages: Sequence[LLMMessage] | None = None,
    ) -> None:
        super().__init__()
        if context is None:
            context = AgentContext(ContextConfig(InMemoryHistoryProvider()))
        elif isinstance(context, ContextConfig):
            context = AgentContext(context)
        check_scope(session_id=session_id)
        self.context = context
        self.session_id = session_id
        self._initial = list(initial_messages or [])
        self._seen = 0

    async def _store(self, messages: Sequence[LLMMessage]) -> None:
        converted: list[ChatMessage] = []
        for message in messages:  # each stored message is a new turn: its id is its own
            converted += to_ravi(message, salt=uuid.uuid4().hex)
        await self.context.add_messages(self.session_id, converted)

    async def add_message(self, message: LLMMessage) -> None:
        """Store one message at the end of the session."""
        if self._initial:
            initial, self._initial = self._initial, []
            await self._store(initial)
        await self._store([message])

    async def get_messages(self) -> list[LLMMessage]:
        """Ravi's window of the session, as AutoGen messages."""
        if self._initial:
            initial, self._initial = self._initial, []
            await self._store(initial)
        return from_ravi(await self.context.get_prompt_window(self.session_id))

    async def clear(self) -> None:
        """Remove the session's transcript."""
        await self.context.config.history.clear(self.context.agent_id, session_id=self.session_id)

    async def save_state(self) -> Mapping[str, Any]:
        """Which session this context is (its messages stay in the store)."""
        return {"ravi_session_id": self.session_id, "ravi_agent_id": self.context.agent_id}

    async def load_state(self, state: Mapping[str, Any]) -> None:
        """Return to a saved session, or store another context's saved messages as this session's."""
        if "ravi_session_id" in state:
            session_id = state["ravi_session_id"]
            check_scope(session_id=session_id)
            self.session_id = session_id
            return
        if "messages" not in state:
            raise InvalidArgument("state holds neither a Ravi session nor messages", field="state")
        from autogen_core.model_context._chat_completion_context import ChatCompletionContextState

        messages = ChatCompletionContextState.model_validate(dict(state)).messages
        await self.clear()
        await self._store(messages)


__all__ = ["RaviChatCompletionContext"]
