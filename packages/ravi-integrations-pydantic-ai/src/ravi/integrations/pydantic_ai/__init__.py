"""Ravi inside PydanticAI (``pip install ravi-integrations-pydantic-ai``).

* :class:`RaviHistory`: a capability (``Agent(..., capabilities=[...])``) that keeps every message of a run in
  any Ravi history store and sends the model Ravi's window, never writing it back into the run.
* :func:`to_ravi` and :func:`from_ravi`: the lossless message conversions it uses.
"""

from ravi.integrations.pydantic_ai.capability import RaviHistory
from ravi.integrations.pydantic_ai.convert import from_ravi, to_ravi

__all__ = ["RaviHistory", "from_ravi", "to_ravi"]
