"""The pytest plugin: ``--ravi-backend KIND=NAME`` runs the contract of KIND against a registered backend.

Options for the backend come from the environment as a JSON object in ``RAVI_<KIND>_OPTIONS``, for example
``RAVI_HISTORY_OPTIONS='{"dsn": "postgresql://localhost/ravi"}'``. Run the suite with::

    pytest --ravi-backend history=postgres --pyargs ravi.conformance.run
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

from ravi.kernel.errors import ConfigurationError
from ravi.kernel.registry import GROUPS


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("ravi", "Ravi conformance")
    group.addoption(
        "--ravi-backend",
        action="append",
        default=[],
        metavar="KIND=NAME",
        help="run the conformance contract of KIND against the backend registered as NAME "
        f"(kinds: {', '.join(GROUPS)}); repeatable",
    )


def selected_backends(config: pytest.Config) -> dict[str, str]:
    """``kind -> name`` from ``--ravi-backend`` options."""
    chosen: dict[str, str] = {}
    for spec in config.getoption("ravi_backend") or []:
        kind, sep, name = spec.partition("=")
        if not sep or kind not in GROUPS or not name:
            raise pytest.UsageError(
                f"--ravi-backend expects KIND=NAME with KIND one of {', '.join(GROUPS)}, got {spec!r}"
            )
        chosen[kind] = name
    return chosen


def backend_options(kind: str) -> dict[str, Any]:
    """Options for the backend of ``kind`` from ``RAVI_<KIND>_OPTIONS`` (a JSON object)."""
    variable = f"RAVI_{kind.upper()}_OPTIONS"
    raw = os.environ.get(variable, "{}")
    try:
        options = json.loads(raw)
    except json.JSONDecodeError as error:
        raise ConfigurationError(f"{variable} is not valid JSON: {error.msg}") from error
    if not isinstance(options, dict):
        raise ConfigurationError(f"{variable} must be a JSON object")
    return options


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "ravi_kind(kind): the store kind a conformance test class checks")


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
