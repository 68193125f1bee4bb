"""``ReActAgent``: a small reason-and-act loop with its memory in an :class:`AgentContext` (000).

Each step sends the model Ravi's window (never the whole transcript), records the model's reply, runs the tools
it calls and records their results, until the model answers without calling a tool or ``max_steps`` is reached.
Every turn goes through the context, so the retention policy applies when the run ends.

Example:
    >>> import asyncio
    >>> from ravi.agents.context import ContextConfig, InMemoryHistoryProvider
    >>> from ravi.kernel.messages import ToolCallBlock
    >>> model = ScriptedModel([
    ...     ChatMessage.assistant(tool_calls=[ToolCallBlock(id="c1", name="add", arguments={"a": 2, "b": 3})]),
    ...     ChatMessage.assistant("2 + 3 = 5"),
    ... ])
    >>> add = Tool("add", "Add two numbers.", lambda a, b: a + b)
    >>> agent = ReActAgent("bot", model=model, context=ContextConfig(InMemoryHistoryProvider()), tools=[add])
    >>> asyncio.run(agent.run("session-1", "What is 2 + 3?")).text
    '2 + 3 = 5'
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ravi.agents.context.agent_context import AgentContext
from ravi.agents.context.config import ContextConfig
from ravi.agents.context.model_context import ModelContext
from ravi.agents.storage.context_vars import (
    DEFAULT,
    current_agent_id,
    current_agent_label,
    current_parent_agent_id,
    current_thread_id,
)
from ravi.agents.storage.tasks import GlobalTaskStore
from ravi.kernel.errors import ConfigurationError, InvalidArgument
from ravi.kernel.messages import ChatMessage, ToolCallBlock
from ravi.kernel.storage import TaskList, TaskStatus, TaskStore


@dataclass(frozen=True)
class Tool:
    """A function the model may call: ``name``, a ``description`` for the model, the JSON Schema of its
    ``parameters``, and the ``function`` (sync or async) called with the call's arguments as keywords."""

    name: str
    description: str
    function: Callable[..., Any]
    parameters: Mapping[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})

    def schema(self) -> dict[str, Any]:
        """The tool as an OpenAI-style function definition."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": dict(self.parameters)},
        }


_ACTIONS = ("plan", "add", "show", "move", "retry")


class TaskManagerTool(Tool):
    """A tool for the agent's own task board (000): plan tasks (a new board, replacing the one there was), add
    tasks, show the board, move a task through its lifecycle, retry a failed one.

    It reads whose board it is from the context variables the running agent set (``current_thread_id`` for the
    conversation, ``current_agent_id`` for the agent: a :class:`ReActAgent` sets them for its run), so the model
    never names a board; called with none of them set, it works on the ``"default"`` board. Each call returns the
    board as it is after the call. Boards live in ``store``, by default the process-wide
    :meth:`~ravi.agents.storage.GlobalTaskStore.get` (configured by ``[tasks]``).

    Example:
        >>> import asyncio
        >>> from ravi.agents.storage import TaskStore
        >>> tool = TaskManagerTool(TaskStore())
        >>> board = asyncio.run(tool.function(action="plan", tasks=["read the log", "fix the deploy"]))
        >>> [(t["title"], t["status"]) for t in board["tasks"]]
        [('read the log', 'planned'), ('fix the deploy', 'planned')]
    """

    store: TaskStore | None
    """Where the boards live (``None``: the process-wide store, looked up at each call)."""

    def __init__(self, store: TaskStore | None = None, *, name: str = "task_manager") -> None:
        if store is not None and not isinstance(store, TaskStore):
            raise ConfigurationError(f"store must be a TaskStore, got {type(store).__name__}")
        super().__init__(
            name,
            "Keep your task board: plan (tasks: a new board, replacing the current one and its results), add "
            "(tasks: to the current board), show, move (task_id, status, result) or retry (task_id) a task. "
            "Returns the board.",
            self._call,
            {
                "type": "object",
                "properties": {
                    "action": {"type": "string", "enum": list(_ACTIONS)},
                    "tasks": {"type": "array", "items": {"type": "string"}, "description": "titles (plan, add)"},
                    "task_id": {"type": "string", "description": "the task to move or retry"},
                    "status": {"type": "string", "enum": [s.value for s in TaskStatus]},
                    "result": {"type": "string", "description": "what the task came to (move)"},
                },
                "required": ["action"],
                "additionalProperties": False,
            },
        )
        object.__setattr__(self, "store", store)

    async def _call(
        self,
        action: str | None = None,
        tasks: Sequence[str] = (),
        task_id: str | None = None,
        status: str | None = None,
        result: str | None = None,
        **unexpected: Any,
    ) -> dict[str, Any]:
        if unexpected:  # a model that adds an argument of its own is told which ones the tool takes
            raise InvalidArgument(
                f"unexpected argument {', '.join(map(repr, sorted(unexpected)))}: the tool takes action, tasks, "
                "task_id, status and result",
            )
        store = self.store or GlobalTaskStore.get()
        board = current_thread_id.get(), current_agent_id.get()
        if action == "plan":
            await store.create_task_list(*board, _titles(tasks))
        elif action == "add":
            await store.add_tasks(*board, _titles(tasks))
        elif action in ("move", "retry"):
            if not isinstance(task_id, str) or not task_id:
                raise InvalidArgument(f"needed to {action}: the id of a task on the board", field="task_id")
            if action == "retry":
                await store.increment_retry(*board, task_id)
            else:
                try:
                    target = TaskStatus(status or "")
                except ValueError:
                    raise InvalidArgument(
                        f"one of {', '.join(s.value for s in TaskStatus)} is needed, got {status!r}",
                        field="status",
                    ) from None
                await store.update_status(*board, task_id, target, result=result)
        elif action != "show":
            raise InvalidArgument(f"one of {', '.join(_ACTIONS)} is needed, got {action!r}", field="action")
        return _board(await store.get_task_list(*board), *board)


def _titles(tasks: object) -> list[str]:
    if isinstance(tasks, str) or not isinstance(tasks, Sequence) or not tasks:
        raise InvalidArgument("a non-empty list of task titles is needed", field="tasks")
    if not all(isinstance(t, str) and t.strip() for t in tasks):
        raise InvalidArgument("each task is a non-empty title", field="tasks")
    return list(tasks)


def _board(board: TaskList | None, conversation_id: str, agent_id: str) -> dict[str, Any]:
    """The board as the model sees it: whose it is, and each task's id, title, status, retries and result."""
    return {
        "conversation_id": conversation_id,
        "agent_id": agent_id,
        "tasks": [
            {"id": t.id, "title": t.title, "status": t.status.value, "retry_count": t.retry_count, "result": t.result}
            for t in (board.tasks if board is not None else ())
        ],
    }


@runtime_checkable
class ChatModel(Protocol):
    """A model that answers a window with an assistant message, which may call tools."""

    async def respond(self, messages: Sequence[ChatMessage], *, tools: Sequence[Tool]) -> ChatMessage:
        """The assistant's next message for ``messages``."""
        ...


class ScriptedModel:
    """A model that answers from a script, for tests and demos: each reply is a message, or a function of the
    window it is given. It records every window it was sent (``seen``). A reply function finds a tool's answer in
    the window's ``tool`` messages: ``message.content[0].content`` is the result's text (its ``ToolResultBlock``;
    ``message.text`` joins text blocks only, so it is empty there)."""

    def __init__(self, replies: Iterable[ChatMessage | Callable[[Sequence[ChatMessage]], ChatMessage]]) -> None:
        self._replies = list(replies)
        self.seen: list[list[ChatMessage]] = []

    async def respond(self, messages: Sequence[ChatMessage], *, tools: Sequence[Tool]) -> ChatMessage:
        """The next scripted reply."""
        self.seen.append(list(messages))
        if not self._replies:
            raise InvalidArgument("the scripted model has no reply left")
        reply = self._replies.pop(0)
        return reply(messages) if callable(reply) else reply


class ReActAgent:
    """An agent that reasons and acts in a loop, remembering through an :class:`AgentContext`.

    Args:
        name: The agent's id: its sessions are stored under it.
        model: The :class:`ChatModel` it calls.
        context: A ``ContextConfig`` (a ``ModelContext`` too) or an ``AgentContext``: where turns are stored and
            how the window is assembled. A ``TokenBudgetContext`` measures each window with the model's own
            ``count_tokens(text)`` when it has one.
        tools: The tools the model may call.
        max_steps: Model calls per run at most.
        label: A human-readable name of the agent (``current_agent_label``); its ``name`` by default.

    While it runs, the agent sets the context variables of 000 (``current_thread_id`` to the session,
    ``current_agent_id`` and ``current_agent_label`` to itself, ``current_parent_agent_id`` to the agent that was
    running when it started, for a sub-agent), so its tools and stores see who is running; they are restored when
    the run ends.
    """

    def __init__(
        self,
        name: str,
        *,
        model: ChatModel,
        context: ContextConfig | AgentContext | None = None,
        tools: Sequence[Tool] = (),
        max_steps: int = 8,
        label: str | None = None,
    ) -> None:
        if not callable(getattr(model, "respond", None)):
            raise ConfigurationError(f"model must have respond(messages, tools=...), got {type(model).__name__}")
        if not isinstance(max_steps, int) or isinstance(max_steps, bool) or max_steps < 1:
            raise InvalidArgument(f"max_steps must be an integer >= 1, got {max_steps!r}")
        self.name = name
        self.label = label or name
        self.model = model
        if isinstance(context, AgentContext):
            self.context = context
        else:
            self.context = AgentContext(context or ContextConfig.default(), agent_id=name)
        self.tools = {tool.name: tool for tool in tools}
        self.max_steps = max_steps

    async def run(self, session_id: str, user_input: str | ChatMessage, *, run_id: str | None = None) -> ChatMessage:
        """Answer ``user_input`` in ``session_id``: the model's final message (one that calls no tool).

        Raises:
            InvalidArgument: the model still calls tools after ``max_steps`` calls.
        """
        message = user_input if isinstance(user_input, ChatMessage) else ChatMessage.user(user_input)
        parent = current_agent_id.get()
        tokens = (
            current_thread_id.set(session_id),
            current_agent_id.set(self.name),
            current_agent_label.set(self.label),
            current_parent_agent_id.set(parent if parent != DEFAULT else None),
        )
        try:
            return await self._run(session_id, message, run_id)
        finally:
            current_parent_agent_id.reset(tokens[3])
            current_agent_label.reset(tokens[2])
            current_agent_id.reset(tokens[1])
            current_thread_id.reset(tokens[0])

    async def _run(self, session_id: str, message: ChatMessage, run_id: str | None) -> ChatMessage:
        config = self.context.config
        # a context that counts with the model (003's TokenBudgetContext) is given it, as build() would be
        counter = config.counter_for(self.model) if isinstance(config, ModelContext) else None
        async with self.context.run(session_id, run_id) as run:
            await run.add(message)
            for _ in range(self.max_steps):
                reply = await self.model.respond(await run.window(counter=counter), tools=list(self.tools.values()))
                await run.add(reply)
                if not reply.tool_calls:
                    return reply
                await run.add(*[await self._call(call) for call in reply.tool_calls])
        raise InvalidArgument(f"the model was still calling tools after {self.max_steps} steps")

    async def _call(self, call: ToolCallBlock) -> ChatMessage:
        """The tool message answering ``call``: its result, or the error, marked as one, for the model to see."""
        tool = self.tools.get(call.name)
        if tool is None:
            return ChatMessage.tool(call.id, f"unknown tool {call.name!r}", is_error=True)
        try:
            result = tool.function(**dict(call.arguments))
            if inspect.isawaitable(result):
                result = await result
        except Exception as error:  # the model sees the failure and can recover
            return ChatMessage.tool(call.id, f"{type(error).__name__}: {error}", is_error=True)
        text = result if isinstance(result, str) else json.dumps(result, ensure_ascii=False, default=str)
        return ChatMessage.tool(call.id, text)


__all__ = ["ChatModel", "ReActAgent", "ScriptedModel", "TaskManagerTool", "Tool"]
