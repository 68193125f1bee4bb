"""``Closeable``: every store is an async context manager released with ``aclose``."""

from __future__ import annotations

from typing import Self


class Closeable:
    """``async with store:`` and ``await store.aclose()`` work on every store; in memory there is nothing to
    release, so code written against the in-memory default runs unchanged on Postgres or Redis."""

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Nothing to release in memory; safe to call again."""


__all__ = ["Closeable"]
