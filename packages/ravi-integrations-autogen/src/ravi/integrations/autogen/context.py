"""``RaviChatCompletionContext``: an AutoGen ``ChatCompletionContext`` kept in Ravi, whose window is Ravi's."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any, Self

from autogen_core import Component
from autogen_core.model_context import ChatCompletionContext
from autogen_core.model_context._chat_completion_context import ChatCompletionContextState
from autogen_core.models import FunctionExecutionResultMessage, LLMMessage
from pydantic import BaseModel, ValidationError

from ravi.agents.adapters import as_context
from ravi.agents.context import AgentContext, ContextConfig
from ravi.integrations.autogen.convert import from_ravi, to_ravi
from ravi.kernel.errors import ConfigurationError, InvalidArgument, InvalidMessage
from ravi.kernel.messages import ChatMessage
from ravi.kernel.values import check_scope


class RaviChatCompletionContextConfig(BaseModel):
    """What ``dump_component()`` keeps of a :class:`RaviChatCompletionContext`: its session, and its store and
    pipeline as Ravi settings (the sections of ``ravi.toml``; ``None``: ``ravi.toml`` and ``RAVI_*`` variables
    wherever the component is loaded)."""

    session_id: str
    agent_id: str | None = None
    settings: dict[str, Any] | None = None
    initial_messages: list[LLMMessage] | None = None


class RaviChatCompletionContext(ChatCompletionContext, Component[RaviChatCompletionContextConfig]):
    """The model context of an AutoGen agent (``AssistantAgent(..., model_context=...)``), kept in a Ravi history
    store: ``add_message`` appends to the session, ``get_messages`` is the window the configured pipeline
    assembles (within its budget, function calls with their results), and the stored transcript is never
    changed by it.

    As AutoGen's own contexts: ``save_state()`` holds the conversation (every stored message), so ``clear()``
    then ``load_state(state)`` restores it, and ``load_state`` of another context's state stores its messages
    as this session's transcript. ``dump_component()`` describes the context by configuration (its session and
    the Ravi settings its store and pipeline are built from, see ``settings``), so ``load_component`` builds the
    same context; a context built on store objects (``ContextConfig(history, ...)``) cannot be described so.

    Args:
        context: An ``AgentContext`` or ``ContextConfig``; ``None`` builds one from ``settings``.
        session_id: The session the conversation is kept in.
        initial_messages: Messages the conversation starts with (stored at the first call when the session holds
            no messages yet; one that is not an AutoGen message is ``InvalidMessage`` here).
        settings: Ravi settings as ``ravi.toml`` holds them (``{"history": {"backend": "postgres", "dsn": ...},
            "context": {"model": "gpt-4o"}}``), over ``ravi.toml`` and ``RAVI_*`` variables; only without
            ``context``.

    Example:
        >>> from ravi.agents.context import ContextConfig, TokenBudgetComposedStrategy
        >>> config = ContextConfig.default()
        >>> context = RaviChatCompletionContext(config, session_id="s1")
    """

    component_config_schema = RaviChatCompletionContextConfig
    component_provider_override = "ravi.integrations.autogen.RaviChatCompletionContext"

    def __init__(
        self,
        context: AgentContext | ContextConfig | None = None,
        *,
        session_id: str,
        initial_messages: Sequence[LLMMessage] | None = None,
        settings: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(list(initial_messages) if initial_messages is not None else None)
        check_scope(session_id=session_id)
        for message in initial_messages or []:  # refused now, not at every call that would store them
            to_ravi(message)
        self._described = context is None  # built from settings alone, so dump_component can describe it
        if settings is not None:
            if context is not None:
                raise ConfigurationError("pass either a context or settings, not both")
            if not isinstance(settings, Mapping):
                raise ConfigurationError(
                    f"settings must be a mapping of ravi.toml's sections, got {type(settings).__name__}",
                    hint='settings={"history": {"backend": "postgres", "dsn": "..."}}',
                )
            from ravi.agents.settings import load_settings

            context = AgentContext(ContextConfig.from_settings(load_settings(**dict(settings))))
        self._settings = dict(settings) if settings is not None else None
        self.context = as_context(context)
        self.session_id = session_id
        self._initial = list(initial_messages or [])
        self._cleared = 0  # counts clear() and load_state(): the initial messages are not given back past one
        self._messages = []  # the conversation lives in the store, not in AutoGen's list

    async def _store(self, messages: Sequence[LLMMessage]) -> None:
        converted: list[ChatMessage] = []
        for message in messages:  # each stored message is a new turn: its id is its own
            converted += to_ravi(message, salt=uuid.uuid4().hex)
        await self.context.add_messages(self.session_id, converted)

    async def _start(self, messages: Sequence[LLMMessage] = ()) -> None:
        """Store ``messages``, after the initial messages when they are not stored yet, in one append. The initial
        messages start a new session only: a session that holds messages already (this context built again, in a
        new process or from its dumped component) continues without them. They are claimed first, so concurrent
        first calls store them once, and given back when the append fails, so the next call stores them (unless
        the session was cleared meanwhile)."""
        initial, self._initial = self._initial, []
        if not initial and not messages:
            return
        cleared = self._cleared
        try:
            if initial and await self.context.config.history.count_messages(
                self.context.agent_id, session_id=self.session_id
            ):
                initial = []  # the conversation started already
            await self._store([*initial, *messages])
        except BaseException:
            if initial and cleared == self._cleared:
                self._initial = initial + self._initial
            raise

    async def add_message(self, message: LLMMessage) -> None:
        """Store one message at the end of the session (after the initial messages, at the first call)."""
        await self._start([message])

    async def get_messages(self) -> list[LLMMessage]:
        """Ravi's window of the session, as AutoGen messages. Like AutoGen's own bounded contexts, it never
        starts with a ``FunctionExecutionResultMessage`` (results without their calls; the engine keeps calls
        with their results, so only one holding no result at all can lead)."""
        await self._start()
        window = from_ravi(await self.context.get_prompt_window(self.session_id))
        while window and isinstance(window[0], FunctionExecutionResultMessage):
            window = window[1:]
        return window

    async def clear(self) -> None:
        """Remove the session's transcript, and what the context's strategies derived from it
        (``AgentContext.clear``)."""
        self._initial = []
        self._cleared += 1
        await self.context.clear(self.session_id)

    async def save_state(self) -> Mapping[str, Any]:
        """The conversation: every stored message of the session (AutoGen's ``ChatCompletionContextState``),
        and which session it is."""
        await self._start()
        stored = await self.context.config.history.get_messages(self.context.agent_id, session_id=self.session_id)
        state = ChatCompletionContextState(messages=from_ravi(stored)).model_dump()
        return {**state, "ravi_session_id": self.session_id, "ravi_agent_id": self.context.agent_id}

    async def load_state(self, state: Mapping[str, Any]) -> None:
        """Make the saved conversation this session's transcript (what was stored in it is replaced, in one
        atomic step on every store Ravi ships: ``AgentContext.replace_messages``); a state that names a Ravi
        session and holds no messages returns to that session.

        Raises:
            InvalidMessage: the state's messages are not AutoGen messages; nothing stored is changed.
            InvalidArgument: the state holds neither messages nor a Ravi session.
        """
        if not isinstance(state, Mapping):
            raise InvalidArgument(f"state must be a mapping, got {type(state).__name__}", field="state")
        if "messages" not in state:
            if "ravi_session_id" not in state:
                raise InvalidArgument("state holds neither messages nor a Ravi session", field="state")
            session_id = state["ravi_session_id"]
            check_scope(session_id=session_id)
            self.session_id = session_id
            return
        try:
            messages = ChatCompletionContextState.model_validate({"messages": state["messages"]}).messages
        except ValidationError as error:
            first = error.errors(include_url=False)[0]
            where = ".".join(str(p) for p in first["loc"])
            raise InvalidMessage(f"not an AutoGen message: {first['msg']}", field=f"state.{where}") from None
        converted: list[ChatMessage] = []
        for message in messages:  # converted before anything is removed, so a bad state changes nothing
            converted += to_ravi(message, salt=uuid.uuid4().hex)
        self._initial = []
        self._cleared += 1
        await self.context.replace_messages(self.session_id, converted)

    def _to_config(self) -> RaviChatCompletionContextConfig:
        if not self._described:
            raise ConfigurationError(
                "this context was built on store objects, which a component configuration cannot describe",
                hint="build it from settings: RaviChatCompletionContext(session_id=..., settings={...}), "
                "or with neither context nor settings to use ravi.toml",
            )
        return RaviChatCompletionContextConfig(
            session_id=self.session_id,
            agent_id=self.context.agent_id,
            settings=self._settings,
            initial_messages=self._initial_messages,
        )

    @classmethod
    def _from_config(cls, config: RaviChatCompletionContextConfig) -> Self:
        context = cls(session_id=config.session_id, initial_messages=config.initial_messages, settings=config.settings)
        if config.agent_id is not None and config.agent_id != context.context.agent_id:
            context.context = AgentContext(context.context.config, agent_id=config.agent_id)
        return context


__all__ = ["RaviChatCompletionContext", "RaviChatCompletionContextConfig"]
