"""The connection layer shared by the Postgres stores: pool, migrations, identifiers and error mapping.

Every store owns one :class:`Database`: an asyncpg pool created on first use, with the store's schema created
and upgraded by versioned migrations under an advisory lock, so several processes starting at once apply each
migration exactly once. Driver exceptions never leave this module: :func:`mapped_errors` turns them into the
kernel's typed errors.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import asyncpg

from ravi.kernel.errors import (
    BackendUnavailable,
    ConfigurationError,
    InvalidArgument,
    PermissionDenied,
    RaviError,
)

_IDENTIFIER = re.compile(r"^[a-z_][a-z0-9_]{0,40}$")


def identifier(value: str, what: str, *, allow_empty: bool = False) -> str:
    """``value`` if it is a safe SQL identifier (lower-case letters, digits, underscores), else
    ``ConfigurationError``. Identifiers cannot be bound as parameters, so they are validated instead."""
    if allow_empty and value == "":
        return value
    if not isinstance(value, str) or not _IDENTIFIER.match(value):
        raise ConfigurationError(
            f"{what} {value!r} is not a valid identifier",
            hint="use lower-case letters, digits and underscores, starting with a letter or underscore (max 41)",
        )
    return value


@dataclass(frozen=True)
class Migration:
    """One step of a component's schema: ``sql`` formatted with ``{schema}`` and ``{prefix}``."""

    version: int
    description: str
    sql: str


# The server or the network is gone: every pooled connection is suspect, so the pool is dropped and rebuilt.
_CONNECTION_LOST: tuple[type[BaseException], ...] = (
    asyncpg.exceptions.ConnectionDoesNotExistError,
    asyncpg.exceptions.ConnectionFailureError,
    asyncpg.exceptions.CannotConnectNowError,
    asyncpg.exceptions.AdminShutdownError,
    asyncpg.exceptions.CrashShutdownError,
    ConnectionError,
    OSError,
)
# The server is there but cannot serve this call now: the call fails, the pool stays.
_BUSY: tuple[type[BaseException], ...] = (
    asyncpg.exceptions.TooManyConnectionsError,
    asyncpg.exceptions.PostgresConnectionError,
    asyncpg.exceptions.InterfaceError,
    asyncpg.exceptions.InternalClientError,
)
_PERMISSION = (
    asyncpg.exceptions.InvalidPasswordError,
    asyncpg.exceptions.InvalidAuthorizationSpecificationError,
    asyncpg.exceptions.InsufficientPrivilegeError,
)
_BAD_INPUT = (
    asyncpg.exceptions.DataError,
    asyncpg.exceptions.UntranslatableCharacterError,
    asyncpg.exceptions.CharacterNotInRepertoireError,
    asyncpg.exceptions.ProgramLimitExceededError,
)


class Database:
    """An asyncpg pool for one schema, opened lazily, migrated once, closed explicitly.

    Args:
        dsn: ``postgresql://user:password@host:port/database``.
        schema: The schema holding Ravi's tables (created if missing).
        table_prefix: Prepended to every table name, so several apps can share one schema.
        min_size, max_size: Pool size.
        command_timeout: Seconds before a statement is cancelled (that call raises ``BackendUnavailable``).
    """

    def __init__(
        self,
        dsn: str,
        *,
        schema: str = "ravi",
        table_prefix: str = "",
        min_size: int = 1,
        max_size: int = 10,
        command_timeout: float = 30.0,
        connect_timeout: float = 10.0,
        init: Callable[[asyncpg.Connection], Awaitable[None]] | None = None,
    ) -> None:
        if not isinstance(dsn, str) or not dsn.startswith(("postgres://", "postgresql://")):
            raise ConfigurationError(
                "a Postgres DSN must start with postgresql://", hint="for example postgresql://user@localhost/db"
            )
        if min_size < 0 or max_size < 1 or min_size > max_size:
            raise ConfigurationError(f"pool sizes must satisfy 0 <= min_size <= max_size, got {min_size}, {max_size}")
        self.dsn = dsn
        self.schema = identifier(schema, "schema")
        self.prefix = identifier(table_prefix, "table_prefix", allow_empty=True)
        self._pool_options = {
            "min_size": min_size,
            "max_size": max_size,
            "command_timeout": command_timeout,
            "timeout": connect_timeout,
        }
        self._init = init
        self._pool: asyncpg.Pool | None = None
        self._lock = asyncio.Lock()
        self._migrations: dict[str, Sequence[Migration]] = {}

    def table(self, name: str) -> str:
        """The qualified name of table ``name`` (``schema.prefixname``), safe to format into SQL."""
        return f'"{self.schema}"."{self.prefix}{name}"'

    def add_migrations(self, component: str, migrations: Sequence[Migration]) -> None:
        """Register ``component``'s migrations, applied when the pool first opens."""
        self._migrations[component] = migrations

    async def pool(self) -> asyncpg.Pool:
        """The pool, opened and migrated on first use."""
        if self._pool is not None:
            return self._pool
        async with self._lock:
            if self._pool is None:
                with mapped_errors(self):
                    connection = await asyncpg.connect(self.dsn, timeout=self._pool_options["timeout"])
                    try:
                        await self._migrate(connection)
                    finally:
                        await connection.close()
                    self._pool = await asyncpg.create_pool(self.dsn, init=self._init, **self._pool_options)
        assert self._pool is not None
        return self._pool

    async def _migrate(self, connection: asyncpg.Connection) -> None:
        migrations_table = self.table("migrations")
        key = zlib.crc32(f"ravi:{self.schema}:{self.prefix}".encode())
        async with connection.transaction():
            # One process at a time past this point; the others wait, then find the work done.
            await connection.execute("SELECT pg_advisory_xact_lock($1)", key)
            await connection.execute(f'CREATE SCHEMA IF NOT EXISTS "{self.schema}"')
            await connection.execute(
                f"CREATE TABLE IF NOT EXISTS {migrations_table} (component text NOT NULL, version int NOT NULL, "
                "description text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now(), "
                "PRIMARY KEY (component, version))"
            )
            applied = {
                (r["component"], r["version"])
                for r in await connection.fetch(f"SELECT component, version FROM {migrations_table}")
            }
            for component, steps in self._migrations.items():
                for step in sorted(steps, key=lambda m: m.version):
                    if (component, step.version) in applied:
                        continue
                    await connection.execute(step.sql.format(schema=self.schema, prefix=self.prefix))
                    await connection.execute(
                        f"INSERT INTO {migrations_table} (component, version, description) VALUES ($1, $2, $3)",
                        component,
                        step.version,
                        step.description,
                    )

    @contextlib.asynccontextmanager
    async def connection(self) -> AsyncIterator[asyncpg.Connection]:
        """A pooled connection, with driver errors mapped to Ravi's."""
        with mapped_errors(self):
            pool = await self.pool()
            async with pool.acquire() as connection:
                yield connection

    async def fetch(self, query: str, *args: Any) -> list[asyncpg.Record]:
        """Rows of one statement."""
        async with self.connection() as connection:
            return list(await connection.fetch(check_statement(query), *args))

    async def fetchrow(self, query: str, *args: Any) -> asyncpg.Record | None:
        """The first row of one statement."""
        async with self.connection() as connection:
            return await connection.fetchrow(check_statement(query), *args)

    async def fetchval(self, query: str, *args: Any) -> Any:
        """The first value of one statement."""
        async with self.connection() as connection:
            return await connection.fetchval(check_statement(query), *args)

    async def execute(self, query: str, *args: Any) -> str:
        """Run one statement; returns its status tag (``"DELETE 3"``)."""
        async with self.connection() as connection:
            return str(await connection.execute(check_statement(query), *args))

    async def close(self) -> None:
        """Close the pool; the next call opens a new one."""
        pool, self._pool = self._pool, None
        if pool is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(pool.close(), timeout=5)


class PostgresStore:
    """What every Postgres store shares: a :class:`Database` for its component's migrations, and ``close``.

    Args:
        dsn: ``postgresql://user:password@host:port/database``.
        schema: The schema of the tables (created and migrated on first use).
        table_prefix: Prefix of the table names, so several apps can share one schema.
        min_size, max_size: Connection pool size.
        command_timeout: Seconds before a statement is cancelled (that call raises ``BackendUnavailable``).
    """

    component: str
    migrations: Sequence[Migration]

    def __init__(
        self,
        dsn: str,
        *,
        schema: str = "ravi",
        table_prefix: str = "",
        min_size: int = 1,
        max_size: int = 10,
        command_timeout: float = 30.0,
        init: Callable[[asyncpg.Connection], Awaitable[None]] | None = None,
    ) -> None:
        self.db = Database(
            dsn,
            schema=schema,
            table_prefix=table_prefix,
            min_size=min_size,
            max_size=max_size,
            command_timeout=command_timeout,
            init=init,
        )
        self.db.add_migrations(self.component, self.migrations)

    async def close(self) -> None:
        """Close the connection pool."""
        await self.db.close()


@contextlib.contextmanager
def mapped_errors(database: Database | None = None) -> Any:
    """Turn asyncpg and socket errors into the kernel's typed errors."""
    try:
        yield
    except RaviError:
        raise
    except _PERMISSION as error:
        raise PermissionDenied(f"Postgres refused: {error}") from error
    except asyncpg.exceptions.InvalidCatalogNameError as error:
        raise ConfigurationError(
            f"Postgres database does not exist: {error}", hint="create it, or fix the database name in the DSN"
        ) from error
    except asyncpg.exceptions.UndefinedFileError as error:
        raise ConfigurationError(
            f"a Postgres extension is not installed on the server: {error}",
            hint="install pgvector (and Apache AGE for the graph store) on the server",
        ) from error
    except _BAD_INPUT as error:
        raise InvalidArgument(f"Postgres cannot store this value: {error}") from error
    except TimeoutError as error:  # command_timeout: asyncpg cancels the statement, the connection lives on
        raise BackendUnavailable(
            "Postgres timed out: the statement ran past command_timeout and was cancelled",
            hint="raise command_timeout, or look for locks or slow queries on the server",
        ) from error
    except _CONNECTION_LOST as error:
        if database is not None and database._pool is not None:
            database._pool.terminate()
            database._pool = None
        raise BackendUnavailable(
            f"Postgres is unreachable: {type(error).__name__}: {error}",
            hint="check the host and port in the DSN; once the server is back the next call reconnects",
        ) from error
    except _BUSY as error:
        raise BackendUnavailable(f"Postgres could not serve the call: {type(error).__name__}: {error}") from error
    except asyncpg.exceptions.PostgresError as error:
        raise RaviError(f"Postgres error: {type(error).__name__}: {error}") from error


def check_statement(query: str) -> str:
    """``query`` unless it holds a NUL, which the wire protocol cannot carry (``InvalidArgument``)."""
    if "\x00" in query:
        raise InvalidArgument("a SQL statement cannot contain a NUL character")
    return query


__all__ = ["Database", "Migration", "PostgresStore", "check_statement", "identifier", "mapped_errors"]
