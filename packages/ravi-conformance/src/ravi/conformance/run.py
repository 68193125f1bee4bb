"""Contract classes bound to the backends chosen with ``--ravi-backend`` (see :mod:`ravi.conformance.plugin`).

Collected with ``pytest --ravi-backend KIND=NAME --pyargs ravi.conformance.run``; the kinds not chosen are
deselected.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from ravi.conformance import (
    BlobStoreContract,
    CypherCapableContract,
    GraphStoreContract,
    HistoryProviderContract,
    LongTermMemoryContract,
    ShortTermMemoryContract,
    SummaryStoreContract,
    TaskStoreContract,
    VectorStoreContract,
    WindowReaderContract,
)
from ravi.conformance.plugin import backend_options, isolated_options, selected_backends
from ravi.kernel.registry import load_backend


async def _build(request: pytest.FixtureRequest, kind: str) -> AsyncIterator[Any]:
    name = selected_backends(request.config).get(kind)
    if name is None:
        pytest.skip(f"no --ravi-backend {kind}=NAME given")
    isolate = isolated_options(request.config).get(kind)
    built = load_backend(kind, name, **backend_options(kind, isolate=isolate))
    if kind == "blob":
        await built.connect()
    try:
        yield built
    finally:
        destroy = getattr(built, "destroy", None)
        if isolate and destroy is not None:  # the test's own scope: leave nothing behind
            await destroy()
        closer = getattr(built, "disconnect" if kind == "blob" else "close", None)
        if closer is not None:
            result = closer()
            if inspect.isawaitable(result):
                await result


# The contracts and the kind of backend each runs against; a test class per contract, named after it.
CONTRACTS: dict[type, str] = {
    HistoryProviderContract: "history",
    WindowReaderContract: "history",
    ShortTermMemoryContract: "state",
    LongTermMemoryContract: "longterm",
    VectorStoreContract: "vector",
    GraphStoreContract: "graph",
    CypherCapableContract: "graph",
    BlobStoreContract: "blob",
    TaskStoreContract: "tasks",
    SummaryStoreContract: "summaries",
}


class _Registered:
    """The ``backend`` fixture of every contract here: the registered backend of the class's ``ravi_kind``."""

    ravi_kind: str

    @pytest_asyncio.fixture
    async def backend(self, request: pytest.FixtureRequest) -> AsyncIterator[Any]:
        async for built in _build(request, self.ravi_kind):
            yield built


for _contract, _kind in CONTRACTS.items():
    _name = "Test" + _contract.__name__.removesuffix("Contract")
    globals()[_name] = pytest.mark.ravi_kind(_kind)(
        type(_name, (_Registered, _contract), {"ravi_kind": _kind, "__module__": __name__})
    )
