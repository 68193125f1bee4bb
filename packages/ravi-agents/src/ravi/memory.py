"""002's ``memory`` facade: it imports, and exports nothing, as 002 gives it (kept for import-path parity).

Conversation memory is not here. The compaction engine 002 describes (``estimate_context_tokens``,
``should_compact``, ``find_cut_point``, ``summarize``, ``compact``) is :mod:`ravi.agents.context.functional`; the
context windows are :mod:`ravi.agents.context`; the stores (history, state, long-term memory) are the Protocols of
:mod:`ravi.kernel.storage`. Add nothing to this module.

Example:
    >>> import ravi.memory
    >>> ravi.memory.__all__
    []
"""

__all__: list[str] = []
