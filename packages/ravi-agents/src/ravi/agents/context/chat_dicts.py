"""Chat dicts as context modules exchange them, stored losslessly as Ravi messages.

An orchestrator hands a context module OpenAI-style dicts, possibly with the ``developer`` role and content blocks
of kinds Ravi does not model (amplifier's ``thinking`` with provider state, ``redacted_thinking``, ``reasoning``,
``tool_call``, ``tool_result``, ``image`` with a ``source``). :func:`from_chat_dict` derives the blocks assembly
needs (counts, tool pairs, compaction); when the Ravi message would not give the dict back exactly, the message's
metadata keeps the dict itself (under :data:`KEY`). :func:`to_chat_dict` gives the dict back as it was added,
unless the pipeline changed the message's content, in which case it rebuilds one from the blocks.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ravi.kernel.errors import InvalidMessage
from ravi.kernel.messages import ChatMessage
from ravi.kernel.values import json_object, thaw

KEY = "chat_dict"
"""The metadata key under which a message stored from a dict records how to give the dict back."""


def _image(part: Mapping[str, Any], where: str) -> dict[str, Any]:
    source = part.get("source")
    if not isinstance(source, Mapping):
        raise InvalidMessage("an image block needs a 'source' object", field=f"{where}.source")
    url: Any = source.get("url")
    if source.get("type") == "base64" or "data" in source:
        media = source.get("media_type") or "application/octet-stream"
        url = f"data:{media};base64,{source.get('data', '')}"
    if not isinstance(url, str) or not url:
        raise InvalidMessage("an image source needs 'url' or base64 'data'", field=f"{where}.source")
    return {"type": "image_url", "image_url": {"url": url}}


def _summary_text(items: Any) -> str:
    if not isinstance(items, list):
        return ""
    texts = [i.get("text") if isinstance(i, Mapping) else i for i in items]
    return "\n".join(t for t in texts if isinstance(t, str))


UNPARSED = "unparsed"
"""The key under which a derived tool call holds arguments that are not a JSON object (see :func:`_calls`)."""


def _calls(calls: Any) -> Any:
    """``tool_calls`` with each call's ``function.arguments`` that is a string but not a JSON object (a model cut
    off mid-call writes ``'{"path": "a.t'``) held as ``{"unparsed": the string}``: the message is stored, its
    tokens counted with the string, and the dict, kept whole, is what is given back and sent."""
    if not isinstance(calls, list):
        return calls
    out = []
    for call in calls:
        function = call.get("function") if isinstance(call, Mapping) else None
        raw = function.get("arguments") if isinstance(function, Mapping) else None
        # not an object, or one no store keeps (NaN, -0.0, too deep): held as written
        if isinstance(function, Mapping) and isinstance(raw, str) and raw.strip() and json_object(raw) is None:
            call = {**call, "function": {**function, "arguments": {UNPARSED: raw}}}
        out.append(call)
    return out


def _normalise(data: Mapping[str, Any]) -> dict[str, Any]:
    """``data`` in the form :meth:`ChatMessage.from_openai` reads (developer as system, blocks as parts, tool-call
    arguments that are not a JSON object as :func:`_calls` holds them)."""
    out = dict(data)
    if out.get("role") == "developer":
        out["role"] = "system"
    if "tool_calls" in out:
        out["tool_calls"] = _calls(out["tool_calls"])
    content = out.get("content")
    if not isinstance(content, list):
        return out
    parts: list[Any] = []
    calls: list[dict[str, Any]] = []
    results: list[Mapping[str, Any]] = []
    for i, part in enumerate(content):
        kind = part.get("type") if isinstance(part, Mapping) else None
        where = f"content[{i}]"
        if kind == "thinking" and isinstance(part, Mapping):
            thinking = {"type": "thinking", "thinking": part.get("thinking", "")}
            if part.get("signature") is not None:
                thinking["signature"] = part["signature"]
            parts.append(thinking)
        elif kind == "redacted_thinking" and isinstance(part, Mapping):
            parts.append({"type": "thinking", "thinking": "", "signature": part.get("data", "")})
        elif kind == "reasoning" and isinstance(part, Mapping):
            parts.append({"type": "thinking", "thinking": _summary_text(part.get("summary"))})
        elif kind == "image" and isinstance(part, Mapping):
            parts.append(_image(part, where))
        elif kind == "tool_call" and isinstance(part, Mapping):
            calls.append(
                {
                    "id": part.get("id"),
                    "type": "function",
                    "function": {"name": part.get("name"), "arguments": part.get("input") or {}},
                }
            )
        elif kind == "tool_result" and isinstance(part, Mapping):
            results.append(part)
        else:
            parts.append(part)
    if results:
        if len(results) != 1 or parts or calls:
            raise InvalidMessage("a tool result message holds exactly one tool_result block", field="content")
        output = results[0].get("output")
        if out.get("role") in (None, "tool", "user"):  # a result answers a call: it is a tool message
            out["role"] = "tool"
        if not out.get("tool_call_id"):
            out["tool_call_id"] = results[0].get("tool_call_id")
        out["content"] = output if isinstance(output, str) else json.dumps(output, ensure_ascii=False, default=str)
        return out
    out["content"] = parts
    if calls:
        known = {c.get("id") for c in out.get("tool_calls") or [] if isinstance(c, Mapping)}
        out["tool_calls"] = list(out.get("tool_calls") or []) + [c for c in calls if c["id"] not in known]
    return out


def _rebuilds(message: ChatMessage, data: Mapping[str, Any]) -> bool:
    """Whether ``message.to_openai()`` gives back every key of ``data`` unchanged, and adds none a model reads."""
    full = message.to_openai()
    if any(key not in full or full[key] != value for key, value in data.items()):
        return False
    return set(message.to_openai(extras=False)) <= set(data)


def from_chat_dict(data: Mapping[str, Any]) -> ChatMessage:
    """A chat dict as a Ravi message that gives the dict back (:func:`to_chat_dict`).

    The message's metadata records, under :data:`KEY`, either which of Ravi's own fields the dict carried
    (``{"fields": [...]}``, usually none), when the message rebuilds it exactly, or else the dict itself
    (``{"dict": data}``; always so for a dict whose own metadata holds that key).

    Raises:
        InvalidMessage: ``data`` is not a mapping, has no or an unknown role, or a block is malformed; or a value
            in it is one Ravi cannot store exactly (not JSON).
    """
    if not isinstance(data, Mapping):
        raise InvalidMessage(f"expected a mapping, got {type(data).__name__}", field="message")
    message = ChatMessage.from_openai(_normalise(data))
    # a dict whose own metadata holds the key is kept whole: the mark takes the key's place in the metadata
    if KEY not in message.metadata and _rebuilds(message, data):
        extra = sorted(set(data) - set(message.to_openai(extras=False)))
        mark: dict[str, Any] = {"fields": extra}
    else:
        mark = {"dict": dict(data)}
    return message.model_copy(update={"metadata": {**message.metadata, KEY: mark}})


def to_chat_dict(message: ChatMessage, *, request: bool = False) -> dict[str, Any]:
    """The dict ``message`` was stored from; for a ``request``, as the pipeline left it.

    A message rebuilt exactly is given back with the keys it was given (the pipeline's changes included). A message
    stored with its whole dict gives that dict back, unless the pipeline changed its content in a ``request``; then
    it is rebuilt from its blocks, with only what a chat endpoint reads (and the ``developer`` role kept). A message
    not stored from a dict (a ``ChatMessage``, a summary) gives :meth:`ChatMessage.to_openai`, with its id and
    metadata outside a request.
    """
    mark = message.metadata.get(KEY)
    if not isinstance(mark, Mapping):
        return message.to_openai(extras=not request)
    if "fields" in mark:
        full = message.to_openai()
        if "metadata" in full:
            own = {k: v for k, v in full["metadata"].items() if k != KEY}
            full["metadata"] = own
        keys = set(message.to_openai(extras=False)) | set(mark["fields"])
        return {k: full[k] for k in full if k in keys}
    original: dict[str, Any] = thaw(mark["dict"])
    if not request:
        return original
    same = message.memo.get("chat_dict:same")
    if same is None:
        same = ChatMessage.from_openai(_normalise(original)).content == message.content
        message.memo["chat_dict:same"] = same
    if same:
        return original
    rebuilt = message.to_openai(extras=False)
    if original.get("role") == "developer":
        rebuilt["role"] = "developer"
    return rebuilt


__all__ = ["KEY", "from_chat_dict", "to_chat_dict"]
