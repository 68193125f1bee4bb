"""``OpenAICompatibleClient``: summaries from any chat-completions endpoint (OpenAI, vLLM, Ollama, LiteLLM)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ravi.kernel.cancel import CancelToken
from ravi.kernel.env import read_raw
from ravi.kernel.errors import BackendUnavailable, ConfigurationError, PermissionDenied, RaviError
from ravi.kernel.messages import ChatMessage, to_openai


class OpenAICompatibleClient:
    """An :class:`~ravi.kernel.llm.LLMClient` over the ``/chat/completions`` HTTP API (needs ``httpx``:
    ``pip install 'ravi-agents[openai]'``).

    Args:
        model: The model name the endpoint knows.
        base_url: The API root, for example ``http://localhost:11434/v1``; ``OPENAI_BASE_URL`` by default.
        api_key: Bearer token; ``OPENAI_API_KEY`` by default (may be empty for local servers).
        timeout: Seconds per request.
    """

    def __init__(
        self, model: str, *, base_url: str | None = None, api_key: str | None = None, timeout: float = 60.0
    ) -> None:
        try:
            import httpx
        except ImportError as error:
            raise ConfigurationError(
                "OpenAICompatibleClient needs the httpx package, which is not installed",
                hint="pip install 'ravi-agents[openai]'",
            ) from error
        base = base_url or read_raw("OPENAI_BASE_URL")
        if not base:
            raise ConfigurationError(
                "no base_url given and OPENAI_BASE_URL is not set", hint="pass base_url='http://host:port/v1'"
            )
        key = api_key if api_key is not None else (read_raw("OPENAI_API_KEY") or "")
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self.model = model
        self._client = httpx.AsyncClient(base_url=base.rstrip("/"), headers=headers, timeout=timeout)

    async def complete(
        self, messages: Sequence[ChatMessage], *, max_tokens: int | None = None, cancel: CancelToken | None = None
    ) -> str:
        """The model's reply text."""
        import httpx

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
            return str(response.json()["choices"][0]["message"]["content"] or "")
        except (ValueError, KeyError, IndexError, TypeError) as error:
            raise RaviError(f"unexpected chat endpoint reply: {response.text[:300]}") from error

    async def aclose(self) -> None:
        """Close the HTTP connections."""
        await self._client.aclose()


__all__ = ["OpenAICompatibleClient"]
