"""PydanticAI's model messages to Ravi's and back, losslessly.

A ``ModelResponse`` is one assistant message (text, thinking with its signature, tool calls). A ``ModelRequest``
carries parts of different kinds, so each part is one Ravi message: a system prompt is a system message, a user
prompt a user message, a tool return a tool result, a retry prompt for a tool an error result (else a user
message). A request with no parts is kept too, as a user message with no content. Every Ravi message keeps the
PydanticAI message it came from (its JSON form) and its part's place, so reading back gives the very messages
that were stored; when the pipeline changed a part (a shortened tool return), that part is rebuilt and the
message keeps its other fields.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic_ai.messages import (
    INVALID_JSON_KEY,
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from ravi.agents.adapters import Originals
from ravi.kernel.errors import InvalidMessage
from ravi.kernel.messages import ChatMessage, TextBlock, ThinkingBlock, ToolCallBlock, ToolResultBlock
from ravi.kernel.values import json_object, thaw

KEY = "pydantic_ai"
"""The metadata key under which a Ravi message keeps its PydanticAI message and its part's place."""


def _dump(message: ModelMessage) -> dict[str, Any]:
    return dict(ModelMessagesTypeAdapter.dump_python([message], mode="json")[0])


def _load(data: Any) -> ModelMessage:
    return ModelMessagesTypeAdapter.validate_python([data])[0]


ORIGINALS: Originals[ModelMessage] = Originals(KEY, load=lambda kept: _load(kept["message"]))
"""The PydanticAI messages kept in Ravi messages (an application's own ``"pydantic_ai"`` metadata is not one)."""


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        return "".join(c if isinstance(c, str) else json.dumps(_jsonable(c), sort_keys=True) for c in content)
    return json.dumps(_jsonable(content), sort_keys=True)


def _jsonable(value: Any) -> Any:
    try:
        json.dumps(value)
        return value
    except TypeError:
        return repr(value)


def _request_blocks(part: Any) -> tuple[str, tuple[Any, ...]]:
    """The Ravi role and blocks of one request part."""
    if isinstance(part, SystemPromptPart):
        return "system", (TextBlock(text=part.content),)
    if isinstance(part, UserPromptPart):
        return "user", (TextBlock(text=_text(part.content)),)
    if isinstance(part, ToolReturnPart):
        failed = getattr(part, "outcome", "success") != "success"
        block = ToolResultBlock(tool_call_id=part.tool_call_id, content=part.model_response_str(), is_error=failed)
        return "tool", (block,)
    if isinstance(part, RetryPromptPart) and part.tool_name is not None:
        return "tool", (ToolResultBlock(tool_call_id=part.tool_call_id, content=part.model_response(), is_error=True),)
    if isinstance(part, RetryPromptPart):
        return "user", (TextBlock(text=part.model_response()),)
    return "user", (TextBlock(text=json.dumps(_jsonable(dataclasses.asdict(part)), sort_keys=True, default=str)),)


def _arguments(part: ToolCallPart) -> dict[str, Any]:
    """``part.args_as_dict()``, but a JSON object no store keeps (NaN, nesting too deep) is held as written, as
    PydanticAI holds JSON it cannot read."""
    if isinstance(part.args, str) and part.args.strip() and json_object(part.args) is None:
        return {INVALID_JSON_KEY: part.args}
    return part.args_as_dict()


def _response_blocks(message: ModelResponse) -> tuple[Any, ...]:
    blocks: list[Any] = []
    for part in message.parts:
        if isinstance(part, TextPart):
            blocks.append(TextBlock(text=part.content))
        elif isinstance(part, ThinkingPart):
            blocks.append(ThinkingBlock(thinking=part.content, signature=part.signature))
        elif isinstance(part, ToolCallPart):
            blocks.append(ToolCallBlock(id=part.tool_call_id, name=part.tool_name, arguments=_arguments(part)))
        else:  # built-in tool calls and returns, files: their JSON, so they count
            blocks.append(TextBlock(text=json.dumps(_dump(ModelResponse(parts=[part])), sort_keys=True)))
    return tuple(blocks)


def to_ravi(message: ModelMessage, *, salt: str = "") -> list[ChatMessage]:
    """The Ravi messages of one PydanticAI message; ``salt`` (its place in the conversation) keeps ids unique.

    Raises:
        InvalidMessage: not a ``ModelRequest`` or ``ModelResponse``.
    """
    if not isinstance(message, (ModelRequest, ModelResponse)):
        raise InvalidMessage(f"expected a PydanticAI ModelMessage, got {type(message).__name__}", field="message")
    data = _dump(message)
    message = _load(data)  # the stored form (PydanticAI normalises some parts when it serialises them)
    ident = "pa-" + hashlib.sha256((salt + json.dumps(data, sort_keys=True)).encode()).hexdigest()[:32]
    if isinstance(message, ModelResponse):
        meta: dict[str, Any] = {KEY: {"message": data, "origin": ident}}
        return [ChatMessage(id=ident, role="assistant", content=_response_blocks(message), metadata=meta)]
    if not message.parts:
        return [ChatMessage(id=ident, role="user", content=(), metadata={KEY: {"message": data, "origin": ident}})]
    out = []
    for i, part in enumerate(message.parts):
        role, blocks = _request_blocks(part)
        part_meta: dict[str, Any] = {KEY: {"message": data, "origin": ident, "part": i}}
        out.append(ChatMessage(id=f"{ident}-{i}", role=role, content=blocks, metadata=part_meta))
    return out


def _rebuilt_part(message: ChatMessage, original: Any, names: Mapping[str, str]) -> Any:
    """A request part for a Ravi message the pipeline changed, or one that keeps no PydanticAI message (stored by
    an application or another face): a tool result is a ``ToolReturnPart`` answering its call (named as the
    call that ``names`` holds for its id), failed when it is an error."""
    block = message.content[0] if message.content else TextBlock(text="")
    if isinstance(block, ToolResultBlock) and isinstance(original, ToolReturnPart):
        return dataclasses.replace(original, content=block.content)
    if isinstance(block, ToolResultBlock):
        return ToolReturnPart(
            tool_name=names.get(block.tool_call_id, ""),
            content=block.content,
            tool_call_id=block.tool_call_id,
            outcome="failed" if block.is_error else "success",
        )
    text = "".join(b.text for b in message.content if isinstance(b, TextBlock))
    if message.role == "system":
        return SystemPromptPart(content=text)
    return UserPromptPart(content=text)


_RESULTS = object()
"""Where tool results that keep no PydanticAI request come from: consecutive ones make one request."""


def from_ravi(messages: Sequence[ChatMessage]) -> list[ModelMessage]:
    """PydanticAI messages from Ravi's (a window, or a whole transcript): a request is rebuilt from the parts
    that are there, each unchanged part being the stored one; an unchanged response is the stored one."""
    out: list[ModelMessage] = []
    current: object = None
    parts: list[Any] = []
    base: ModelRequest | None = None
    names: dict[str, str] = {}  # each tool call's name by its id, for a tool result rebuilt from its blocks

    def flush() -> None:
        nonlocal current, parts, base
        if parts:
            out.append(dataclasses.replace(base, parts=list(parts)) if base else ModelRequest(parts=list(parts)))
        current, parts, base = None, [], None

    for message in messages:
        original = ORIGINALS.of(message)
        kept = ORIGINALS.data(message) if original is not None else None
        if message.role == "assistant":
            flush()
            if isinstance(original, ModelResponse) and _response_blocks(original) == message.content:
                out.append(original)
            else:
                out.append(_response_from_blocks(message, original))
            names.update((b.id, b.name) for b in message.content if isinstance(b, ToolCallBlock))
            continue
        if isinstance(original, ModelRequest) and not original.parts and not message.content:
            flush()
            out.append(original)  # a request with no parts, as it was
            continue
        origin = kept.get("origin") if isinstance(kept, Mapping) else None
        if origin is None and message.role == "tool":
            origin = _RESULTS  # tool results that keep no request: one request, as parallel calls' results are
        if origin is None or origin != current:
            flush()
            current = origin
            base = original if isinstance(original, ModelRequest) else None
        part_index = kept.get("part") if isinstance(kept, Mapping) else None
        if base is not None and isinstance(part_index, int) and part_index < len(base.parts):
            part = base.parts[part_index]
            parts.append(
                part
                if _request_blocks(part) == (message.role, message.content)
                else _rebuilt_part(message, part, names)
            )
        else:
            parts.append(_rebuilt_part(message, None, names))
    flush()
    return out


def _response_from_blocks(message: ChatMessage, original: ModelMessage | None) -> ModelResponse:
    parts: list[Any] = []
    for block in message.content:
        if isinstance(block, TextBlock):
            parts.append(TextPart(content=block.text))
        elif isinstance(block, ThinkingBlock):
            parts.append(ThinkingPart(content=block.thinking, signature=block.signature))
        elif isinstance(block, ToolCallBlock):
            parts.append(ToolCallPart(tool_name=block.name, args=thaw(block.arguments), tool_call_id=block.id))
    if isinstance(original, ModelResponse):
        return dataclasses.replace(original, parts=parts)
    return ModelResponse(parts=parts)


__all__ = ["KEY", "from_ravi", "to_ravi"]
