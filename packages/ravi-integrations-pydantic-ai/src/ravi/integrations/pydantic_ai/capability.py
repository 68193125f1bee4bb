"""``RaviHistory``: a PydanticAI capability that keeps a run's messages in Ravi and sends Ravi's window."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import ModelMessage
from ravi.agents.adapters import StoredPrefix, append_new, as_context
from ravi.agents.context import AgentContext, ContextConfig
from ravi.integrations.pydantic_ai.convert import from_ravi, to_ravi
from ravi.kernel.errors import InvalidMessage
from ravi.kernel.messages import ChatMessage
from ravi.kernel.values import check_scope


class RaviHistory(AbstractCapability[Any]):
    """``Agent(..., capabilities=[RaviHistory(config, session_id="s1")])``.

    Before each model request, the run's messages are stored in the session (idempotent: each message's id
    comes from its place in the conversation and its content) and the model is sent the window the pipeline
    assembles from the stored transcript. Unlike ``ProcessHistory``, the window is never written back into the
    run: ``result.all_messages()`` and ``new_messages()`` keep every message as it was. To continue a
    conversation, pass ``message_history=await ravi.messages()``.

    Example:
        >>> capability = RaviHistory(ContextConfig.default(), session_id="s1")
    """

    def __init__(self, context: AgentContext | ContextConfig | None = None, *, session_id: str) -> None:
        check_scope(session_id=session_id)
        self.context = as_context(context)
        self.session_id = session_id
        self._stored = StoredPrefix()

    async def store(self, messages: list[ModelMessage]) -> None:
        """Store the conversation ``messages`` (those already stored are skipped).

        Raises:
            InvalidMessage: ``messages`` is not a list of PydanticAI messages.
        """
        if not isinstance(messages, Sequence) or isinstance(messages, str):
            raise InvalidMessage(
                f"messages must be a list of PydanticAI messages, got {type(messages).__name__}", field="messages"
            )
        agent_id = self.context.agent_id
        start = self._stored.start(agent_id, self.session_id, messages)
        converted: list[ChatMessage] = []
        for i in range(start, len(messages)):
            converted += to_ravi(messages[i], salt=f"{self.session_id}:{i}")
        await append_new(self.context, self.session_id, converted)
        self._stored.mark(agent_id, self.session_id, messages)

    async def messages(self) -> list[ModelMessage]:
        """The stored conversation, as PydanticAI messages (for ``message_history=``)."""
        history = self.context.config.history
        messages = from_ravi(await history.get_messages(self.context.agent_id, session_id=self.session_id))
        # they are the store's: a run continuing them adds only its own
        self._stored.mark(self.context.agent_id, self.session_id, messages)
        return messages

    async def before_model_request(self, ctx: Any, request_context: Any) -> Any:
        """Store the conversation so far, then send the model Ravi's window of it."""
        await self.store(list(request_context.messages))
        window = await self.context.get_prompt_window(self.session_id)
        request_context.messages = from_ravi(window)
        return request_context

    async def after_run(self, ctx: Any, *, result: Any) -> Any:
        """Store the run's final messages."""
        await self.store(list(result.all_messages()))
        return result

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return None  # holds a store: not part of a serialisable agent spec


__all__ = ["RaviHistory"]
