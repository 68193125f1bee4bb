"""The connection layer shared by the Redis stores: client, key naming and error mapping."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from urllib.parse import quote

import redis.asyncio as aioredis
import redis.exceptions as rex

from ravi.kernel.errors import BackendUnavailable, ConfigurationError, InvalidArgument, PermissionDenied, RaviError

_PREFIX = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


def part(value: str) -> str:
    """A key component: any string, escaped so it can never forge a separator or a hash tag."""
    return quote(value, safe="")


class RedisConnection:
    """A redis-py asyncio client for one URL, with Ravi's key prefix.

    Args:
        url: ``redis://[:password@]host:port/db`` (or ``rediss://`` for TLS, ``unix://`` for a socket).
        prefix: Prepended to every key, so several apps can share one Redis.
        socket_timeout: Seconds before a command is abandoned (``BackendUnavailable``); also how long a call
            waits for a free connection when all ``max_connections`` are busy.
        max_connections: Connections kept open at most; further concurrent calls wait for one.
    """

    def __init__(
        self, url: str, *, prefix: str = "ravi", socket_timeout: float = 10.0, max_connections: int = 50
    ) -> None:
        if not isinstance(url, str) or not url.startswith(("redis://", "rediss://", "unix://")):
            raise ConfigurationError(
                "a Redis URL must start with redis://, rediss:// or unix://",
                hint="for example redis://localhost:6379/0",
            )
        if not isinstance(prefix, str) or not _PREFIX.match(prefix):
            raise ConfigurationError(
                f"key prefix {prefix!r} is not valid", hint="use 1-64 letters, digits, '_', '.' or '-'"
            )
        self.prefix = prefix
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
        self.client = aioredis.Redis.from_pool(pool)  # the client owns the pool: aclose() closes both

    def key(self, kind: str, *scope: str, tail: str = "") -> str:
        """``prefix:kind:{scope}:tail``; the scope in a hash tag keeps one scope's keys on one cluster slot."""
        tag = "|".join(part(s) for s in scope)
        return f"{self.prefix}:{kind}:{{{tag}}}" + (f":{tail}" if tail else "")

    async def close(self) -> None:
        """Close the connections."""
        await self.client.aclose()


@contextlib.contextmanager
def mapped_errors() -> Iterator[None]:
    """Turn redis-py and socket errors into the kernel's typed errors."""
    try:
        yield
    except RaviError:
        raise
    except rex.AuthenticationError as error:
        raise PermissionDenied(f"Redis refused the credentials: {error}") from error
    except rex.NoPermissionError as error:
        raise PermissionDenied(f"Redis refused the command: {error}") from error
    except (rex.ConnectionError, rex.TimeoutError, ConnectionError, OSError, TimeoutError) as error:
        raise BackendUnavailable(
            f"Redis is unreachable: {type(error).__name__}: {error}",
            hint="the next call reconnects once the server is back",
        ) from error
    except rex.DataError as error:
        raise InvalidArgument(f"Redis cannot store this value: {error}") from error
    except rex.RedisError as error:
        if "OOM" in str(error):
            raise BackendUnavailable(f"Redis is out of memory: {error}") from error
        raise RaviError(f"Redis error: {type(error).__name__}: {error}") from error


__all__ = ["RedisConnection", "mapped_errors", "part"]
