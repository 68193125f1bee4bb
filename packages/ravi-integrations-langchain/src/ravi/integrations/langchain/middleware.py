"""``RaviContextMiddleware``: Ravi's window before every model call of a LangChain v1 agent (LangGraph)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, cast

from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, RemoveMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from ravi.agents.adapters import StoredPrefix, append_new, as_context
from ravi.agents.context import AgentContext, ContextConfig
from ravi.integrations.langchain import _loop
from ravi.integrations.langchain.convert import changed, langchain_id, to_langchain, to_ravi
from ravi.kernel.errors import ConfigurationError
from ravi.kernel.messages import ChatMessage
from ravi.kernel.values import check_scope


def _state_messages(request: ModelRequest) -> Sequence[BaseMessage]:
    """The agent's transcript: the graph state's messages (what another middleware changed in the request only
    is not part of it), or the request's when it carries no state."""
    state = request.state
    messages = state.get("messages") if isinstance(state, Mapping) else None
    return messages if isinstance(messages, Sequence) else request.messages


def answer_invalid_tool_calls(messages: Sequence[BaseMessage]) -> list[BaseMessage] | None:
    """``messages`` with an error :class:`ToolMessage` right after each AI message for each of its tool calls
    LangChain could not parse (``invalid_tool_calls``) that nothing answers yet, or ``None`` when none is
    unanswered. The error says what LangChain's own answer says; LangChain adds that answer inside the model call,
    too late for the middleware to store it before the turns that follow it. Each answer's id is derived from the
    AI message's and the call's, so the same answer made again (a replayed run) is the same message."""
    answered = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
    out: list[BaseMessage] = []
    for message in messages:
        out.append(message)
        if not isinstance(message, AIMessage):
            continue
        for call in message.invalid_tool_calls:
            call_id = call.get("id")
            if call_id is None or call_id in answered:
                continue
            name = call.get("name") or "unknown"
            out.append(
                ToolMessage(
                    content=f"Tool call {name} with id {call_id} could not be executed - "
                    "arguments were malformed or truncated.",
                    name=name,
                    tool_call_id=call_id,
                    status="error",
                    # the same answer has the same id: a run replayed from a checkpoint before this answer makes
                    # it again, and the session, which keeps messages by id, holds it once
                    id=f"{message.id}/invalid-tool-call/{call_id}" if message.id else None,
                )
            )
            answered.add(call_id)
    return out if len(out) != len(messages) else None


def merge(
    window: Sequence[ChatMessage], request: Sequence[BaseMessage], state: Sequence[BaseMessage]
) -> list[BaseMessage]:
    """What the model is sent: Ravi's window of the stored session, with the request's own view of it.

    * A window message that is in the request goes in the request's order: as the pipeline left it when it
      changed it (a shortened tool result, say), unless another middleware changed it too, else the request's
      own message object.
    * A message of the agent's state that the request lacks was taken out by another middleware: not sent.
    * A window message the request does not hold (an earlier turn of the session, a summary) stays in place.
    * A request message that is not in the state (one without an id, such as the error LangChain adds for a
      malformed tool call, or one another middleware added) is sent where the request has it, unless it is a
      tool result whose call is not sent (a provider refuses such an orphan).
    """
    in_state = {m.id: m for m in state if m.id is not None}
    position: dict[str, int] = {}
    for i, m in enumerate(request):
        if m.id is not None:
            position.setdefault(m.id, i)
    ids = [langchain_id(w) for w in window]
    newest = {lc: i for i, lc in enumerate(ids) if lc is not None}  # a message stored again changed: its newest
    placed: list[tuple[int | None, BaseMessage]] = []  # each window message with its place in the request
    sent: set[str] = set()
    for i, (w, lc) in enumerate(zip(window, ids, strict=True)):
        if lc is not None and newest[lc] != i:
            continue
        if lc is not None and lc in position:
            at = position[lc]
            mine, theirs = request[at], in_state.get(lc)
            compacted = theirs is not None and (mine is theirs or mine == theirs) and changed(w)
            placed.append((at, to_langchain(w) if compacted else mine))  # the request's own object, if it can
            sent.add(lc)
        elif lc is None or lc not in in_state:
            placed.append((None, to_langchain(w)))
    slots = [k for k, (at, _) in enumerate(placed) if at is not None]  # the request's messages in its order
    for k, item in zip(slots, sorted((placed[k] for k in slots), key=lambda item: item[0] or 0), strict=True):
        placed[k] = item
    extra: list[tuple[int, BaseMessage]] = [
        (i, m) for i, m in enumerate(request) if m.id is None or (m.id not in in_state and m.id not in sent)
    ]
    out: list[BaseMessage] = []
    calls: set[str] = set()

    def add(message: BaseMessage, *, own: bool) -> None:
        if isinstance(message, AIMessage):
            calls.update(c["id"] for c in message.tool_calls if c["id"] is not None)
            calls.update(c["id"] for c in message.invalid_tool_calls if c["id"] is not None)
        elif own and isinstance(message, ToolMessage) and message.tool_call_id not in calls:
            return
        out.append(message)

    j = 0
    for place, message in placed:
        while place is not None and j < len(extra) and extra[j][0] < place:
            add(extra[j][1], own=True)
            j += 1
        add(message, own=False)
    for _, message in extra[j:]:
        add(message, own=True)
    return out


class RaviContextMiddleware(AgentMiddleware):
    """Keeps a LangChain agent's whole transcript in Ravi and sends the model Ravi's window.

    Before each model call, the messages of the agent's state that Ravi has not stored yet are appended to the
    session (idempotent: the same message always gets the same Ravi id, so nothing is stored twice, and a
    message replaced under its id is stored as the new message it is), and the model is called with the window
    the configured pipeline assembles from the stored transcript (within its budget, tool calls with their
    results), merged with the request as other middleware left it (see :func:`merge`): every message of the
    request reaches the model, with or without an id, unless the window left it out. The window only goes to
    the model: the graph's state, and so its checkpoints and ``result["messages"]``, keep every message whole.
    After the run, the final messages are stored too.

    A tool call LangChain could not parse is answered in the graph's state before the model call (an error
    ``ToolMessage`` right after the AI message, as LangChain would add it during the call;
    :func:`answer_invalid_tool_calls`), so the session stores it where the state has it, before the turns that
    follow, not after them.

    The session is ``session_id`` when given, else the run's ``thread_id`` (``config={"configurable":
    {"thread_id": ...}}``). ``session_id`` may also be a function of the run's config that names the session
    (``lambda config: config["configurable"]["user_id"]``, say).

    Example:
        >>> from ravi.agents.context import ContextConfig, TokenBudgetComposedStrategy
        >>> middleware = RaviContextMiddleware(ContextConfig.default(), session_id="s1")
    """

    def __init__(
        self,
        context: AgentContext | ContextConfig | None = None,
        *,
        session_id: str | Callable[[RunnableConfig], str] | None = None,
    ) -> None:
        super().__init__()
        if isinstance(session_id, str) or (session_id is not None and not callable(session_id)):
            check_scope(session_id=session_id)
        self.context = as_context(context)
        self.session_id = session_id
        self._stored = StoredPrefix()

    def _session(self) -> str:
        if isinstance(self.session_id, str):
            return self.session_id
        from langgraph.config import get_config

        try:
            config = get_config()
        except RuntimeError:
            config = {}
        if self.session_id is not None:
            chosen = self.session_id(config)
            check_scope(session_id=chosen)
            return chosen
        thread = config.get("configurable", {}).get("thread_id")
        if not thread:
            raise ConfigurationError(
                "RaviContextMiddleware needs a session",
                hint="pass session_id=..., or run the agent with config={'configurable': {'thread_id': ...}}",
            )
        return str(thread)

    async def _store(self, session_id: str, messages: Sequence[BaseMessage]) -> None:
        agent_id = self.context.agent_id
        places = self._stored.unstored(agent_id, session_id, messages)
        new = [to_ravi(messages[i]) for i in places if messages[i].id is not None]
        await append_new(self.context, session_id, new)
        self._stored.mark(agent_id, session_id, messages)

    async def _request(self, session_id: str, request: ModelRequest) -> ModelRequest:
        state = _state_messages(request)
        await self._store(session_id, state)
        window = await self.context.get_prompt_window(session_id)
        return request.override(messages=cast("list[AnyMessage]", merge(window, request.messages, state)))

    def before_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """Answer, in the state, the tool calls LangChain could not parse (see :func:`answer_invalid_tool_calls`)."""
        answered = answer_invalid_tool_calls(state["messages"])
        if answered is None:
            return None
        return {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), *answered]}

    async def abefore_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """The asynchronous form of :meth:`before_model`."""
        return self.before_model(state, runtime)

    async def awrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], Awaitable[ModelResponse]],
    ) -> ModelResponse:
        """Store what is new, then call the model with Ravi's window."""
        return await handler(await self._request(self._session(), request))

    def wrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], ModelResponse],
    ) -> ModelResponse:
        """The synchronous form (``agent.invoke``): the same, on the package's background loop."""
        return handler(_loop.run(self._request(self._session(), request)))

    async def aafter_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """Store the run's last messages (the final answer)."""
        await self._store(self._session(), state["messages"])
        return None

    def after_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """The synchronous form of :meth:`aafter_agent`."""
        session_id = self._session()
        _loop.run(self._store(session_id, state["messages"]))
        return None


__all__ = ["RaviContextMiddleware", "answer_invalid_tool_calls", "merge"]
