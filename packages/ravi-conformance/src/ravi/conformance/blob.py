"""``BlobStoreContract``: what every blob store must do."""

from __future__ import annotations

import asyncio

import pytest

from ravi.conformance._base import ContractBase, call_or_skip_unsupported, eventually, skip_without, unique
from ravi.kernel.errors import InvalidArgument, NotFound
from ravi.kernel.storage import BlobStore


class BlobStoreContract(ContractBase):
    """Subclass and override the ``blob_store`` fixture to yield an empty, connected ``BlobStore``."""

    contract_name = "BlobStore"
    pytestmark = pytest.mark.asyncio

    @pytest.fixture
    def blob_store(self) -> BlobStore:
        """Override: an empty, connected backend, fresh for each test."""
        raise NotImplementedError("override the 'blob_store' fixture to build an empty backend")

    async def test_is_a_blob_store(self, blob_store: BlobStore) -> None:
        assert isinstance(blob_store, BlobStore)

    async def test_canary_fixture_gives_an_empty_backend_first(self, blob_store: BlobStore) -> None:
        with pytest.raises(NotFound):
            await blob_store.download("canary")
        await blob_store.upload("canary", b"left behind")

    async def test_canary_fixture_gives_an_empty_backend_second(self, blob_store: BlobStore) -> None:
        with pytest.raises(NotFound):
            await blob_store.download("canary")
        await blob_store.upload("canary", b"left behind")

    async def test_upload_then_download(self, blob_store: BlobStore) -> None:
        key = unique("dir/file") + ".json"
        assert (
            await blob_store.upload(key, b'{"a": 1}', content_type="application/json", metadata={"source": "tool"})
            == key
        )
        blob = await blob_store.download(key)
        assert (blob.key, blob.data, blob.content_type) == (key, b'{"a": 1}', "application/json")
        assert blob.metadata == {"source": "tool"}

    async def test_default_content_type(self, blob_store: BlobStore) -> None:
        key = unique("k")
        await blob_store.upload(key, b"x")
        assert (await blob_store.download(key)).content_type == "application/octet-stream"

    async def test_upload_replaces(self, blob_store: BlobStore) -> None:
        key = unique("k")
        await blob_store.upload(key, b"old", content_type="text/plain")
        await blob_store.upload(key, b"new", content_type="text/markdown")
        blob = await blob_store.download(key)
        assert (blob.data, blob.content_type) == (b"new", "text/markdown")

    async def test_every_byte_value_and_empty_data(self, blob_store: BlobStore) -> None:
        key, empty = unique("bytes"), unique("empty")
        await blob_store.upload(key, bytes(range(256)) * 4)
        await blob_store.upload(empty, b"")
        assert (await blob_store.download(key)).data == bytes(range(256)) * 4
        assert (await blob_store.download(empty)).data == b""

    async def test_large_blob(self, blob_store: BlobStore) -> None:
        key = unique("large")
        data = bytes(range(256)) * (24 * 1024 + 7)  # a little over 6 MiB
        await blob_store.upload(key, data)
        assert (await blob_store.download(key)).data == data

    async def test_delete_is_idempotent(self, blob_store: BlobStore) -> None:
        key = unique("k")
        await blob_store.upload(key, b"x")
        assert await blob_store.delete(key) is True
        assert await blob_store.delete(key) is False
        with pytest.raises(NotFound):
            await blob_store.download(key)

    async def test_missing_blob_is_not_found(self, blob_store: BlobStore) -> None:
        with pytest.raises(NotFound):
            await blob_store.download(unique("missing"))

    async def test_presigned_url(self, blob_store: BlobStore) -> None:
        key = unique("k")
        await blob_store.upload(key, b"x")
        url = await blob_store.presign_url(key, expires_in=60)
        assert isinstance(url, str) and url
        with pytest.raises(NotFound):
            await blob_store.presign_url(unique("missing"))

    @pytest.mark.parametrize("key", ["", "a" * 1025, "bad\x00key", "tab\tkey", "new\nline", "del\x7f"])
    async def test_invalid_keys_are_refused(self, blob_store: BlobStore, key: str) -> None:
        with pytest.raises(InvalidArgument):
            await blob_store.upload(key, b"x")

    async def test_unicode_keys_work(self, blob_store: BlobStore) -> None:
        keys = ["dossier/été/файл 漢字 🚀.txt", "quotes'\"and$$dollars", "spaces and + plus & amp=eq?q#frag"]
        for key in keys:
            await blob_store.upload(key, key.encode())
        for key in keys:
            assert (await blob_store.download(key)).data == key.encode()

    async def test_keys_are_isolated(self, blob_store: BlobStore) -> None:
        prefix = unique("p")
        await blob_store.upload(f"{prefix}/a", b"a")
        await blob_store.upload(f"{prefix}/ab", b"ab")
        await blob_store.delete(f"{prefix}/a")
        assert (await blob_store.download(f"{prefix}/ab")).data == b"ab"

    async def test_concurrent_uploads(self, blob_store: BlobStore) -> None:
        prefix = unique("c")
        await asyncio.gather(*(blob_store.upload(f"{prefix}/{i}", str(i).encode()) for i in range(20)))
        got = await asyncio.gather(*(blob_store.download(f"{prefix}/{i}") for i in range(20)))
        assert [b.data for b in got] == [str(i).encode() for i in range(20)]

    async def test_expired_blobs_are_gone(self, blob_store: BlobStore) -> None:
        skip_without(self.capabilities, "ttl", reason="blobs uploaded with a ttl")
        key, kept = unique("ttl"), unique("kept")
        await call_or_skip_unsupported(blob_store.upload(key, b"fleeting", ttl=0.3), "ttl")
        await blob_store.upload(kept, b"durable")
        assert (await blob_store.download(key)).data == b"fleeting"

        async def expired() -> bool:
            try:
                await blob_store.download(key)
            except NotFound:
                return True
            return False

        await eventually(expired, within=0.3 + self.capabilities.ttl_resolution + 5, what="ttl expiry")
        assert (await blob_store.download(kept)).data == b"durable"

    async def test_bad_ttl_and_data_are_refused(self, blob_store: BlobStore) -> None:
        key = unique("k")
        with pytest.raises(InvalidArgument):
            await blob_store.upload(key, b"x", ttl=0)
        with pytest.raises(InvalidArgument):
            await blob_store.upload(key, "text, not bytes")  # type: ignore[arg-type]
        with pytest.raises(NotFound):
            await blob_store.download(key)

    async def test_keys_never_alias_each_other(self, blob_store: BlobStore) -> None:
        """Every key the store accepts names its own blob: ``/x``, ``a//b``, ``./x`` and ``x/`` may be refused
        with InvalidArgument, but never overwrite or stand for ``x`` or ``a/b``."""
        p = unique("alias")
        plain = {f"{p}/x": b"x", f"{p}/a/b": b"a/b"}
        for key, data in plain.items():
            await blob_store.upload(key, data)
        for odd in [f"/{p}/x", f"{p}//x", f"{p}/a//b", f"{p}/./x", f"{p}/a/../x", f"{p}/x/", "..", "."]:
            try:
                await blob_store.upload(odd, b"odd")
            except InvalidArgument:
                continue
            assert (await blob_store.download(odd)).data == b"odd", f"{odd!r} was acknowledged but not stored"
            for key, data in plain.items():
                assert (await blob_store.download(key)).data == data, f"{odd!r} overwrote {key!r}"
            await blob_store.delete(odd)
            for key, data in plain.items():
                assert (await blob_store.download(key)).data == data, f"deleting {odd!r} deleted {key!r}"

    async def test_metadata_comes_back_exactly_or_is_refused(self, blob_store: BlobStore) -> None:
        """User metadata is stored exactly (keys keep their case, empty values stay) or refused up front."""
        for metadata in [{"Owner": "ada"}, {"empty": ""}, {"note": "Grüße"}, {"k": "v" * 3_000}]:
            key = unique("meta")
            try:
                await blob_store.upload(key, b"x", metadata=metadata)
            except InvalidArgument:
                with pytest.raises(NotFound):
                    await blob_store.download(key)
                continue
            assert dict((await blob_store.download(key)).metadata) == metadata

    async def test_ttls_no_server_can_hold_are_refused(self, blob_store: BlobStore) -> None:
        key = unique("k")
        for ttl in (float("inf"), 1e17, float("nan")):
            with pytest.raises(InvalidArgument):
                await blob_store.upload(key, b"x", ttl=ttl)
        with pytest.raises(NotFound):
            await blob_store.download(key)

    async def test_connect_and_disconnect_can_repeat(self, blob_store: BlobStore) -> None:
        await blob_store.connect()
        key = unique("k")
        await blob_store.upload(key, b"x")
        assert (await blob_store.download(key)).data == b"x"
