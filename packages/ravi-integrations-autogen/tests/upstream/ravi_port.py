"""AutoGen's model contexts rebound to ``RaviChatCompletionContext``, and what of their tests does not apply.

Each stand-in is a ``RaviChatCompletionContext`` on the run's store (``ravi_upstream.store()``: in memory, or
Postgres or Redis by configuration), in a session of its own, with the Ravi pipeline that does what the AutoGen
context does: none for ``UnboundedChatCompletionContext``, a sliding window of ``buffer_size`` for
``BufferedChatCompletionContext``, a token budget of ``token_limit`` counted for the client's model for
``TokenLimitedChatCompletionContext``. ``AssistantAgent`` is AutoGen's own, with a Ravi context in place of the
``UnboundedChatCompletionContext`` it makes when given none.
"""

from __future__ import annotations

import importlib
import sys
import types
import uuid
from collections.abc import Sequence
from typing import Any

import ravi_upstream
from autogen_agentchat.agents import _assistant_agent
from autogen_core.models import LLMMessage

from ravi.agents.context import (
    ContextConfig,
    SlidingWindowCompaction,
    TokenBudgetComposedStrategy,
)
from ravi.agents.tokens import MODEL_FAMILIES, ExactTokenCounter, counter_for_model
from ravi.integrations.autogen import RaviChatCompletionContext


def _context(pipeline: Any, initial_messages: Sequence[LLMMessage] | None) -> RaviChatCompletionContext:
    ravi_upstream.built()
    config = ContextConfig(ravi_upstream.store(), pipeline, agent_id=ravi_upstream.scope())
    return RaviChatCompletionContext(config, session_id=uuid.uuid4().hex, initial_messages=initial_messages)


def UnboundedChatCompletionContext(initial_messages: Sequence[LLMMessage] | None = None) -> Any:  # noqa: N802
    """A Ravi context that sends every message: an empty pipeline."""
    return _context([], initial_messages)


def BufferedChatCompletionContext(  # noqa: N802
    buffer_size: int, initial_messages: Sequence[LLMMessage] | None = None
) -> Any:
    """A Ravi context that sends the last ``buffer_size`` messages: a sliding window."""
    return _context([SlidingWindowCompaction(max_messages=buffer_size)], initial_messages)


def TokenLimitedChatCompletionContext(  # noqa: N802
    model_client: Any,
    *,
    token_limit: int | None = None,
    tool_schema: Any = None,
    initial_messages: Sequence[LLMMessage] | None = None,
) -> Any:
    """A Ravi context within ``token_limit`` tokens (else the limit AutoGen knows for the client's model),
    counted as the client counts: exactly with the model's OpenAI encoding, ``cl100k_base`` for a model that has
    none (AutoGen's choice for Ollama's models)."""
    model = str(model_client._create_args["model"])
    known = any(model.startswith(f) for f in MODEL_FAMILIES if MODEL_FAMILIES[f][0])
    counter = counter_for_model(model) if known else ExactTokenCounter("cl100k_base")
    if token_limit is None:
        limits = importlib.import_module(type(model_client).__module__.rsplit(".", 1)[0] + "._model_info")
        token_limit = int(limits.get_token_limit(model))
    return _context([TokenBudgetComposedStrategy([], token_budget=token_limit, counter=counter)], initial_messages)


def HeadAndTailChatCompletionContext(  # noqa: N802
    head_size: int, tail_size: int, initial_messages: Sequence[LLMMessage] | None = None
) -> Any:
    """No Ravi strategy puts a placeholder between a head and a tail; the tests of this context are skipped."""
    raise NotImplementedError("no Ravi strategy puts a 'Skipped N messages' placeholder between head and tail")


def _ravi_by_default() -> RaviChatCompletionContext:
    """The context an ``AssistantAgent`` given none makes: Ravi's, built from settings (in memory, or the configured
    store), so the agent serialises as a component."""
    ravi_upstream.built()
    return RaviChatCompletionContext(session_id=uuid.uuid4().hex)


# AutoGen's own class, with Ravi as the context it makes when given none (where it made an
# UnboundedChatCompletionContext): a subclass would not load back from its own dump_component().
_assistant_agent.UnboundedChatCompletionContext = _ravi_by_default  # type: ignore[attr-defined]
AssistantAgent = _assistant_agent.AssistantAgent


def _mcp_stand_in() -> None:
    """autogen-ext 0.7.5's MCP tools do not import beside mcp 2 (which openai-agents 0.24 needs): the test file
    imports them at its top, so they are replaced by names that refuse to be used, and the two tests that use
    them are skipped."""
    try:
        import autogen_ext.tools.mcp  # noqa: F401
    except ImportError:
        stand_in = types.ModuleType("autogen_ext.tools.mcp")

        class _Unavailable:
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                raise ImportError("autogen_ext.tools.mcp does not import beside mcp 2")

        stand_in.McpWorkbench = type("McpWorkbench", (_Unavailable,), {})  # type: ignore[attr-defined]
        stand_in.SseServerParams = type("SseServerParams", (_Unavailable,), {})  # type: ignore[attr-defined]
        sys.modules["autogen_ext.tools.mcp"] = stand_in


_mcp_stand_in()

_MCP = (
    "serialises an agent with autogen-ext's McpWorkbench, whose module does not import beside mcp 2 (which "
    "openai-agents 0.24 needs)"
)
_HEAD_AND_TAIL = (
    "HeadAndTailChatCompletionContext: AutoGen's own strategy that puts a 'Skipped N messages' placeholder "
    "between the first and the last messages; Ravi has no such strategy"
)

NOT_APPLICABLE: dict[str, dict[str, str]] = {
    "autogen-core": {"tests/test_model_context.py::test_head_and_tail_model_context": _HEAD_AND_TAIL},
    "autogen-agentchat": {
        "tests/test_assistant_agent.py::test_workbench_serialize_and_deserialize": _MCP,
        "tests/test_assistant_agent.py::test_multiple_workbenches_serialize_and_deserialize": _MCP,
    },
}
