"""Ravi inside LangChain v1 agents and LangGraph (``pip install ravi-integrations-langchain``).

* :class:`RaviContextMiddleware` for ``create_agent(..., middleware=[...])``: the agent's whole transcript in any
  Ravi history store, and Ravi's window (the configured pipeline, within its budget) before every model call,
  never written back into the graph's state.
* :class:`RaviChatMessageHistory`: LangChain's ``BaseChatMessageHistory`` over any Ravi history store, sync and
  async, lossless for every message kind.
* :func:`to_ravi` and :func:`to_langchain`: the message conversions both use.

Ravi belongs in the model call and the chat history, not in a LangGraph checkpointer, which stores the whole
graph state.
"""

from ravi.integrations.langchain.convert import to_langchain, to_ravi
from ravi.integrations.langchain.history import RaviChatMessageHistory
from ravi.integrations.langchain.middleware import RaviContextMiddleware

__all__ = ["RaviChatMessageHistory", "RaviContextMiddleware", "to_langchain", "to_ravi"]
