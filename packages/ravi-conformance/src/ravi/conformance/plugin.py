"""The pytest plugin: ``--ravi-backend KIND[=NAME]`` runs the contract of KIND against a registered backend.

The backend and its options come from Ravi's configuration, as everywhere else: the ``[KIND]`` table of
``ravi.toml`` and ``RAVI_<KIND>__<KEY>`` variables (``RAVI_HISTORY__DSN=postgresql://localhost/ravi``). ``NAME``
overrides the configured backend. Run the suite with::

    RAVI_HISTORY__DSN=postgresql://localhost/ravi pytest --ravi-backend history=postgres --pyargs ravi.conformance.run
"""

from __future__ import annotations

from typing import Any

import pytest

from ravi.kernel.config import store_config
from ravi.kernel.env import env_name, read_env
from ravi.kernel.errors import ConfigurationError
from ravi.kernel.registry import GROUPS


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("ravi", "Ravi conformance")
    group.addoption(
        "--ravi-backend",
        action="append",
        default=[],
        metavar="KIND[=NAME]",
        help="run the conformance contract of KIND against the backend registered as NAME, or the one ravi.toml "
        f"and RAVI_<KIND>__BACKEND configure (kinds: {', '.join(GROUPS)}); repeatable",
    )
    group.addoption(
        "--ravi-isolate",
        action="append",
        default=[],
        metavar="KIND=OPTION",
        help="give the backend option OPTION (a schema, a key prefix, a bucket) a fresh value for every test, "
        "so a persistent backend starts empty each time; repeatable",
    )


def selected_backends(config: pytest.Config) -> dict[str, str]:
    """``kind -> name`` from ``--ravi-backend`` options (a bare KIND takes the configured backend)."""
    chosen: dict[str, str] = {}
    for spec in config.getoption("ravi_backend") or []:
        kind, sep, name = spec.partition("=")
        if kind not in GROUPS or (sep and not name):
            raise pytest.UsageError(
                f"--ravi-backend expects KIND or KIND=NAME with KIND one of {', '.join(GROUPS)}, got {spec!r}"
            )
        chosen[kind] = name or str(store_config(kind)["backend"])
    return chosen


ISOLATION = {"postgres": "schema", "redis": "prefix", "s3": "key_prefix", "age": "graph"}
"""The option that gives each test a scope of its own, for Ravi's persistent backends (used when no
``--ravi-isolate`` names one for the kind)."""


def isolated_options(config: pytest.Config) -> dict[str, str]:
    """``kind -> option`` from ``--ravi-isolate`` options, else the default of Ravi's own persistent backends."""
    chosen: dict[str, str] = {
        kind: ISOLATION[name] for kind, name in selected_backends(config).items() if name in ISOLATION
    }
    for spec in config.getoption("ravi_isolate") or []:
        kind, sep, option = spec.partition("=")
        if not sep or kind not in GROUPS or not option:
            raise pytest.UsageError(f"--ravi-isolate expects KIND=OPTION, got {spec!r}")
        chosen[kind] = option
    return chosen


def backend_options(kind: str, *, isolate: str | None = None) -> dict[str, Any]:
    """Options for the backend of ``kind``: its ``[kind]`` table in ``ravi.toml`` with ``RAVI_<KIND>__<KEY>``
    variables over it (:func:`ravi.kernel.config.store_config`), ``backend`` left out. With ``isolate``, that
    option gets a fresh value (its configured value, or ``ravi``, plus a random suffix).

    Raises:
        ConfigurationError: the configuration file is invalid, or ``RAVI_<KIND>_OPTIONS`` (no longer read) is set.
    """
    legacy = env_name(f"{kind}-options")
    if read_env(f"{kind}-options") is not None:
        raise ConfigurationError(
            f"{legacy} is no longer read",
            hint=f"set each option as {env_name(kind)}__<KEY> (for example {env_name(kind)}__DSN) or in the "
            f"[{kind}] table of ravi.toml",
        )
    options = {k: v for k, v in store_config(kind).items() if k != "backend"}
    if isolate:
        import uuid

        options[isolate] = f"{options.get(isolate) or 'ravi'}_{uuid.uuid4().hex[:12]}"
    return options


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "ravi_kind(kind): the store kind a conformance test class checks")
    try:  # bad configuration: one usage error, not a failure per test
        for kind in selected_backends(config):
            backend_options(kind)
    except ConfigurationError as error:
        raise pytest.UsageError(str(error)) from None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    chosen = selected_backends(config)
    if not chosen:
        return
    keep, drop = [], []
    for item in items:
        marker = item.get_closest_marker("ravi_kind")
        if marker is None or marker.args[0] in chosen:
            keep.append(item)
        else:
            drop.append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def contract_rule(item: pytest.Item) -> str | None:
    """The rule a contract test checks: its contract's name and the first paragraph of its docstring."""
    function = getattr(item, "function", None)
    cls = getattr(item, "cls", None)
    if function is None or cls is None:
        return None
    for owner in cls.__mro__:
        if function.__name__ in owner.__dict__ and owner.__module__.startswith("ravi.conformance."):
            doc = (owner.__dict__[function.__name__].__doc__ or "").strip()
            if not doc:
                return None
            contract = getattr(owner, "contract_name", owner.__name__)
            return f"{contract}: " + " ".join(doc.split("\n\n")[0].split())
    return None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """A failing contract test prints the rule it checks, beside pytest's own report."""
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        rule = contract_rule(item)
        if rule is not None:
            report.sections.append(("the contract rule that failed", rule))
