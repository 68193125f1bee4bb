"""Responses-API items (what the OpenAI Agents SDK keeps in a session) to Ravi messages and back, losslessly.

Items become Ravi messages the assembly engine understands, each keeping its original items in its metadata
under ``"openai_agents"``:

* a user, system or developer message is one message (``developer`` is a system message to Ravi);
* consecutive assistant items (output messages, reasoning with its encrypted content, function calls, hosted
  tool calls) are one assistant turn, so parallel calls travel together;
* a ``function_call_output`` is a tool message (its result);
* anything else is kept as a user message holding the item's JSON (it still counts against the budget).

A function call's ``arguments`` is a JSON string that may be invalid: the call keeps it exactly, and Ravi's view of
the arguments is the parsed object, or ``{"arguments": <the string>}`` when it is not a JSON object.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ravi.kernel.errors import InvalidMessage, RaviError
from ravi.kernel.messages import ChatMessage, ImageBlock, TextBlock, ThinkingBlock, ToolCallBlock, ToolResultBlock
from ravi.kernel.values import json_object, thaw

KEY = "openai_agents"
"""The metadata key under which a Ravi message keeps its items."""

_ASSISTANT_TYPES = {"reasoning", "function_call"}
_HOSTED_CALLS = {
    "web_search_call",
    "file_search_call",
    "computer_call",
    "code_interpreter_call",
    "image_generation_call",
    "local_shell_call",
    "mcp_call",
    "mcp_list_tools",
    "mcp_approval_request",
    "shell_call",
    "apply_patch_call",
    "custom_tool_call",
}


def _plain(value: Any) -> Any:
    """An item as plain JSON data (the SDK may hand over pydantic models)."""
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        value = dump(exclude_unset=True)
    if isinstance(value, Mapping):
        for key in value:
            if not isinstance(key, str):  # str(key) would rename it, and {1: ..., "1": ...} would lose one
                raise InvalidMessage(
                    f"a session item's keys must be text, got {type(key).__name__} {key!r}", field="item"
                )
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _kind(item: Mapping[str, Any]) -> str:
    kind = item.get("type")
    if kind is None and "role" in item:
        return "message"
    return str(kind)


def _is_assistant(item: Mapping[str, Any]) -> bool:
    kind = _kind(item)
    return kind in _ASSISTANT_TYPES or kind in _HOSTED_CALLS or (kind == "message" and item.get("role") == "assistant")


def _text_parts(content: Any) -> list[Any]:
    if isinstance(content, str):
        return [TextBlock(text=content)] if content else []
    blocks: list[Any] = []
    for part in content or []:
        kind = part.get("type") if isinstance(part, Mapping) else None
        if kind in ("input_text", "output_text", "text", "summary_text"):
            blocks.append(TextBlock(text=str(part.get("text", ""))))
        elif kind == "refusal":
            blocks.append(TextBlock(text=str(part.get("refusal", ""))))
        elif kind == "input_image" and (part.get("image_url") or part.get("file_id")):
            blocks.append(ImageBlock(url=str(part.get("image_url") or f"file:{part['file_id']}")))
        else:
            blocks.append(TextBlock(text=json.dumps(part, sort_keys=True)))
    return blocks


def _arguments(raw: Any) -> dict[str, Any]:
    if isinstance(raw, Mapping):
        return dict(raw)
    parsed = json_object(raw) if isinstance(raw, str) else None  # None too for an object no store keeps (NaN)
    return parsed if parsed is not None else {"arguments": str(raw)}


def _assistant_blocks(items: Sequence[Mapping[str, Any]]) -> tuple[Any, ...]:
    blocks: list[Any] = []
    for item in items:
        kind = _kind(item)
        if kind == "message":
            blocks += _text_parts(item.get("content"))
        elif kind == "reasoning":
            summary = " ".join(str(s.get("text", "")) for s in item.get("summary") or [] if isinstance(s, Mapping))
            blocks.append(ThinkingBlock(thinking=summary, signature=item.get("encrypted_content")))
        elif kind == "function_call":
            call_id = str(item.get("call_id") or item.get("id") or "unknown")
            blocks.append(
                ToolCallBlock(id=call_id, name=str(item["name"]), arguments=_arguments(item.get("arguments")))
            )
        else:  # a hosted tool's call: its JSON, so it counts
            blocks.append(TextBlock(text=json.dumps(item, sort_keys=True)))
    return tuple(blocks)


def _ident(items: Sequence[Mapping[str, Any]], salt: str) -> str:
    """A message id derived from its items (and where they were added), so the same items give the same id."""
    digest = hashlib.sha256((salt + json.dumps(list(items), sort_keys=True, default=str)).encode()).hexdigest()
    return f"oa-{digest[:32]}"


def group(items: Iterable[Any]) -> list[list[dict[str, Any]]]:
    """The items in Ravi turns: consecutive assistant items together, every other item alone."""
    turns: list[list[dict[str, Any]]] = []
    for raw in items:
        item = _plain(raw)
        if not isinstance(item, dict):
            raise InvalidMessage(f"a session item must be a mapping, got {type(raw).__name__}", field="item")
        if _is_assistant(item) and turns and all(_is_assistant(i) for i in turns[-1]):
            turns[-1].append(item)
        else:
            turns.append([item])
    return turns


def to_ravi(turn: Sequence[dict[str, Any]], *, salt: str = "", extra: Mapping[str, Any] | None = None) -> ChatMessage:
    """One turn (from :func:`group`) as a Ravi message keeping its items; ``salt`` makes its id unique where the
    same items may appear twice in one session.

    Raises:
        InvalidMessage: an item lacks a field its type needs (a function call without a name, say).
    """
    try:
        return _to_ravi(turn, salt, extra)
    except RaviError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as error:
        raise InvalidMessage(f"a session item cannot be stored: {error!r}", field="item") from None


def _to_ravi(turn: Sequence[dict[str, Any]], salt: str, extra: Mapping[str, Any] | None) -> ChatMessage:
    first = turn[0]
    kind = _kind(first)
    metadata = {KEY: {"items": list(turn), **(extra or {})}}
    ident = _ident(turn, salt)
    if _is_assistant(first):
        return ChatMessage(id=ident, role="assistant", content=_assistant_blocks(turn), metadata=metadata)
    if kind == "function_call_output":
        output = first.get("output")
        text = output if isinstance(output, str) else json.dumps(output, sort_keys=True)
        result = ToolResultBlock(tool_call_id=str(first.get("call_id") or "unknown"), content=text)
        return ChatMessage(id=ident, role="tool", content=(result,), metadata=metadata)
    if kind == "message" and first.get("role") in ("user", "system", "developer"):
        role = "user" if first["role"] == "user" else "system"
        return ChatMessage(id=ident, role=role, content=tuple(_text_parts(first.get("content"))), metadata=metadata)
    return ChatMessage(
        id=ident, role="user", content=(TextBlock(text=json.dumps(first, sort_keys=True)),), metadata=metadata
    )


def items_of(message: ChatMessage) -> list[dict[str, Any]]:
    """The items a Ravi message stands for: its original ones when the pipeline left it unchanged, else items
    rebuilt from what it now holds (a shortened tool output, an assistant turn without its folded calls, a
    summary)."""
    kept = message.metadata.get(KEY)
    if isinstance(kept, Mapping):
        original = [thaw(i) for i in kept.get("items", [])]
        if original and _rebuilt_matches(original, message):
            return original
    if message.role == "tool":
        result = message.content[0]
        assert isinstance(result, ToolResultBlock)
        return [{"type": "function_call_output", "call_id": result.tool_call_id, "output": result.content}]
    text = "".join(b.text for b in message.content if isinstance(b, TextBlock))
    if message.role == "assistant":
        out: list[dict[str, Any]] = []
        if text:
            out.append({"role": "assistant", "content": text})
        for b in message.content:
            if isinstance(b, ToolCallBlock):
                arguments = json.dumps(dict(b.arguments))
                out.append({"type": "function_call", "call_id": b.id, "name": b.name, "arguments": arguments})
        return out
    return [{"role": "system" if message.role == "system" else "user", "content": text}]


def outputs_after_calls(items: Sequence[Mapping[str, Any]]) -> list[Any]:
    """``items`` with each ``function_call_output`` moved up to right after the run of consecutive function calls
    holding its call (the newest call of its ``call_id`` before it), the outputs of one run in the order given;
    every other item keeps its place and order, and an output with no call before it stays where it is.

    The Chat Completions models of the SDK (``Converter.items_to_messages``) turn a run of calls into one assistant
    message and each output into a tool message, which must follow it at once: an assistant message stored
    between a call and its output (another run's answer) made a request the API refuses. Items already so are
    returned in the same order.
    """
    last_of_run: list[int] = list(range(len(items)))  # each function call: the last call of its run
    for j in range(len(items) - 2, -1, -1):
        if _kind(items[j]) == "function_call" and _kind(items[j + 1]) == "function_call":
            last_of_run[j] = last_of_run[j + 1]
    calls: dict[str, int] = {}  # each call id: where its newest call so far is
    after: dict[int, list[int]] = {}  # the last call of a run: the outputs to put right after it
    moved: set[int] = set()
    for j, item in enumerate(items):
        kind = _kind(item)
        call_id = item.get("call_id")
        if kind == "function_call" and isinstance(call_id, str):
            calls[call_id] = j
        elif kind == "function_call_output" and isinstance(call_id, str) and call_id in calls:
            after.setdefault(last_of_run[calls[call_id]], []).append(j)
            moved.add(j)
    out: list[Any] = []
    for j, item in enumerate(items):
        if j not in moved:
            out.append(item)
        out.extend(items[k] for k in after.get(j, ()))
    return out


def _rebuilt_matches(items: list[dict[str, Any]], message: ChatMessage) -> bool:
    """Whether ``message`` still holds what its items say (the pipeline did not change it)."""
    try:
        return to_ravi(items).content == message.content
    except Exception:
        return False


__all__ = ["KEY", "group", "items_of", "outputs_after_calls", "to_ravi"]
