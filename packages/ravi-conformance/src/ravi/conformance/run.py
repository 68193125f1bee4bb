"""Contract classes bound to the backends chosen with ``--ravi-backend`` (see :mod:`ravi.conformance.plugin`).

Collected with ``pytest --ravi-backend KIND=NAME --pyargs ravi.conformance.run``; the kinds not chosen are
deselected.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from ravi.conformance import (
    BlobStoreContract,
    CypherCapableContract,
    GraphStoreContract,
    HistoryProviderContract,
    HistorySearcherContract,
    HybridSearcherContract,
    LongTermMemoryContract,
    ShortTermMemoryContract,
    SummaryStoreContract,
    TaskStoreContract,
    VectorStoreContract,
    WindowReaderContract,
)
from ravi.conformance.plugin import SHARED_IN_PROCESS, check_destroy, close_backend, targets
from ravi.kernel.registry import build_backend


async def _build(request: pytest.FixtureRequest, kind: str) -> AsyncIterator[Any]:
    target = next((t for t in targets(request.config) if t.kind == kind), None)
    if target is None:
        pytest.skip(f"no --ravi-backend {kind}=NAME given")
    options = target.test_options()
    request.node.stash[_OPTIONS] = options
    built = build_backend(kind, target.name, options, origins=target.origins)
    if kind == "blob":
        await built.connect()
    try:
        yield built
    finally:
        if target.isolate:  # the test's own scope: leave nothing behind
            check_destroy(target, built)
            await built.destroy()
        await close_backend(kind, built)


_OPTIONS = pytest.StashKey[dict[str, Any]]()
"""The options the test's backend was built with, so that its peer reaches the same store."""


# The contracts and the kind of backend each runs against; a test class per contract, named after it.
CONTRACTS: dict[type, str] = {
    HistoryProviderContract: "history",
    WindowReaderContract: "history",
    HistorySearcherContract: "history",
    HybridSearcherContract: "history",
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
    """The ``backend`` fixture of every contract here: the registered backend of the class's ``ravi_kind``; and
    its ``peer``: another provider on the same store, as a second process would have one."""

    ravi_kind: str

    @pytest_asyncio.fixture
    async def backend(self, request: pytest.FixtureRequest) -> AsyncIterator[Any]:
        async for built in _build(request, self.ravi_kind):
            yield built

    @pytest_asyncio.fixture
    async def peer(self, request: pytest.FixtureRequest, backend: Any) -> AsyncIterator[Any]:
        """The in-memory store is its one instance; a persistent one is built again with the test's options (the
        same schema, prefix or file). A backend that is not isolated may keep a store of its own per instance
        (an in-memory one without options), so its peer is the backend itself, the contracts' default; the
        windowed read's test of another process's writes, which needs a second provider, skips saying so."""
        target = next(t for t in targets(request.config) if t.kind == self.ravi_kind)
        if target.name in SHARED_IN_PROCESS:
            yield backend
            return
        if not target.isolate:
            if isinstance(self, WindowReaderContract):
                pytest.skip(
                    f"no second provider on the same store: {target.name} is not isolated per test; with "
                    f"--isolate {self.ravi_kind}=OPTION (--ravi-isolate), OPTION naming where its data lives and "
                    "an async destroy() removing it, this test gets a second provider built with the same options"
                )
            yield backend
            return
        built = build_backend(self.ravi_kind, target.name, request.node.stash[_OPTIONS], origins=target.origins)
        try:
            yield built
        finally:
            await close_backend(self.ravi_kind, built)


for _contract, _kind in CONTRACTS.items():
    _name = "Test" + _contract.__name__.removesuffix("Contract")
    globals()[_name] = pytest.mark.ravi_kind(_kind)(
        type(_name, (_Registered, _contract), {"ravi_kind": _kind, "__module__": __name__})
    )
