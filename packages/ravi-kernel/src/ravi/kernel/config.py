"""Where Ravi's configuration comes from: ``ravi.toml`` and ``RAVI_*`` variables.

The file is the path given, else ``$RAVI_CONFIG``, else ``./ravi.toml`` if it exists. Each store kind has a table
(``[history]``, ``[vector]``, ...) with its ``backend`` and options, and ``RAVI_<KIND>__<KEY>`` variables set or
override single keys (``RAVI_HISTORY__DSN=...``; their values are strings). ``ravi.agents.settings.RaviSettings``
reads the whole configuration, validated; :func:`store_sources` reads one store's table the same way for code
below the agents layer (the conformance plugin), saying where each option came from. A variable that switches a
store to another backend drops the file's options of the old one. The environment is read through the
registry of :mod:`ravi.kernel.env`.

Example:
    >>> CONFIG_FILE
    'ravi.toml'
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ravi.kernel.env import env_name, read_env, read_prefixed
from ravi.kernel.errors import ConfigurationError
from ravi.kernel.registry import GROUPS

CONFIG_FILE = "ravi.toml"
"""The configuration file Ravi looks for in the working directory."""


def config_path(path: str | Path | None = None) -> Path | None:
    """The configuration file: ``path``, else ``$RAVI_CONFIG``, else ``./ravi.toml`` if present, else ``None``.

    Raises:
        ConfigurationError: ``path`` (or ``$RAVI_CONFIG``) names a file that does not exist, a folder, or what is
            not a regular file (a device, a pipe).
    """
    if path is not None:
        chosen = Path(path)
        if chosen.is_dir():
            raise ConfigurationError(f"configuration file {str(chosen)!r} is a folder", hint="name the ravi.toml in it")
        if chosen.exists() and not chosen.is_file():  # /dev/null, a shell's <(...): read more than once, or empty
            raise ConfigurationError(
                f"configuration file {str(chosen)!r} is not a regular file (a device or a pipe)",
                hint="name a ravi.toml; the configuration is read more than once",
            )
        if not chosen.is_file():
            raise ConfigurationError(f"configuration file {str(chosen)!r} does not exist")
        return chosen
    configured = read_env("config")
    if configured:
        return config_path(configured)
    default = Path.cwd() / CONFIG_FILE
    return default if default.is_file() else None


SECTIONS = (*GROUPS, "context")
"""The sections of the configuration: a table of ``ravi.toml`` each, and the ``<SECTION>`` of a variable."""


def check_variables(sections: Iterable[str] = SECTIONS) -> None:
    """Refuse a ``RAVI_*`` variable that looks like a setting but is not read as one: a misspelt section
    (``RAVI_HISTROY__BACKEND``) or one underscore after the section (``RAVI_HISTORY_BACKEND``). Each reader of the
    variables checks them (the settings, :func:`store_sources`), so no store runs on the default backend while
    the variable that names another one goes unseen.

    Raises:
        ConfigurationError: naming the variable and the spelling that is read.
    """
    known = {s.lower() for s in sections}
    prefix = env_name("")
    for name in sorted(read_prefixed("")):
        section, nested, _ = name[len(prefix) :].partition("__")
        if nested and section.lower() not in known:
            raise ConfigurationError(
                f"{name} names no section of the settings (sections: {', '.join(sorted(known))})",
                hint=f"spell it {prefix}<SECTION>__<KEY>, as {env_name('history__backend')}",
            )
        head, single, key = section.partition("_")
        if not nested and single and key and head.lower() in known:  # RAVI_HISTORY_BACKEND: one underscore
            hint = f"spell it {prefix}{head}__{key}"
            if key.upper() == "OPTIONS":  # the JSON variable of older versions
                hint = f"set each option as {prefix}{head}__<KEY>, as {prefix}{head}__DSN"
            raise ConfigurationError(f"{name} is not read: a section's key follows two underscores", hint=hint)


def read_config(path: str | Path | None = None) -> dict[str, Any]:
    """The parsed configuration file (see :func:`config_path`), or ``{}`` when there is none.

    Raises:
        ConfigurationError: the file does not exist or is not valid TOML.
    """
    found = config_path(path)
    if found is None:
        return {}
    try:
        return tomllib.loads(found.read_bytes().decode("utf-8"))  # TOML is UTF-8, whatever the locale
    except UnicodeDecodeError as error:
        raise ConfigurationError(
            f"{found} is not valid TOML: it is not UTF-8 ({error.reason} at byte {error.start})"
        ) from None
    except tomllib.TOMLDecodeError as error:
        raise ConfigurationError(f"{found} is not valid TOML: {error}") from error


@dataclass(frozen=True)
class StoreConfig:
    """One store's configuration, and where each part of it came from.

    Attributes:
        kind: The store kind (``history``, ``vector``, ...).
        backend: The backend's entry-point name (``memory`` unless configured).
        options: The backend's options (values from variables are strings until the backend's options model
            converts them).
        origins: For each option, and for ``backend``, where it came from: the file (``ravi.toml [history]``),
            a variable (``RAVI_HISTORY__DSN``) or the caller.
        dropped: Options of the file's ``[kind]`` table left out because a variable (or the caller) switched
            the backend to another one.
    """

    kind: str
    backend: str
    options: dict[str, Any] = field(default_factory=dict)
    origins: dict[str, str] = field(default_factory=dict)
    dropped: tuple[str, ...] = ()


def store_sources(kind: str, path: str | Path | None = None, *, backend: str | None = None) -> StoreConfig:
    """One store's configuration: its ``[kind]`` table with ``RAVI_<KIND>__<KEY>`` variables over it.

    A variable that names another backend than the file does (``RAVI_HISTORY__BACKEND=memory`` over a
    ``[history]`` table with ``backend = "postgres"``) switches the store: the file's options, which belong to
    the file's backend, are dropped. ``backend`` (a caller's choice, such as ``ravi conformance history=NAME``)
    switches it the same way, over both.

    Raises:
        ConfigurationError: the file is invalid, or ``[kind]`` is not a table.
    """
    check_variables()
    found = config_path(path)
    section = read_config(found).get(kind, {})
    if not isinstance(section, dict):
        raise ConfigurationError(
            f"[{kind}] in {CONFIG_FILE} must be a table", hint=f'write it as [{kind}] with backend = "..." below'
        )
    where = f"{found.name if found else CONFIG_FILE} [{kind}]"
    file_options = {k: v for k, v in section.items() if k != "backend"}
    variables: dict[str, tuple[str, str]] = {}
    prefix = env_name(f"{kind}__")
    for name, value in read_prefixed(f"{kind}__").items():
        key = name[len(prefix) :].lower()
        if key:
            variables[key] = (name, value)
    chosen, origin = str(section.get("backend", "memory")), where if "backend" in section else "the default"
    dropped: tuple[str, ...] = ()
    switched = [(variables["backend"][1], variables["backend"][0])] if "backend" in variables else []
    if backend is not None:
        switched.append((backend, "the caller"))
    for name, source in switched:
        if "backend" in section and name != section["backend"] and file_options:
            dropped = tuple(file_options)
            file_options = {}
        chosen, origin = name, source
    options: dict[str, Any] = dict(file_options)
    origins = dict.fromkeys(file_options, where)
    for key, (name, value) in variables.items():
        if key != "backend":
            options[key], origins[key] = value, name
    origins["backend"] = origin
    return StoreConfig(kind, chosen, options, origins, dropped)


def store_config(kind: str, path: str | Path | None = None) -> dict[str, Any]:
    """One store's configuration as one mapping: ``backend`` and its options (see :func:`store_sources`).

    Raises:
        ConfigurationError: the file is invalid, or ``[kind]`` is not a table.
    """
    sources = store_sources(kind, path)
    return {**sources.options, "backend": sources.backend}


__all__ = [
    "CONFIG_FILE",
    "SECTIONS",
    "StoreConfig",
    "check_variables",
    "config_path",
    "read_config",
    "store_config",
    "store_sources",
]
