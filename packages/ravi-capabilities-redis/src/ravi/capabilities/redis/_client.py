"""The connection layer shared by the Redis stores: client, key naming and error mapping."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
import re
import ssl
import threading
from collections.abc import Iterator
from typing import Any, ClassVar, TypedDict, Unpack, cast
from urllib.parse import parse_qs, quote, urlsplit

import redis.asyncio as aioredis
import redis.exceptions as rex
from redis.asyncio.connection import URL_QUERY_ARGUMENT_PARSERS, RedisSSLContext, parse_url
from redis.commands.core import AsyncScript

from ravi.capabilities.redis.options import RedisConnectionOptions
from ravi.kernel.closing import Closeable
from ravi.kernel.errors import BackendUnavailable, ConfigurationError, InvalidArgument, PermissionDenied, RaviError
from ravi.kernel.loops import until_loop_ends

_PREFIX = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


def part(value: str) -> str:
    """A key component: any string, escaped so it can never forge a separator or a hash tag."""
    return quote(value, safe="")


class _Cluster(aioredis.RedisCluster):
    """redis-py's cluster client, initialised once, under a lock, before the first command runs.

    redis-py works out a command's slot before it initialises the client, so many concurrent first callers (a
    server starting up under load) race on half-made connections; one initialisation first avoids that.
    """

    _ravi_ready = False
    _ravi_lock: asyncio.Lock | None = None

    async def execute_command(self, *args: Any, **kwargs: Any) -> Any:
        if not self._ravi_ready:
            if self._ravi_lock is None:
                self._ravi_lock = asyncio.Lock()
            async with self._ravi_lock:
                if not self._ravi_ready:
                    await self.initialize()
                    self._ravi_ready = True
        return await super().execute_command(*args, **kwargs)


_TLS_PATIENCE = 0.5
"""Seconds a TLS handshake runs before the server is asked, in plain Redis, whether it speaks TLS at all (a
handshake on a working connection takes milliseconds)."""
_PING = b"*1\r\n$4\r\nPING\r\n"


class _TLSConnection(aioredis.SSLConnection):
    """redis-py's TLS connection, telling a server that speaks no TLS from a slow one.

    A Redis server without TLS takes the handshake's first bytes for the start of a command and waits for its end,
    so the handshake waited out the whole socket timeout and failed as though nothing answered. When the handshake
    has not finished after :data:`_TLS_PATIENCE`, a second connection asks the server ``PING`` in plain Redis: an
    answer in plain Redis (``+PONG``, or an error such as ``-NOAUTH``) is a server without TLS, a
    ``ConfigurationError`` at once; anything else (a TLS server's alert, a closed connection, silence) lets the
    handshake go on to its own end."""

    async def _connect(self) -> None:
        handshake = asyncio.ensure_future(super()._connect())  # type: ignore[no-untyped-call]
        try:
            timeout = self.socket_connect_timeout or _TLS_PATIENCE
            done, _ = await asyncio.wait({handshake}, timeout=min(_TLS_PATIENCE, timeout))
            if not done and await _speaks_plain_redis(self.host, self.port, timeout):
                raise ConfigurationError(
                    f"the Redis server at {self.host}:{self.port} speaks no TLS, and the URL (rediss://) asks for it",
                    hint="use redis:// for this server, or name the port where it speaks TLS (its tls-port)",
                )
            await handshake
            self._ravi_reader = self._reader
        finally:
            if not handshake.done():
                handshake.cancel()
                with contextlib.suppress(Exception, asyncio.CancelledError):  # its end is not this call's
                    await handshake

    _ravi_reader: asyncio.StreamReader | None = None

    async def on_connect_check_health(self, check_health: bool = True) -> None:
        """redis-py's first commands on a new connection, with a connection the server ends at once told apart:
        a server that asks for a client certificate (``tls-auth-clients``) ends the connection right after the
        handshake when it gets none or one it does not trust, and when its alert is lost to the closed
        connection, nothing else says why."""
        try:
            await super().on_connect_check_health(check_health)
        except rex.ConnectionError as error:
            if isinstance(error.__cause__, ssl.SSLError):
                raise
            raise rex.ConnectionError(
                f"{error} (the server ended the TLS connection right after the handshake: a server that asks for "
                "client certificates does so when none, or one it does not trust, is given; see ssl_certfile and "
                "ssl_keyfile)"
            ) from error

    async def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        """redis-py's, with a write that fails because the server ended the TLS connection over an alert (under TLS
        1.3 a server checks the client's certificate after the handshake, so its refusal can end the connection
        before the first command is written) raised from that alert, as a read that meets it is."""
        try:
            await super().send_packed_command(command, check_health)
        except rex.ConnectionError as error:
            reader = self._ravi_reader
            alert = reader.exception() if reader is not None else None
            if isinstance(alert, ssl.SSLError) and error.__cause__ is not alert:
                raise rex.ConnectionError(str(error)) from alert
            raise


async def _speaks_plain_redis(host: str, port: int, within: float) -> bool:
    """Whether the server at ``host:port`` answers a ``PING`` sent in plain Redis in plain Redis (within ``within``
    seconds)."""
    try:
        async with asyncio.timeout(within):
            reader, writer = await asyncio.open_connection(host, port)
            try:
                writer.write(_PING)
                await writer.drain()
                first = await reader.read(1)
            finally:
                writer.close()
                with contextlib.suppress(OSError):
                    await writer.wait_closed()
    except (OSError, TimeoutError):
        return False
    return first in (b"+", b"-")


class _SharedClient:
    """One redis-py client (and its blocking connection pool) per (event loop, URL, options), shared by every
    store that asks for it; closed when its last store closes."""

    def __init__(
        self, key: tuple[Any, ...], url: str, socket_timeout: float, max_connections: int, cluster: bool
    ) -> None:
        self.key = key
        self.scripts: dict[str, AsyncScript] = {}
        self.loading = asyncio.Lock()
        self.users = 0
        # closed when its event loop shuts down (an asyncio.run call returning) if no store closed it before: a
        # client of a finished loop is never used again, and its connections would stay open
        self._ending = until_loop_ends(self._close)
        self.client: aioredis.Redis
        if cluster:  # one client for the whole cluster: it finds every node from this one
            self.client = cast(
                aioredis.Redis,
                _Cluster.from_url(
                    url,
                    max_connections=max_connections,
                    socket_timeout=socket_timeout,
                    socket_connect_timeout=socket_timeout,
                    decode_responses=False,
                ),
            )
            return
        # A blocking pool: a call past max_connections waits (up to socket_timeout) for a free connection
        # instead of failing while the server is healthy.
        pool = aioredis.BlockingConnectionPool.from_url(
            url,
            max_connections=max_connections,
            timeout=socket_timeout,
            socket_timeout=socket_timeout,
            socket_connect_timeout=socket_timeout,
            decode_responses=False,
            health_check_interval=30,
        )
        if pool.connection_class is aioredis.SSLConnection:  # rediss://: told apart from a server without TLS
            pool.connection_class = _TLSConnection
        self.client = aioredis.Redis.from_pool(pool)  # the client owns the pool: aclose() closes both

    async def release(self) -> None:
        with _REGISTRY:
            self.users -= 1
            if self.users > 0:
                return
        if self.key[0] is asyncio.get_running_loop():
            await self._ending.aclose()  # runs _close, once
        else:  # a client of another (perhaps finished) event loop cannot be awaited here: its sockets go with it
            self._forget()

    def _forget(self) -> None:
        with _REGISTRY:
            if _SHARED.get(self.key) is self:
                del _SHARED[self.key]

    async def _close(self) -> None:
        self._forget()
        with contextlib.suppress(Exception):
            await self.client.aclose()


_SHARED: dict[tuple[Any, ...], _SharedClient] = {}
_REGISTRY = threading.RLock()
"""Guards ``_SHARED``, each connection's clients by loop and the clients' user counts: threads that each run
their own loop use one store, and each new loop drops the finished loops' clients. Held by code that never
awaits."""


_CERT_REQS = ("none", "optional", "required")
"""What redis-py takes as a URL's ``ssl_cert_reqs`` (it checks it only when it first connects)."""

_TLS_FILES = {"ssl_ca_certs": "file", "ssl_certfile": "file", "ssl_keyfile": "file", "ssl_ca_path": "folder"}
"""The URL parameters that name TLS files (redis-py reads them only when it first connects)."""
_URL_PARAMETERS = frozenset(URL_QUERY_ARGUMENT_PARSERS) | {
    "client_name",
    "ssl_cert_reqs",
    "ssl_ciphers",
    "ssl_password",
    *_TLS_FILES,
}
"""The query parameters a Redis URL may carry: those redis-py converts from text, and those it takes as text.
redis-py hands any other to its connections as it is, text, when they first connect: a name they do not take
raised a bare ``TypeError``, and a flag or an object given as text is wrong (decision 123)."""
_CLUSTER_PARAMETERS = _URL_PARAMETERS & frozenset(inspect.signature(aioredis.RedisCluster.__init__).parameters)
"""The same, for a cluster: redis-py's cluster client takes fewer (no ``ssl_ca_path``, no ``timeout``)."""


def _check_url(url: str, *, cluster: bool = False) -> None:
    """``ConfigurationError`` unless redis-py can read ``url`` and its database is a number: redis-py reads the URL
    when the first call makes its client, and raised a bare ``ValueError`` there (a port past 65535 or not a number,
    a broken IPv6 address, a bad query parameter), and it ignored a database that is not a number (``/sessions``
    used database 0), and an ``ssl_cert_reqs`` it does not know failed the first call with a generic error.
    A query parameter redis-py does not take raised a bare ``TypeError`` at the first call, and TLS files it could
    not read failed it as an unreachable server: both are refused here (:func:`_check_tls`)."""
    try:
        parsed = parse_url(url)
    except ValueError as error:
        raise ConfigurationError(
            f"the Redis URL cannot be used: {error}", hint="for example redis://localhost:6379/0"
        ) from None
    cert_reqs = parsed.get("ssl_cert_reqs")
    if isinstance(cert_reqs, str) and cert_reqs not in _CERT_REQS:
        raise ConfigurationError(
            f"the Redis URL cannot be used: ssl_cert_reqs must be one of {', '.join(_CERT_REQS)}, got {cert_reqs!r}",
            hint="for example rediss://localhost:6380/0?ssl_cert_reqs=required",
        )
    known = _CLUSTER_PARAMETERS if cluster else _URL_PARAMETERS
    unknown = sorted(set(parse_qs(urlsplit(url).query)) - known)
    if unknown:
        raise ConfigurationError(
            f"the Redis URL has a parameter Ravi does not pass on: {', '.join(unknown)}",
            hint=f"a Redis URL{' of a cluster' if cluster else ''} takes {', '.join(sorted(known))}",
        )
    if url.startswith(("redis://", "rediss://")):
        database = urlsplit(url).path.lstrip("/")
        if database and not database.isdigit():
            raise ConfigurationError(
                f"the Redis URL's database must be a number, got {database!r}",
                hint="for example redis://localhost:6379/0",
            )
    tls = {name: value for name, value in parsed.items() if name.startswith("ssl_")}
    if tls and not url.startswith("rediss://"):
        raise ConfigurationError(
            f"the Redis URL sets {', '.join(sorted(tls))} but does not use TLS",
            hint="use rediss:// for a server that speaks TLS: rediss://host:6380/0?ssl_ca_certs=/path/to/ca.pem",
        )
    if url.startswith("rediss://"):
        _check_tls(tls)


def _check_tls(options: dict[str, Any]) -> None:
    """``ConfigurationError`` unless redis-py can make its TLS context from the URL's ``ssl_*`` parameters: the
    files exist, the client certificate loads with its key, the CA files hold certificates."""
    for name, kind in _TLS_FILES.items():
        path = options.get(name)
        if path is None:
            continue
        exists = os.path.isdir(path) if kind == "folder" else os.path.isfile(path)
        if not exists or not os.access(path, os.R_OK):
            raise ConfigurationError(
                f"the Redis URL's {name} names no {kind} this process can read: {path!r}",
                hint="give an absolute path, percent-encoded in the URL (a space is %20)",
            )
    if "ssl_certfile" in options or "ssl_keyfile" in options:
        try:
            ssl.create_default_context().load_cert_chain(
                options.get("ssl_certfile") or options["ssl_keyfile"],
                options.get("ssl_keyfile"),
                options.get("ssl_password"),
            )
        except (OSError, ValueError) as error:  # ssl.SSLError is an OSError
            raise ConfigurationError(
                f"the Redis URL's ssl_certfile and ssl_keyfile are not a client certificate and its key: {error}",
                hint="ssl_certfile names the certificate (PEM) and ssl_keyfile its private key, unless one file "
                "holds both",
            ) from None
    try:
        RedisSSLContext(**{name.removeprefix("ssl_"): value for name, value in options.items()}).get()
    except (OSError, ValueError, TypeError, rex.RedisError) as error:
        raise ConfigurationError(f"the Redis URL's TLS parameters cannot be used: {error}") from None


class RedisConnection:
    """Ravi's key naming and a redis-py asyncio client for one URL, shared per server and event loop.

    Every store with the same URL and options in one event loop uses one client and one connection pool; each
    event loop gets its own (redis-py connections belong to the loop that opened them).

    Args:
        url: ``redis://[:password@]host:port/db`` (or ``rediss://`` for TLS, ``unix://`` for a socket).
        prefix: Prepended to every key, so several apps can share one Redis.
        socket_timeout: Seconds before a command is abandoned (``BackendUnavailable``); also how long a call
            waits for a free connection when all ``max_connections`` are busy.
        max_connections: Connections kept open at most; further concurrent calls wait for one.
        cluster: ``url`` is a node of a Redis Cluster: talk to the whole cluster through it. Each session's (or
            scope's) keys share one hash tag, so every script and transaction stays on one slot.
    """

    def __init__(
        self,
        url: str,
        *,
        prefix: str = "ravi",
        socket_timeout: float = 10.0,
        max_connections: int = 50,
        cluster: bool = False,
    ) -> None:
        if not isinstance(url, str) or not url.startswith(("redis://", "rediss://", "unix://")):
            raise ConfigurationError(
                "a Redis URL must start with redis://, rediss:// or unix://",
                hint="for example redis://localhost:6379/0",
            )
        _check_url(url, cluster=bool(cluster))
        if not isinstance(prefix, str) or not _PREFIX.match(prefix):
            raise ConfigurationError(
                f"key prefix {prefix!r} is not valid", hint="use 1-64 letters, digits, '_', '.' or '-'"
            )
        if isinstance(socket_timeout, bool) or not isinstance(socket_timeout, int | float) or not socket_timeout > 0:
            raise ConfigurationError(f"socket_timeout must be a positive number of seconds, got {socket_timeout!r}")
        if isinstance(max_connections, bool) or not isinstance(max_connections, int) or max_connections < 1:
            raise ConfigurationError(f"max_connections must be an integer >= 1, got {max_connections!r}")
        self.prefix = prefix
        self._options = (url, float(socket_timeout), max_connections, bool(cluster))
        self._mine: dict[asyncio.AbstractEventLoop, _SharedClient] = {}

    def _shared(self) -> _SharedClient:
        loop = asyncio.get_running_loop()
        shared = self._mine.get(loop)
        if shared is None:
            with _REGISTRY:
                for finished in [other for other in self._mine if other.is_closed()]:  # closed with their loops
                    gone = self._mine.pop(finished)
                    gone.users -= 1
                    if gone.users <= 0:
                        gone._forget()
                shared = self._mine.get(loop)
                if shared is None:
                    key = (loop, *self._options)
                    shared = _SHARED.get(key)
                    if shared is None:
                        shared = _SHARED[key] = _SharedClient(key, *self._options)
                    shared.users += 1
                    self._mine[loop] = shared
        return shared

    @property
    def client(self) -> aioredis.Redis:
        """This event loop's client (created on first use)."""
        return self._shared().client

    async def run_script(self, text: str, keys: list[str], args: list[Any]) -> Any:
        """Run the Lua script ``text`` (by ``EVALSHA``), loaded once per client before its first use, so many
        concurrent first callers do not race to load it (which a cluster client does not survive)."""
        shared = self._shared()
        script = shared.scripts.get(text)
        if script is None:
            async with shared.loading:
                script = shared.scripts.get(text)
                if script is None:
                    script = shared.client.register_script(text)
                    await shared.client.script_load(text)
                    shared.scripts[text] = script
        return await script(keys=keys, args=args)

    def key(self, kind: str, *scope: str, tail: str = "") -> str:
        """``prefix:kind:{scope}:tail``; the scope in a hash tag keeps one scope's keys on one cluster slot."""
        tag = "|".join(part(s) for s in scope)
        return f"{self.prefix}:{kind}:{{{tag}}}" + (f":{tail}" if tail else "")

    async def close(self) -> None:
        """Stop using the shared clients (each closes with its last user); safe to call again."""
        with _REGISTRY:
            mine, self._mine = self._mine, {}
        for shared in mine.values():
            await shared.release()


class RedisOptions(TypedDict, total=False):
    """The connection options every Redis store takes (see :class:`RedisStore`)."""

    prefix: str
    socket_timeout: float
    max_connections: int
    cluster: bool


class RedisStore(Closeable):
    """What every Redis store shares: a :class:`RedisConnection`, and being an async context manager closed
    with ``aclose``.

    Args:
        url: ``redis://[:password@]host:port/db`` (or ``rediss://`` for TLS, ``unix://`` for a socket).
        prefix: Key prefix (default ``ravi``) so several apps can share one Redis.
        socket_timeout: Seconds before a command is abandoned (``BackendUnavailable``).
        max_connections: Connections kept open at most; further concurrent calls wait for one.
        cluster: ``url`` names a node of a Redis Cluster (see :class:`RedisConnection`).
    """

    Options: ClassVar[type[RedisConnectionOptions]] = RedisConnectionOptions
    """The store's options model (types, documentation, defaults), for configuration and keyword arguments."""

    def __init__(self, url: str, **options: Unpack[RedisOptions]) -> None:
        given = RedisConnectionOptions.check(url=url, **options).given()
        self.redis = RedisConnection(given.pop("url"), **given)

    async def aclose(self) -> None:
        """Release the connections (the shared client closes with its last store); safe to call again."""
        await self.redis.close()

    async def close(self) -> None:
        """The same as :meth:`aclose`."""
        await self.aclose()

    async def destroy(self) -> None:
        """Remove every key under this store's ``prefix`` (of every Ravi store sharing it), by ``SCAN``. For tests
        and throwaway data: the conformance runner calls it after each test."""
        with mapped_errors():
            client = self.redis.client
            async for key in client.scan_iter(match=f"{self.redis.prefix}:*", count=1_000):
                await client.delete(key)


_CLIENT_CERTIFICATE_REFUSED = frozenset(
    {
        "TLSV13_ALERT_CERTIFICATE_REQUIRED",  # none given (TLS 1.3)
        "TLSV1_ALERT_UNKNOWN_CA",  # signed by a CA the server does not trust
        "SSLV3_ALERT_BAD_CERTIFICATE",
        "SSLV3_ALERT_CERTIFICATE_UNKNOWN",
        "SSLV3_ALERT_CERTIFICATE_EXPIRED",
        "SSLV3_ALERT_CERTIFICATE_REVOKED",
    }
)
"""The alerts (OpenSSL's reasons) a TLS server sends when it refuses the client's certificate, or its absence."""


def _tls_refusal(error: BaseException) -> RaviError | None:
    """The typed error for a TLS connection refused over a certificate, found among ``error``'s causes (redis-py
    raises its own ``ConnectionError`` while handling the ``ssl`` error): the server's certificate not trusted, a
    ``ConfigurationError``; the client's refused by the server, ``PermissionDenied``. Else ``None``."""
    seen: set[int] = set()
    pending: list[BaseException | None] = [error]
    while pending:
        current = pending.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, ssl.SSLCertVerificationError):
            return ConfigurationError(
                f"the Redis server's TLS certificate is not trusted: {current.verify_message}",
                hint="name the CA that signed it in the URL: rediss://host:6380/0?ssl_ca_certs=/path/to/ca.pem "
                "(percent-encoded), and connect by a name the certificate holds; ssl_cert_reqs=none skips the "
                "check, which is insecure",
            )
        if isinstance(current, ssl.SSLError) and current.reason in _CLIENT_CERTIFICATE_REFUSED:
            return PermissionDenied(
                f"the Redis server refused the TLS connection's client certificate ({current.reason}): it asks "
                "for one signed by a CA it trusts (its tls-auth-clients and tls-ca-cert-file)",
                hint="give the client certificate and its key in the URL: "
                "rediss://host:6380/0?ssl_ca_certs=/path/to/ca.pem&ssl_certfile=/path/to/client.pem"
                "&ssl_keyfile=/path/to/client.key",
            )
        pending += [current.__cause__, current.__context__]
    return None


@contextlib.contextmanager
def mapped_errors() -> Iterator[None]:
    """Turn redis-py and socket errors into the kernel's typed errors."""
    try:
        yield
    except RaviError:
        raise
    except rex.AuthenticationError as error:
        raise PermissionDenied(
            f"Redis refused the credentials: {error}",
            hint="check the user and password in the URL (redis://user:password@host:port/db)",
        ) from error
    except rex.NoPermissionError as error:
        raise PermissionDenied(f"Redis refused the command: {error}") from error
    except (rex.ConnectionError, rex.TimeoutError, ConnectionError, OSError, TimeoutError) as error:
        if isinstance(error.__cause__, RaviError):  # raised by a connection of ours as it opened (_TLSConnection)
            raise error.__cause__ from None
        refused = _tls_refusal(error)
        if refused is not None:
            raise refused from error
        raise BackendUnavailable(
            f"Redis is unreachable: {type(error).__name__}: {error}",
            hint="check the host and port in the URL; once the server is back the next call reconnects",
        ) from error
    except rex.DataError as error:
        raise InvalidArgument(f"Redis cannot store this value: {error}") from error
    except rex.ReadOnlyError as error:  # a replica: the URL names one, or the primary became one in a failover
        raise BackendUnavailable(
            f"the Redis URL names a read-only replica: {error}",
            hint="point the URL at the primary; nothing was written",
        ) from error
    except rex.InvalidResponse as error:  # the address answers, but not as Redis does (another service's port)
        raise BackendUnavailable(
            f"the server at the Redis URL does not answer as Redis: {error}",
            hint="check the host and port in the URL: they may name another service",
        ) from error
    except rex.RedisError as error:
        if "DB index is out of range" in str(error):  # SELECT of the URL's database, when a connection opens
            raise ConfigurationError(
                f"Redis has no database of the number the URL names: {error}",
                hint="use a database the server has (0 to 15 unless its databases setting allows more): "
                "the number after the port in the URL, redis://host:6379/0",
            ) from error
        if "OOM" in str(error):
            raise BackendUnavailable(f"Redis is out of memory: {error}") from error
        raise RaviError(f"Redis error: {type(error).__name__}: {error}") from error


__all__ = ["RedisConnection", "RedisOptions", "RedisStore", "mapped_errors", "part"]
