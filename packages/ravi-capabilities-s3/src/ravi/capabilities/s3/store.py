"""``S3FileStore``: blobs on AWS S3, MinIO, SeaweedFS or any S3-compatible store."""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import math
import time
from collections.abc import Callable, Iterator, Mapping
from datetime import timedelta
from types import TracebackType
from typing import Any, TypeVar

import boto3
import botocore.exceptions as bce
from boto3.s3.transfer import TransferConfig
from botocore.config import Config

from ravi.capabilities.s3.options import S3Options
from ravi.kernel.env import read_raw
from ravi.kernel.errors import (
    BackendUnavailable,
    ConfigurationError,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    RaviError,
)
from ravi.kernel.loops import KeyedLocks
from ravi.kernel.storage import (
    MAX_KEY_BYTES,
    Blob,
    blob_prefix,
    check_blob_key,
    check_blob_metadata,
    check_content_type,
    check_forget,
)
from ravi.kernel.values import MAX_TTL_SECONDS, ttl_seconds

_log = logging.getLogger(__name__)
T = TypeVar("T")

EXPIRES_KEY = "ravi-expires-at"
"""User-metadata key that records a blob's expiry (seconds since the epoch)."""
TTL_TAG = "ravi-ttl-days"
"""Object tag that the bucket's lifecycle rules match, so expired objects are also removed by the store."""


def _rule_days() -> tuple[int, ...]:
    days, last = [1, 2, 3, 4, 5, 6, 7], math.ceil(MAX_TTL_SECONDS / 86_400)
    while days[-1] < last:
        days.append(min(days[-1] * 2, last))
    return tuple(days)


RULE_DAYS = _rule_days()
"""The lifetimes, in days, of the bucket's lifecycle rules: every day of the first week, then doubling up to the
longest TTL (1 to 7, 14, 28, ... 28,672, 36,500). A blob's lifetime is rounded up to the next of them (at most
twice its own), so every store writes the same fixed set of rules, ``RULES``."""

RULES: tuple[dict[str, Any], ...] = tuple(
    {
        "ID": f"ravi-ttl-{days}d",
        "Status": "Enabled",
        "Expiration": {"Days": days},
        "Filter": {"Tag": {"Key": TTL_TAG, "Value": str(days)}},
    }
    for days in RULE_DAYS
)
"""Ravi's lifecycle rules: one per lifetime of :data:`RULE_DAYS`, deleting the objects tagged with it."""


def _rounded_days(seconds: float) -> int:
    """The lifetime of :data:`RULE_DAYS` a TTL of ``seconds`` is tagged with: the shortest that is not shorter."""
    days = max(1, math.ceil(seconds / 86_400))
    return next(d for d in RULE_DAYS if d >= days)


def _deadline(meta: Mapping[str, str]) -> float | None:
    """When a blob with the metadata ``meta`` expires (a Unix time), or ``None`` when it never does."""
    expires = meta.get(EXPIRES_KEY)
    if expires is None:
        return None
    try:
        return float(expires)
    except ValueError:  # written by something other than Ravi: not an expiry Ravi can honour
        _log.warning("ignoring a malformed %s metadata value %r", EXPIRES_KEY, expires)
        return None


def _error_code(error: BaseException) -> str:
    """The S3 error code behind a mapped error (its ``ClientError`` cause), or ``""``."""
    cause = error.__cause__
    if isinstance(cause, bce.ClientError):
        return str(cause.response.get("Error", {}).get("Code", ""))
    return ""


def _same_rule(rule: Mapping[str, Any], rules: list[dict[str, Any]]) -> bool:
    """Whether ``rules`` hold ``rule`` as it is written: its id, with the same status, expiry and filter."""
    return any(
        r.get("ID") == rule["ID"] and all(r.get(k) == rule[k] for k in ("Status", "Expiration", "Filter"))
        for r in rules
    )


_NOT_FOUND = {"NoSuchKey", "404", "NotFound"}
_DENIED = {"AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "403", "Forbidden"}
_NO_BUCKET = {"NoSuchBucket"}
_TOO_LONG = {"KeyTooLongError"}


@contextlib.contextmanager
def mapped_errors(what: str) -> Iterator[None]:
    """Turn boto3/botocore errors into the kernel's typed errors."""
    try:
        yield
    except RaviError:
        raise
    except bce.ClientError as error:
        code = str(error.response.get("Error", {}).get("Code", ""))
        if code in _NOT_FOUND:
            raise NotFound(f"{what}: not found") from error
        if code in _DENIED:
            raise PermissionDenied(f"{what}: the store refused the credentials or the request ({code})") from error
        if code in _TOO_LONG:  # a key_prefix and a key that together pass the server's limit
            raise InvalidArgument(f"{what}: the server refused the key as too long ({code})") from error
        if code in _NO_BUCKET:
            raise ConfigurationError(
                f"{what}: the bucket does not exist", hint="create it, or pass create_bucket=True"
            ) from error
        raise RaviError(f"{what}: S3 error {code}: {error}") from error
    except (
        bce.EndpointConnectionError,
        bce.ConnectionClosedError,
        bce.ReadTimeoutError,
        bce.ConnectTimeoutError,
        bce.ConnectionError,
        ConnectionError,
        TimeoutError,
    ) as error:
        raise BackendUnavailable(f"{what}: the S3 endpoint is unreachable: {error}") from error
    except bce.NoCredentialsError as error:
        raise ConfigurationError(
            f"{what}: no S3 credentials found",
            hint="pass access_key and secret_key, or set up the boto3 credential chain",
        ) from error
    except bce.BotoCoreError as error:
        raise RaviError(f"{what}: {error}") from error


class S3FileStore:
    """The ``BlobStore`` contract on S3.

    boto3 underneath: one client, reused, its blocking calls run in a worker thread so the event loop never
    waits on the network. Blobs larger than ``multipart_threshold`` go up in multipart uploads.

    A blob uploaded with a ``ttl`` records its expiry in its metadata: it is never returned after that time
    (whatever the store's clock says). Where the store supports bucket lifecycle rules, the object is also tagged
    so a rule removes it once the whole days have passed.

    Args:
        bucket: The bucket; created on :meth:`connect` when ``create_bucket`` is true, else it must exist.
        endpoint_url: For MinIO, SeaweedFS and other compatible stores (``None`` for AWS).
        region: The region name (``None``: ``AWS_REGION``, else ``AWS_DEFAULT_REGION``, else ``us-east-1``).
        access_key, secret_key: Credentials (``None`` uses boto3's usual credential chain).
        addressing_style: ``"path"``, ``"virtual"`` or ``"auto"``.
        key_prefix: Prepended to every key: empty, or ending with ``/`` (``"app1/"``), so no app's keys are
            another's.
        multipart_threshold: Bytes above which uploads are multipart.
        timeout: Seconds to wait to connect, and for each answer, before the call fails with
            ``BackendUnavailable``.
        max_attempts: Tries per call (1, the default, means no retry, so ``timeout`` bounds the wait; with
            more, throttled or failed requests are retried and a call may wait ``max_attempts`` times as long).
        lifecycle_rules: Tag expiring blobs and add bucket lifecycle rules that remove them.

    Keys follow :func:`~ravi.kernel.storage.check_blob_key` (no empty, ``.`` or ``..`` segment, which S3
    gateways normalise into other keys), and metadata :func:`~ravi.kernel.storage.check_blob_metadata`
    (lower-case keys, printable ASCII values, at most 2 KiB), so a blob comes back exactly as it was stored.
    """

    Options = S3Options
    """The store's options model (types, documentation, defaults), for configuration and keyword arguments."""

    def __init__(
        self,
        bucket: str,
        *,
        endpoint_url: str | None = None,
        region: str | None = None,
        access_key: str | None = None,
        secret_key: str | None = None,
        addressing_style: str = "auto",
        key_prefix: str = "",
        create_bucket: bool = False,
        multipart_threshold: int = 8 * 1024 * 1024,
        timeout: float = 30.0,
        max_attempts: int = 1,
        lifecycle_rules: bool = True,
    ) -> None:
        if region is None:  # as the AWS tools read it, then S3's first region
            region = read_raw("AWS_REGION") or read_raw("AWS_DEFAULT_REGION") or "us-east-1"
        S3Options.check(
            bucket=bucket,
            endpoint_url=endpoint_url,
            region=region,
            access_key=access_key,
            secret_key=secret_key,
            addressing_style=addressing_style,
            key_prefix=key_prefix,
            create_bucket=create_bucket,
            multipart_threshold=multipart_threshold,
            timeout=timeout,
            max_attempts=max_attempts,
            lifecycle_rules=lifecycle_rules,
        )
        if not isinstance(bucket, str) or not bucket:
            raise ConfigurationError("bucket must be a non-empty string")
        if not isinstance(max_attempts, int) or max_attempts < 1:
            raise ConfigurationError(f"max_attempts must be an integer >= 1, got {max_attempts!r}")
        if addressing_style not in ("path", "virtual", "auto"):
            raise ConfigurationError(f"addressing_style must be path, virtual or auto, got {addressing_style!r}")
        self.bucket = bucket
        self.key_prefix = key_prefix
        self.max_key_bytes = MAX_KEY_BYTES - len(key_prefix.encode("utf-8"))
        """How many UTF-8 bytes a key may hold: S3's 1,024 less what the ``key_prefix`` takes."""
        self.create_bucket = create_bucket
        self._lifecycle = lifecycle_rules
        self._rules_checked = False
        self._transfer = TransferConfig(
            multipart_threshold=multipart_threshold, multipart_chunksize=max(5 * 1024 * 1024, multipart_threshold)
        )
        self._client_options: dict[str, Any] = {
            "endpoint_url": endpoint_url,
            "region_name": region,
            "aws_access_key_id": access_key,
            "aws_secret_access_key": secret_key,
            "config": Config(
                signature_version="s3v4",
                s3={"addressing_style": addressing_style},
                connect_timeout=timeout,
                read_timeout=timeout,
                retries={"mode": "standard", "total_max_attempts": max_attempts},
            ),
        }
        self._client: Any = None
        self._deleting = KeyedLocks[str]()

    async def __aenter__(self) -> S3FileStore:
        await self.connect()
        return self

    async def __aexit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        await self.disconnect()

    async def _call(self, what: str, function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        if self._client is None:
            await self.connect()
        with mapped_errors(what):
            return await asyncio.to_thread(function, *args, **kwargs)

    async def connect(self) -> None:
        """Create the client and check the bucket (creating it when configured to). Safe to call again, and from
        several tasks or threads at once: the client is kept once the bucket is there, so no call reaches a
        bucket another caller is still creating, and a bucket created meanwhile by another caller counts as
        created."""
        if self._client is not None:
            return
        try:
            with mapped_errors("connect"):
                client = await asyncio.to_thread(boto3.session.Session().client, "s3", **self._client_options)
        except ValueError as error:  # botocore refused an option (the options' checks apply its rules first)
            raise ConfigurationError(f"connect: boto3 refused the S3 options: {error}") from error
        try:
            with mapped_errors(f"bucket {self.bucket!r}"):
                await asyncio.to_thread(client.head_bucket, Bucket=self.bucket)
        except NotFound:
            if not self.create_bucket:
                raise ConfigurationError(
                    f"bucket {self.bucket!r} does not exist", hint="create it, or pass create_bucket=True"
                ) from None
            with mapped_errors(f"create bucket {self.bucket!r}"):
                try:
                    await asyncio.to_thread(client.create_bucket, Bucket=self.bucket)
                except bce.ClientError as error:
                    if error.response.get("Error", {}).get("Code") != "BucketAlreadyOwnedByYou":
                        raise
        self._client = client

    async def destroy(self) -> None:
        """Remove every object under this store's ``key_prefix`` (the whole bucket when there is none). For tests
        and throwaway data: the conformance runner calls it after each test."""
        client = self._client or await self._connected()
        paginator = client.get_paginator("list_objects_v2")

        def remove_all() -> None:
            for page in paginator.paginate(Bucket=self.bucket, Prefix=self.key_prefix):
                for item in page.get("Contents", []):
                    client.delete_object(Bucket=self.bucket, Key=item["Key"])

        await self._call("destroy", remove_all)

    async def aclose(self) -> None:
        """The same as :meth:`disconnect`: close the client's connections; safe to call again."""
        await self.disconnect()

    async def disconnect(self) -> None:
        """Close the client's connections."""
        client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(Exception):
                await asyncio.to_thread(client.close)

    def _key(self, key: str) -> str:
        size = len(check_blob_key(key).encode("utf-8"))
        if size > self.max_key_bytes:
            raise InvalidArgument(
                f"a blob key may hold at most {self.max_key_bytes} UTF-8 bytes in this store, this one has {size}: its "
                f"key_prefix {self.key_prefix!r} takes {MAX_KEY_BYTES - self.max_key_bytes} of S3's {MAX_KEY_BYTES}",
                hint="shorten the key (a hash of its long part, for instance) or the key_prefix",
            )
        return self.key_prefix + key

    async def _ensure_rules(self) -> None:
        """Ravi's lifecycle rules (:data:`RULES`) on the bucket, checked once per store, where the store supports
        them. The set is fixed, so every store writes the same one: two processes writing at once write the same
        rules, and neither loses one the other added (one rule per lifetime, read, changed and written back, lost
        one). The bucket's other rules are kept: rules that cannot be read (a timeout, a refused read) are left as
        they are, never replaced by Ravi's alone; S3 has no conditional write of a lifecycle configuration, so an
        edit of those by another tool at the very moment of this first write can still be lost."""
        if not self._lifecycle or self._rules_checked:
            return
        client = self._client or await self._connected()
        self._rules_checked = True
        try:
            try:
                current = await self._call("lifecycle", client.get_bucket_lifecycle_configuration, Bucket=self.bucket)
                rules = list(current.get("Rules", []))
            except RaviError as error:
                if _error_code(error) != "NoSuchLifecycleConfiguration":
                    raise  # rules that could not be read are not known to be none: writing would drop them
                rules = []
            ours = {rule["ID"] for rule in RULES}
            if all(_same_rule(rule, rules) for rule in RULES):
                return  # every rule there as Ravi writes it: one another tool changed (its days) is written again
            await self._call(
                "lifecycle",
                client.put_bucket_lifecycle_configuration,
                Bucket=self.bucket,
                LifecycleConfiguration={"Rules": [r for r in rules if r.get("ID") not in ours] + list(RULES)},
            )
        except RaviError as error:  # the store has no lifecycle rules: expiry by metadata still holds
            _log.info("bucket %s: no lifecycle rules (%s)", self.bucket, error)

    async def upload(
        self,
        key: str,
        data: bytes,
        *,
        content_type: str = "application/octet-stream",
        ttl: timedelta | float | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> str:
        """Store ``data`` under ``key`` (multipart above the threshold); returns the key."""
        full = self._key(key)
        if not isinstance(data, bytes | bytearray | memoryview):
            raise InvalidArgument(f"data must be bytes, got {type(data).__name__}")
        seconds = ttl_seconds(ttl)
        # lower-case keys, "ravi-" reserved: nothing can forge the expiry, which has room of its own (S3's 2 KiB)
        meta = check_blob_metadata(metadata, ttl=seconds)
        extra: dict[str, Any] = {"ContentType": check_content_type(content_type)}
        if seconds is not None:
            await self._ensure_rules()  # first: the blob's lifetime starts at its upload, not before this setup
            meta[EXPIRES_KEY] = repr(time.time() + seconds)
            extra["Tagging"] = f"{TTL_TAG}={_rounded_days(seconds)}"
        extra["Metadata"] = meta
        client = self._client or await self._connected()
        await self._call(
            f"upload {key!r}",
            client.upload_fileobj,
            io.BytesIO(bytes(data)),
            self.bucket,
            full,
            ExtraArgs=extra,
            Config=self._transfer,
        )
        return key

    async def _connected(self) -> Any:
        await self.connect()
        return self._client

    @staticmethod
    def _expired(meta: Mapping[str, str]) -> bool:
        deadline = _deadline(meta)
        return deadline is not None and time.time() >= deadline

    async def download(self, key: str) -> Blob:
        """The blob under ``key``; ``NotFound`` if it is missing or expired."""
        full = self._key(key)
        client = self._client or await self._connected()
        response = await self._call(f"download {key!r}", client.get_object, Bucket=self.bucket, Key=full)
        meta = dict(response.get("Metadata", {}))
        if self._expired(meta):
            # this version only (If-Match its ETag): a blob another writer stored under the key since the read stays
            # (the server refuses the delete with PreconditionFailed)
            version = {"IfMatch": response["ETag"]} if response.get("ETag") else {}
            with contextlib.suppress(RaviError):
                await self._call(f"delete {key!r}", client.delete_object, Bucket=self.bucket, Key=full, **version)
            raise NotFound(f"download {key!r}: not found (expired)")
        body = await self._call(f"download {key!r}", response["Body"].read)
        meta = {k: v for k, v in meta.items() if not k.startswith("ravi-")}  # Ravi's own records stay inside
        return Blob(
            key=key, data=body, content_type=response.get("ContentType", "application/octet-stream"), metadata=meta
        )

    async def _head(self, key: str) -> dict[str, Any] | None:
        full = self._key(key)
        client = self._client or await self._connected()
        try:
            head = await self._call(f"head {key!r}", client.head_object, Bucket=self.bucket, Key=full)
        except NotFound:
            return None
        return None if self._expired(head.get("Metadata", {})) else dict(head)

    async def delete(self, key: str) -> bool:
        """Remove the blob; ``False`` if it was not there (or had expired).

        Concurrent deletes of one key through this store, on one event loop, report ``True`` once. S3 has no
        conditional delete, so deletes racing on one key from separate processes (or separate loops) may both
        report ``True``.
        """
        self._key(key)  # checked before it keys a lock (a list is no key, and no lock's either)
        async with self._deleting(key):
            present = await self._head(key) is not None
            client = self._client  # deleted either way: an expired blob goes too
            await self._call(f"delete {key!r}", client.delete_object, Bucket=self.bucket, Key=self._key(key))
            return present

    async def forget(self, agent_id: str, *, session_id: str | None = None) -> int:
        """Erase every object whose key starts with :func:`~ravi.kernel.storage.blob_prefix` of the scope
        (``agent_id/``, or ``agent_id/session_id/``) (``Forgetter``); returns how many objects (expired ones
        included: they are deleted too)."""
        check_forget(agent_id, session_id)
        client = self._client or await self._connected()
        prefix = self.key_prefix + blob_prefix(agent_id, session_id)
        paginator = client.get_paginator("list_objects_v2")

        def remove() -> int:
            removed = 0
            for page in paginator.paginate(Bucket=self.bucket, Prefix=prefix):
                for item in page.get("Contents", []):  # one by one: not every S3 server takes DeleteObjects
                    client.delete_object(Bucket=self.bucket, Key=item["Key"])
                    removed += 1
            return removed

        return await self._call(f"forget {prefix!r}", remove)

    async def presign_url(self, key: str, *, expires_in: timedelta | float = 3600) -> str:
        """A presigned GET URL that plain HTTP can fetch until ``expires_in`` passes (at most 7 days on AWS), or
        until the blob expires when that is sooner: the URL never serves a blob past its TTL (the bucket's
        lifecycle rule removes it days later only)."""
        seconds = ttl_seconds(expires_in, name="expires_in")
        if seconds is None:
            raise InvalidArgument("expires_in must be a duration (seconds or a timedelta), got None")
        head = await self._head(key)
        if head is None:
            raise NotFound(f"presign {key!r}: not found")
        deadline = _deadline(head.get("Metadata", {}))
        if deadline is not None:
            seconds = min(seconds, deadline - time.time())
            if seconds < 1:  # a URL lives whole seconds: one that would outlive the blob is not given
                raise NotFound(f"presign {key!r}: not found (expires within a second)")
        client = self._client
        return str(
            await self._call(
                f"presign {key!r}",
                client.generate_presigned_url,
                "get_object",
                Params={"Bucket": self.bucket, "Key": self._key(key)},
                ExpiresIn=max(1, int(seconds)),
            )
        )


__all__ = ["EXPIRES_KEY", "RULES", "RULE_DAYS", "TTL_TAG", "S3FileStore"]
