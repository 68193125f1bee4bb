"""LangChain's memory classes rebound to Ravi's adapters, and what of their tests does not apply.

* ``InMemoryChatMessageHistory`` (langchain-core) and ``PostgresChatMessageHistory`` (langchain-postgres) are a
  ``RaviChatMessageHistory`` built from the same arguments, on the run's store (``ravi_upstream.store()``: in
  memory, or Postgres or Redis by configuration);
* ``create_agent`` (langchain) builds the same agent with a ``RaviContextMiddleware`` last in its middleware (so
  it sees the request as every other middleware left it): the session is the run's ``thread_id``, or, for a
  run without one, a session of the agent's own.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

import ravi_upstream
from langchain.agents import create_agent as _create_agent
from langchain_core.messages import BaseMessage

from ravi.agents.context import ContextConfig
from ravi.integrations.langchain import RaviChatMessageHistory, RaviContextMiddleware


class InMemoryChatMessageHistory(RaviChatMessageHistory):
    """A RaviChatMessageHistory built with ``InMemoryChatMessageHistory``'s arguments; equal to another when their
    messages are, as the pydantic model it stands for is."""

    def __init__(self, *, messages: Sequence[BaseMessage] | None = None) -> None:
        ravi_upstream.built()
        super().__init__(ravi_upstream.store(), session_id=uuid.uuid4().hex, agent_id=ravi_upstream.scope())
        if messages:
            self.add_messages(messages)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RaviChatMessageHistory):
            return NotImplemented
        return self.messages == other.messages

    __hash__ = None  # type: ignore[assignment]


_TABLES: dict[str, set[tuple[str, str]]] = {}


class PostgresChatMessageHistory(RaviChatMessageHistory):
    """A RaviChatMessageHistory built with ``PostgresChatMessageHistory``'s arguments: the table is an agent
    scope of the run's store (the connection the test opens is not used)."""

    def __init__(
        self,
        table_name: str,
        session_id: str,
        /,
        *,
        sync_connection: Any = None,
        async_connection: Any = None,
    ) -> None:
        ravi_upstream.built()
        agent_id = ravi_upstream.scope(table_name)
        super().__init__(ravi_upstream.store(), session_id=session_id, agent_id=agent_id)
        _TABLES.setdefault(agent_id, set()).add((agent_id, session_id))

    @staticmethod
    def create_tables(connection: Any, table_name: str, /) -> None:
        """Nothing to create: a Ravi store needs no table per history."""

    @staticmethod
    async def acreate_tables(connection: Any, table_name: str, /) -> None:
        """Nothing to create: a Ravi store needs no table per history."""

    @staticmethod
    def drop_table(connection: Any, table_name: str, /) -> None:
        """Remove every session kept under the table's scope."""
        for agent_id, session_id in _TABLES.pop(ravi_upstream.scope(table_name), set()):
            RaviChatMessageHistory(ravi_upstream.store(), session_id=session_id, agent_id=agent_id).clear()

    @staticmethod
    async def adrop_table(connection: Any, table_name: str, /) -> None:
        for agent_id, session_id in _TABLES.pop(ravi_upstream.scope(table_name), set()):
            await RaviChatMessageHistory(ravi_upstream.store(), session_id=session_id, agent_id=agent_id).aclear()


def create_agent(model: Any, tools: Any = None, *, middleware: Sequence[Any] = (), **kwargs: Any) -> Any:
    """``langchain.agents.create_agent`` with a ``RaviContextMiddleware`` last in ``middleware``."""
    ravi_upstream.built()
    own = uuid.uuid4().hex

    def session(config: Any) -> str:
        return str(config.get("configurable", {}).get("thread_id") or own)

    context = ContextConfig(ravi_upstream.store(), agent_id=ravi_upstream.scope())
    ravi = RaviContextMiddleware(context, session_id=session)
    return _create_agent(model, tools, middleware=[*middleware, ravi], **kwargs)


_DRAWING = (
    "compares a drawing of the agent's graph (draw_mermaid) with LangChain's stored snapshot: Ravi's middleware "
    "adds its own after_agent node to the graph"
)
_SYNC_IN_LOOP = (
    "calls the agent's synchronous invoke() inside a running event loop under LangChain's blocking-call detector "
    "(blockbuster): Ravi's stores are asynchronous, so the middleware's synchronous path waits for them on its "
    "own loop, which blocks the caller's"
)
_WALL_CLOCK = (
    "asserts an upper bound on wall-clock time (under 0.5 s for 0.2 s of back-off), which the round trips to a "
    "server store (two per model call) on a shared machine can exceed"
)

NOT_APPLICABLE: dict[str, dict[str, str]] = {
    "langchain-core": {
        "test_chat_history_deprecated[InMemoryChatMessageHistory]": (
            "reads the deprecation notice in the docstring of LangChain's own class"
        ),
    },
    "langchain-postgres": {},
    "langchain": {
        **{
            f"tests/unit_tests/agents/{name}": _DRAWING
            for name in (
                "middleware/core/test_decorators.py::test_async_middleware_with_can_jump_to_graph_snapshot",
                "middleware/core/test_diagram.py::test_create_agent_diagram",
                "middleware/core/test_framework.py::test_agent_graph_with_jump_to_end_as_after_agent",
                "middleware/core/test_framework.py::test_create_agent_jump",
                "middleware/core/test_framework.py::test_simple_agent_graph",
                "test_return_direct_graph.py::test_agent_graph_with_mixed_tools",
                "test_return_direct_graph.py::test_agent_graph_with_return_direct_tool",
                "test_return_direct_graph.py::test_agent_graph_without_return_direct_tools",
            )
        },
        **{
            f"tests/unit_tests/agents/middleware/implementations/{name}": _WALL_CLOCK
            for name in (
                "test_model_retry.py::test_model_retry_constant_backoff",
                "test_tool_retry.py::test_tool_retry_constant_backoff",
            )
        },
        **{
            f"tests/unit_tests/agents/middleware/core/test_framework.py::{name}": _SYNC_IN_LOOP
            for name in (
                "test_execution_order[False]",
                "test_hook_execution[after-False]",
                "test_hook_execution[before-False]",
                "test_hook_with_class_inheritance[after-False]",
                "test_hook_with_class_inheritance[before-False]",
            )
        },
    },
}
