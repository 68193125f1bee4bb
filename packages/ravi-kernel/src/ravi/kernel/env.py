"""The environment registry: the one sanctioned way Ravi reads environment variables.

Ravi's own variables carry the ``RAVI_`` prefix (:data:`ENV_PREFIX`); :func:`env_name` brands a suffix into
one, :func:`read_env` reads it, :func:`read_prefixed` reads every variable under a prefix (the
``RAVI_<KIND>__<KEY>`` options of a store), and :func:`read_raw` is the escape hatch for names that are not
Ravi's own (``OPENAI_API_KEY``, ``RUNTIME_BACKEND``). :func:`environment` copies the whole environment for a
child process. :func:`ravi_home` is Ravi's state directory.

Example:
    >>> env_name("agent-dir")
    'RAVI_AGENT_DIR'
    >>> read_env("surely-not-set-in-any-environment") is None
    True
"""

from __future__ import annotations

import os
from pathlib import Path

from ravi.kernel.errors import InvalidArgument

ENV_PREFIX = "RAVI"
"""The prefix :func:`env_name` puts before every Ravi variable."""


def env_name(suffix: str) -> str:
    """The branded name of a variable: ``env_name("home") == "RAVI_HOME"`` (upper-cased, ``-`` becomes ``_``).

    Raises:
        InvalidArgument: ``suffix`` is not a string.
    """
    if not isinstance(suffix, str):
        raise InvalidArgument(f"a variable's suffix must be a string, got {type(suffix).__name__}", field="suffix")
    return f"{ENV_PREFIX}_{suffix.upper().replace('-', '_')}"


def read_env(suffix: str) -> str | None:
    """The value of the Ravi variable for ``suffix`` (``read_env("config")`` reads ``RAVI_CONFIG``), or ``None``."""
    return os.environ.get(env_name(suffix))


def read_raw(name: str) -> str | None:
    """The value of a variable that is not Ravi's own, by its literal name (``read_raw("AWS_REGION")``).

    Raises:
        InvalidArgument: ``name`` is not a string.
    """
    if not isinstance(name, str):
        raise InvalidArgument(f"a variable's name must be a string, got {type(name).__name__}", field="name")
    return os.environ.get(name)


def read_prefixed(suffix: str) -> dict[str, str]:
    """Every set, non-empty Ravi variable whose name starts with ``env_name(suffix)`` (the case of the name is
    ignored), by its name: ``read_prefixed("history__")`` gives ``{"RAVI_HISTORY__DSN": "..."}``."""
    prefix = env_name(suffix)
    return {name: value for name, value in os.environ.items() if name.upper().startswith(prefix) and value != ""}


def environment() -> dict[str, str]:
    """A copy of the whole environment, for a child process that must inherit it (a local server)."""
    return dict(os.environ)


def ravi_home() -> Path:
    """Ravi's state directory: ``$RAVI_HOME`` (with ``~`` and variables expanded) when set, else ``~/.ravi``."""
    configured = read_env("home")
    if configured:
        return Path(os.path.expandvars(configured)).expanduser()
    return Path.home() / ".ravi"


__all__ = ["ENV_PREFIX", "env_name", "environment", "ravi_home", "read_env", "read_prefixed", "read_raw"]
