"""Ravi's in-process layer: context assembly, the in-memory stores, the summarisers and the ``ravi`` command."""
