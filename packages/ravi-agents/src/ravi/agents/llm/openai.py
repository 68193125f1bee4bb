"""``OpenAICompatibleClient``: summaries from any chat-completions endpoint (OpenAI, vLLM, Ollama, LiteLLM)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from ravi.agents.llm._request import check_request
from ravi.kernel.cancel import CancelToken
from ravi.kernel.env import read_raw
from ravi.kernel.errors import BackendUnavailable, ConfigurationError, InvalidArgument, PermissionDenied, RaviError
from ravi.kernel.messages import ChatMessage, to_openai
from ravi.kernel.registry import install_command


class OpenAICompatibleClient:
    """An :class:`~ravi.kernel.llm.LLMClient` over the ``/chat/completions`` HTTP API (needs ``httpx``:
    ``pip install 'ravi-agents[openai]'``).

    Args:
        model: The model name the endpoint knows.
        base_url: The API root, for example ``http://localhost:11434/v1``; ``OPENAI_BASE_URL`` by default.
        api_key: Bearer token; ``OPENAI_API_KEY`` by default (may be empty for local servers).
        timeout: Seconds per request.

    Raises:
        ConfigurationError: ``httpx`` is not installed; no base URL (neither given nor in ``OPENAI_BASE_URL``), or
            one that is not an ``http(s)://`` URL.
        InvalidArgument: ``model`` is not a non-empty name, ``base_url`` or ``api_key`` is not text, or
            ``timeout`` is not a finite number of seconds > 0.
    """

    def __init__(
        self, model: str, *, base_url: str | None = None, api_key: str | None = None, timeout: float = 60.0
    ) -> None:
        try:
            import httpx
        except ImportError as error:
            raise ConfigurationError(
                "OpenAICompatibleClient needs the httpx package, which is not installed",
                hint=install_command("ravi-agents[openai]"),
            ) from error
        if not isinstance(model, str) or not model:
            raise InvalidArgument(f"must be a model's name, got {model!r}", field="model")
        for name, value in (("base_url", base_url), ("api_key", api_key)):
            if value is not None and not isinstance(value, str):
                raise InvalidArgument(f"must be text or None, got {type(value).__name__}", field=name)
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout < math.inf:
            raise InvalidArgument(f"must be a finite number of seconds > 0, got {timeout!r}", field="timeout")
        if base_url == "":
            raise ConfigurationError("base_url is empty", hint="pass base_url='http://host:port/v1'")
        base = base_url or read_raw("OPENAI_BASE_URL")
        if not base:
            raise ConfigurationError(
                "no base_url given and OPENAI_BASE_URL is not set", hint="pass base_url='http://host:port/v1'"
            )
        try:
            scheme = httpx.URL(base).scheme
        except (httpx.InvalidURL, ValueError, TypeError) as error:
            raise ConfigurationError(f"base_url {base!r} is not a URL: {error}") from None
        if scheme not in ("http", "https"):
            raise ConfigurationError(
                f"base_url {base!r} is not an http(s) URL", hint="pass base_url='http://host:port/v1'"
            )
        key = api_key if api_key is not None else (read_raw("OPENAI_API_KEY") or "")
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self.model = model
        self._client = httpx.AsyncClient(base_url=base.rstrip("/"), headers=headers, timeout=timeout)

    async def complete(
        self, messages: Sequence[ChatMessage], *, max_tokens: int | None = None, cancel: CancelToken | None = None
    ) -> str:
        """The model's reply text.

        Raises:
            InvalidArgument: ``messages`` are not ``ChatMessage`` objects, ``max_tokens`` is neither ``None`` nor
                an integer > 0, or ``cancel`` is not a ``CancelToken`` (before any request).
            BackendUnavailable: the endpoint cannot be reached.
            PermissionDenied: the endpoint refused the credentials.
            RaviError: the endpoint answered with an error, or with a reply that is not a chat completion (or
                whose content is not text).
            CancelledByToken: ``cancel`` was cancelled.
        """
        import httpx

        check_request(messages, max_tokens, cancel)
        if cancel is not None:
            cancel.raise_if_cancelled()
        body: dict[str, Any] = {"model": self.model, "messages": to_openai(messages)}
        if max_tokens is not None:
            body["max_tokens"] = max_tokens
        try:
            response = await self._client.post("/chat/completions", json=body)
        except httpx.HTTPError as error:
            raise BackendUnavailable(f"chat endpoint unreachable: {error}") from error
        if response.status_code in (401, 403):
            raise PermissionDenied(f"chat endpoint refused the credentials ({response.status_code})")
        if response.status_code >= 400:
            raise RaviError(f"chat endpoint answered {response.status_code}: {response.text[:300]}")
        if cancel is not None:
            cancel.raise_if_cancelled()
        try:
            content = response.json()["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError) as error:
            raise RaviError(f"unexpected chat endpoint reply: {response.text[:300]}") from error
        if content is None:
            return ""
        if not isinstance(content, str):  # a list of parts, say: its repr is not the reply's text
            raise RaviError(f"unexpected chat endpoint reply (content is not text): {response.text[:300]}")
        return content

    async def aclose(self) -> None:
        """Close the HTTP connections."""
        await self._client.aclose()


__all__ = ["OpenAICompatibleClient"]
