"""Test doubles shared by the agents tests: a summariser that records its prompts, and an in-memory provider
that counts what each kind of read returned."""

from __future__ import annotations

from collections.abc import Sequence

from ravi.agents.context import InMemoryHistoryProvider
from ravi.kernel.cancel import CancelToken
from ravi.kernel.messages import ChatMessage
from ravi.kernel.storage import HistoryWindow


class RecordingLLM:
    """Answers ``summary #n`` and keeps each prompt's transcript."""

    def __init__(self) -> None:
        self.prompts: list[str] = []

    async def complete(
        self, messages: Sequence[ChatMessage], *, max_tokens: int | None = None, cancel: CancelToken | None = None
    ) -> str:
        self.prompts.append(messages[-1].text)
        return f"summary #{len(self.prompts)}"


class Recording(InMemoryHistoryProvider):
    """Counts how many messages each kind of read returned."""

    def __init__(self) -> None:
        super().__init__()
        self.windowed = 0
        self.whole = 0

    async def read_window(self, agent_id: str, *, session_id: str, tokens: int) -> HistoryWindow:
        view = await super().read_window(agent_id, session_id=session_id, tokens=tokens)
        self.windowed += len(view.messages)
        return view

    async def get_messages(
        self, agent_id: str, *, session_id: str, limit: int | None = None, offset: int = 0
    ) -> list[ChatMessage]:
        messages = await super().get_messages(agent_id, session_id=session_id, limit=limit, offset=offset)
        self.whole += len(messages)
        return messages
