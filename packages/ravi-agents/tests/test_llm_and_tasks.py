from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ravi.agents.llm import ExtractiveSummarizer, OpenAICompatibleClient
from ravi.agents.storage import GlobalTaskStore, TaskStore
from ravi.kernel.cancel import CancelledByToken, CancelToken
from ravi.kernel.errors import BackendUnavailable, ConfigurationError, InvalidArgument, PermissionDenied, RaviError
from ravi.kernel.messages import ChatMessage


class ChatEndpoint(BaseHTTPRequestHandler):
    """A local server speaking the chat-completions protocol, recording what it was sent."""

    received: list[dict] = []  # noqa: RUF012 - shared with the test, on purpose

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        ChatEndpoint.received.append({"path": self.path, "auth": self.headers.get("Authorization"), "body": body})
        if self.headers.get("Authorization") != "Bearer good-key":
            self.send_response(401)
            self.end_headers()
            return
        _send_reply(self, "a summary")

    def log_message(self, *args: object) -> None:
        pass


def _send_reply(handler: BaseHTTPRequestHandler, content: object) -> None:
    """Answer a chat completion request with one assistant message whose ``content`` is ``content``."""
    data = json.dumps({"choices": [{"message": {"role": "assistant", "content": content}}]}).encode()
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


@pytest.fixture
def endpoint() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), ChatEndpoint)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    ChatEndpoint.received.clear()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


async def test_openai_compatible_client_sends_the_chat_and_reads_the_reply(endpoint: str) -> None:
    client = OpenAICompatibleClient("small-model", base_url=endpoint, api_key="good-key")
    try:
        reply = await client.complete([ChatMessage.system("be brief"), ChatMessage.user("hi")], max_tokens=50)
    finally:
        await client.aclose()
    assert reply == "a summary"
    [request] = ChatEndpoint.received
    assert request["path"] == "/v1/chat/completions"
    assert request["body"] == {
        "model": "small-model",
        "max_tokens": 50,
        "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}],
    }


async def test_openai_compatible_client_errors_are_typed(endpoint: str) -> None:
    refused = OpenAICompatibleClient("m", base_url=endpoint, api_key="wrong")
    with pytest.raises(PermissionDenied):
        await refused.complete([ChatMessage.user("hi")])
    await refused.aclose()
    unreachable = OpenAICompatibleClient("m", base_url="http://127.0.0.1:1/v1", api_key="k")
    with pytest.raises(BackendUnavailable):
        await unreachable.complete([ChatMessage.user("hi")])
    await unreachable.aclose()
    token = CancelToken()
    token.cancel("stop")
    cancelled = OpenAICompatibleClient("m", base_url=endpoint, api_key="good-key")
    with pytest.raises(CancelledByToken):
        await cancelled.complete([ChatMessage.user("hi")], cancel=token)
    await cancelled.aclose()
    assert len(ChatEndpoint.received) == 1  # the cancelled call never went out


def test_a_client_without_httpx_installed_is_refused_with_the_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the ``openai`` extra, building the client says what to install, as a ``ConfigurationError``."""
    monkeypatch.setitem(sys.modules, "httpx", None)  # what an environment without httpx gives an import
    with pytest.raises(ConfigurationError) as refused:
        OpenAICompatibleClient("m", base_url="http://127.0.0.1:1/v1")
    assert "ravi-agents[openai]" in str(refused.value)


async def test_extractive_summary_keeps_requests_and_errors_within_budget() -> None:
    transcript = "\n".join(
        [
            "user: please fix the build",
            "assistant: looking",
            "tool error: exit status 1",
            *[f"assistant: filler line {i} " + "x" * 80 for i in range(50)],
        ]
    )
    text = await ExtractiveSummarizer().complete([ChatMessage.user(transcript)], max_tokens=60)
    assert "user: please fix the build" in text and "tool error: exit status 1" in text
    assert len(text) <= 4 * 60


def test_global_task_store_is_process_wide_and_follows_runtime_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RUNTIME_BACKEND", raising=False)
    assert GlobalTaskStore.get() is GlobalTaskStore.get()
    assert isinstance(GlobalTaskStore.get(), TaskStore)
    pytest.importorskip("ravi.capabilities.postgres")
    monkeypatch.setenv("RUNTIME_BACKEND", "postgres")  # 000's switch: the [tasks] backend of the settings
    monkeypatch.setenv("RAVI_TASKS__DSN", "postgresql://nowhere.invalid/db")  # its options, as for any store
    store = GlobalTaskStore.get()  # found through the registry; built, not connected
    assert type(store).__name__ == "PgTaskStore"
    assert GlobalTaskStore.get() is store
    monkeypatch.delenv("RAVI_TASKS__DSN")
    with pytest.raises(ConfigurationError, match=r"RUNTIME_BACKEND=postgres: \[tasks\] backend = 'postgres'.*dsn"):
        GlobalTaskStore.get()  # one error format for bad configuration: the key and the fix, and where it was set
    monkeypatch.setenv("RUNTIME_BACKEND", "POSTGRES")
    with pytest.raises(ConfigurationError, match=r"^RUNTIME_BACKEND=POSTGRES: "):
        GlobalTaskStore.get()  # the variable is named, not only the [tasks] section it stands for


async def test_global_task_store_closes_what_it_built(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RUNTIME_BACKEND", raising=False)
    closed: list[object] = []
    first = GlobalTaskStore.get()
    monkeypatch.setattr(type(first), "aclose", lambda self: _note(closed, self))
    await GlobalTaskStore.aclose()
    assert closed == [first]  # the shared store was closed, once
    assert GlobalTaskStore.get() is not first  # and forgotten: the next get builds afresh
    await GlobalTaskStore.aclose()


async def _note(closed: list[object], store: object) -> None:
    closed.append(store)


BAD_REQUESTS = [
    ({"messages": None}, "messages"),
    ({"messages": "summarise"}, "messages"),
    ({"messages": [1]}, "messages"),
    ({"max_tokens": 0}, "max_tokens"),
    ({"max_tokens": -5}, "max_tokens"),
    ({"max_tokens": True}, "max_tokens"),
    ({"max_tokens": 1.5}, "max_tokens"),
    ({"max_tokens": "50"}, "max_tokens"),
    ({"cancel": 1}, "cancel"),
    ({"cancel": "stop"}, "cancel"),
]


def _clients() -> list[object]:
    from ravi.agents.llm import CallableLLMClient

    return [
        ExtractiveSummarizer(),
        CallableLLMClient(lambda messages, max_tokens=None: "a summary"),
        OpenAICompatibleClient("m", base_url="http://127.0.0.1:1/v1", api_key="k"),
    ]


@pytest.mark.parametrize(("arguments", "field"), BAD_REQUESTS)
async def test_every_client_refuses_a_bad_request_before_any_call(arguments: dict[str, object], field: str) -> None:
    """Each client took its arguments as they came: ``max_tokens=0`` gave the extractive summariser's default
    length, ``"50"`` a bare ``TypeError``, ``cancel=1`` an ``AttributeError``, and the function or the endpoint
    was called with a string for the messages."""
    for client in _clients():
        request = {"messages": [ChatMessage.user("hi")], **arguments}
        messages = request.pop("messages")
        with pytest.raises(InvalidArgument) as raised:
            await client.complete(messages, **request)  # type: ignore[attr-defined]
        assert raised.value.field == field or str(raised.value).startswith(field), (client, raised.value)
        if isinstance(client, OpenAICompatibleClient):
            await client.aclose()


@pytest.mark.parametrize(
    ("arguments", "says"),
    [
        ({"model": 1}, "model"),
        ({"model": ""}, "model"),
        ({"base_url": 1}, "base_url"),
        ({"base_url": ""}, "base_url"),
        ({"api_key": 1}, "api_key"),
        ({"timeout": 0}, "timeout"),
        ({"timeout": -1.0}, "timeout"),
        ({"timeout": True}, "timeout"),
        ({"timeout": "60"}, "timeout"),
        ({"timeout": float("nan")}, "timeout"),
    ],
)
def test_an_openai_compatible_client_refuses_bad_settings(arguments: dict[str, object], says: str) -> None:
    settings: dict[str, object] = {"model": "m", "base_url": "http://127.0.0.1:1/v1", **arguments}
    with pytest.raises((InvalidArgument, ConfigurationError)) as raised:
        OpenAICompatibleClient(**settings)  # type: ignore[arg-type]
    assert says in str(raised.value)


@pytest.mark.parametrize("line_chars", [0, -1, True, 1.5, None, "240"])
def test_an_extractive_summariser_refuses_a_line_length_that_is_not_a_positive_integer(line_chars: object) -> None:
    with pytest.raises(InvalidArgument, match="line_chars"):
        ExtractiveSummarizer(line_chars=line_chars)  # type: ignore[arg-type]


def test_a_cancel_argument_is_checked_by_the_kernel() -> None:
    from ravi.kernel.cancel import check_cancel

    token = CancelToken()
    assert check_cancel(token) is token and check_cancel(None) is None
    with pytest.raises(InvalidArgument, match="cancel"):
        check_cancel(True)


@pytest.mark.parametrize("content", [["a", "summary"], {"text": "a summary"}, 42])
async def test_a_reply_whose_content_is_not_text_is_refused_not_stringified(content: object) -> None:
    """A reply whose ``content`` was a list of parts (or another value) came back as its Python repr,
    ``"['a', 'summary']"``, taken for the summary's text."""

    class Parts(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            _send_reply(self, content)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Parts)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    client = OpenAICompatibleClient("m", base_url=f"http://127.0.0.1:{server.server_address[1]}/v1", api_key="k")
    try:
        with pytest.raises(RaviError, match="unexpected chat endpoint reply"):
            await client.complete([ChatMessage.user("hi")])
    finally:
        await client.aclose()
        server.shutdown()
        server.server_close()
