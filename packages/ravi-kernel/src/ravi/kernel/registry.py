"""Backends by name: one entry-point group per storage Protocol.

A distribution registers a backend by declaring an entry point, for example in its ``pyproject.toml``::

    [project.entry-points."ravi.history"]
    postgres = "ravi.capabilities.postgres:PostgresHistoryProvider"

The object named is a factory (usually the class) called with the backend's options as keyword arguments; a
factory that declares an options model (``Options``, a :class:`ravi.kernel.options.BackendOptions`) has them
checked and converted by it first. Entry points stay strings until a backend is asked for: listing backends
imports nothing of them.

Example:
    >>> from ravi.kernel.registry import available
    >>> "memory" in available("history")  # with ravi-agents installed
    True
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable, Mapping
from importlib import import_module
from importlib.metadata import EntryPoint, entry_points
from typing import Any, Literal, Protocol, runtime_checkable

from ravi.kernel.env import env_name
from ravi.kernel.errors import ConfigurationError, RaviError
from ravi.kernel.options import options_model

Kind = Literal["history", "state", "longterm", "vector", "graph", "blob", "tasks", "summaries"]

GROUPS: Mapping[str, str] = {
    "history": "ravi.history",
    "state": "ravi.state",
    "longterm": "ravi.longterm",
    "vector": "ravi.vector",
    "graph": "ravi.graph",
    "blob": "ravi.blob",
    "tasks": "ravi.tasks",
    "summaries": "ravi.summaries",
}
"""Store kind to entry-point group."""

PROTOCOLS: Mapping[str, str] = {
    "history": "HistoryProvider",
    "state": "ShortTermMemory",
    "longterm": "LongTermMemory",
    "vector": "VectorStore",
    "graph": "GraphStore",
    "blob": "BlobStore",
    "tasks": "TaskStore",
    "summaries": "SummaryStore",
}
"""Store kind to the name of its Protocol in ``ravi.kernel.storage``."""

KNOWN_BACKENDS: Mapping[str, tuple[str, frozenset[str]]] = {
    "memory": ("ravi-agents", frozenset(GROUPS)),
    "postgres": (
        "ravi-capabilities-postgres",
        frozenset({"history", "state", "longterm", "vector", "tasks", "summaries"}),
    ),
    "redis": ("ravi-capabilities-redis", frozenset({"history", "state", "longterm", "summaries"})),
    "s3": ("ravi-capabilities-s3", frozenset({"blob"})),
    "age": ("ravi-capabilities-age", frozenset({"graph"})),
}
"""Backends Ravi publishes: name to (distribution, kinds it serves), used to say what to install."""


CLONE_NEEDS: Mapping[str, tuple[str, ...]] = {"ravi-agents[embeddings]": ("ravi-embeddings-wordllama",)}
"""The other distributions of Ravi an extra needs, whose directories an install from a clone gives too (pip would
look for them on the package index)."""


def install_command(*requirements: str, upgrade: bool = False) -> str:
    """What to run to install ``requirements`` (distributions of Ravi, each with its extras, such as
    ``"ravi-agents[otel]"``): the command for the package index, then the one for a clone of Ravi, at its root
    (``./packages/<distribution>``). Every hint Ravi gives about installing something is written with it.

    Example:
        >>> print(install_command("ravi-agents[otel]").replace("; ", "\\n"))
        pip install 'ravi-agents[otel]'
        from a clone of Ravi, at its root: pip install './packages/ravi-agents[otel]'
    """

    def quoted(requirement: str) -> str:
        return f"'{requirement}'" if "[" in requirement else requirement

    local: list[str] = []
    for requirement in requirements:
        local += [f"./packages/{d}" for d in CLONE_NEEDS.get(requirement, ()) if f"./packages/{d}" not in local]
        local.append(f"./packages/{requirement}")
    pip = "pip install --upgrade" if upgrade else "pip install"
    index = " ".join(quoted(r) for r in requirements)
    clone = " ".join(quoted(r) for r in local)
    return f"{pip} {index}; from a clone of Ravi, at its root: {pip} {clone}"


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """``"did you mean 'x'? "`` for the closest of ``choices`` to a misspelt ``word``, else ``""``."""
    close = difflib.get_close_matches(word, list(choices), n=1)
    return f"did you mean {close[0]!r}? " if close else ""


def _group(kind: str) -> str:
    try:
        return GROUPS[kind]
    except KeyError:
        raise ConfigurationError(
            f"unknown store kind {kind!r}", hint=f"{did_you_mean(kind, GROUPS)}expected one of: {', '.join(GROUPS)}"
        ) from None


def _entry_points(kind: str) -> dict[str, EntryPoint]:
    found: dict[str, EntryPoint] = {}
    for ep in entry_points(group=_group(kind)):
        other = found.get(ep.name)
        if other is not None and other.value != ep.value:
            raise ConfigurationError(
                f"two installed distributions register the {kind} backend {ep.name!r}: "
                f"{_origin(other)} ({other.value}) and {_origin(ep)} ({ep.value})",
                hint="uninstall one of them; Ravi refuses to pick one silently",
            )
        found[ep.name] = ep
    return found


def _origin(ep: EntryPoint) -> str:
    dist = getattr(ep, "dist", None)
    return f"{dist.name}" if dist is not None else "an unknown distribution"


def available(kind: str) -> dict[str, str]:
    """The installed backends of ``kind``: name to the object path it loads (nothing is imported).

    Raises:
        ConfigurationError: ``kind`` is not a store kind, or two distributions claim one name.
    """
    return {name: ep.value for name, ep in sorted(_entry_points(kind).items())}


def install_hint(kind: str, name: str) -> str | None:
    """The distribution that provides backend ``name`` for ``kind``, if Ravi publishes one."""
    known = KNOWN_BACKENDS.get(name)
    if known is None or kind not in known[1]:
        return None
    return known[0]


def backend_factory(kind: str, name: str) -> Callable[..., Any]:
    """The factory registered for backend ``name`` of ``kind``, imported on this call.

    Raises:
        ConfigurationError: no such backend is installed (the message lists the installed ones and the
            distribution to install), importing it failed (or raised), or its module lacks the object it names.
    """
    eps = _entry_points(kind)
    ep = eps.get(name)
    if ep is None:
        installed = ", ".join(sorted(eps)) or "none"
        dist = install_hint(kind, name)
        hint = (
            f"install it with: {install_command(dist)}"
            if dist
            else f"{did_you_mean(name, eps)}it is either misspelled or not installed; a backend registers itself "
            f"under the entry-point group {GROUPS[kind]!r}"
        )
        raise ConfigurationError(f"no {kind} backend named {name!r} is installed (installed: {installed})", hint=hint)
    try:
        import_module(ep.module)
    except ImportError as error:
        missing = error.name if isinstance(error, ModuleNotFoundError) else None
        own = bool(missing) and f"{ep.module}.".startswith(f"{missing}.")  # the entry point's module, not a driver
        raise ConfigurationError(
            f"the {kind} backend {name!r} ({ep.value}) failed to import: {error}",
            hint=f"check the module its entry point names in the group {GROUPS[kind]!r}, or reinstall {_origin(ep)}"
            if own
            else f"reinstall {_origin(ep)} with its dependencies",
        ) from error
    except Exception as error:  # the backend's module raised while it was imported: its error, not a traceback
        raise ConfigurationError(
            f"the {kind} backend {name!r} ({ep.value}) failed to import: {type(error).__name__}: {error}",
            hint=f"importing {ep.module} must succeed for {_origin(ep)} to be used",
        ) from error
    try:
        factory = ep.load()
    except AttributeError as error:
        raise ConfigurationError(
            f"the {kind} backend {name!r} ({ep.value}) failed to load: {error}",
            hint=f"correct the object its entry point names in the group {GROUPS[kind]!r} (module:attribute) in "
            f"the pyproject.toml of {_origin(ep)}, and reinstall it",
        ) from error
    if not callable(factory):
        raise ConfigurationError(f"the {kind} backend {name!r} ({ep.value}) is not callable")
    return factory  # type: ignore[no-any-return]


LOCAL_SERVERS = "ravi.local"
"""Entry-point group of throwaway servers that capabilities offer for demos and tests (``postgres``, ...).

Each names a class whose instances have ``start()``, ``stop()`` and ``backend_options()`` (the options that
point that capability's backends at the running server)."""


@runtime_checkable
class ServesOtherBackends(Protocol):
    """An optional ability of a local server (:data:`LOCAL_SERVERS`): the stores another backend keeps on it, by
    kind (the local Postgres build includes Apache AGE: ``{"graph": "age"}``). ``ravi dev SERVER --kind KIND``
    prints their configuration beside its own backend's."""

    serves: Mapping[str, str]


def local_server(name: str) -> Any:
    """A new, not yet started, throwaway server registered as ``name`` in :data:`LOCAL_SERVERS`.

    Raises:
        ConfigurationError: none is registered under that name (the message says what to install).
    """
    eps = {ep.name: ep for ep in entry_points(group=LOCAL_SERVERS)}
    ep = eps.get(name)
    if ep is None:
        dist = KNOWN_BACKENDS.get(name, (None,))[0]
        hint = install_command(f"{dist}[local]") if dist and dist != "ravi-agents" else "choose one of the installed"
        raise ConfigurationError(
            f"no local {name} server is installed (installed: {', '.join(sorted(eps)) or 'none'})", hint=hint
        )
    try:
        return ep.load()()
    except ImportError as error:
        raise ConfigurationError(
            f"the local {name} server failed to import: {error}",
            hint=install_command(f"{KNOWN_BACKENDS.get(name, ('?',))[0]}[local]"),
        ) from error


def check_options(
    kind: str,
    name: str,
    options: Mapping[str, Any],
    *,
    origins: Mapping[str, str] | None = None,
    where: str | None = None,
) -> dict[str, Any]:
    """The options of backend ``name`` of ``kind``, checked and converted by the options model it declares
    (:class:`ravi.kernel.options.BackendOptions`; strings from variables become numbers, booleans, durations).
    A backend that declares none gets ``options`` as they are.

    Args:
        kind, name: The backend.
        options: Its options, from configuration (strings from variables included).
        origins: Where each option came from (``RAVI_HISTORY__DSN``, ``ravi.toml [history]``), for messages.
        where: What the message says the options are for (default ``the history backend 'postgres'``).

    Raises:
        ConfigurationError: unknown kind or name, or options the model refuses (naming each, and where it came
            from when ``origins`` says).
    """
    model = options_model(backend_factory(kind, name))
    if model is None:
        return dict(options)
    return model.parse(options, origins=origins, where=where or f"the {kind} backend {name!r}", kind=kind).given()


def _missing_hint(kind: str, error: str) -> str:
    """Where to set the arguments a constructor without an options model says are missing (``TypeError``:
    "missing 1 required positional argument: 'dsn'"), else where to look."""
    found = re.search(r"missing \d+ required (?:positional|keyword-only) arguments?: (.+)$", error)
    if found is None:
        return "check the option names in the backend's documentation"
    keys = ", ".join(f"{k} (or {env_name(f'{kind}__{k}')})" for k in re.findall(r"'(\w+)'", found.group(1)))
    return f"set {keys} in the [{kind}] table of ravi.toml"


def build_backend(kind: str, name: str, options: Mapping[str, Any], *, origins: Mapping[str, str] | None = None) -> Any:
    """Backend ``name`` of ``kind``, built with ``options`` checked by its options model (:func:`check_options`).

    Raises:
        ConfigurationError: unknown kind or name, an import failure, options the backend rejects, or a
            constructor that failed with an exception of its own or its driver's (named in the message).
    """
    factory = backend_factory(kind, name)
    checked = check_options(kind, name, options, origins=origins)
    try:
        return factory(**checked)
    except RaviError:
        raise
    except TypeError as error:
        raise ConfigurationError(
            f"bad options for the {kind} backend {name!r}: {error}", hint=_missing_hint(kind, str(error))
        ) from error
    except Exception as error:  # a third party's constructor: its driver's error must not leak out of Ravi
        raise ConfigurationError(
            f"the {kind} backend {name!r} could not be built: {type(error).__name__}: {error}",
            hint=f"check its options ({', '.join(sorted(checked)) or 'none given'})",
        ) from error


def load_backend(kind: str, name: str, **options: Any) -> Any:
    """Build backend ``name`` of ``kind`` with ``options`` (for example ``dsn=...``), checked by its options
    model (:func:`build_backend`).

    Raises:
        ConfigurationError: unknown kind or name, an import failure, options the backend rejects, or a
            constructor that failed.

    Example:
        >>> history = load_backend("history", "memory")
    """
    return build_backend(kind, name, options)


__all__ = [
    "CLONE_NEEDS",
    "GROUPS",
    "KNOWN_BACKENDS",
    "PROTOCOLS",
    "Kind",
    "LOCAL_SERVERS",
    "ServesOtherBackends",
    "available",
    "backend_factory",
    "build_backend",
    "check_options",
    "did_you_mean",
    "install_command",
    "install_hint",
    "load_backend",
    "local_server",
]
