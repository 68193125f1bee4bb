"""Ravi inside AutoGen (``pip install ravi-integrations-autogen``).

* :class:`RaviChatCompletionContext`: an AutoGen ``ChatCompletionContext`` whose messages live in any Ravi
  history store and whose ``get_messages()`` is Ravi's window.
* :func:`to_ravi` and :func:`from_ravi`: the lossless message conversions it uses.
"""

from ravi.integrations.autogen.context import RaviChatCompletionContext
from ravi.integrations.autogen.convert import from_ravi, to_ravi

__all__ = ["RaviChatCompletionContext", "from_ravi", "to_ravi"]
