"""Blobs (004): ``Blob``, the ``BlobStore`` Protocol, and the key and metadata rules every blob store keeps."""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import timedelta
from typing import Protocol, TypeGuard, runtime_checkable

from pydantic import Field

from ravi.kernel.errors import InvalidArgument
from ravi.kernel.messages import FrozenDict, ReadOnlyDict
from ravi.kernel.storage._common import _FROZEN
from ravi.kernel.values import Value


class Blob(Value):
    """Bytes downloaded from a blob store, with their content type and user metadata."""

    model_config = _FROZEN

    key: str
    data: bytes
    content_type: str = "application/octet-stream"
    metadata: ReadOnlyDict = Field(default_factory=FrozenDict)


@runtime_checkable
class BlobStore(Protocol):
    """Bytes by key (tool outputs, files, images), with optional expiry and shareable URLs.

    Keys are checked by :func:`check_blob_key`. A store whose keys have less room than :data:`MAX_KEY_BYTES` says
    so with :class:`BoundedKeys`."""

    async def connect(self) -> None:
        """Open connections; stores are also async context managers that connect and disconnect."""
        ...

    async def disconnect(self) -> None:
        """Close connections."""
        ...

    async def upload(
        self,
        key: str,
        data: bytes,
        *,
        content_type: str = "application/octet-stream",
        ttl: timedelta | float | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> str:
        """Store ``data`` under ``key`` (replacing it); returns the key. After ``ttl`` it is gone."""
        ...

    async def download(self, key: str) -> Blob:
        """The blob under ``key``; ``NotFound`` if it is missing or expired."""
        ...

    async def delete(self, key: str) -> bool:
        """Remove the blob; ``False`` if it was not there."""
        ...

    async def presign_url(self, key: str, *, expires_in: timedelta | float = 3600) -> str:
        """A URL that fetches the blob without credentials until ``expires_in`` passes."""
        ...


MAX_KEY_BYTES = 1024
"""The longest blob key, in UTF-8 bytes (S3's limit)."""


@runtime_checkable
class BoundedKeys(Protocol):
    """An optional ability of a blob store whose keys have less room than :data:`MAX_KEY_BYTES` (S3's limit counts
    an S3 store's ``key_prefix`` too): ``max_key_bytes`` says how many UTF-8 bytes a key may hold, and a longer key
    is refused with ``InvalidArgument``. The conformance suite sizes its longest key by it."""

    max_key_bytes: int


MAX_SEGMENT_BYTES = 255
"""The longest ``/``-separated segment of a blob key, in UTF-8 bytes (a file name's limit on the file systems
that S3 servers such as SeaweedFS and MinIO keep objects in)."""


def check_blob_key(key: object) -> str:
    """``key`` if it is a valid blob key, else ``InvalidArgument``.

    A key is a non-empty string of at most :data:`MAX_KEY_BYTES` UTF-8 bytes without control characters or
    backslashes (unicode is welcome), made of ``/``-separated segments of at most :data:`MAX_SEGMENT_BYTES`
    bytes each (S3 servers that keep objects as files refuse longer ones): no leading or trailing ``/``, no
    empty segment (``a//b``) and no ``.`` or ``..`` segment. Object stores and their gateways normalise such keys, so
    ``/x`` or ``a/./b`` would alias ``x`` and ``a/b``, and some S3 servers (SeaweedFS) read a backslash as a
    ``/`` (``a\\b`` overwrote ``a/b``, and a key ending in one was acknowledged and read back empty); refusing
    them keeps one key, one blob, on every backend.
    """
    if not isinstance(key, str):
        raise InvalidArgument(f"a blob key must be a string, got {type(key).__name__}")
    if not key:
        raise InvalidArgument("a blob key must not be empty")
    size = len(key.encode("utf-8", "surrogatepass"))
    if size > MAX_KEY_BYTES:
        raise InvalidArgument(f"a blob key may hold at most {MAX_KEY_BYTES} UTF-8 bytes, this one has {size}")
    bad = next((c for c in key if ord(c) < 32 or ord(c) == 127 or 0xD800 <= ord(c) <= 0xDFFF), None)
    if bad is not None:
        raise InvalidArgument(f"a blob key must not contain control characters or lone surrogates ({bad!r})")
    if "\\" in key:
        raise InvalidArgument(
            f"a blob key must not contain a backslash ({key!r}): some S3 servers read it as '/'",
            hint="use '/' to separate segments, or percent-encode the backslash (%5C)",
        )
    segments = key.split("/")
    if any(segment in ("", ".", "..") for segment in segments):
        raise InvalidArgument(
            f"blob key {key!r} has an empty, '.' or '..' segment, or a leading or trailing '/'",
            hint="use segments separated by single slashes, such as 'reports/2024/q1.pdf'",
        )
    longest = max(len(segment.encode("utf-8")) for segment in segments)
    if longest > MAX_SEGMENT_BYTES:
        raise InvalidArgument(
            f"a blob key's '/'-separated segments may hold at most {MAX_SEGMENT_BYTES} UTF-8 bytes, one of "
            f"{key!r:.80} has {longest}",
            hint="split a long name with '/', or shorten it (a hash of it, for instance)",
        )
    return key


MAX_METADATA_BYTES = 2048
"""The most user metadata a blob may carry, keys and values in UTF-8 bytes together (S3's limit)."""

EXPIRY_METADATA_BYTES = 40
"""What a blob uploaded with a ttl keeps free of its :data:`MAX_METADATA_BYTES` for the store's record of its
expiry (the S3 store writes ``ravi-expires-at`` and the time there: 33 bytes)."""

MAX_METADATA_ENTRIES = 64
"""The most user metadata entries a blob may carry (each is an HTTP header on S3)."""

_METADATA_KEY = re.compile(r"^[a-z0-9][a-z0-9_-]{0,127}$")


def check_blob_metadata(metadata: Mapping[str, str] | None, *, ttl: float | None = None) -> dict[str, str]:
    """Blob metadata that every store keeps exactly, else ``InvalidArgument``.

    S3 sends metadata as HTTP headers: it lower-cases keys, drops empty values, trims spaces around values and
    re-encodes anything beyond printable ASCII. So keys are lower-case letters, digits, ``-`` and ``_``; values
    are non-empty printable ASCII that neither starts nor ends with a space (percent-encode anything else); keys
    starting with ``ravi-`` are Ravi's own; and the whole fits in :data:`MAX_METADATA_ENTRIES` entries and
    :data:`MAX_METADATA_BYTES` bytes, less :data:`EXPIRY_METADATA_BYTES` for a blob with a ``ttl`` (S3 refused
    the whole otherwise, while the in-memory store kept it).
    """
    if metadata is None:
        return {}
    if not isinstance(metadata, Mapping):
        raise InvalidArgument(f"metadata must be a mapping of strings, got {type(metadata).__name__}")
    if len(metadata) > MAX_METADATA_ENTRIES:
        raise InvalidArgument(f"a blob may carry at most {MAX_METADATA_ENTRIES} metadata entries, got {len(metadata)}")
    size = 0
    for key, value in metadata.items():
        if not isinstance(key, str) or not _METADATA_KEY.match(key):
            raise InvalidArgument(
                f"metadata key {key!r} is not valid",
                hint="use lower-case ASCII letters, digits, '-' and '_' (S3 lower-cases keys)",
            )
        if key.startswith("ravi-"):
            raise InvalidArgument(f"metadata key {key!r} is reserved: keys starting with 'ravi-' are Ravi's own")
        if not _header_value(value):
            raise InvalidArgument(
                f"metadata value of {key!r} must be a non-empty string of printable ASCII that neither starts nor "
                f"ends with a space, got {value!r:.60}",
                hint="percent-encode other text (urllib.parse.quote)",
            )
        size += len(key) + len(value)
    room = MAX_METADATA_BYTES if ttl is None else MAX_METADATA_BYTES - EXPIRY_METADATA_BYTES
    if size > room:
        why = "" if ttl is None else " with a ttl (the rest records the expiry)"
        raise InvalidArgument(f"blob metadata may hold at most {room} bytes{why}, this has {size}")
    return dict(metadata)


def check_content_type(content_type: object) -> str:
    """``content_type`` if it is a non-empty string of printable ASCII that neither starts nor ends with a space
    (an HTTP header value, which HTTP trims), else ``InvalidArgument``."""
    if not _header_value(content_type):
        raise InvalidArgument(
            "content_type must be a non-empty printable ASCII string that neither starts nor ends with a space, "
            f"got {content_type!r:.60}"
        )
    return content_type


def _header_value(value: object) -> TypeGuard[str]:
    """Whether ``value`` comes back from an HTTP header as it was sent: non-empty printable ASCII, no space at
    either end (HTTP trims them)."""
    return (
        isinstance(value, str)
        and value.isascii()
        and value.isprintable()
        and value != ""
        and value[0] != " "
        and value[-1] != " "
    )


__all__ = [
    "EXPIRY_METADATA_BYTES",
    "MAX_KEY_BYTES",
    "MAX_METADATA_BYTES",
    "MAX_METADATA_ENTRIES",
    "MAX_SEGMENT_BYTES",
    "Blob",
    "BlobStore",
    "BoundedKeys",
    "check_blob_key",
    "check_blob_metadata",
    "check_content_type",
]
