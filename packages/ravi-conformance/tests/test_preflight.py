"""The preflight of ``ravi conformance`` and ``--ravi-backend``: a backend that cannot pass says why in one line,
before any test runs."""

from __future__ import annotations

import asyncio
import functools
from importlib.metadata import EntryPoint
from typing import Any

import pytest

import ravi.agents.context.history  # noqa: F401 - the backends below load it
from ravi.agents.context import InMemoryHistoryProvider
from ravi.conformance import HistoryProviderContract, ShortTermMemoryContract
from ravi.conformance._base import protocol_gaps
from ravi.conformance.plugin import preflight, resolve
from ravi.kernel import registry
from ravi.kernel.errors import ConfigurationError
from ravi.kernel.storage import HistoryProvider


class SyncHistory:
    """The six methods of ``HistoryProvider``, two of them not ``async``."""

    def __init__(self) -> None:
        self.messages: list[Any] = []

    def append(self, agent_id: str, message: Any, *, session_id: str, run_id: str = "") -> None:
        self.messages.append(message)

    async def append_many(self, agent_id: str, messages: Any, *, session_id: str, run_id: str = "") -> None:
        self.messages.extend(messages)

    async def get_messages(self, agent_id: str, *, session_id: str, limit: int | None = None, offset: int = 0) -> Any:
        return list(self.messages)

    async def clear(self, agent_id: str, *, session_id: str) -> int:
        return 0

    async def clear_run(self, agent_id: str, *, session_id: str, run_id: str) -> int:
        return 0

    def count_messages(self, agent_id: str, *, session_id: str) -> int:
        return len(self.messages)


class PartialHistory:
    """Two of the six methods."""

    async def append(self, agent_id: str, message: Any, *, session_id: str, run_id: str = "") -> None:
        return None

    async def get_messages(self, agent_id: str, *, session_id: str, limit: int | None = None, offset: int = 0) -> Any:
        return []


def traced(method: Any) -> Any:
    """A decorator of the usual kind: a plain function that returns the wrapped method's coroutine."""

    @functools.wraps(method)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return method(*args, **kwargs)

    return wrapper


class TracedHistory(InMemoryHistoryProvider):
    """Every method of ``HistoryProvider`` wrapped by :func:`traced`."""

    append = traced(InMemoryHistoryProvider.append)
    count_messages = traced(InMemoryHistoryProvider.count_messages)


def test_an_async_method_behind_a_wrapping_decorator_is_async() -> None:
    """A decorator that keeps ``__wrapped__`` (``functools.wraps``) around an ``async def`` returns its
    coroutine: the backend is a ``HistoryProvider``."""
    assert protocol_gaps(TracedHistory(), HistoryProvider) == ""
    assert protocol_gaps(SyncHistory(), HistoryProvider) == "append, count_messages are not `async def`"


def registered(monkeypatch: pytest.MonkeyPatch, group: str, **targets: str) -> None:
    eps = [EntryPoint(name, target, group) for name, target in targets.items()]
    monkeypatch.setattr(registry, "entry_points", lambda group=None: [e for e in eps if e.group == group])


def test_a_backend_whose_module_fails_to_import_is_not_called_not_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    """An entry point whose module is missing was reported as "no history backend named 'x' is installed
    (installed: x, ...)", hiding the import error that says what is wrong."""
    registered(monkeypatch, "ravi.history", broken="ravi_conformance_no_such_module:Backend")
    with pytest.raises(ConfigurationError) as raised:
        resolve(["history=broken"])
    message = str(raised.value)
    assert "is installed" not in message
    assert "history=broken: the history backend 'broken'" in message
    assert "No module named 'ravi_conformance_no_such_module'" in message


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        (f"{__name__}:SyncHistory", "SyncHistory is not a HistoryProvider: append, count_messages are not `async def`"),
        (f"{__name__}:PartialHistory", "PartialHistory is not a HistoryProvider: it lacks append_many, clear, "),
    ],
    ids=["not-async", "missing-methods"],
)
def test_a_backend_without_the_protocols_methods_fails_the_preflight_naming_them(
    monkeypatch: pytest.MonkeyPatch, target: str, expected: str
) -> None:
    """Sync methods ran every test to "object int can't be used in 'await' expression", and missing ones to an
    ``AttributeError`` per test, after a preflight that passed."""
    registered(monkeypatch, "ravi.history", mine=target)
    with pytest.raises(ConfigurationError) as raised:
        preflight(["history=mine"])
    assert str(raised.value).startswith(f"history=mine: {expected}")
    assert "async def" in str(raised.value.hint)


@pytest.mark.parametrize(
    ("contract", "backend", "expected"),
    [
        (HistoryProviderContract, SyncHistory, "append, count_messages are not `async def`"),
        (HistoryProviderContract, PartialHistory, "it lacks append_many, clear, clear_run, count_messages"),
        (ShortTermMemoryContract, PartialHistory, "it lacks get_state, set_state, update_state, clear"),
    ],
)
def test_the_protocol_rule_names_what_is_missing(contract: type, backend: type, expected: str) -> None:
    """``test_is_a_history_provider`` failed with "assert False"."""
    name = next(n for n in vars(contract) if n.startswith("test_is_a_"))
    with pytest.raises(AssertionError) as raised:
        asyncio.run(getattr(contract(), name)(backend()))
    assert expected in str(raised.value)


def test_a_backend_that_is_not_isolated_gets_itself_as_its_peer(
    monkeypatch: pytest.MonkeyPatch, pytester: pytest.Pytester
) -> None:
    """A history backend ``ravi conformance`` could not isolate (an in-memory one without options) skipped the
    history rules that take a ``peer``, saying to run with ``--isolate``, which such a backend cannot; a
    subclass of the contract runs them with the backend itself, the fixture's default."""
    registered(monkeypatch, "ravi.history", plain="ravi.agents.context.history:InMemoryHistoryProvider")
    result = pytester.runpytest(
        "-p",
        "no:cacheprovider",
        "-p",
        "no:randomly",
        "-o",
        "asyncio_default_fixture_loop_scope=function",
        "--ravi-backend",
        "history=plain",
        "--pyargs",
        "ravi.conformance.run",
        "-k",
        "TestHistoryProvider and (reuses_ids_freely or puts_the_batch_in_place)",
        "-rs",
    )
    result.assert_outcomes(passed=2)
    assert "--isolate" not in result.stdout.str()
