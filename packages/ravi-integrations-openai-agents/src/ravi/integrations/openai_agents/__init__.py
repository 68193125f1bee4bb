"""Ravi inside the OpenAI Agents SDK (``pip install ravi-integrations-openai-agents``).

* :class:`RaviSession`: the SDK's ``Session`` (``get_items``, ``add_items``, ``pop_item``, ``clear_session``)
  over any Ravi history store, lossless for every item kind.
* :func:`ravi_input_filter`: a ``RunConfig(call_model_input_filter=...)`` that sends the model Ravi's window.
"""

from ravi.integrations.openai_agents.convert import group, items_of, to_ravi
from ravi.integrations.openai_agents.session import RaviSession
from ravi.integrations.openai_agents.window import ravi_input_filter

__all__ = ["RaviSession", "group", "items_of", "ravi_input_filter", "to_ravi"]
