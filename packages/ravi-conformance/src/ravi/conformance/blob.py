"""``BlobStoreContract``: what every blob store must do."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from ravi.conformance._base import (
    ContractBase,
    assert_protocol,
    at_limit,
    call_or_skip_unsupported,
    eventually,
    refuses_long_ids,
    skip_without,
    unique,
)
from ravi.kernel.errors import InvalidArgument, NotFound
from ravi.kernel.storage import (
    EXPIRY_METADATA_BYTES,
    MAX_KEY_BYTES,
    MAX_METADATA_BYTES,
    Blob,
    BlobStore,
    BoundedKeys,
    Forgetter,
    blob_prefix,
)
from ravi.kernel.values import MAX_ID_BYTES


class BlobStoreContract(ContractBase):
    """Subclass and override the ``backend`` fixture to yield an empty, connected ``BlobStore``."""

    contract_name = "BlobStore"
    pytestmark = pytest.mark.asyncio

    @pytest.fixture
    def backend(self) -> BlobStore:
        """Override: an empty, connected backend, fresh for each test."""
        raise NotImplementedError("override the 'backend' fixture to build an empty backend")

    async def test_is_a_blob_store(self, backend: BlobStore) -> None:
        """The backend satisfies the ``BlobStore`` Protocol: it has every method of it, each ``async def``.

        Fix: give the class each method the message names, as ``async def`` with the Protocol's signature
        (``ravi.kernel.storage.BlobStore``).
        """
        assert_protocol(backend, BlobStore)

    async def test_canary_fixture_gives_an_empty_backend_first(self, backend: BlobStore) -> None:
        """The fixture gives every test an empty backend (the first of two tests that each leave data behind).

        Fix: the store held data before the test ran: give each test an empty store of its own in the ``backend``
        fixture (an in-memory store, or a bucket or key prefix of its own), or isolate a persistent one with ``--isolate
        KIND=OPTION`` (``--ravi-isolate``) and an ``async def destroy(self)`` that removes what the option names.
        """
        with pytest.raises(NotFound):
            await backend.download("canary")
        await backend.upload("canary", b"left behind")

    async def test_canary_fixture_gives_an_empty_backend_second(self, backend: BlobStore) -> None:
        """The fixture gives every test an empty backend (the second of two tests that each leave data behind).

        Fix: give each test a store of its own: build it in the ``backend`` fixture (an in-memory or temporary
        store), or isolate a persistent one with ``--isolate KIND=OPTION`` (``--ravi-isolate``) and an
        ``async def destroy(self)`` that removes what the option names.
        """
        try:
            await backend.download("canary")
        except NotFound:
            pass
        else:
            raise AssertionError("state leaked between tests: download('canary') found the first canary's blob")
        await backend.upload("canary", b"left behind")

    async def test_upload_then_download(self, backend: BlobStore) -> None:
        """A blob downloads with the bytes, content type and metadata it was uploaded with.

        Fix: keep the bytes, the content type and the user metadata with the key (S3: ``ContentType`` and ``Metadata``
        of the object) and build a ``Blob`` of them on ``download``, under the key the caller gave.
        """
        key = unique("dir/file") + ".json"
        assert (
            await backend.upload(key, b'{"a": 1}', content_type="application/json", metadata={"source": "tool"}) == key
        )
        blob = await backend.download(key)
        assert (blob.key, blob.data, blob.content_type) == (key, b'{"a": 1}', "application/json")
        assert blob.metadata == {"source": "tool"}

    async def test_default_content_type(self, backend: BlobStore) -> None:
        """A blob uploaded without a content type downloads as ``application/octet-stream``.

        Fix: default ``content_type`` to ``"application/octet-stream"`` in ``upload``'s signature, as the Protocol does,
        and store it.
        """
        key = unique("k")
        await backend.upload(key, b"x")
        assert (await backend.download(key)).content_type == "application/octet-stream"

    async def test_upload_replaces(self, backend: BlobStore) -> None:
        """Uploading to a key that exists replaces its blob.

        Fix: let ``upload`` overwrite what is under the key, content type and metadata included (S3's ``put_object``
        does; a store with rows uses an upsert).
        """
        key = unique("k")
        await backend.upload(key, b"old", content_type="text/plain")
        await backend.upload(key, b"new", content_type="text/markdown")
        blob = await backend.download(key)
        assert (blob.data, blob.content_type) == (b"new", "text/markdown")

    async def test_every_byte_value_and_empty_data(self, backend: BlobStore) -> None:
        """Every byte value, and empty data, round-trip exactly.

        Fix: store ``bytes(data)`` as binary (``bytea``, an S3 object's body), never decoded as text; an empty body is a
        blob, not a missing one.
        """
        key, empty = unique("bytes"), unique("empty")
        await backend.upload(key, bytes(range(256)) * 4)
        await backend.upload(empty, b"")
        assert (await backend.download(key)).data == bytes(range(256)) * 4
        assert (await backend.download(empty)).data == b""

    async def test_large_blob(self, backend: BlobStore) -> None:
        """A blob of several megabytes round-trips exactly.

        Fix: send and read the whole body (read the S3 ``Body`` stream to its end), with no size limit below several
        megabytes.
        """
        key = unique("large")
        data = bytes(range(256)) * (24 * 1024 + 7)  # a little over 6 MiB
        await backend.upload(key, data)
        assert (await backend.download(key)).data == data

    async def test_delete_is_idempotent(self, backend: BlobStore) -> None:
        """Deleting a memory removes it; deleting a missing id is not an error.

        Fix: return whether a live blob was there (look it up first, under a lock per key in the process), delete it
        either way, and return ``False`` without raising for a missing key.
        """
        key = unique("k")
        await backend.upload(key, b"x")
        assert await backend.delete(key) is True
        assert await backend.delete(key) is False
        with pytest.raises(NotFound):
            await backend.download(key)

    async def test_missing_blob_is_not_found(self, backend: BlobStore) -> None:
        """Downloading a missing key raises ``NotFound``.

        Fix: map the server's missing key (S3's ``NoSuchKey``, ``404``) to ``NotFound`` of ``ravi.kernel.errors``, never
        a driver error.
        """
        with pytest.raises(NotFound):
            await backend.download(unique("missing"))

    async def test_presigned_url(self, backend: BlobStore) -> None:
        """``presign_url`` gives a URL for a stored blob and ``NotFound`` for a missing one.

        Fix: return a URL for a live blob (S3: ``generate_presigned_url``; a store without HTTP access may give a URL of
        its own scheme, ``memory://key``), after checking the blob exists: ``NotFound`` otherwise.
        """
        key = unique("k")
        await backend.upload(key, b"x")
        url = await backend.presign_url(key, expires_in=60)
        assert isinstance(url, str) and url
        with pytest.raises(NotFound):
            await backend.presign_url(unique("missing"))

    @pytest.mark.parametrize("key", ["", "a" * 1025, "bad\x00key", "tab\tkey", "new\nline", "del\x7f"])
    async def test_invalid_keys_are_refused(self, backend: BlobStore, key: str) -> None:
        """Empty, over-long keys and keys with control characters are refused with ``InvalidArgument``.

        Fix: pass every key through ``check_blob_key`` of ``ravi.kernel.storage`` before the store sees it.
        """
        with pytest.raises(InvalidArgument):
            await backend.upload(key, b"x")

    @pytest.mark.parametrize("key", [None, 3, b"k", ["k"], ("k",)], ids=["none", "int", "bytes", "list", "tuple"])
    async def test_a_key_that_is_not_a_string_is_refused_by_every_call(self, backend: BlobStore, key: object) -> None:
        """Every call given a key that is not a string raises ``InvalidArgument`` (S3's ``delete`` raised a bare
        ``TypeError`` for a list).

        Fix: call ``check_blob_key`` of ``ravi.kernel.storage`` first in every method (``delete`` and ``presign_url``
        too), before the key builds a path, a lock or a request.
        """
        with pytest.raises(InvalidArgument):
            await backend.upload(key, b"x")  # type: ignore[arg-type]
        with pytest.raises(InvalidArgument):
            await backend.download(key)  # type: ignore[arg-type]
        with pytest.raises(InvalidArgument):
            await backend.delete(key)  # type: ignore[arg-type]
        with pytest.raises(InvalidArgument):
            await backend.presign_url(key)  # type: ignore[arg-type]

    async def test_an_expiry_that_is_not_a_duration_is_refused(self, backend: BlobStore) -> None:
        """``presign_url`` needs a positive duration: ``None``, zero or a string is ``InvalidArgument`` (``None`` was
        taken in memory and failed an assertion on S3).

        Fix: pass ``expires_in`` through ``ttl_seconds(expires_in, name="expires_in")`` of ``ravi.kernel.values``, and
        raise ``InvalidArgument`` when it returns ``None``.
        """
        key = unique("k")
        await backend.upload(key, b"x")
        for expires_in in (None, 0, -5, "60"):
            with pytest.raises(InvalidArgument):
                await backend.presign_url(key, expires_in=expires_in)  # type: ignore[arg-type]

    async def test_a_backslash_never_aliases_a_slash(self, backend: BlobStore) -> None:
        """A key with a backslash is stored exactly or refused: ``a\\b`` is never ``a/b`` (some S3 servers
        turn one into the other), and a key ending in a backslash reads back what was written.

        Troubleshooting: refuse backslashes in keys (``check_blob_key`` does), or encode them."""
        prefix = unique("p")
        await backend.upload(f"{prefix}/a/b", b"slash")
        for key, data in ((f"{prefix}/a\\b", b"backslash"), (f"{prefix}/a\\", b"trailing")):
            try:
                await backend.upload(key, data)
            except InvalidArgument:
                continue
            assert (await backend.download(key)).data == data, f"{key!r} did not read back"
        assert (await backend.download(f"{prefix}/a/b")).data == b"slash", "a backslash key overwrote a slash key"

    async def test_a_long_key_is_stored_exactly_or_refused(self, backend: BlobStore) -> None:
        """A key within ``MAX_KEY_BYTES`` whose segments are long is stored exactly or refused with
        ``InvalidArgument``; one whose segments are short reads back at any length the limit allows (a
        :class:`~ravi.kernel.storage.BoundedKeys` store's ``max_key_bytes``: an S3 store's ``key_prefix`` takes part
        of S3's limit).

        Troubleshooting: file systems under S3 servers (SeaweedFS's filer, MinIO) keep at most 255 bytes per
        ``/``-separated segment; ``check_blob_key`` refuses longer segments."""
        prefix = unique("p")
        for key in (f"{prefix}/{'x' * 256}", f"{prefix}/{'é' * 128}", f"{prefix}/{'y' * 600}/z"):
            try:
                await backend.upload(key, key.encode())
            except InvalidArgument:
                continue
            assert (await backend.download(key)).data == key.encode()
        room = backend.max_key_bytes if isinstance(backend, BoundedKeys) else MAX_KEY_BYTES
        segments = f"{prefix}/" + "/".join(["w" * 250] * 4)
        key = segments[: room - 1].rstrip("/") + "k"
        await backend.upload(key, b"long")
        assert (await backend.download(key)).data == b"long"

    async def test_unicode_keys_work(self, backend: BlobStore) -> None:
        """Keys with non-ASCII characters round-trip.

        Fix: pass keys to the client as they are (the S3 client encodes them), never URL-quoted or formatted into a path
        by hand.
        """
        keys = ["dossier/été/файл 漢字 🚀.txt", "quotes'\"and$$dollars", "spaces and + plus & amp=eq?q#frag"]
        for key in keys:
            await backend.upload(key, key.encode())
        for key in keys:
            assert (await backend.download(key)).data == key.encode()

    async def test_keys_are_isolated(self, backend: BlobStore) -> None:
        """Blobs under different keys never see each other, even when one key is a prefix of another.

        Fix: address a blob by its whole key (an exact look-up, ``Key=``), never by a prefix, a pattern or a listing.
        """
        prefix = unique("p")
        await backend.upload(f"{prefix}/a", b"a")
        await backend.upload(f"{prefix}/ab", b"ab")
        await backend.delete(f"{prefix}/a")
        assert (await backend.download(f"{prefix}/ab")).data == b"ab"

    async def test_concurrent_uploads(self, backend: BlobStore) -> None:
        """Concurrent uploads to different keys all land.

        Fix: give each upload its own request or transaction; share no buffer or state between concurrent calls, and run
        a blocking client in a thread (``asyncio.to_thread``).
        """
        prefix = unique("c")
        await asyncio.gather(*(backend.upload(f"{prefix}/{i}", str(i).encode()) for i in range(20)))
        got = await asyncio.gather(*(backend.download(f"{prefix}/{i}") for i in range(20)))
        assert [b.data for b in got] == [str(i).encode() for i in range(20)]

    async def test_expired_blobs_are_gone(self, backend: BlobStore) -> None:
        """A blob past its TTL is never downloaded again.

        Fix: keep the expiry with the blob (the S3 store writes ``ravi-expires-at`` in its metadata, a time computed
        from ``ttl_seconds`` of ``ravi.kernel.values``) and answer ``NotFound`` for an expired blob on every read,
        deleting it then.
        """
        skip_without(self.capabilities, "ttl", reason="blobs uploaded with a ttl")
        key, kept = unique("ttl"), unique("kept")
        await backend.upload(kept, b"durable")
        uploaded = time.monotonic()
        await call_or_skip_unsupported(backend.upload(key, b"fleeting", ttl=1.0), "ttl")
        try:
            assert (await backend.download(key)).data == b"fleeting"
        except NotFound:  # only a machine so busy that the upload and the read took longer than the ttl
            assert time.monotonic() - uploaded >= 1.0, "a blob was gone before its ttl"

        async def expired() -> bool:
            try:
                await backend.download(key)
            except NotFound:
                return True
            return False

        await eventually(expired, within=1.0 + self.capabilities.ttl_resolution + 5, what="ttl expiry")
        assert (await backend.download(kept)).data == b"durable"

    async def test_bad_ttl_and_data_are_refused(self, backend: BlobStore) -> None:
        """A TTL that is not positive, or data that is not bytes, is ``InvalidArgument``; nothing is stored.

        Fix: check ``ttl`` with ``ttl_seconds`` of ``ravi.kernel.values`` and that ``data`` is ``bytes``, ``bytearray``
        or ``memoryview`` (``InvalidArgument`` otherwise), before anything is written.
        """
        key = unique("k")
        with pytest.raises(InvalidArgument):
            await backend.upload(key, b"x", ttl=0)
        with pytest.raises(InvalidArgument):
            await backend.upload(key, "text, not bytes")  # type: ignore[arg-type]
        with pytest.raises(NotFound):
            await backend.download(key)

    async def test_keys_never_alias_each_other(self, backend: BlobStore) -> None:
        """Every key the store accepts names its own blob: ``/x``, ``a//b``, ``./x`` and ``x/`` may be refused
        with InvalidArgument, but never overwrite or stand for ``x`` or ``a/b``.

        Fix: pass every key through ``check_blob_key`` of ``ravi.kernel.storage``, which refuses a leading, trailing or
        doubled ``/`` and ``.`` or ``..`` segments, which object stores and gateways normalise into another key.
        """
        p = unique("alias")
        plain = {f"{p}/x": b"x", f"{p}/a/b": b"a/b"}
        for key, data in plain.items():
            await backend.upload(key, data)
        for odd in [f"/{p}/x", f"{p}//x", f"{p}/a//b", f"{p}/./x", f"{p}/a/../x", f"{p}/x/", "..", "."]:
            try:
                await backend.upload(odd, b"odd")
            except InvalidArgument:
                continue
            assert (await backend.download(odd)).data == b"odd", f"{odd!r} was acknowledged but not stored"
            for key, data in plain.items():
                assert (await backend.download(key)).data == data, f"{odd!r} overwrote {key!r}"
            await backend.delete(odd)
            for key, data in plain.items():
                assert (await backend.download(key)).data == data, f"deleting {odd!r} deleted {key!r}"

    async def test_metadata_comes_back_exactly_or_is_refused(self, backend: BlobStore) -> None:
        """User metadata is stored exactly (keys keep their case, empty values stay, spaces around a value stay:
        HTTP trims them from a header) or refused up front.

        Fix: pass metadata through ``check_blob_metadata`` of ``ravi.kernel.storage`` (with the upload's ttl in
        seconds), which refuses what S3's headers change (upper case, empty values, spaces at either end, non-ASCII),
        and store what it returns.
        """
        for metadata in [
            {"Owner": "ada"},
            {"empty": ""},
            {"note": "Grüße"},
            {"k": "v" * 3_000},
            {"padded": " both ends "},
            {"trailing": "end "},
        ]:
            blob = await _stored_or_refused(backend, unique("meta"), metadata=metadata)
            assert blob is None or dict(blob.metadata) == metadata

    async def test_metadata_leaves_room_for_the_expiry_of_a_blob_with_a_ttl(self, backend: BlobStore) -> None:
        """S3 keeps at most 2,048 bytes of user metadata, and a store that keeps a blob's expiry there (as the S3
        store does) needs some of them: metadata that fills the 2,048 bytes is stored without a ttl, and refused
        up front with one (``EXPIRY_METADATA_BYTES`` are kept for it), on every store alike.

        Fix: check metadata with ``check_blob_metadata(metadata, ttl=seconds)`` of ``ravi.kernel.storage``."""
        skip_without(self.capabilities, "ttl", reason="blobs uploaded with a ttl")
        full = {"k": "v" * (MAX_METADATA_BYTES - 1)}
        key = unique("full")
        await backend.upload(key, b"x", metadata=full)
        assert dict((await backend.download(key)).metadata) == full
        with pytest.raises(InvalidArgument):
            await backend.upload(key, b"y", metadata=full, ttl=3600)
        assert (await backend.download(key)).data == b"x"
        room = {"k": "v" * (MAX_METADATA_BYTES - EXPIRY_METADATA_BYTES - 1)}
        await call_or_skip_unsupported(backend.upload(key, b"z", metadata=room, ttl=3600), "ttl")
        assert dict((await backend.download(key)).metadata) == room

    async def test_content_type_comes_back_exactly_or_is_refused(self, backend: BlobStore) -> None:
        """The content type is stored exactly or refused up front (spaces around it included: HTTP trims them).

        Fix: pass the content type through ``check_content_type`` of ``ravi.kernel.storage``, which refuses spaces at
        either end (HTTP trims them), and store what it returns.
        """
        for content_type in ("text/plain; charset=utf-8", " text/plain", "text/plain "):
            blob = await _stored_or_refused(backend, unique("type"), content_type=content_type)
            assert blob is None or blob.content_type == content_type

    async def test_ttls_no_server_can_hold_are_refused(self, backend: BlobStore) -> None:
        """A TTL longer than a server can hold is refused, not silently shortened.

        Fix: pass ``ttl`` through ``ttl_seconds`` of ``ravi.kernel.values``, which refuses infinity, NaN and more than
        ``MAX_TTL_SECONDS``, before anything is written.
        """
        key = unique("k")
        for ttl in (float("inf"), 1e17, float("nan")):
            with pytest.raises(InvalidArgument):
                await backend.upload(key, b"x", ttl=ttl)
        with pytest.raises(NotFound):
            await backend.download(key)

    async def test_connect_and_disconnect_can_repeat(self, backend: BlobStore) -> None:
        """``connect`` and ``disconnect`` may be called more than once.

        Fix: make ``connect`` return at once when the client exists, and ``disconnect`` forget the client (closing it)
        so a later call connects again.
        """
        await backend.connect()
        key = unique("k")
        await backend.upload(key, b"x")
        assert (await backend.download(key)).data == b"x"

    async def test_forget_erases_the_blobs_under_the_scope_only(self, backend: BlobStore) -> None:
        """``forget`` (``Forgetter``, optional) erases the blobs whose key starts with
        ``blob_prefix(agent_id, session_id)`` (``agent_id/session_id/``, each id percent-encoded), and none of
        another session, of another agent, nor of an agent whose id starts with the first's.

        Fix: call ``check_forget`` of ``ravi.kernel.storage`` first, then delete every key that starts with
        ``blob_prefix(agent_id, session_id)`` of ``ravi.kernel.storage`` (list by that prefix, which ends with ``/`` and
        percent-encodes each id), and return how many.
        """
        if not isinstance(backend, Forgetter):
            pytest.skip(f"backend lacks forget: {type(backend).__name__} is not a Forgetter")
        a = unique("agent")
        keys = {
            (a, "s1"): [f"{blob_prefix(a, 's1')}x", f"{blob_prefix(a, 's1')}deep/y"],
            (a, "s2"): [f"{blob_prefix(a, 's2')}x"],
            (a + "x", "s1"): [f"{blob_prefix(a + 'x', 's1')}x"],
            (a + "/s1", None): [f"{blob_prefix(a + '/s1')}x"],
        }
        for group in keys.values():
            for key in group:
                await backend.upload(key, b"data")
        assert await backend.forget(a, session_id="s1") == 2
        assert await backend.forget(a, session_id="s1") == 0
        for (agent, session), group in keys.items():
            for key in group:
                gone = agent == a and session == "s1"
                if gone:
                    with pytest.raises(NotFound):
                        await backend.download(key)
                else:
                    assert (await backend.download(key)).data == b"data", f"{key} was removed"
        assert await backend.forget(a) == 1
        assert (await backend.download(keys[a + "x", "s1"][0])).data == b"data"
        assert (await backend.download(keys[a + "/s1", None][0])).data == b"data"

    async def test_forget_takes_ids_up_to_the_limit_and_refuses_longer_ones(self, backend: BlobStore) -> None:
        """``forget`` (``Forgetter``, optional) answers for agent and session ids of exactly ``MAX_ID_BYTES`` UTF-8
        bytes (whose prefix, percent-encoded, is longer than any key: nothing is under it), and refuses longer
        ones with ``InvalidArgument`` naming the id and the limit, as every store does; nothing else goes.

        Fix: build the prefix with ``blob_prefix`` of ``ravi.kernel.storage``, which calls ``check_forget`` and turns an
        id too long for a key segment into a digest; list by it without checking it as a key (no key is that long, so
        nothing is found).
        """
        if not isinstance(backend, Forgetter):
            pytest.skip(f"backend lacks forget: {type(backend).__name__} is not a Forgetter")
        kept = f"{blob_prefix(unique('agent'), 's')}x"
        await backend.upload(kept, b"data")
        agent, session = at_limit("\u00e9" * MAX_ID_BYTES, unique("")), at_limit("/", unique(""))
        assert await backend.forget(agent, session_id=session) == 0
        assert await backend.forget(agent) == 0
        await refuses_long_ids(
            lambda long: {
                "forget(agent_id)": ("agent_id", lambda: backend.forget(long)),
                "forget(session_id)": ("session_id", lambda: backend.forget(agent, session_id=long)),
            }
        )
        assert (await backend.download(kept)).data == b"data"


async def _stored_or_refused(backend: BlobStore, key: str, **options: Any) -> Blob | None:
    """What ``key`` gives back after an upload with ``options``, or ``None`` when the upload was refused, in
    which case nothing may have been stored under it."""
    try:
        await backend.upload(key, b"x", **options)
    except InvalidArgument:
        with pytest.raises(NotFound):
            await backend.download(key)
        return None
    return await backend.download(key)
