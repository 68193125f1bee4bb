"""``RaviContextMiddleware``: Ravi's window before every model call of a LangChain v1 agent (LangGraph)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, cast

from langchain_core.messages import AnyMessage, BaseMessage

from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from ravi.agents.context import AgentContext, ContextConfig
from ravi.agents.context.session import StoredPrefix
from ravi.integrations.langchain import _loop
from ravi.integrations.langchain.convert import to_langchain, to_ravi
from ravi.kernel.errors import ConfigurationError
from ravi.kernel.messages import ChatMessage
from ravi.kernel.values import check_scope


def _as_state(window: Sequence[ChatMessage]) -> list[AnyMessage]:
    return cast("list[AnyMessage]", [to_langchain(m) for m in window])


class RaviContextMiddleware(AgentMiddleware):
    """Keeps a LangChain agent's whole transcript in Ravi and sends the model Ravi's window.

    Before each model call, the messages of the agent's state that Ravi has not stored yet are appended to the
    session (idempotent by id, so nothing is stored twice), and the model is called with the window the
    configured pipeline assembles from the stored transcript (within its budget, tool calls with their
    results). The window only goes to the model: the graph's state, and so its checkpoints and
    ``result["messages"]``, keep every message whole. After the run, the final messages are stored too.

    The session is ``session_id`` when given, else the run's ``thread_id`` (``config={"configurable":
    {"thread_id": ...}}``).

    Example:
        >>> from ravi.agents.context import ContextConfig, TokenBudgetComposedStrategy
        >>> middleware = RaviContextMiddleware(ContextConfig.default(), session_id="s1")
    """

    def __init__(self, context: AgentContext | ContextConfig | None = None, *, session_id: str | None = None) -> None:
        super().__init__()
        if context is None:
            context = AgentContext(ContextConfig.from_settings())
        elif isinstance(context, ContextConfig):
            context = AgentContext(context)
        if not isinstance(context, AgentContext):
            raise ConfigurationError(
                f"context must be an AgentContext or a ContextConfig, got {type(context).__name__}"
            )
        if session_id is not None:
            check_scope(session_id=session_id)
        self.context = context
        self.session_id = session_id
        self._stored = StoredPrefix()

    def _session(self) -> str:
        if self.session_id is not None:
            return self.session_id
        try:
            from langgraph.config import get_config

            thread = get_config().get("configurable", {}).get("thread_id")
        except RuntimeError:
            thread = None
        if not thread:
            raise ConfigurationError(
                "RaviContextMiddleware needs a session",
                hint="pass session_id=..., or run the agent with config={'configurable': {'thread_id': ...}}",
            )
        return str(thread)

    async def _store(self, session_id: str, messages: Sequence[BaseMessage]) -> None:
        new = [to_ravi(m) for m in messages[self._stored.start(session_id, messages) :] if m.id is not None]
        if new:
            await self.context.add_messages(session_id, new)
        self._stored.mark(session_id, messages)

    async def _window(self, request: ModelRequest) -> ModelRequest:
        session_id = self._session()
        await self._store(session_id, request.messages)
        window = await self.context.get_prompt_window(session_id)
        return request.override(messages=_as_state(window))

    async def awrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], Awaitable[ModelResponse]],
    ) -> ModelResponse:
        """Store what is new, then call the model with Ravi's window."""
        return await handler(await self._window(request))

    def wrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], ModelResponse],
    ) -> ModelResponse:
        """The synchronous form (``agent.invoke``): the same, on the package's background loop."""
        session_id = self._session()

        async def window() -> ModelRequest:
            await self._store(session_id, request.messages)
            stored = await self.context.get_prompt_window(session_id)
            return request.override(messages=_as_state(stored))

        return handler(_loop.run(window()))

    async def aafter_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """Store the run's last messages (the final answer)."""
        await self._store(self._session(), state["messages"])
        return None

    def after_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """The synchronous form of :meth:`aafter_agent`."""
        session_id = self._session()
        _loop.run(self._store(session_id, state["messages"]))
        return None


__all__ = ["RaviContextMiddleware"]
