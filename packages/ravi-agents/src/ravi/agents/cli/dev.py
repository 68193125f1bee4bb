"""``ravi dev SERVER``: a local server from the installed wheels, up until you stop it, with the lines to paste.

The servers are the throwaway ones the capabilities register under the ``ravi.local`` entry points
(``LocalPostgres`` from ``ravi-capabilities-postgres[local]``, ``LocalRedis`` from ``ravi-capabilities-redis[local]``,
``LocalS3`` from ``ravi-capabilities-s3[local]``), so ``ravi-agents`` imports no capability. The command prints the
server's address, a ``ravi.toml`` section and the ``RAVI_*`` variables that point Ravi at it, then waits; Ctrl-C
(or SIGTERM) stops the server and removes its data.
"""

from __future__ import annotations

import difflib
import json
import shlex
import signal
import sys
from collections.abc import Mapping
from importlib.metadata import entry_points
from types import FrameType
from typing import Annotated, Any

import typer

from ravi.kernel.env import env_name
from ravi.kernel.errors import ConfigurationError
from ravi.kernel.registry import (
    GROUPS,
    KNOWN_BACKENDS,
    LOCAL_SERVERS,
    ServesOtherBackends,
    available,
    install_command,
    local_server,
)

_PUBLISHED = ("postgres", "redis", "s3")
"""The local servers Ravi's own capabilities bring, each in its ``[local]`` extra."""


def _servers() -> list[str]:
    return sorted({ep.name for ep in entry_points(group=LOCAL_SERVERS)})


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    return json.dumps(str(value))  # a TOML basic string: the same escapes as JSON's


def paste_lines(backends: Mapping[str, str], options: Mapping[str, Any]) -> tuple[str, str]:
    """The ``ravi.toml`` sections and the ``export`` lines that point each store kind of ``backends`` at the
    backend named there, on a server whose backend options are ``options``."""
    toml, exports = [], []
    for kind, name in backends.items():
        toml += [f"[{kind}]", f'backend = "{name}"', *(f"{key} = {_toml_value(v)}" for key, v in options.items()), ""]
        exports.append(f"export {env_name(f'{kind}__backend')}={shlex.quote(name)}")
        for key, value in options.items():
            text = _toml_value(value) if isinstance(value, bool) else str(value)
            exports.append(f"export {env_name(f'{kind}__{key}')}={shlex.quote(text)}")
    return "\n".join(toml).rstrip() + "\n", "\n".join(exports) + "\n"


class _Stop(Exception):
    """SIGTERM arrived: stop the server as Ctrl-C would."""


def _on_term(signum: int, frame: FrameType | None) -> None:
    raise _Stop


def dev(
    server: Annotated[str, typer.Argument(help="The server to run: postgres, redis or s3 (as installed).")],
    kind: Annotated[
        list[str] | None,
        typer.Option(
            "--kind",
            help="Store kinds to print the configuration for (repeatable; default: history, or blob for s3; graph on "
            "postgres is Apache AGE on the same server).",
        ),
    ] = None,
) -> None:
    """Start a local SERVER from the installed wheels and keep it up until Ctrl-C.

    Prints the server's address, the [KIND] section of ravi.toml and the RAVI_* variables that point Ravi at it.
    The data lives in a temporary directory and is removed when the server stops: this is for development and
    trying Ravi out, not for production.
    """
    installed = _servers()
    if server not in installed:
        close = difflib.get_close_matches(server, installed, n=1)
        packages = [f"ravi-capabilities-{name}[local]" for name in _PUBLISHED if name == server] or [
            f"ravi-capabilities-{name}[local]" for name in _PUBLISHED
        ]
        raise ConfigurationError(
            f"no local {server} server is installed (installed: {', '.join(installed) or 'none'})",
            hint=(f"did you mean {close[0]!r}? " if close else "")
            + "to get one: "
            + "; or ".join(install_command(p) for p in packages),
        )
    running = local_server(server)
    # the kinds the server's own backend serves, and those another backend serves on the same server (Apache AGE's
    # graph store on the local Postgres)
    backends = {k: server for k in GROUPS if server in available(k)}
    also = running.serves if isinstance(running, ServesOtherBackends) else {}
    backends.update({k: b for k, b in also.items() if k not in backends and b in available(k)})
    kinds = kind or (["history"] if "history" in backends else list(backends)[:1])
    for k in kinds:
        if k not in backends and k in also and also[k] in KNOWN_BACKENDS:  # the server has it; its backend is missing
            raise ConfigurationError(
                f"--kind {k}: the local {server} server serves {k} stores through the {also[k]!r} backend, "
                "which is not installed",
                hint="install it with: " + install_command(KNOWN_BACKENDS[also[k]][0]),
            )
        if k not in backends:
            raise ConfigurationError(
                f"--kind {k}: the local {server} server serves no {k} store",
                hint=f"it serves: {', '.join(backends)}",
            )
    typer.echo(f"starting a local {server} server ...", err=True)
    previous = signal.signal(signal.SIGTERM, _on_term)
    try:
        running.start()
        options = running.backend_options()
        address = next(str(v) for k, v in options.items() if k in ("dsn", "url", "endpoint_url"))
        toml, exports = paste_lines({k: backends[k] for k in kinds}, options)
        typer.echo(f"{server} is running at {address}\n")
        typer.echo("Paste into ravi.toml:\n")
        typer.echo(toml)
        typer.echo("or set these variables:\n")
        typer.echo(exports)
        typer.echo("The data is removed when the server stops. Press Ctrl-C to stop it.")
        sys.stdout.flush()
        while True:
            signal.pause()
    except (KeyboardInterrupt, _Stop):
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        running.stop()
    typer.echo(f"stopped the {server} server", err=True)


__all__ = ["dev", "paste_lines"]
