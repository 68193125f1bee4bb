"""LangChain messages to Ravi's and back, losslessly.

A LangChain message becomes a ``ChatMessage`` whose content blocks are what assembly needs (text, tool calls,
tool results with their error flag, images, reasoning), and whose metadata keeps the whole LangChain message
(``message_to_dict``) under ``"langchain"``. Reading it back gives the very message that was stored. A message the
pipeline changed (a shortened tool result, a tool call folded away, a summary) is rebuilt from its blocks, with
its id, name and the LangChain fields that were not changed.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    message_to_dict,
    messages_from_dict,
)

from ravi.kernel.errors import InvalidMessage, RaviError
from ravi.kernel.messages import ChatMessage, ImageBlock, TextBlock, ThinkingBlock, ToolCallBlock, ToolResultBlock
from ravi.kernel.values import thaw

KEY = "langchain"
"""The metadata key under which a stored message keeps its LangChain form."""

_ROLES = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool", "developer": "system"}


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = []
    for block in content or []:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, Mapping) and block.get("type") == "text":
            parts.append(str(block.get("text", "")))
    return "".join(parts)


def _blocks(message: BaseMessage) -> tuple[Any, ...]:
    """The Ravi content blocks of a LangChain message."""
    if isinstance(message, ToolMessage):
        text = message.content if isinstance(message.content, str) else json.dumps(message.content)
        return (
            ToolResultBlock(
                tool_call_id=message.tool_call_id or "unknown", content=text, is_error=message.status == "error"
            ),
        )
    blocks: list[Any] = []
    content = message.content
    if isinstance(content, str):
        if content:
            blocks.append(TextBlock(text=content))
    else:
        for block in content:
            if isinstance(block, str):
                blocks.append(TextBlock(text=block))
                continue
            kind = block.get("type")
            if kind == "text":
                blocks.append(TextBlock(text=str(block.get("text", ""))))
            elif kind in ("reasoning", "thinking"):
                text = block.get("reasoning") or block.get("thinking") or block.get("summary") or ""
                signature = block.get("signature") or block.get("encrypted_content")
                blocks.append(ThinkingBlock(thinking=str(text), signature=signature))
            elif kind == "image_url":
                url = block["image_url"]["url"] if isinstance(block.get("image_url"), Mapping) else block["image_url"]
                blocks.append(ImageBlock(url=str(url)))
            elif kind == "image" and (block.get("url") or block.get("base64")):
                url = block.get("url") or f"data:{block.get('mime_type', 'image/png')};base64,{block['base64']}"
                blocks.append(ImageBlock(url=str(url)))
            elif kind not in ("tool_call", "tool_use"):  # tool calls come from .tool_calls below
                blocks.append(TextBlock(text=json.dumps(block, sort_keys=True, default=str)))
    if isinstance(message, AIMessage):
        for call in message.tool_calls:
            blocks.append(ToolCallBlock(id=call.get("id") or "unknown", name=call["name"], arguments=call["args"]))
    return tuple(blocks)


def to_ravi(message: BaseMessage) -> ChatMessage:
    """A LangChain message as a Ravi ``ChatMessage`` (same id; one is made for a message without one).

    Raises:
        InvalidMessage: the message is of a kind Ravi cannot store, or a field is not JSON.
    """
    try:
        return _to_ravi(message)
    except RaviError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        raise InvalidMessage(f"a LangChain message cannot be stored: {error!r}", field="message") from None


def _to_ravi(message: BaseMessage) -> ChatMessage:
    if not isinstance(message, BaseMessage):
        raise InvalidMessage(f"expected a LangChain message, got {type(message).__name__}", field="message")
    role = _ROLES.get(message.type) or ("system" if getattr(message, "role", None) == "developer" else None)
    if role is None:
        role = "user" if message.type in ("chat", "function") else None
    if role is None:
        raise InvalidMessage(f"LangChain message type {message.type!r} has no Ravi role", field="type")
    data = message_to_dict(message)
    ident = message.id or uuid.uuid4().hex
    data["data"]["id"] = ident
    return ChatMessage(id=ident, role=role, content=_blocks(message), name=message.name or None, metadata={KEY: data})


def to_langchain(message: ChatMessage) -> BaseMessage:
    """A Ravi message as LangChain's: the stored LangChain message itself when the pipeline left it unchanged,
    else one rebuilt from its blocks (keeping its id and name)."""
    stored = message.metadata.get(KEY)
    if isinstance(stored, Mapping):
        original = messages_from_dict([thaw(stored)])[0]
        if _blocks(original) == message.content:
            return original
    text = "".join(b.text for b in message.content if isinstance(b, TextBlock))
    common: dict[str, Any] = {"id": message.id}
    if message.name:
        common["name"] = message.name
    if message.role == "system":
        return SystemMessage(content=text, **common)
    if message.role == "user":
        return HumanMessage(content=text, **common)
    if message.role == "tool":
        result = message.content[0]
        assert isinstance(result, ToolResultBlock)
        status = "error" if result.is_error else "success"
        return ToolMessage(content=result.content, tool_call_id=result.tool_call_id, status=status, **common)
    calls = [
        {"name": b.name, "args": dict(b.arguments), "id": b.id, "type": "tool_call"}
        for b in message.content
        if isinstance(b, ToolCallBlock)
    ]
    return AIMessage(content=text, tool_calls=calls, **common)


__all__ = ["KEY", "to_langchain", "to_ravi"]
