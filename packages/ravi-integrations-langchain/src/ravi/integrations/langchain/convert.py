"""LangChain messages to Ravi's and back, losslessly.

A LangChain message becomes a ``ChatMessage`` whose content blocks are what assembly needs (text, tool calls,
tool results with their error flag, images, reasoning), and whose metadata keeps the whole LangChain message
(``message_to_dict``) under ``"langchain"``. Reading it back gives the very message that was stored, equal to
what was added: its ``id`` too, ``None`` included. Ravi's own message id is the ``ChatMessage``'s, which
LangChain never sees. A message the pipeline changed (a shortened tool result, a tool call folded away, a
summary) is rebuilt from its blocks, with its LangChain id and name.

A tool call LangChain could not parse (``invalid_tool_calls``: a model cut off mid-call wrote ``'{"path": "a.t'``)
is a tool call to Ravi too, so its result is paired with it and its tokens are counted: its arguments are the
parsed object when ``args`` is one, else ``{"unparsed": args}``. The LangChain message, kept whole, is what is
given back.
"""

from __future__ import annotations

import hashlib
import json
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

from ravi.agents.adapters import Originals
from ravi.agents.context.chat_dicts import UNPARSED
from ravi.kernel.errors import InvalidMessage, RaviError
from ravi.kernel.messages import ChatMessage, ImageBlock, TextBlock, ThinkingBlock, ToolCallBlock, ToolResultBlock
from ravi.kernel.values import json_object, thaw

KEY = "langchain"
"""The metadata key under which a stored message keeps its LangChain form."""


def _load(data: Any) -> BaseMessage:
    if not isinstance(data, Mapping) or not isinstance(data.get("data"), Mapping):
        raise ValueError("not a LangChain message dict")
    return messages_from_dict([dict(data)])[0]


ORIGINALS: Originals[BaseMessage] = Originals(KEY, load=_load)
"""The LangChain messages kept in Ravi messages (an application's own ``"langchain"`` metadata is not one)."""

_ROLES = {
    "human": "user",
    "ai": "assistant",
    "system": "system",
    "tool": "tool",
    "developer": "system",
    # chunks: a streamed reply (RunnableWithMessageHistory hands the history an AIMessageChunk), kept as given
    "HumanMessageChunk": "user",
    "AIMessageChunk": "assistant",
    "SystemMessageChunk": "system",
    "ToolMessageChunk": "tool",
}


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


def _unparsed(raw: Any) -> dict[str, Any]:
    """The arguments of a tool call LangChain could not parse: ``args`` parsed when it is a JSON object (the call
    was invalid for another reason), else ``{"unparsed": args}`` (nothing when it is empty)."""
    if isinstance(raw, Mapping):
        return dict(raw)
    if not isinstance(raw, str) or not raw.strip():
        return {}
    parsed = json_object(raw)  # None too for an object no store keeps (NaN, nesting too deep)
    return parsed if parsed is not None else {UNPARSED: raw}


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
        for bad in message.invalid_tool_calls:
            name, arguments = bad.get("name") or "unknown", _unparsed(bad.get("args"))
            blocks.append(ToolCallBlock(id=bad.get("id") or "unknown", name=name, arguments=arguments))
    return tuple(blocks)


def to_ravi(message: BaseMessage, *, ravi_id: str | None = None) -> ChatMessage:
    """A LangChain message as a Ravi ``ChatMessage`` whose metadata keeps the LangChain message exactly.

    The Ravi message's id is ``ravi_id`` when given, else one derived from the whole LangChain message (its
    ``id`` and content): the same message always gets the same id, so storing it again is a no-op, and a
    message with an id already stored but different content gets another, so it is never taken for the first.

    Raises:
        InvalidMessage: the message is of a kind Ravi cannot store, or a field is not JSON.
    """
    try:
        return _to_ravi(message, ravi_id)
    except RaviError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        raise InvalidMessage(f"a LangChain message cannot be stored: {error!r}", field="message") from None


def _to_ravi(message: BaseMessage, ravi_id: str | None) -> ChatMessage:
    if not isinstance(message, BaseMessage):
        raise InvalidMessage(f"expected a LangChain message, got {type(message).__name__}", field="message")
    role = _ROLES.get(message.type) or ("system" if getattr(message, "role", None) == "developer" else None)
    if role is None:
        role = "user" if message.type in ("chat", "function", "ChatMessageChunk", "FunctionMessageChunk") else None
    if role is None:
        raise InvalidMessage(f"LangChain message type {message.type!r} has no Ravi role", field="type")
    data = message_to_dict(message)
    if ravi_id is None:
        digest = hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()
        ravi_id = f"lc-{digest[:32]}"
    return ChatMessage(
        id=ravi_id, role=role, content=_blocks(message), name=message.name or None, metadata=ORIGINALS.keep(data)
    )


def langchain_id(message: ChatMessage) -> str | None:
    """The LangChain ``id`` of the message a Ravi message stands for (``None`` for one that had none, or for a
    message that no LangChain message was stored as, such as a summary)."""
    data = ORIGINALS.data(message)
    inner = data.get("data") if isinstance(data, Mapping) else None
    ident = inner.get("id") if isinstance(inner, Mapping) else None
    return ident if isinstance(ident, str) else None


def changed(message: ChatMessage) -> bool:
    """Whether ``message`` no longer holds what its stored LangChain message says (the pipeline shortened or
    folded it, say), or holds no LangChain message at all."""
    return ORIGINALS.unchanged(message, _blocks) is None


def to_langchain(message: ChatMessage) -> BaseMessage:
    """A Ravi message as LangChain's: the stored LangChain message itself when the pipeline left it unchanged,
    else one rebuilt from its blocks, with the stored message's LangChain id (the Ravi id for a message no
    LangChain message was stored as) and its name."""
    original = ORIGINALS.unchanged(message, _blocks)
    if original is not None:
        return original
    text = "".join(b.text for b in message.content if isinstance(b, TextBlock))
    kept = ORIGINALS.of(message)
    common: dict[str, Any] = {"id": kept.id if kept is not None else message.id}
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
    invalid = {c.get("id") or "unknown": c for c in kept.invalid_tool_calls} if isinstance(kept, AIMessage) else {}
    calls: list[Any] = []
    unparsed: list[Any] = []  # a call LangChain could not parse stays one, with the arguments the model wrote
    for b in message.content:
        if isinstance(b, ToolCallBlock) and b.id in invalid:
            unparsed.append(invalid[b.id])
        elif isinstance(b, ToolCallBlock):
            calls.append({"name": b.name, "args": thaw(b.arguments), "id": b.id, "type": "tool_call"})
    return AIMessage(content=text, tool_calls=calls, invalid_tool_calls=unparsed, **common)


__all__ = ["KEY", "ORIGINALS", "changed", "langchain_id", "to_langchain", "to_ravi"]
