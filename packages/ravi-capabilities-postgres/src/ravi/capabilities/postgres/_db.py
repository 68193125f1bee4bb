"""The connection layer shared by the Postgres stores: pool, migrations, identifiers and error mapping.

Every store owns one :class:`Database`: an asyncpg pool created on first use, with the store's schema created
and upgraded by versioned migrations under an advisory lock, so several processes starting at once apply each
migration exactly once. Driver exceptions never leave this module: :func:`mapped_errors` turns them into the
kernel's typed errors.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import re
import threading
import zlib
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Self, TypedDict, Unpack

import asyncpg

from ravi.capabilities.postgres.options import MAX_TABLE_PREFIX, PostgresStoreOptions
from ravi.kernel.closing import Closeable
from ravi.kernel.errors import (
    BackendUnavailable,
    ConfigurationError,
    InvalidArgument,
    PermissionDenied,
    RaviError,
)
from ravi.kernel.loops import until_loop_ends

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


_OVERLAPS = ("session_",)
"""Endings no table prefix may have: one of Ravi's names is another's with that in front ("session_summaries" is
"session_" + "summaries"), so two apps sharing a schema would share a table. A test reads every name the stores
create from the server and checks this list covers them."""


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
# The server gave up a statement to let another go on (a deadlock, or a serialization failure): the statement did
# nothing, so running it again is safe (every statement outside an explicit transaction; see Database.fetch).
_RETRIED: tuple[type[BaseException], ...] = (
    asyncpg.exceptions.DeadlockDetectedError,
    asyncpg.exceptions.SerializationError,
)
_ATTEMPTS = 5
"""How many times a statement the server gave up (``_RETRIED``) is run before the error reaches the caller."""
_RACED_CREATE = (
    asyncpg.exceptions.UniqueViolationError,
    asyncpg.exceptions.DuplicateObjectError,
    asyncpg.exceptions.DuplicateTableError,
)
"""What a ``CREATE ... IF NOT EXISTS`` raises when another session creates the same object at the same moment: a
unique violation in the catalog once the other commits, or, when the other committed between the name check and
the creation of a table's row type, "type already exists". Nothing was made; run again, it finds the object."""
_MADE_BEFORE = (asyncpg.exceptions.DuplicateTableError, asyncpg.exceptions.DuplicateFunctionError)
"""What a migration's ``CREATE`` raises when its table, index or function is already there. Migrations run under
the schema's advisory lock and their objects are named with the store's prefix, so no other setup can have made
it at the same moment: the ``migrations`` table lost the record of the migration that made it."""
_DROPPED = (
    asyncpg.exceptions.InvalidSchemaNameError,
    asyncpg.exceptions.UndefinedTableError,
    asyncpg.exceptions.UndefinedFunctionError,
)
"""What a statement raises when the schema, a table or a function the store's setup made is gone."""
_BAD_INPUT = (
    asyncpg.exceptions.DataError,
    asyncpg.exceptions.UntranslatableCharacterError,
    asyncpg.exceptions.CharacterNotInRepertoireError,
    asyncpg.exceptions.ProgramLimitExceededError,
)


class _SharedPool:
    """One asyncpg pool per (event loop, DSN, pool options), shared by every store that asks for it.

    Stores built from one settings file talk to one server through one pool instead of one pool each. Each store
    adds its connection hook (pgvector's codec, say); the pool runs every hook on each new connection, and
    connections opened before a hook was added are replaced. The pool closes when its last store closes, or when
    its event loop shuts down (an ``asyncio.run`` call returning), whichever comes first.
    """

    def __init__(self, key: tuple[Any, ...], dsn: str, options: dict[str, Any]) -> None:
        self.key, self.dsn, self.options = key, dsn, options
        self.hooks: list[Callable[[asyncpg.Connection], Awaitable[None]]] = []
        self.pool: asyncpg.Pool | None = None
        self.users = 0
        self.lock = asyncio.Lock()
        self._ending: AsyncGenerator[None, None] | None = None

    async def _init(self, connection: asyncpg.Connection) -> None:
        for hook in list(self.hooks):
            await hook(connection)

    async def add_hook(self, hook: Callable[[asyncpg.Connection], Awaitable[None]] | None) -> None:
        if hook is not None and hook not in self.hooks:
            self.hooks.append(hook)
            if self.pool is not None:
                await self.pool.expire_connections()  # reopened with the new hook on their next acquire

    async def get(self) -> asyncpg.Pool:
        if self.pool is None:
            async with self.lock:
                if self.pool is None:
                    with _opening():
                        self.pool = await asyncpg.create_pool(self.dsn, init=self._init, **self.options)
                    if self._ending is None:
                        self._ending = until_loop_ends(self._close)
        return self.pool

    def lost(self) -> None:
        """The server is gone: drop every connection; the next call opens a new pool."""
        pool, self.pool = self.pool, None
        if pool is not None:
            pool.terminate()

    async def release(self) -> None:
        with _REGISTRY:
            self.users -= 1
            if self.users > 0:
                return
        if self.key[0] is asyncio.get_running_loop():
            if self._ending is not None:
                await self._ending.aclose()  # runs _close, once
            else:
                await self._close()
        else:  # a pool of another (perhaps finished) event loop cannot be awaited from this one
            self._forget()
            pool, self.pool = self.pool, None
            if pool is not None:
                with contextlib.suppress(Exception):
                    pool.terminate()

    def _forget(self) -> None:
        with _REGISTRY:
            if _SHARED.get(self.key) is self:
                del _SHARED[self.key]

    async def _close(self) -> None:
        """Close the pool on its own loop: its last store closed, or the loop is shutting down."""
        self._forget()
        pool, self.pool = self.pool, None
        if pool is None:
            return
        try:
            await asyncio.wait_for(pool.close(), timeout=5)
        except Exception:  # a pool that will not close in time is cut off
            pool.terminate()


_SHARED: dict[tuple[Any, ...], _SharedPool] = {}
_REGISTRY = threading.RLock()
"""Guards ``_SHARED``, each database's pools by loop and the pools' user counts: threads that each run their own
loop use one store, and each new loop drops the finished loops' pools. Held by code that never awaits."""


class Database:
    """The tables of one schema on one server: migrated once, reached through a pool shared per server.

    Every ``Database`` with the same DSN and pool options in one event loop uses one asyncpg pool; each event
    loop gets its own (asyncpg pools cannot cross loops), so a store also works from a second loop.

    Args:
        dsn: ``postgresql://user:password@host:port/database``.
        schema: The schema holding Ravi's tables (created if missing).
        table_prefix: Prepended to every table name, so several apps can share one schema.
        min_size, max_size: Pool size.
        command_timeout: Seconds before a statement is cancelled (that call raises ``BackendUnavailable``).
        connect_timeout: Seconds to wait for a new connection.
        statement_cache_size: Prepared statements kept per connection (0 behind a pooler that cannot keep them).
        init: A hook run on each new pooled connection (pgvector's codec, say).
        prepare: Run once, on a connection of its own, before the pool opens (after the migrations): what must
            exist before a pooled connection can be set up (an extension, a graph).
        server_settings: Session settings every pooled connection starts with (they survive the pool's reset).
        translate: Maps a driver error to a Ravi error before the common mapping does (``None``: no opinion).
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
        statement_cache_size: int = 100,
        init: Callable[[asyncpg.Connection], Awaitable[None]] | None = None,
        prepare: Callable[[asyncpg.Connection], Awaitable[None]] | None = None,
        server_settings: dict[str, str] | None = None,
        translate: Callable[[BaseException], RaviError | None] | None = None,
    ) -> None:
        if not isinstance(dsn, str) or not dsn.startswith(("postgres://", "postgresql://")):
            raise ConfigurationError(
                "a Postgres DSN must start with postgresql://", hint="for example postgresql://user@localhost/db"
            )
        if min_size < 0 or max_size < 1 or min_size > max_size:
            raise ConfigurationError(f"pool sizes must satisfy 0 <= min_size <= max_size, got {min_size}, {max_size}")
        for name, value in (("command_timeout", command_timeout), ("connect_timeout", connect_timeout)):
            if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
                raise ConfigurationError(f"{name} must be a positive number of seconds, got {value!r}")
        self.dsn = dsn
        self.schema = identifier(schema, "schema")
        self.prefix = identifier(table_prefix, "table_prefix", allow_empty=True)
        if len(self.prefix) > MAX_TABLE_PREFIX:
            # PostgreSQL cuts a name past 63 bytes: the longest name a store gives with the prefix in front has 43
            # characters, and a cut one is another name's, or not the name a migration refers to
            raise ConfigurationError(
                f"table_prefix {table_prefix!r} is longer than {MAX_TABLE_PREFIX} characters",
                hint="PostgreSQL cuts longer table and index names; use a shorter prefix",
            )
        if self.prefix.endswith(_OVERLAPS):
            raise ConfigurationError(
                f"table_prefix {table_prefix!r} would give this app's tables the names of another app's in the same "
                f"schema (a prefix ending in {' or '.join(map(repr, _OVERLAPS))} turns 'summaries' into "
                "'session_summaries')",
                hint="end the prefix with the app's own name, for example 'support_'",
            )
        self._pool_options: dict[str, Any] = {
            "min_size": min_size,
            "max_size": max_size,
            "command_timeout": command_timeout,
            "timeout": connect_timeout,
            "statement_cache_size": statement_cache_size,
        }
        if server_settings:
            self._pool_options["server_settings"] = dict(server_settings)
        self._init = init
        self._prepare = prepare
        self.translate = translate
        self._shared: dict[asyncio.AbstractEventLoop, _SharedPool] = {}
        self._locks: dict[asyncio.AbstractEventLoop, asyncio.Lock] = {}
        self._migrated = False
        self._check_setup = False  # a table was missing: is the setup's work gone (check_setup_again)?
        self._migrations: dict[str, Sequence[Migration]] = {}

    def table(self, name: str) -> str:
        """The qualified name of table ``name`` (``schema.prefixname``), safe to format into SQL."""
        return f'"{self.schema}"."{self.prefix}{name}"'

    def add_migrations(self, component: str, migrations: Sequence[Migration]) -> None:
        """Register ``component``'s migrations, applied when the pool first opens."""
        self._migrations[component] = migrations

    async def pool(self) -> asyncpg.Pool:
        """This event loop's pool, opened (and the schema migrated) on first use."""
        loop = asyncio.get_running_loop()
        shared = self._shared.get(loop)
        if shared is None or not self._migrated or self._check_setup:  # a first use, or the setup's work dropped
            self._drop_finished_loops()
            async with self._locks.setdefault(loop, asyncio.Lock()):
                with mapped_errors(self):
                    if self._check_setup:
                        self._check_setup = False
                        if self._migrated and not await self._setup_stands(shared):
                            self._migrated = False
                    if not self._migrated:
                        await self._set_up()
                        self._migrated = True
                        if shared is not None and shared.pool is not None:
                            # set up again: statements prepared against what was dropped are let go, each
                            # connection replaced at its next acquire, and no call under way on it (another
                            # store's, sharing the pool) is ended
                            await shared.pool.expire_connections()
                shared = self._shared.get(loop)
                if shared is None:
                    key = (loop, self.dsn, repr(sorted(self._pool_options.items())))
                    with _REGISTRY:
                        shared = _SHARED.get(key)
                        if shared is None:
                            shared = _SHARED[key] = _SharedPool(key, self.dsn, dict(self._pool_options))
                        shared.users += 1
                    await shared.add_hook(self._init)
                    with _REGISTRY:
                        self._shared[loop] = shared
        with mapped_errors(self):
            return await shared.get()

    async def _setup_stands(self, shared: _SharedPool | None) -> bool:
        """Whether what the migrations made is still there after a statement met a missing table: their record
        (the ``migrations`` table) is gone with the schema, and then the setup runs again; a table of the store's
        own data that is gone (a vector collection another process deleted) is the store's to read again. A
        database without migrations always sets up again."""
        if not self._migrations:
            return False
        query, name = "SELECT to_regclass($1) IS NOT NULL", self.table("migrations")
        if shared is not None and shared.pool is not None:
            return bool(await shared.pool.fetchval(query, name))
        connection = await self._connect()
        try:
            return bool(await connection.fetchval(query, name))
        finally:
            await connection.close()

    async def _connect(self) -> asyncpg.Connection:
        """A connection of its own, outside the pool (for the setup and its check), with the pool's options."""
        with _opening():
            return await asyncpg.connect(
                self.dsn,
                timeout=self._pool_options["timeout"],
                statement_cache_size=self._pool_options["statement_cache_size"],
            )

    async def _set_up(self) -> None:
        """Run the migrations and ``prepare`` on a connection of their own. What is made database-wide (an
        extension) is not covered by a schema's advisory lock: a store of another schema (or the same store on
        another loop, before this one finished) may create it at the same moment, and the server then refuses
        all but one ``CREATE EXTENSION IF NOT EXISTS`` with a unique violation once the other has committed.
        Nothing was applied then, so the whole setup runs again, and finds it made."""
        for attempt in range(1, _ATTEMPTS + 1):
            connection = await self._connect()
            try:
                if self._migrations:
                    await self._migrate(connection)
                if self._prepare is not None:
                    await self._prepare(connection)
                return
            except _RACED_CREATE:
                if attempt == _ATTEMPTS:
                    raise
            finally:
                await connection.close()

    def _drop_finished_loops(self) -> None:
        """Forget the pools of event loops that have closed (their pools closed as the loops shut down), so a
        store used through one ``asyncio.run`` call after another keeps no loop it no longer runs on."""
        with _REGISTRY:
            for loop in [loop for loop in self._shared if loop.is_closed()]:
                shared = self._shared.pop(loop)
                self._locks.pop(loop, None)
                shared.users -= 1
                if shared.users <= 0:
                    shared._forget()

    def lost(self) -> None:
        """The server is gone: drop this loop's pool (shared with other stores), so the next call reconnects."""
        with contextlib.suppress(RuntimeError):
            shared = self._shared.get(asyncio.get_running_loop())
            if shared is not None:
                shared.lost()

    async def _migrate(self, connection: asyncpg.Connection) -> None:
        migrations_table = self.table("migrations")
        key = zlib.crc32(f"ravi:{self.schema}:{self.prefix}".encode())
        async with connection.transaction():
            # One process at a time past this point; the others wait, then find the work done.
            await connection.execute("SELECT pg_advisory_xact_lock($1)", key)
            await connection.execute(f'CREATE SCHEMA IF NOT EXISTS "{self.schema}"')
            recorded = await connection.fetchval("SELECT to_regclass($1) IS NOT NULL", migrations_table)
            if not recorded and await connection.fetchval(_A_GRAPH, self.schema):
                raise ConfigurationError(
                    f"the schema \"{self.schema}\" is an Apache AGE graph's: Ravi's tables would live among the "
                    "graph's, and dropping either would drop both",
                    hint="give the store a schema of its own (schema = ...), another than every graph's name",
                )
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
                    try:
                        await connection.execute(step.sql.format(schema=self.schema, prefix=self.prefix))
                    except _MADE_BEFORE as error:
                        raise self._unrecorded(migrations_table, component, step, recorded, error) from error
                    await connection.execute(
                        f"INSERT INTO {migrations_table} (component, version, description) VALUES ($1, $2, $3)",
                        component,
                        step.version,
                        step.description,
                    )

    def _unrecorded(
        self, migrations_table: str, component: str, step: Migration, recorded: bool, error: Exception
    ) -> ConfigurationError:
        """The error for a migration whose objects exist though the ``migrations`` table has no record of it: the
        record was dropped or emptied, and the version the tables are at cannot be known, so nothing is guessed
        (applying later migrations to tables at an unknown version, or recording versions never applied, could
        damage the data). The transaction that found it is rolled back: nothing is changed."""
        what = "is missing" if not recorded else f"has no record of {component!r} version {step.version}"
        return ConfigurationError(
            f'the schema "{self.schema}" holds the tables of the {component} store but no record of its migrations: '
            f"{migrations_table} {what} ({error}), so the version its tables are at is unknown",
            hint=f"restore {migrations_table} from a backup of this database; or, if the data can go, drop the "
            f'store\'s tables (or the whole schema: DROP SCHEMA "{self.schema}" CASCADE) and the next store makes '
            "them again",
        )

    @contextlib.asynccontextmanager
    async def connection(self) -> AsyncIterator[asyncpg.Connection]:
        """A pooled connection, with driver errors mapped to Ravi's."""
        with mapped_errors(self):
            pool = await self.pool()
            async with pool.acquire() as connection:
                yield connection

    async def _statement(self, method: str, query: str, args: tuple[Any, ...]) -> Any:
        """``connection.<method>(query, *args)`` on a pooled connection, as one statement of its own: one the
        server gave up for a deadlock or a serialization failure did nothing, so it is run again (up to
        ``_ATTEMPTS`` times, after a short random pause that lets the other transaction finish)."""
        query = check_statement(query)
        for attempt in range(1, _ATTEMPTS + 1):
            try:
                async with self.connection() as connection:
                    return await getattr(connection, method)(query, *args)
            except BackendUnavailable as error:
                if attempt == _ATTEMPTS or not isinstance(error.__cause__, _RETRIED):
                    raise
            await asyncio.sleep(random.uniform(0, 0.005 * 2**attempt))
        raise AssertionError("unreachable")  # pragma: no cover

    async def fetch(self, query: str, *args: Any) -> list[asyncpg.Record]:
        """Rows of one statement."""
        return list(await self._statement("fetch", query, args))

    async def fetchrow(self, query: str, *args: Any) -> asyncpg.Record | None:
        """The first row of one statement."""
        return await self._statement("fetchrow", query, args)

    async def fetchval(self, query: str, *args: Any) -> Any:
        """The first value of one statement."""
        return await self._statement("fetchval", query, args)

    async def execute(self, query: str, *args: Any) -> str:
        """Run one statement; returns its status tag (``"DELETE 3"``)."""
        return str(await self._statement("execute", query, args))

    def prepare_again(self) -> None:
        """Run the migrations and ``prepare`` again before the next call (after what they made was dropped)."""
        self._migrated = False

    def check_setup_again(self) -> None:
        """Before the next call, check that what the migrations made is still there, and set up again if not
        (a statement met a missing table: the schema may have been dropped, or only a table of the store's data)."""
        self._check_setup = True

    async def drop_schema(self) -> None:
        """Drop the whole schema and everything in it (every component's tables); the next use creates it again.

        Raises:
            ConfigurationError: the schema is not Ravi's alone to drop (``public``, Postgres's own, an extension's,
                an Apache AGE graph's); nothing is dropped.
        """
        async with self.connection() as connection:
            if await connection.fetchval(_SHARED_SCHEMA, self.schema):
                raise ConfigurationError(
                    f"the schema \"{self.schema}\" holds more than Ravi's tables (it is public, Postgres's own, an "
                    "extension's or an Apache AGE graph's): dropping it would drop what is not Ravi's; nothing dropped",
                    hint=f'drop the store\'s tables (named "{self.prefix}...") yourself, or keep Ravi in a schema of '
                    "its own (schema = ...), which destroy() may drop whole",
                )
            await connection.execute(f'DROP SCHEMA IF EXISTS "{self.schema}" CASCADE')
        self._migrated = False

    async def close(self) -> None:
        """Stop using the shared pools (each closes with its last user); the next call opens one again."""
        with _REGISTRY:
            shared, self._shared = self._shared, {}
            self._locks = {}
        for entry in shared.values():
            await entry.release()


class ConnectionOptions(TypedDict, total=False):
    """The connection options every store on a Postgres server takes, the AGE graph store included (see
    :class:`Database` for each)."""

    min_size: int
    max_size: int
    command_timeout: float
    connect_timeout: float
    statement_cache_size: int


class PoolOptions(ConnectionOptions, total=False):
    """The options every store with tables of its own takes: the connection options, and where its tables live."""

    schema: str
    table_prefix: str


class PostgresStore(Closeable):
    """What every Postgres store shares: a :class:`Database` for its component's migrations, reached through a
    pool shared with the other stores on the same server; an async context manager, closed with ``aclose``.

    Args:
        dsn: ``postgresql://user:password@host:port/database``.
        schema: The schema of the tables (created and migrated on first use).
        table_prefix: Prefix of the table names, so several apps can share one schema.
        min_size, max_size: Connection pool size.
        command_timeout: Seconds before a statement is cancelled (that call raises ``BackendUnavailable``).
        connect_timeout: Seconds to wait for a new connection.
        statement_cache_size: Prepared statements kept per connection; 0 behind PgBouncer older than 1.21 or
            without ``max_prepared_statements``.
    """

    component: str
    migrations: Sequence[Migration]
    init: Callable[[asyncpg.Connection], Awaitable[None]] | None = None
    """A hook run on each new pooled connection (pgvector's codec, say)."""

    Options: ClassVar[type[PostgresStoreOptions]] = PostgresStoreOptions
    """The store's options model (types, documentation, defaults), for configuration and keyword arguments."""

    def __init__(self, dsn: str, **options: Unpack[PoolOptions]) -> None:
        given = PostgresStoreOptions.check(dsn=dsn, **options).given()
        self.db = Database(given.pop("dsn"), init=self.init, **given)
        self.db.add_migrations(self.component, self.migrations)

    async def __aenter__(self) -> Self:
        await self.db.pool()  # entering opens (and migrates) at once, so a bad DSN fails here
        return self

    async def aclose(self) -> None:
        """Release the connection pool (closed once its last store lets go); safe to call again."""
        await self.db.close()

    async def close(self) -> None:
        """The same as :meth:`aclose`."""
        await self.aclose()

    async def destroy(self) -> None:
        """Remove everything stored under this store's ``schema`` (the schema itself, with the tables of every
        Ravi component in it). For tests and throwaway data: the conformance runner calls it after each test."""
        await self.db.drop_schema()


_A_GRAPH = "SELECT to_regclass(format('%I._ag_label_vertex', $1::text)) IS NOT NULL"
"""Whether a schema is an Apache AGE graph's (AGE keeps each graph in a schema of its name, with this table)."""

_SHARED_SCHEMA = (
    "SELECT $1::text = 'public' OR $1::text = 'information_schema' OR $1::text LIKE 'pg\\_%' "
    "OR EXISTS (SELECT 1 FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE n.nspname = $1) "
    f"OR ({_A_GRAPH[len('SELECT ') :]})"
)
"""Whether a schema holds more than Ravi's tables, so that dropping it whole would drop what is not Ravi's."""


@contextlib.contextmanager
def _opening() -> Iterator[None]:
    """What asyncpg raises for a DSN it cannot read (a port past 65535 or not a number, a broken IPv6 address, an
    unknown ``sslmode``) as a ``ConfigurationError``: bare ``ValueError`` and ``OverflowError`` reached the caller,
    and a bad parameter was taken for a busy server (``BackendUnavailable``). A connection that is not made within
    ``connect_timeout`` is ``BackendUnavailable`` saying so: it was taken for a statement past ``command_timeout``.
    """
    try:
        yield
    except RaviError:
        raise
    except TimeoutError as error:
        raise BackendUnavailable(
            "Postgres did not answer within connect_timeout",
            hint="check the host and port in the DSN (another service may listen there), or raise connect_timeout "
            "for a server that is slow to accept connections",
        ) from error
    except (ValueError, OverflowError, asyncpg.exceptions.ClientConfigurationError) as error:
        raise ConfigurationError(
            f"the Postgres DSN cannot be used: {type(error).__name__}: {error}",
            hint="for example postgresql://user:password@localhost:5432/db",
        ) from error


def translate(error: BaseException, database: Database | None = None) -> RaviError:
    """The kernel's typed error for a driver or socket error (``database.translate`` is asked first)."""
    if database is not None and database.translate is not None:
        mapped = database.translate(error)
        if mapped is not None:
            return mapped
    if isinstance(error, _DROPPED) and database is not None:
        # another process dropped what the setup made (destroy(), DROP SCHEMA), or a table of the store's data (a
        # vector collection): the next call checks, and sets the store up again, as on its first, only when the
        # schema's setup is gone, instead of failing every call until a restart
        database.check_setup_again()
        return BackendUnavailable(
            f"Postgres no longer has what this store set up ({error}): was the schema or a table dropped?",
            hint="the next call sets the store up again if its schema was dropped, with the tables empty",
        )
    if isinstance(error, asyncpg.exceptions.InsufficientPrivilegeError):
        return PermissionDenied(
            f"Postgres refused: {error}",
            hint="grant the DSN's user the privilege, or connect as a user that has it",
        )
    if isinstance(error, _PERMISSION):  # the server refused to let the DSN's user connect
        return PermissionDenied(
            f"Postgres refused: {error}",
            hint="check the user and password in the DSN (postgresql://user:password@host:port/db)",
        )
    if isinstance(error, asyncpg.exceptions.ReadOnlySQLTransactionError):  # a standby, or read-only by default
        return BackendUnavailable(
            f"Postgres is read-only here: {error}",
            hint="point the DSN at the primary (a hot standby takes no writes, and each store sets up its schema on "
            "first use), or turn default_transaction_read_only off for its user",
        )
    if isinstance(error, asyncpg.exceptions.InvalidCatalogNameError):
        return ConfigurationError(
            f"Postgres database does not exist: {error}", hint="create it, or fix the database name in the DSN"
        )
    if isinstance(error, asyncpg.exceptions.UndefinedFileError):
        return ConfigurationError(
            f"a Postgres extension is not installed on the server: {error}",
            hint="install pgvector (and Apache AGE for the graph store) on the server",
        )
    if isinstance(error, _BAD_INPUT):
        return InvalidArgument(f"Postgres cannot store this value: {error}")
    if isinstance(error, _RETRIED):
        return BackendUnavailable(
            f"Postgres gave up the call to let a concurrent one finish ({type(error).__name__}), "
            f"{_ATTEMPTS} times for a single statement",
            hint="try again; frequent ones mean the same rows are written by many callers at once",
        )
    if isinstance(error, TimeoutError):  # command_timeout: asyncpg cancels the statement, the connection lives on
        return BackendUnavailable(
            "Postgres timed out: the statement ran past command_timeout and was cancelled",
            hint="raise command_timeout, or look for locks or slow queries on the server",
        )
    if isinstance(error, ConnectionError) and "rejected SSL upgrade" in str(error):  # asyncpg's words for it
        return ConfigurationError(
            f"Postgres does not accept SSL, which the DSN requires: {error}",
            hint="drop sslmode=require (or verify-ca, verify-full) from the DSN, or enable SSL on the server",
        )
    if isinstance(error, _CONNECTION_LOST):
        if database is not None:
            database.lost()
        return BackendUnavailable(
            f"Postgres is unreachable: {type(error).__name__}: {error}",
            hint="check the host and port in the DSN; once the server is back the next call reconnects",
        )
    if isinstance(error, _BUSY):
        return BackendUnavailable(f"Postgres could not serve the call: {type(error).__name__}: {error}")
    return RaviError(f"Postgres error: {type(error).__name__}: {error}")


@contextlib.contextmanager
def mapped_errors(database: Database | None = None) -> Any:
    """Turn asyncpg and socket errors into the kernel's typed errors (:func:`translate`)."""
    try:
        yield
    except RaviError:
        raise
    except (asyncpg.exceptions.PostgresError, *_CONNECTION_LOST, *_BUSY) as error:
        raise translate(error, database) from error


def check_statement(query: str) -> str:
    """``query`` unless it holds a NUL, which the wire protocol cannot carry (``InvalidArgument``)."""
    if "\x00" in query:
        raise InvalidArgument("a SQL statement cannot contain a NUL character")
    return query


__all__ = [
    "ConnectionOptions",
    "Database",
    "Migration",
    "PoolOptions",
    "PostgresStore",
    "check_statement",
    "identifier",
    "mapped_errors",
    "translate",
]
