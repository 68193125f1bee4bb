"""Each framework's own tests of its memory interface, ported to Ravi's adapters (``scripts/upstream``), on the
real Postgres and Redis servers: the same files the packages' tests run on the in-memory store, pointed at a
server by configuration alone (``RAVI_HISTORY__*``), as a user would swap stores.

langchain-postgres's tests open a psycopg connection of their own, so they run here only, where a Postgres
server is at hand, on the in-memory store too. Every run prints its counts (``-rA`` shows them).
"""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest
from servers import Server
from upstream_suites import described, run

ON_SERVERS = ["openai-agents", "langchain-core", "langchain-postgres", "langchain", "autogen-core", "autogen-agentchat"]


def langchain_postgres_env(server: Server) -> dict[str, str]:
    """The ``POSTGRES_*`` variables langchain-postgres's tests build their connection from."""
    url = urlsplit(server.address)
    return {
        "POSTGRES_HOST": url.hostname or "localhost",
        "POSTGRES_PORT": str(url.port or 5432),
        "POSTGRES_USER": url.username or "postgres",
        "POSTGRES_PASSWORD": url.password or "postgres",
        "POSTGRES_DB": url.path.lstrip("/") or "postgres",
    }


def check(summary: dict[str, object]) -> None:
    print(described(summary))  # the counts, for the integration pages
    assert summary["failed"] == 0, described(summary) + "\n" + str(summary["output"])
    assert summary["passed"], described(summary)


@pytest.mark.parametrize("suite", ON_SERVERS)
def test_the_frameworks_own_tests_pass_on_postgres(suite: str, postgres_server: Server, pg_schema: str) -> None:
    env = langchain_postgres_env(postgres_server) if suite == "langchain-postgres" else {}
    check(run(suite, history={"backend": "postgres", "dsn": postgres_server.address, "schema": pg_schema}, env=env))


@pytest.mark.parametrize("suite", ON_SERVERS)
def test_the_frameworks_own_tests_pass_on_redis(suite: str, redis_server: Server, postgres_server: Server) -> None:
    env = langchain_postgres_env(postgres_server) if suite == "langchain-postgres" else {}
    check(run(suite, history={"backend": "redis", "url": redis_server.address}, env=env))


def test_langchain_postgres_tests_pass_in_memory(postgres_server: Server) -> None:
    """The history in memory; only the connection the tests open goes to the server."""
    check(run("langchain-postgres", env=langchain_postgres_env(postgres_server)))
