"""AutoGen's LLM messages to Ravi's and back, losslessly.

Each Ravi message keeps the AutoGen message it came from (its JSON form) under ``"autogen"`` in its metadata.
A ``FunctionExecutionResultMessage`` carries several results; Ravi keeps one result per tool message, so it
becomes one tool message per result, each knowing its place, and they are joined again when read back. One
that holds no result at all is kept too, as a user message with no content (it answers no call, so nothing
of it counts), and reads back as it was.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from autogen_core import FunctionCall, Image
from autogen_core.model_context import ChatCompletionContext
from autogen_core.model_context._chat_completion_context import ChatCompletionContextState
from autogen_core.models import (
    AssistantMessage,
    FunctionExecutionResult,
    FunctionExecutionResultMessage,
    LLMMessage,
    SystemMessage,
    UserMessage,
)

from ravi.agents.adapters import Originals
from ravi.kernel.errors import InvalidMessage
from ravi.kernel.messages import ChatMessage, ImageBlock, TextBlock, ThinkingBlock, ToolCallBlock, ToolResultBlock
from ravi.kernel.values import json_object

KEY = "autogen"
"""The metadata key under which a Ravi message keeps its AutoGen message."""

__all__ = ["KEY", "ChatCompletionContext", "from_ravi", "to_ravi"]


def _dump(message: LLMMessage) -> dict[str, Any]:
    dumped = ChatCompletionContextState(messages=[message]).model_dump(mode="json")["messages"][0]
    return dict(dumped)


def _load(data: Any) -> LLMMessage:
    return ChatCompletionContextState.model_validate({"messages": [data]}).messages[0]


ORIGINALS: Originals[LLMMessage] = Originals(KEY, load=_load)
"""The AutoGen messages kept in Ravi messages (an application's own ``"autogen"`` metadata is not one)."""


def _arguments(raw: str) -> dict[str, Any]:
    parsed = json_object(raw) if isinstance(raw, str) else None  # None too for an object no store keeps (NaN)
    return parsed if parsed is not None else {"arguments": raw}


def _id(data: Mapping[str, Any], salt: str) -> str:
    return "ag-" + hashlib.sha256((salt + json.dumps(data, sort_keys=True)).encode()).hexdigest()[:32]


def to_ravi(message: LLMMessage, *, salt: str = "") -> list[ChatMessage]:
    """The Ravi messages of one AutoGen message (several for a message with several function results).

    Raises:
        InvalidMessage: not an AutoGen LLM message.
    """
    if not isinstance(message, (SystemMessage, UserMessage, AssistantMessage, FunctionExecutionResultMessage)):
        raise InvalidMessage(f"expected an AutoGen LLM message, got {type(message).__name__}", field="message")
    data = _dump(message)
    ident = _id(data, salt)
    if isinstance(message, SystemMessage):
        return [ChatMessage(id=ident, role="system", content=(TextBlock(text=message.content),), metadata={KEY: data})]
    if isinstance(message, UserMessage):
        parts = [message.content] if isinstance(message.content, str) else message.content
        blocks: list[Any] = []
        for part in parts:
            if isinstance(part, Image):
                blocks.append(ImageBlock(url=part.data_uri))
            else:
                blocks.append(TextBlock(text=str(part)))
        return [ChatMessage(id=ident, role="user", content=tuple(blocks), name=message.source, metadata={KEY: data})]
    if isinstance(message, AssistantMessage):
        blocks = [ThinkingBlock(thinking=message.thought)] if message.thought else []
        if isinstance(message.content, str):
            blocks.append(TextBlock(text=message.content))
        else:
            blocks += [ToolCallBlock(id=c.id, name=c.name, arguments=_arguments(c.arguments)) for c in message.content]
        return [
            ChatMessage(id=ident, role="assistant", content=tuple(blocks), name=message.source, metadata={KEY: data})
        ]
    if not message.content:
        return [ChatMessage(id=ident, role="user", content=(), metadata={KEY: data})]
    out = []
    for i, result in enumerate(message.content):
        block = ToolResultBlock(tool_call_id=result.call_id, content=result.content, is_error=bool(result.is_error))
        meta = {KEY: data, "autogen_part": [i, len(message.content)]}
        out.append(ChatMessage(id=f"{ident}-{i}", role="tool", content=(block,), metadata=meta))
    return out


def _place(part: Any, size: int | None) -> int | None:
    """A result's place in its message, from ``autogen_part`` (``None`` when it is not one)."""
    if not isinstance(part, Sequence) or isinstance(part, str) or not part or not isinstance(part[0], int):
        return None
    return part[0] if part[0] >= 0 and (size is None or part[0] < size) else None


def _unchanged(message: ChatMessage, original: LLMMessage, part: int | None) -> bool:
    ravi = to_ravi(original)
    mine = ravi[part] if part is not None and part < len(ravi) else ravi[0]
    return mine.content == message.content


def from_ravi(messages: Sequence[ChatMessage]) -> list[LLMMessage]:
    """AutoGen messages from Ravi's (a window, or a whole transcript): each unchanged message is the AutoGen
    message it was stored from; the results of one ``FunctionExecutionResultMessage`` that are all there are
    joined again; a message the pipeline changed (a shortened result, a summary) is rebuilt from its blocks."""
    out: list[LLMMessage] = []
    pending: list[FunctionExecutionResult] = []

    def flush() -> None:
        if pending:
            out.append(FunctionExecutionResultMessage(content=list(pending)))
            pending.clear()

    for message in messages:
        original = ORIGINALS.of(message)
        part = message.metadata.get("autogen_part")
        if message.role == "tool":
            result = message.content[0]
            assert isinstance(result, ToolResultBlock)
            name = ""
            place = (
                _place(part, len(original.content)) if isinstance(original, FunctionExecutionResultMessage) else None
            )
            if isinstance(original, FunctionExecutionResultMessage) and place is not None:
                name = original.content[place].name
            if pending and _place(part, None) == 0:
                flush()  # the first result of another message
            pending.append(
                FunctionExecutionResult(
                    content=result.content, name=name, call_id=result.tool_call_id, is_error=result.is_error
                )
            )
            continue
        flush()
        if original is not None and _unchanged(message, original, None):
            out.append(original)
            continue
        text = "".join(b.text for b in message.content if isinstance(b, TextBlock))
        source = message.name or message.role
        if message.role == "system":
            out.append(SystemMessage(content=text))
        elif message.role == "user":
            out.append(UserMessage(content=text, source=source))
        else:
            calls = [
                FunctionCall(id=b.id, name=b.name, arguments=json.dumps(dict(b.arguments)))
                for b in message.content
                if isinstance(b, ToolCallBlock)
            ]
            out.append(AssistantMessage(content=calls or text, source=source))
    flush()
    return out
