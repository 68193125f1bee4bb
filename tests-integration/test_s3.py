"""The S3 blob store against a real S3-compatible server: the contract, presigned URLs over plain HTTP,
multipart uploads and the mapping of every failure to a typed error."""

from __future__ import annotations

import asyncio
import urllib.error
import urllib.request
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from servers import Server

from ravi.capabilities.s3 import S3FileStore
from ravi.conformance import BlobStoreContract
from ravi.kernel.errors import BackendUnavailable, ConfigurationError, InvalidArgument, NotFound, PermissionDenied
from ravi.kernel.registry import load_backend
from ravi.kernel.storage import blob_prefix


def store_for(server: Server, bucket: str, **options: Any) -> S3FileStore:
    assert server.credentials is not None
    access, secret = server.credentials
    options.setdefault("create_bucket", True)
    return S3FileStore(
        bucket, endpoint_url=server.address, access_key=access, secret_key=secret, addressing_style="path", **options
    )


class TestS3FileStore(BlobStoreContract):
    @pytest_asyncio.fixture
    async def backend(self, s3_server: Server, s3_bucket: str) -> AsyncIterator[S3FileStore]:
        async with store_for(s3_server, s3_bucket) as store:
            yield store


class TestS3FileStoreUnderAKeyPrefix(BlobStoreContract):
    """The contract through a store whose keys share S3's 1,024 bytes with a ``key_prefix`` (as ``ravi
    conformance`` runs it: each test under a prefix of its own)."""

    @pytest_asyncio.fixture
    async def backend(self, s3_server: Server, s3_bucket: str) -> AsyncIterator[S3FileStore]:
        async with store_for(s3_server, s3_bucket, key_prefix="tenant-with-a-long-name/conformance/") as store:
            yield store


async def test_a_key_prefix_takes_its_bytes_from_the_keys_room(s3_server: Server, s3_bucket: str) -> None:
    """S3 keeps at most 1,024 bytes of key, the prefix's included: a prefixed store says how many its keys may
    hold (``max_key_bytes``), stores a key of exactly that many, and refuses a longer one with
    ``InvalidArgument`` before any request (the server's refusal came back as an S3 error)."""
    from ravi.agents.storage import InMemoryFileStore
    from ravi.kernel.storage import MAX_KEY_BYTES, BoundedKeys

    prefix = "app-é/"
    async with store_for(s3_server, s3_bucket, key_prefix=prefix) as store:
        assert isinstance(store, BoundedKeys) and not isinstance(InMemoryFileStore(), BoundedKeys)
        assert store.max_key_bytes == MAX_KEY_BYTES - len(prefix.encode())
        segments = "/".join(["s" * 200] * 6)
        fits = segments[: store.max_key_bytes - 1].rstrip("/") + "k"
        fits += "k" * (store.max_key_bytes - len(fits.encode()))
        assert len(fits.encode()) == store.max_key_bytes
        await store.upload(fits, b"fits")
        assert (await store.download(fits)).data == b"fits"
        with pytest.raises(InvalidArgument, match="key_prefix"):
            await store.upload(fits + "k", b"too long")
        assert (await store.download(fits)).data == b"fits"
    async with store_for(s3_server, s3_bucket) as whole:
        assert whole.max_key_bytes == MAX_KEY_BYTES


async def test_a_key_prefix_must_leave_room_for_a_key(s3_server: Server, s3_bucket: str) -> None:
    """A key_prefix of S3's 1,024 bytes or more (multi-byte characters counted as their bytes) leaves no room for
    any key: the store is refused when it is made, naming the prefix, instead of refusing every key later with a
    room of 0 or -1 bytes. A prefix that leaves one byte holds a one-byte key."""
    segment = "x" * 254 + "/"
    for prefix in (segment * 4 + "abc/", segment * 4 + "abcd/", segment * 3 + "é" * 127 + "/abcd/"):
        assert len(prefix.encode()) >= 1024
        with pytest.raises(ConfigurationError, match="key_prefix"):
            store_for(s3_server, s3_bucket, key_prefix=prefix)
    async with store_for(s3_server, s3_bucket, key_prefix=segment * 4 + "ab/") as store:
        assert store.max_key_bytes == 1
        await store.upload("k", b"one byte")
        assert (await store.download("k")).data == b"one byte"
        with pytest.raises(InvalidArgument, match="key_prefix"):
            await store.upload("é", b"two bytes")


def fetch(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, b""


async def test_presigned_urls_work_over_plain_http_until_tampered(s3_server: Server, s3_bucket: str) -> None:
    async with store_for(s3_server, s3_bucket) as store:
        await store.upload("report ü.txt", b"the report", content_type="text/plain")
        url = await store.presign_url("report ü.txt", expires_in=300)
        assert fetch(url) == (200, b"the report")
        tampered = url.replace("X-Amz-Signature=", "X-Amz-Signature=0")
        assert fetch(tampered)[0] == 403


@pytest.mark.parametrize(
    ("environment", "given", "signed_for"),
    [
        ({"AWS_REGION": "eu-west-3", "AWS_DEFAULT_REGION": "ap-south-1"}, None, "eu-west-3"),
        ({"AWS_DEFAULT_REGION": "ap-south-1"}, None, "ap-south-1"),
        ({}, None, "us-east-1"),
        ({"AWS_REGION": "eu-west-3"}, "ca-central-1", "ca-central-1"),
    ],
)
async def test_the_region_is_the_one_the_aws_tools_read_unless_given(
    s3_server: Server,
    s3_bucket: str,
    monkeypatch: pytest.MonkeyPatch,
    environment: dict[str, str],
    given: str | None,
    signed_for: str,
) -> None:
    """Without ``region`` the store signed for ``us-east-1`` whatever ``AWS_REGION`` said (002 reads it with
    ``read_raw("AWS_REGION")``); a bucket in another region then refuses every request's signature."""
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    async with store_for(s3_server, s3_bucket, region=given) as store:
        await store.upload("placed.txt", b"x")
        url = await store.presign_url("placed.txt", expires_in=60)
    assert f"%2F{signed_for}%2Fs3%2Faws4_request" in url, url


async def test_a_presigned_url_does_not_outlive_its_blob(s3_server: Server, s3_bucket: str) -> None:
    """A blob's TTL ends every read, and a URL is a read: one asked for an hour served a blob of two minutes
    for the whole hour (the bucket's lifecycle rule removes it a day or more later)."""
    from urllib.parse import parse_qs, urlsplit

    async with store_for(s3_server, s3_bucket) as store:
        await store.upload("brief", b"x", ttl=120)
        await store.upload("kept", b"x")
        short = parse_qs(urlsplit(await store.presign_url("brief", expires_in=3_600)).query)
        assert 0 < int(short["X-Amz-Expires"][0]) <= 120
        whole = parse_qs(urlsplit(await store.presign_url("kept", expires_in=3_600)).query)
        assert int(whole["X-Amz-Expires"][0]) == 3_600
        brief = parse_qs(urlsplit(await store.presign_url("brief", expires_in=60)).query)
        assert int(brief["X-Amz-Expires"][0]) == 60


async def test_large_blobs_go_up_in_multipart_uploads(s3_server: Server, s3_bucket: str) -> None:
    async with store_for(s3_server, s3_bucket, multipart_threshold=5 * 1024 * 1024) as store:
        data = bytes(range(256)) * (48 * 1024 + 1)  # about 12 MiB: three parts
        await store.upload("big.bin", data)
        head = await store._call("head", store._client.head_object, Bucket=s3_bucket, Key="big.bin")
        assert "-" in head["ETag"], "a multipart upload's ETag ends in -<parts>"
        assert (await store.download("big.bin")).data == data


async def test_wrong_credentials_are_permission_denied(s3_server: Server, s3_bucket: str) -> None:
    async with store_for(s3_server, s3_bucket) as good:
        await good.upload("k", b"x")
    bad = S3FileStore(
        s3_bucket, endpoint_url=s3_server.address, access_key="ravi", secret_key="wrong-secret", addressing_style="path"
    )
    with pytest.raises(PermissionDenied):
        await bad.connect()


async def test_missing_bucket_is_a_configuration_error_unless_created(s3_server: Server, s3_bucket: str) -> None:
    store = store_for(s3_server, s3_bucket, create_bucket=False)
    with pytest.raises(ConfigurationError, match="does not exist"):
        await store.connect()
    async with store_for(s3_server, s3_bucket, create_bucket=True) as created:
        await created.upload("k", b"x")


async def test_unreachable_endpoint_is_backend_unavailable(s3_bucket: str) -> None:
    store = S3FileStore(s3_bucket, endpoint_url="http://127.0.0.1:1", access_key="a", secret_key="b", timeout=1)
    with pytest.raises(BackendUnavailable):
        await store.connect()


@pytest.mark.parametrize(
    "options",
    [
        {"endpoint_url": "not a url"},
        {"endpoint_url": "localhost:9000"},
        {"bucket": "no spaces!"},
        {"region": "us east"},
    ],
    ids=["endpoint-words", "endpoint-without-scheme", "bucket", "region"],
)
def test_options_boto3_would_refuse_are_a_configuration_error_when_built(options: dict[str, str]) -> None:
    """boto3 checks the endpoint, the bucket name and the region itself: what it refuses is refused when the store
    is built, as a ``ConfigurationError``. A bad endpoint was a bare ``ValueError`` at the first call, and a bad
    bucket name or region a generic ``RaviError``."""
    settings = {"bucket": "b", "endpoint_url": "http://127.0.0.1:1", "access_key": "a", "secret_key": "b"} | options
    with pytest.raises(ConfigurationError, match=next(iter(options))):
        S3FileStore(**settings)  # type: ignore[arg-type]


async def test_missing_object_is_not_found(s3_server: Server, s3_bucket: str) -> None:
    async with store_for(s3_server, s3_bucket) as store:
        with pytest.raises(NotFound):
            await store.download("nothing here")


async def test_key_prefixes_keep_apps_apart(s3_server: Server, s3_bucket: str) -> None:
    async with (
        store_for(s3_server, s3_bucket, key_prefix="app1/") as one,
        store_for(s3_server, s3_bucket, key_prefix="app2/") as two,
    ):
        await one.upload("same", b"one")
        with pytest.raises(NotFound):
            await two.download("same")


async def test_a_key_prefix_ends_with_a_slash_so_no_app_forgets_another_apps_blobs(
    s3_server: Server, s3_bucket: str
) -> None:
    """Two apps in one bucket with key prefixes ``app1`` and ``app10``: app1 forgetting its agent ``042`` listed
    the objects under ``app1042/``, which are app10's agent ``42``, and removed them (and app1's ``destroy``
    removed all of app10's). A key prefix is now empty or ends with ``/``; with slashes the apps stay apart."""
    for prefix in ("app1", "app1/../", "app1\\/", "/"):
        with pytest.raises(ConfigurationError, match="key_prefix"):
            store_for(s3_server, s3_bucket, key_prefix=prefix)
    async with (
        store_for(s3_server, s3_bucket, key_prefix="app1/") as one,
        store_for(s3_server, s3_bucket, key_prefix="app10/") as ten,
    ):
        await ten.upload(blob_prefix("42") + "notes.txt", b"app10's")
        await one.upload(blob_prefix("042") + "notes.txt", b"app1's")
        assert await one.forget("042") == 1
        assert (await ten.download(blob_prefix("42") + "notes.txt")).data == b"app10's"


async def test_ttl_installs_a_lifecycle_rule_where_supported(s3_server: Server, s3_bucket: str) -> None:
    async with store_for(s3_server, s3_bucket) as store:
        await store.upload("k", b"x", ttl=3 * 86_400)
        try:
            config = await store._call("lifecycle", store._client.get_bucket_lifecycle_configuration, Bucket=s3_bucket)
        except Exception as error:
            pytest.skip(f"this S3 store keeps no lifecycle rules ({error}); expiry by metadata still holds")
        assert any(r["ID"] == "ravi-ttl-3d" for r in config["Rules"])


THEIRS = {"ID": "theirs", "Status": "Enabled", "Expiration": {"Days": 9}, "Filter": {"Prefix": "tmp/"}}
"""A lifecycle rule of another tool, which Ravi's rules must leave in place."""


async def set_rules(store: Any, bucket: str, rules: list[dict[str, Any]]) -> None:
    """Make ``rules`` the bucket's lifecycle rules, as another tool would; skips (saying why) on an S3 server that
    keeps none."""
    import botocore.exceptions

    assert store._client is not None
    try:
        await asyncio.to_thread(
            store._client.put_bucket_lifecycle_configuration, Bucket=bucket, LifecycleConfiguration={"Rules": rules}
        )
    except botocore.exceptions.ClientError as error:
        pytest.skip(f"this S3 store keeps no lifecycle rules ({error}); expiry by metadata still holds")


async def rules_of(store: Any, bucket: str) -> list[dict[str, Any]]:
    """The bucket's lifecycle rules, read directly."""
    config = await asyncio.to_thread(store._client.get_bucket_lifecycle_configuration, Bucket=bucket)
    return list(config["Rules"])


async def test_two_stores_setting_up_lifecycle_rules_at_once_lose_none(s3_server: Server, s3_bucket: str) -> None:
    """Each store added a rule for its blob's lifetime by reading the bucket's rules, adding one and writing them
    back: two stores that both read before either wrote lost one rule, and its blobs were never removed by the
    bucket. Here both read before either writes; every tag on a blob has a rule, and a rule of another tool is
    kept."""
    from ravi.capabilities.s3.store import TTL_TAG

    both_read = asyncio.Barrier(2)
    async with store_for(s3_server, s3_bucket) as one, store_for(s3_server, s3_bucket) as two:
        await set_rules(one, s3_bucket, [THEIRS])
        for store in (one, two):
            call = store._call

            async def read_together(what: str, function: Any, *args: Any, _call: Any = call, **kwargs: Any) -> Any:
                result = await _call(what, function, *args, **kwargs)
                if getattr(function, "__name__", "") == "get_bucket_lifecycle_configuration":
                    await both_read.wait()
                return result

            store._call = read_together  # type: ignore[method-assign]
        await asyncio.gather(one.upload("a", b"x", ttl=86_400), two.upload("b", b"x", ttl=2 * 86_400))
        rules = await rules_of(one, s3_bucket)
        tagged = set()
        for key in ("a", "b"):
            tags = await asyncio.to_thread(one._client.get_object_tagging, Bucket=s3_bucket, Key=key)
            tagged |= {t["Value"] for t in tags["TagSet"] if t["Key"] == TTL_TAG}
        assert tagged == {"1", "2"}
        matched = {r["Filter"]["Tag"]["Value"] for r in rules if "Tag" in r.get("Filter", {})}
        assert tagged <= matched
        assert "theirs" in {r["ID"] for r in rules}


@pytest.mark.parametrize("failure", [BackendUnavailable, PermissionDenied])
async def test_lifecycle_rules_that_cannot_be_read_are_not_replaced(
    s3_server: Server, s3_bucket: str, failure: type[Exception]
) -> None:
    """A read of the bucket's rules that failed (a timeout, a policy refusing the read) was taken for no rules,
    and Ravi's were written alone, dropping every rule of the bucket's other tools."""
    async with store_for(s3_server, s3_bucket) as store:
        await set_rules(store, s3_bucket, [THEIRS])
        call = store._call

        async def unreadable(what: str, function: Any, *args: Any, **kwargs: Any) -> Any:
            if getattr(function, "__name__", "") == "get_bucket_lifecycle_configuration":
                raise failure(f"{what}: refused")
            return await call(what, function, *args, **kwargs)

        store._call = unreadable  # type: ignore[method-assign]
        await store.upload("k", b"x", ttl=86_400)
        assert (await store.download("k")).data == b"x"
        assert "theirs" in {r["ID"] for r in await rules_of(store, s3_bucket)}


async def test_a_ravi_rule_another_tool_changed_is_written_again(s3_server: Server, s3_bucket: str) -> None:
    """Ravi's rules were taken as set up when their ids were there: a ``ravi-ttl-7d`` another tool changed to one
    day went on deleting blobs of a week's TTL after a day, and one it disabled deleted none."""
    from ravi.capabilities.s3.store import RULES

    async with store_for(s3_server, s3_bucket) as store:
        changed = [{**rule, "Expiration": {"Days": 1}} if rule["ID"] == "ravi-ttl-7d" else dict(rule) for rule in RULES]
        changed = [{**rule, "Status": "Disabled"} if rule["ID"] == "ravi-ttl-14d" else rule for rule in changed]
        await set_rules(store, s3_bucket, changed)
        await store.upload("week", b"x", ttl=7 * 86_400)
        rules = await rules_of(store, s3_bucket)
        by_id = {r["ID"]: r for r in rules}
        assert by_id["ravi-ttl-7d"]["Expiration"] == {"Days": 7}
        assert by_id["ravi-ttl-14d"]["Status"] == "Enabled"
        assert len(rules) == len(RULES)


async def test_an_expiring_upload_may_be_a_fresh_stores_first_call(s3_server: Server, s3_bucket: str) -> None:
    """A store used without ``async with`` (as ``Stores.from_settings().blob`` hands it over) connects on its
    first call, including an upload with a TTL, which sets up the lifecycle rule first."""
    store = store_for(s3_server, s3_bucket)
    try:
        await store.upload("first", b"x", ttl=3_600)
        assert (await store.download("first")).data == b"x"
    finally:
        await store.disconnect()


async def test_registered_under_s3(s3_server: Server, s3_bucket: str) -> None:
    assert s3_server.credentials is not None
    access, secret = s3_server.credentials
    store = load_backend(
        "blob",
        "s3",
        bucket=s3_bucket,
        endpoint_url=s3_server.address,
        access_key=access,
        secret_key=secret,
        create_bucket=True,
    )
    assert isinstance(store, S3FileStore)
    await store.connect()
    await store.disconnect()


@pytest.mark.asyncio
@pytest.mark.parametrize("forged", [{"Ravi-Expires-At": "0"}, {"ravi-expires-at": "0"}, {"ravi-expires-at": "soon"}])
async def test_caller_metadata_cannot_forge_ravis_expiry_record(
    s3_server: Server, s3_bucket: str, forged: dict[str, str]
) -> None:
    """S3 lower-cases metadata keys, so ``Ravi-Expires-At`` used to become Ravi's own expiry record."""
    async with store_for(s3_server, s3_bucket) as store:
        with pytest.raises(InvalidArgument):
            await store.upload("k", b"data", metadata=forged)
        with pytest.raises(NotFound):
            await store.download("k")


@pytest.mark.asyncio
async def test_many_metadata_entries_are_refused_before_the_upload(s3_server: Server, s3_bucket: str) -> None:
    """90 entries used to upload, then make every download fail with an outage error."""
    async with store_for(s3_server, s3_bucket) as store:
        with pytest.raises(InvalidArgument, match="at most"):
            await store.upload("k", b"data", metadata={f"k{i}": "v" for i in range(90)})
        with pytest.raises(NotFound):
            await store.download("k")
        await store.upload("k", b"data", metadata={f"k{i}": "v" for i in range(60)})
        assert len((await store.download("k")).metadata) == 60


@pytest.mark.asyncio
async def test_concurrent_deletes_of_one_key_report_true_once(s3_server: Server, s3_bucket: str) -> None:
    async with store_for(s3_server, s3_bucket) as store:
        await store.upload("k", b"data")
        results = await asyncio.gather(*(store.delete("k") for _ in range(20)))
        assert results.count(True) == 1


class HeldS3FileStore(S3FileStore):
    """The S3 store, whose existence checks from one event loop wait until the test lets them through."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.loop: asyncio.AbstractEventLoop | None = None
        self.gate, self.entered = asyncio.Event(), asyncio.Event()

    async def _head(self, key: str) -> dict[str, Any] | None:
        if asyncio.get_running_loop() is self.loop:
            self.entered.set()
            await self.gate.wait()
        return await super()._head(key)


@pytest.mark.asyncio
async def test_a_delete_from_another_event_loop_runs_while_this_loops_deletes_wait(
    s3_server: Server, s3_bucket: str
) -> None:
    """A store shared by threads that each run their own event loop: while one loop deletes a key, with another
    delete of it waiting, a delete of the same key from a second loop runs. One lock served every loop: the second
    loop found it held by the first and raised ``RuntimeError``."""
    assert s3_server.credentials is not None
    access, secret = s3_server.credentials
    store = HeldS3FileStore(
        s3_bucket,
        endpoint_url=s3_server.address,
        access_key=access,
        secret_key=secret,
        addressing_style="path",
        create_bucket=True,
    )
    async with store:
        await store.upload("k", b"data")
        store.loop = asyncio.get_running_loop()
        deletes = [asyncio.create_task(store.delete("k"))]
        await store.entered.wait()  # the first delete holds the key's lock
        deletes.append(asyncio.create_task(store.delete("k")))
        await asyncio.sleep(0)  # one step: the second delete reaches the lock (nothing before it awaits) and waits
        other = await asyncio.to_thread(asyncio.run, store.delete("k"))
        store.gate.set()
        assert other is True and await asyncio.gather(*deletes) == [False, False]


@pytest.mark.asyncio
async def test_a_silent_endpoint_is_asked_once_per_call(s3_bucket: str) -> None:
    """The timeout bounds a call: with the default max_attempts=1 a silent server sees one request, not three."""
    connections = 0

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        await reader.read(65536)  # read the request and never answer
        await asyncio.Event().wait()

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    store = S3FileStore(s3_bucket, endpoint_url=f"http://127.0.0.1:{port}", access_key="a", secret_key="b", timeout=0.5)
    try:
        with pytest.raises(BackendUnavailable):
            await store.connect()
        assert connections == 1
    finally:
        await store.disconnect()
        server.close()


class _ReplacedBeforeItsDelete(S3FileStore):
    """A store whose removal of an expired blob (on download) runs just after another writer stored a fresh blob
    under the key: the moment of a race between two processes, made to happen every time."""

    writer: S3FileStore | None = None
    fresh = b"fresh"

    async def _call(self, what: str, function: Any, *args: Any, **kwargs: Any) -> Any:
        if what.startswith("delete") and self.writer is not None:
            writer, self.writer = self.writer, None
            await writer.upload("k", self.fresh)
        return await super()._call(what, function, *args, **kwargs)


async def test_a_read_of_an_expired_blob_never_removes_the_blob_written_since(
    s3_server: Server, s3_bucket: str
) -> None:
    """A download that finds the blob expired removes that version only: a blob another writer stored under the
    key in the meantime stays (the removal was unconditional and took the fresh blob with it)."""
    assert s3_server.credentials is not None
    access, secret = s3_server.credentials
    options: dict[str, Any] = {"endpoint_url": s3_server.address, "access_key": access, "secret_key": secret}
    async with store_for(s3_server, s3_bucket) as writer:
        reader = _ReplacedBeforeItsDelete(s3_bucket, addressing_style="path", **options)
        async with reader:
            await writer.upload("k", b"old", ttl=1e-6)
            reader.writer = writer
            with pytest.raises(NotFound):
                await reader.download("k")
            assert reader.writer is None  # the fresh blob went up between the read and the removal
            assert (await writer.download("k")).data == b"fresh"


def test_the_local_server_takes_an_object_in_each_of_many_buckets() -> None:
    """A whole test run creates hundreds of buckets on one local SeaweedFS, and each takes volumes of its own:
    ``weed mini`` allowed free disk space / volume size of them (74 with 76 GB free), after which every upload
    failed with ``InternalError`` and ``make test`` failed late in the run on a fresh clone."""
    import boto3

    from ravi.capabilities.s3.local import ACCESS_KEY, SECRET_KEY, LocalS3

    server = LocalS3()
    endpoint = server.start()
    try:
        client = boto3.client(
            "s3",
            endpoint_url=endpoint,
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
            region_name="us-east-1",
        )
        for i in range(150):
            client.create_bucket(Bucket=f"bucket-{i:04d}")
            client.put_object(Bucket=f"bucket-{i:04d}", Key="k", Body=b"x")
        big = bytes(range(256)) * (20 * 4096)  # 20 MiB: more than one volume of the local server holds
        client.put_object(Bucket="bucket-0001", Key="big", Body=big)
        assert client.get_object(Bucket="bucket-0001", Key="big")["Body"].read() == big
        assert client.get_object(Bucket="bucket-0149", Key="k")["Body"].read() == b"x"
    finally:
        server.stop()
