"""Where Ravi's configuration comes from: ``ravi.toml`` and ``RAVI_*`` variables.

The file is the path given, else ``$RAVI_CONFIG``, else ``./ravi.toml`` if it exists. Each store kind has a table
(``[history]``, ``[vector]``, ...) with its ``backend`` and options, and ``RAVI_<KIND>__<KEY>`` variables set or
override single keys (``RAVI_HISTORY__DSN=...``; their values are strings). ``ravi.agents.settings.RaviSettings``
reads the whole configuration, validated; :func:`store_config` reads one store's table the same way for code
below the agents layer (the conformance plugin).

Example:
    >>> CONFIG_FILE
    'ravi.toml'
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any

from ravi.kernel.env import env_name, read_env
from ravi.kernel.errors import ConfigurationError

CONFIG_FILE = "ravi.toml"
"""The configuration file Ravi looks for in the working directory."""


def config_path(path: str | Path | None = None) -> Path | None:
    """The configuration file: ``path``, else ``$RAVI_CONFIG``, else ``./ravi.toml`` if present, else ``None``.

    Raises:
        ConfigurationError: ``path`` (or ``$RAVI_CONFIG``) names a file that does not exist.
    """
    if path is not None:
        chosen = Path(path)
        if not chosen.is_file():
            raise ConfigurationError(f"configuration file {str(chosen)!r} does not exist")
        return chosen
    configured = read_env("config")
    if configured:
        return config_path(configured)
    default = Path.cwd() / CONFIG_FILE
    return default if default.is_file() else None


def read_config(path: str | Path | None = None) -> dict[str, Any]:
    """The parsed configuration file (see :func:`config_path`), or ``{}`` when there is none.

    Raises:
        ConfigurationError: the file does not exist or is not valid TOML.
    """
    found = config_path(path)
    if found is None:
        return {}
    try:
        return tomllib.loads(found.read_text())
    except tomllib.TOMLDecodeError as error:
        raise ConfigurationError(f"{found} is not valid TOML: {error}") from error


def store_config(kind: str, path: str | Path | None = None) -> dict[str, Any]:
    """One store's configuration: its ``[kind]`` table with ``RAVI_<KIND>__<KEY>`` variables over it, and
    ``backend`` (``"memory"`` unless configured).

    Raises:
        ConfigurationError: the file is invalid, or ``[kind]`` is not a table.
    """
    section = read_config(path).get(kind, {})
    if not isinstance(section, dict):
        raise ConfigurationError(
            f"[{kind}] in {CONFIG_FILE} must be a table", hint=f'write it as [{kind}] with backend = "..." below'
        )
    out: dict[str, Any] = dict(section)
    prefix = env_name(f"{kind}__")
    for name, value in os.environ.items():
        key = name[len(prefix) :].lower()
        if name.upper().startswith(prefix) and key and value != "":
            out[key] = value
    out.setdefault("backend", "memory")
    return out


__all__ = ["CONFIG_FILE", "config_path", "read_config", "store_config"]
