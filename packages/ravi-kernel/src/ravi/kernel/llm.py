"""What Ravi needs from models: a way to ask for a summary, embeddings, and token counts."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from ravi.kernel.cancel import CancelToken
from ravi.kernel.messages import ChatMessage


class ModelInfo(BaseModel):
    """The sizes that decide a model's window: how many tokens it reads and how many it may write.

    Example:
        >>> ModelInfo(name="my-model", context_window=32_000, max_output_tokens=4_000).input_budget(safety_margin=0)
        28000
    """

    model_config = ConfigDict(frozen=True)

    name: str
    context_window: int = Field(gt=0)
    max_output_tokens: int = Field(ge=0)

    def input_budget(self, *, safety_margin: int = 0) -> int:
        """Tokens left for the prompt: window minus output reserve minus ``safety_margin``."""
        return max(0, self.context_window - self.max_output_tokens - safety_margin)


@runtime_checkable
class LLMClient(Protocol):
    """A chat model that can answer a list of messages with text (used to write summaries)."""

    async def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        max_tokens: int | None = None,
        cancel: CancelToken | None = None,
    ) -> str:
        """The model's reply to ``messages`` as plain text.

        Implementations check ``cancel`` before and after the model call and raise ``CancelledByToken``.
        """
        ...


@runtime_checkable
class EmbeddingClient(Protocol):
    """Turns texts into vectors of a fixed ``dimension``."""

    @property
    def dimension(self) -> int:
        """The length of every vector this client returns."""
        ...

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in order."""
        ...


@runtime_checkable
class TokenCounter(Protocol):
    """Counts tokens the way a model would bill them; implementations cache per message."""

    def count_text(self, text: str) -> int:
        """Tokens in ``text``."""
        ...

    def count_message(self, message: ChatMessage) -> int:
        """Tokens in one message, its per-message overhead included."""
        ...

    def count_messages(self, messages: Sequence[ChatMessage]) -> int:
        """Tokens in a whole window."""
        ...


__all__ = ["EmbeddingClient", "LLMClient", "ModelInfo", "TokenCounter"]
