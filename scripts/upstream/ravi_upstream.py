"""The pytest plugin that runs a framework's own tests, ported by ``port.py``, on Ravi's adapters.

Each ported suite's ``pytest.ini`` loads it (``-p ravi_upstream``). It reads the suite's ``MANIFEST.json`` and
the integration's ``ravi_port.py`` (the stand-ins and what does not apply), and:

* collects only the ported test files (a helper module named ``test_*.py`` is imported, not run);
* in the files ported as *selected*, keeps only the tests whose source names a rebound object (the others never
  reach Ravi, and are deselected);
* skips each test ``ravi_port.NOT_APPLICABLE`` lists, with its reason (the framework internal it probes);
* gives each test a scope of its own in the store (:func:`scope`), in memory or, with
  ``RAVI_UPSTREAM_STORE=configured``, the history store that ``RAVI_HISTORY__*`` configure (Postgres, Redis);
* records which tests built a Ravi adapter (:func:`built`), and prints one summary line,
  ``RAVI-UPSTREAM {json}``: the suite, its version, the store, and the counts of tests ported, passed, failed and
  skipped (with reasons), and of those that built a Ravi adapter.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import json
import os
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

_store: Any = None
_test = {"nonce": uuid.uuid4().hex[:8], "built": False}
_RUN = uuid.uuid4().hex[:6]


def store() -> Any:
    """The history store every stand-in of this run uses: in memory, or the configured one."""
    global _store
    if _store is None:
        if configured():
            from ravi.agents.settings import build_store

            _store = build_store("history")
        else:
            from ravi.agents.context import InMemoryHistoryProvider

            _store = InMemoryHistoryProvider()
    return _store


def configured() -> bool:
    """Whether the stand-ins use the store ``RAVI_HISTORY__*`` configure (else one in memory)."""
    return os.environ.get("RAVI_UPSTREAM_STORE") == "configured"


def scope(name: object = "") -> str:
    """An agent scope standing for ``name`` (a database path, a key prefix) in the current test: the same name
    gives the same scope within a test, and no two tests share one."""
    return f"up-{_RUN}-{_test['nonce']}-{uuid.uuid5(uuid.NAMESPACE_URL, str(name)).hex[:12]}"


def built() -> None:
    """Record that the current test built a Ravi adapter (stand-ins call this)."""
    _test["built"] = True


class _Port:
    def __init__(self, config: pytest.Config) -> None:
        self.root = Path(str(config.rootpath))
        self.manifest = json.loads((self.root / "MANIFEST.json").read_text())
        self.suite: str = self.manifest["dist"]
        self.tests = {self.root / p for p in self.manifest["whole"] + self.manifest["selected"]}
        self.selected = {self.root / p for p in self.manifest["selected"]}
        port = importlib.import_module("ravi_port")
        if not config.pluginmanager.is_registered(port):
            config.pluginmanager.register(port, "ravi_port")  # its hooks and fixtures, if it has any
        self.not_applicable: dict[str, str] = port.NOT_APPLICABLE.get(self.suite, {})
        self.names = tuple(self.manifest["rebind"])
        self.outcomes: dict[str, str] = {}
        self.reasons: dict[str, str] = {}
        self.built: set[str] = set()
        self.ported = 0

    def reason(self, item: pytest.Item) -> str | None:
        path = Path(str(item.path)).relative_to(self.root).as_posix()
        name = getattr(item, "originalname", item.name)
        for key in (f"{path}::{item.name}", f"{path}::{name}", item.name, name, f"{path}::"):
            if key in self.not_applicable:
                return self.not_applicable[key]
        return None

    def builds(self, item: pytest.Item) -> bool:
        function = getattr(item, "function", None)
        try:
            source = inspect.getsource(function) if function is not None else ""
        except (OSError, TypeError):
            return True
        return any(f"{name}(" in source or f"{name}." in source for name in self.names)


_PORT: _Port | None = None


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini("ravi_suite", "the framework distribution whose tests these are")


def pytest_configure(config: pytest.Config) -> None:
    global _PORT
    _PORT = _Port(config)
    store()  # built here, not first inside a test's event loop (finding a backend reads package metadata)


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    if _PORT is not None and collection_path.is_file() and collection_path.name.startswith("test_"):
        return collection_path not in _PORT.tests
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    assert _PORT is not None
    kept, dropped = [], []
    for item in items:
        if Path(str(item.path)) in _PORT.selected and not _PORT.builds(item):
            dropped.append(item)
            continue
        kept.append(item)
        reason = _PORT.reason(item)
        if reason is not None:
            item.add_marker(pytest.mark.skip(reason=f"not for Ravi: {reason}"))
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept
    _PORT.ported = len(kept)


def pytest_runtest_logstart(nodeid: str, location: Any) -> None:
    _test["nonce"] = uuid.uuid4().hex[:8]
    _test["built"] = False


@pytest.fixture(autouse=True)
def _ravi_test_scope(request: pytest.FixtureRequest) -> Any:
    if "blockbuster" in request.fixturenames:
        _drivers_may_block(request.getfixturevalue("blockbuster"))
    yield
    if configured() and _store is not None:
        # A server store keeps a connection pool per event loop, and each test runs in a loop of its own: let go
        # of them, or a long suite runs the server out of connections (the next call opens a pool again).
        asyncio.run(_store.aclose())


# Where a suite's blocking-call detector (blockbuster) lets a server's driver block: while it sets up a new
# connection (reading ~/.pgpass and SSL paths, its own package version), once per connection; a pool is kept per
# event loop, and each test has a loop of its own. In memory nothing connects.
DRIVER_SETUP = (
    ("asyncpg/connect_utils.py", "_connect"),
    ("redis/asyncio/connection.py", "make_connection"),
)


def _drivers_may_block(blockbuster: Any) -> None:
    for function in blockbuster.functions.values():
        for module, name in DRIVER_SETUP:
            function.can_block_in(module, name)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    assert _PORT is not None
    if report.when == "call" or report.outcome != "passed":
        if report.outcome == "skipped":
            reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
            _PORT.reasons[report.nodeid] = reason.removeprefix("Skipped: ")
        if _PORT.outcomes.get(report.nodeid) != "failed":
            _PORT.outcomes[report.nodeid] = report.outcome
    if report.when == "teardown" and _test["built"]:
        _PORT.built.add(report.nodeid)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _PORT is None:
        return
    outcomes = Counter(_PORT.outcomes.values())
    summary = {
        "suite": _PORT.suite,
        "version": _PORT.manifest["version"],
        "store": os.environ.get("RAVI_HISTORY__BACKEND", "memory") if configured() else "memory",
        "ported": _PORT.ported,
        "passed": outcomes["passed"],
        "failed": outcomes["failed"],
        "skipped": outcomes["skipped"],
        "built": len(_PORT.built),
        "passed_built": sum(1 for n in _PORT.built if _PORT.outcomes.get(n) == "passed"),
        "skips": dict(Counter(_PORT.reasons.values()).most_common()),
        "failures": sorted(n for n, o in _PORT.outcomes.items() if o == "failed"),
    }
    terminalreporter.write_line("RAVI-UPSTREAM " + json.dumps(summary, sort_keys=True))
