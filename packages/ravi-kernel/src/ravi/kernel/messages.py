"""The message model: ``ChatMessage`` and its content blocks, and the OpenAI-style dict form.

Messages are immutable values. A store can hand the same object to any number of readers, and no reader can
change what another sees: models are frozen, content is a tuple, and ``metadata`` and tool-call ``arguments``
are read-only all the way down (:class:`FrozenDict` and :class:`FrozenList`, built from what the caller gave, so
the caller's own dicts and lists stay the caller's).

Example:
    >>> msg = ChatMessage.assistant(tool_calls=[ToolCallBlock(id="c1", name="search", arguments={"q": "x"})])
    >>> ChatMessage.from_openai(msg.to_openai()) == msg
    True
"""

from __future__ import annotations

import functools
import gc
import json
import uuid
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Annotated, Any, Literal, NoReturn, Self

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, model_validator

from ravi.kernel.errors import InvalidArgument, InvalidMessage
from ravi.kernel.values import MAX_DEPTH, check_model, error_path, rebuilt, refuse_change

Role = Literal["system", "user", "assistant", "tool"]
ROLES: tuple[str, ...] = ("system", "user", "assistant", "tool")


def _refuse(self: object, *args: Any, **kwargs: Any) -> NoReturn:
    """What changing a :class:`FrozenDict` or :class:`FrozenList` raises, as changing a tuple does."""
    raise TypeError("message values are read-only; build a new one with model_copy(update=...)")


class FrozenDict(dict[str, Any]):
    """A ``dict`` that refuses mutation, so a message shared by many readers stays the same for all."""

    __slots__ = ()

    def __new__(cls, *args: Any, **kwargs: Any) -> FrozenDict:
        built = dict.__new__(cls)
        dict.__init__(built, *args, **kwargs)
        return built

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        """Filled once, by ``__new__``: calling ``__init__`` again changes nothing."""

    __setitem__ = _refuse
    __delitem__ = _refuse
    __ior__ = _refuse
    clear = _refuse
    pop = _refuse
    popitem = _refuse
    setdefault = _refuse
    update = _refuse

    def __reduce__(self) -> tuple[type[FrozenDict], tuple[dict[str, Any]]]:
        return (FrozenDict, (dict(self),))

    def __copy__(self) -> FrozenDict:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> FrozenDict:
        import copy

        return FrozenDict(copy.deepcopy(dict(self), memo))


class FrozenList(list[Any]):
    """A ``list`` that refuses mutation: a list inside a message's ``metadata`` or a tool call's ``arguments``.
    It equals, serialises and reads like a list; :func:`ravi.kernel.values.thaw` gives a plain one."""

    __slots__ = ()

    def __new__(cls, *args: Any) -> FrozenList:
        built = list.__new__(cls)
        list.__init__(built, *args)
        return built

    def __init__(self, *args: Any) -> None:
        """Filled once, by ``__new__``: calling ``__init__`` again changes nothing."""

    __setitem__ = _refuse
    __delitem__ = _refuse
    __iadd__ = _refuse
    __imul__ = _refuse
    append = _refuse
    extend = _refuse
    insert = _refuse
    pop = _refuse
    remove = _refuse
    clear = _refuse
    sort = _refuse
    reverse = _refuse

    def __reduce__(self) -> tuple[type[FrozenList], tuple[list[Any]]]:
        return (FrozenList, (list(self),))

    def __copy__(self) -> FrozenList:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> FrozenList:
        import copy

        return FrozenList(copy.deepcopy(list(self), memo))


_SCALARS = frozenset({str, int, float, bool, type(None)})


def _frozen(value: Any, depth: int = 0) -> Any:
    """``value`` read-only all the way down: each mapping a :class:`FrozenDict`, each list or tuple a
    :class:`FrozenList` (JSON has arrays only, so a tuple reads back from every store as the list it is stored as),
    each made anew, so nothing the caller holds is shared. What lies deeper than JSON may nest is left as it is,
    for the message's check to refuse."""
    if depth > MAX_DEPTH:
        return value
    scalars, depth = _SCALARS, depth + 1
    if isinstance(value, Mapping):
        return FrozenDict({k: v if type(v) in scalars else _frozen(v, depth) for k, v in value.items()})
    if isinstance(value, list | tuple):
        return FrozenList([v if type(v) in scalars else _frozen(v, depth) for v in value])
    return value


ReadOnlyDict = Annotated[dict[str, Any], AfterValidator(_frozen)]

_FROZEN = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


class _Part(BaseModel):
    """Base of the message model: bad input raises ``InvalidMessage`` naming the field, never pydantic's error,
    and text that no store can keep (lone surrogates, NaN, JSON nested too deep) is refused when built."""

    model_config = _FROZEN

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as error:
            _raise_invalid(error)
        self._check()

    # Parts nested in a message are built by pydantic-core alone, without this ``__init__`` (as for pydantic's
    # own): the outermost call checks the whole tree once. Without the mark, each nested part would be validated
    # twice and checked once per level, three times the cost of reading a message.
    __init__.__pydantic_base_init__ = True  # type: ignore[attr-defined]

    @classmethod
    def model_validate(cls, obj: Any, **options: Any) -> Self:
        """Build from a dict (or object) with the same checks and errors as the constructor."""
        try:
            model = super().model_validate(obj, **options)
        except ValidationError as error:
            _raise_invalid(error)
        model._check()
        return model

    @classmethod
    def model_validate_json(cls, json_data: str | bytes | bytearray, **options: Any) -> Self:
        """Build from JSON (as stores keep messages) with the same checks and errors as the constructor."""
        try:
            model = super().model_validate_json(json_data, **options)
        except ValidationError as error:
            _raise_invalid(error)
        model._check()
        return model

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """A copy with ``update`` applied and validated (raises ``InvalidMessage`` like the constructor)."""
        return rebuilt(self, update) if update else super().model_copy(deep=deep)

    def __setattr__(self, name: str, value: Any) -> NoReturn:
        refuse_change(self, name)

    def __delattr__(self, name: str) -> NoReturn:
        refuse_change(self, name)

    def _check(self) -> None:
        try:
            check_model(self)
        except InvalidArgument as error:
            raise InvalidMessage(error.reason, field=error.field or "message", hint=error.hint) from error


class TextBlock(_Part):
    """Plain text."""

    model_config = _FROZEN
    type: Literal["text"] = "text"
    text: str


class ImageBlock(_Part):
    """An image, by URL or as a ``data:`` URL carrying base64 bytes."""

    model_config = _FROZEN
    type: Literal["image"] = "image"
    url: str
    detail: Literal["auto", "low", "high"] | None = None


class DocumentBlock(_Part):
    """A document (PDF, text file) sent inline as base64 ``data`` or referenced by ``url``."""

    model_config = _FROZEN
    type: Literal["document"] = "document"
    data: str | None = None
    url: str | None = None
    media_type: str | None = None
    title: str | None = None

    @model_validator(mode="after")
    def _one_source(self) -> DocumentBlock:
        if (self.data is None) == (self.url is None):
            raise ValueError("a document needs exactly one of 'data' or 'url'")
        return self


class ThinkingBlock(_Part):
    """Model reasoning that some providers return and expect back verbatim (with its ``signature``)."""

    model_config = _FROZEN
    type: Literal["thinking"] = "thinking"
    thinking: str
    signature: str | None = None


class ToolCallBlock(_Part):
    """A call the assistant asks the runtime to make; ``id`` pairs it with its ``ToolResultBlock``."""

    model_config = _FROZEN
    type: Literal["tool_call"] = "tool_call"
    id: str = Field(min_length=1)
    name: str = Field(min_length=1)
    arguments: ReadOnlyDict = Field(default_factory=FrozenDict)


class ToolResultBlock(_Part):
    """The answer to one tool call. ``is_error`` marks a failed call, which compaction never shortens."""

    model_config = _FROZEN
    type: Literal["tool_result"] = "tool_result"
    tool_call_id: str = Field(min_length=1)
    content: str
    is_error: bool = False


ContentBlock = Annotated[
    TextBlock | ImageBlock | DocumentBlock | ThinkingBlock | ToolCallBlock | ToolResultBlock,
    Field(discriminator="type"),
]


def _new_id() -> str:
    return uuid.uuid4().hex


def _now() -> datetime:
    return datetime.now(UTC)


def _field_of(error: ValidationError) -> str:
    return error_path(error) or "message"


def _raise_invalid(error: ValidationError) -> NoReturn:
    first = error.errors()[0]
    raise InvalidMessage(first["msg"], field=_field_of(error)) from error


class ChatMessage(_Part):
    """One turn of a conversation: who said it (``role``) and what (``content`` blocks).

    ``id`` is stable for the message's life and is what stores de-duplicate on; ``created_at`` is UTC.
    Tool calls live in assistant messages, tool results in tool messages (exactly one result each, as in the
    OpenAI wire format). Invalid input raises :class:`~ravi.kernel.errors.InvalidMessage` naming the field.

    Example:
        >>> ChatMessage.user("hello").text
        'hello'
    """

    model_config = _FROZEN

    id: str = Field(default_factory=_new_id, min_length=1)
    role: Role
    content: tuple[ContentBlock, ...] = ()
    name: str | None = None
    metadata: ReadOnlyDict = Field(default_factory=FrozenDict)
    created_at: datetime = Field(default_factory=_now)

    @model_validator(mode="after")
    def _blocks_fit_role(self) -> ChatMessage:
        offset = self.created_at.utcoffset()
        if offset and (offset.seconds % 60 or offset.microseconds):
            # JSON timestamps, and so every server store, keep the offset to the minute: +00:19:32 (a zone's local
            # mean time before 1900) would move the instant
            raise ValueError(
                f"created_at: UTC offset {offset} is not a whole number of minutes, which no store keeps "
                "(convert it to UTC)"
            )
        for i, block in enumerate(self.content):
            if isinstance(block, ToolCallBlock) and self.role != "assistant":
                raise ValueError(f"content[{i}]: tool calls belong in assistant messages, not {self.role!r}")
            if isinstance(block, ToolResultBlock) and self.role != "tool":
                raise ValueError(f"content[{i}]: tool results belong in tool messages, not {self.role!r}")
        if self.role == "tool":
            results = [b for b in self.content if isinstance(b, ToolResultBlock)]
            if len(results) != 1 or len(self.content) != 1:
                raise ValueError("a tool message holds exactly one ToolResultBlock")
        return self

    def __eq__(self, other: object) -> bool:
        """Equal when every field is: the ``memo`` (a cache) never takes part."""
        if self is other:
            return True
        if type(other) is not type(self):
            return NotImplemented
        mine, theirs = self.__dict__, other.__dict__
        return all(mine[name] == theirs[name] for name in _MESSAGE_FIELDS)

    @functools.cached_property
    def memo(self) -> dict[str, Any]:
        """A per-object cache for values derived from this (immutable) message, such as token counts.

        Keys are namespaced by their owner (``"tokens:heuristic"``). Not part of the message's value: it is
        excluded from equality and serialisation, and a ``model_copy`` starts with an empty one.
        """
        return {}

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> ChatMessage:
        """A copy with ``update`` applied and validated (raises ``InvalidMessage`` like the constructor), with a
        memo of its own."""
        copied = super().model_copy(update=update, deep=deep)
        copied.__dict__.pop("memo", None)
        return copied

    # -- constructors -------------------------------------------------------------------------------

    @classmethod
    def system(cls, text: str, **fields: Any) -> ChatMessage:
        """A system message holding ``text``."""
        return cls(role="system", content=(TextBlock(text=text),), **fields)

    @classmethod
    def user(cls, text: str, **fields: Any) -> ChatMessage:
        """A user message holding ``text``."""
        return cls(role="user", content=(TextBlock(text=text),), **fields)

    @classmethod
    def assistant(
        cls, text: str | None = None, *, tool_calls: Iterable[ToolCallBlock] = (), **fields: Any
    ) -> ChatMessage:
        """An assistant message with optional ``text`` followed by ``tool_calls``."""
        blocks: list[TextBlock | ToolCallBlock] = [TextBlock(text=text)] if text is not None else []
        blocks.extend(tool_calls)
        return cls(role="assistant", content=tuple(blocks), **fields)

    @classmethod
    def tool(cls, tool_call_id: str, content: str, *, is_error: bool = False, **fields: Any) -> ChatMessage:
        """A tool message answering the call ``tool_call_id``."""
        block = ToolResultBlock(tool_call_id=tool_call_id, content=content, is_error=is_error)
        return cls(role="tool", content=(block,), **fields)

    # -- views --------------------------------------------------------------------------------------

    @property
    def text(self) -> str:
        """The text blocks joined by newlines (empty when there are none)."""
        return "\n".join(b.text for b in self.content if isinstance(b, TextBlock))

    @property
    def tool_calls(self) -> tuple[ToolCallBlock, ...]:
        """The tool calls this message makes, in order."""
        return tuple(b for b in self.content if isinstance(b, ToolCallBlock))

    @property
    def tool_result(self) -> ToolResultBlock | None:
        """The tool result a tool message carries, else ``None``."""
        if self.role != "tool":
            return None
        block = self.content[0]
        assert isinstance(block, ToolResultBlock)
        return block

    # -- OpenAI-style dicts -------------------------------------------------------------------------

    def to_openai(self, *, extras: bool = True) -> dict[str, Any]:
        """This message as an OpenAI-style chat dict.

        With ``extras`` (the default) the dict also carries ``id``, ``created_at``, ``metadata``, thinking blocks,
        ``is_error`` and, for tool calls that are not all after the rest of the content (text after a call),
        ``tool_call_positions`` (where each call stands among the blocks), so :meth:`from_openai` gives back an
        equal message. ``extras=False`` gives only what a chat-completions endpoint accepts.
        """
        out: dict[str, Any] = {"role": self.role}
        if self.role == "tool":
            result = self.tool_result
            assert result is not None
            out["tool_call_id"] = result.tool_call_id
            out["content"] = result.content
            if extras:
                out["is_error"] = result.is_error
        else:
            blocks = [b for b in self.content if not isinstance(b, ToolCallBlock)]
            if not extras:
                blocks = [b for b in blocks if not isinstance(b, ThinkingBlock)]
            if not blocks:
                out["content"] = None
            elif len(blocks) == 1 and isinstance(blocks[0], TextBlock):
                out["content"] = blocks[0].text
            else:
                out["content"] = [_part_to_openai(b) for b in blocks]
            calls = self.tool_calls
            if calls:
                out["tool_calls"] = [
                    {
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.name, "arguments": json.dumps(dict(c.arguments), ensure_ascii=False)},
                    }
                    for c in calls
                ]
                if extras:  # OpenAI keeps the calls apart from the content: say where they stood, if not last
                    positions = [i for i, b in enumerate(self.content) if isinstance(b, ToolCallBlock)]
                    if positions != list(range(len(self.content) - len(calls), len(self.content))):
                        out["tool_call_positions"] = positions
        if self.name is not None:
            out["name"] = self.name
        if extras:
            out["id"] = self.id
            out["created_at"] = self.created_at.isoformat()
            if self.metadata:
                out["metadata"] = dict(self.metadata)
        return out

    @classmethod
    def from_openai(cls, data: Mapping[str, Any]) -> ChatMessage:
        """Build a message from an OpenAI-style chat dict (as produced by :meth:`to_openai` or an API).

        Raises:
            InvalidMessage: the dict has no role, an unknown role, a tool message without ``tool_call_id``,
                malformed tool-call arguments, or an unknown content part; ``field`` names where.
        """
        if not isinstance(data, Mapping):
            raise InvalidMessage(f"expected a mapping, got {type(data).__name__}", field="message")
        role = data.get("role")
        if role is None:
            raise InvalidMessage("missing", field="role")
        if role not in ROLES:
            raise InvalidMessage(f"unknown role {role!r}; expected one of {', '.join(ROLES)}", field="role")
        fields: dict[str, Any] = {"role": role}
        for key in ("id", "name", "metadata", "created_at"):
            if data.get(key) is not None:
                fields[key] = data[key]
        content = data.get("content")
        if role == "tool":
            call_id = data.get("tool_call_id")
            if not call_id or not isinstance(call_id, str):
                raise InvalidMessage("a tool message needs a non-empty string", field="tool_call_id")
            if content is None:
                content = ""
            if isinstance(content, list):  # some clients send text parts for tool output
                content = "".join(_text_of_part(p, f"content[{i}]") for i, p in enumerate(content))
            if not isinstance(content, str):
                raise InvalidMessage("tool output must be a string or text parts", field="content")
            block = ToolResultBlock(tool_call_id=call_id, content=content, is_error=bool(data.get("is_error", False)))
            fields["content"] = (block,)
        else:
            blocks: list[Any] = []
            if isinstance(content, str):
                blocks.append(TextBlock(text=content))
            elif isinstance(content, list):
                blocks.extend(_part_from_openai(p, f"content[{i}]") for i, p in enumerate(content))
            elif content is not None:
                raise InvalidMessage(
                    f"expected a string, a list of parts or null, got {type(content).__name__}", field="content"
                )
            calls = data.get("tool_calls") or []
            if calls and role != "assistant":
                raise InvalidMessage("only assistant messages make tool calls", field="tool_calls")
            if not isinstance(calls, list):
                raise InvalidMessage("expected a list", field="tool_calls")
            parsed = [_call_from_openai(c, i) for i, c in enumerate(calls)]
            fields["content"] = _place_calls(blocks, parsed, data.get("tool_call_positions"))
        return cls(**fields)


_MESSAGE_FIELDS = tuple(ChatMessage.model_fields)


def _place_calls(blocks: list[Any], calls: list[ToolCallBlock], positions: Any) -> tuple[Any, ...]:
    """The content of an assistant message: ``blocks`` with ``calls`` after them, or where ``positions`` (what
    :meth:`ChatMessage.to_openai` wrote for calls that did not come last) puts each of them."""
    if positions is None:
        return (*blocks, *calls)
    size = len(blocks) + len(calls)
    if (
        not isinstance(positions, list)
        or len(positions) != len(calls)
        or not all(type(p) is int and 0 <= p < size for p in positions)
        or sorted(set(positions)) != positions
    ):
        raise InvalidMessage(
            f"expected {len(calls)} increasing positions below {size}, one per tool call", field="tool_call_positions"
        )
    placed: list[Any] = []
    rest, called = iter(blocks), iter(calls)
    for index in range(size):
        placed.append(next(called) if index in positions else next(rest))
    return tuple(placed)


def _part_to_openai(block: Any) -> dict[str, Any]:
    if isinstance(block, TextBlock):
        return {"type": "text", "text": block.text}
    if isinstance(block, ImageBlock):
        image: dict[str, Any] = {"url": block.url}
        if block.detail is not None:
            image["detail"] = block.detail
        return {"type": "image_url", "image_url": image}
    if isinstance(block, DocumentBlock):
        file = {
            k: v
            for k, v in (
                ("file_data", block.data),
                ("file_url", block.url),
                ("media_type", block.media_type),
                ("filename", block.title),
            )
            if v is not None
        }
        return {"type": "file", "file": file}
    if isinstance(block, ThinkingBlock):
        part = {"type": "thinking", "thinking": block.thinking}
        if block.signature is not None:
            part["signature"] = block.signature
        return part
    raise AssertionError(f"unexpected block {block!r}")  # pragma: no cover


def _text_of_part(part: Any, where: str) -> str:
    if isinstance(part, Mapping) and part.get("type") == "text" and isinstance(part.get("text"), str):
        return str(part["text"])
    raise InvalidMessage("expected a text part", field=where)


def _part_from_openai(part: Any, where: str) -> Any:
    if not isinstance(part, Mapping):
        raise InvalidMessage("expected a content part object", field=where)
    kind = part.get("type")
    try:
        if kind == "text":
            return TextBlock(text=part["text"])
        if kind == "image_url":
            image = part["image_url"]
            if isinstance(image, str):
                return ImageBlock(url=image)
            return ImageBlock(url=image["url"], detail=image.get("detail"))
        if kind == "file":
            file = part["file"]
            return DocumentBlock(
                data=file.get("file_data"),
                url=file.get("file_url"),
                media_type=file.get("media_type"),
                title=file.get("filename"),
            )
        if kind == "thinking":
            return ThinkingBlock(thinking=part["thinking"], signature=part.get("signature"))
    except KeyError as error:
        raise InvalidMessage(f"missing key {error.args[0]!r}", field=where) from error
    except (TypeError, AttributeError) as error:
        raise InvalidMessage(f"malformed {kind} part", field=where) from error
    except ValidationError as error:
        raise InvalidMessage(error.errors()[0]["msg"], field=f"{where}.{_field_of(error)}") from error
    raise InvalidMessage(f"unknown content part type {kind!r}", field=f"{where}.type")


def _call_from_openai(call: Any, index: int) -> ToolCallBlock:
    where = f"tool_calls[{index}]"
    if not isinstance(call, Mapping):
        raise InvalidMessage("expected a tool call object", field=where)
    function = call.get("function")
    if not isinstance(function, Mapping):
        raise InvalidMessage("missing", field=f"{where}.function")
    raw = function.get("arguments", "{}")
    if isinstance(raw, str):
        try:
            arguments = json.loads(raw) if raw.strip() else {}
        except json.JSONDecodeError as error:
            raise InvalidMessage(f"not valid JSON ({error.msg})", field=f"{where}.function.arguments") from error
    else:
        arguments = raw
    if not isinstance(arguments, Mapping):
        raise InvalidMessage("must encode a JSON object", field=f"{where}.function.arguments")
    call_id, name = call.get("id"), function.get("name")
    if not isinstance(call_id, str) or not call_id:
        raise InvalidMessage("a tool call needs a non-empty string id", field=f"{where}.id")
    if not isinstance(name, str) or not name:
        raise InvalidMessage("a tool call needs a function name", field=f"{where}.function.name")
    return ToolCallBlock(id=call_id, name=name, arguments=dict(arguments))


def messages_from_json(bodies: Iterable[str | bytes], tokens: Iterable[int | None] | None = None) -> list[ChatMessage]:
    """Messages from their stored JSON, each built as :meth:`ChatMessage.model_validate_json` builds it (and
    raising as it does), for a store that reads many at once. With ``tokens`` (the stored counts, one per body,
    ``None`` where unknown), each count is put into its message's memo, so this process never counts it again.

    The garbage collector is paused while they are built: every container made is part of the result, so a
    collection would free nothing, and its passes over the whole heap cost more than the parsing itself (10,000
    agent messages: 250 ms with it, 115 ms without). It is resumed afterwards if it was running.

    Example:
        >>> [m.text for m in messages_from_json(['{"role": "user", "content": [{"type": "text", "text": "hi"}]}'])]
        ['hi']
    """
    from ravi.kernel.tokens import seed_stored_tokens

    running = gc.isenabled()
    gc.disable()
    try:
        messages = [ChatMessage.model_validate_json(body) for body in bodies]
        if tokens is not None:
            for message, count in zip(messages, tokens, strict=True):
                if count is not None:
                    seed_stored_tokens(message, count)
        return messages
    finally:
        if running:
            gc.enable()


def to_openai(messages: Sequence[ChatMessage], *, extras: bool = False) -> list[dict[str, Any]]:
    """Messages as OpenAI-style dicts; ``extras=False`` by default, ready to send to a chat endpoint."""
    return [m.to_openai(extras=extras) for m in messages]


def from_openai(items: Iterable[Mapping[str, Any]]) -> list[ChatMessage]:
    """Messages from OpenAI-style dicts; an invalid one raises ``InvalidMessage`` naming its index and field."""
    out = []
    for i, item in enumerate(items):
        try:
            out.append(ChatMessage.from_openai(item))
        except InvalidMessage as error:
            raise InvalidMessage(error.message.split(": ", 1)[-1], field=f"[{i}].{error.field}") from error
    return out


SUMMARY_KEY = "ravi.summary"
"""Metadata key that marks a summary message, a derived record that stands in a window for the messages it
covers (its value says which); the only message a strategy may add to a window."""


__all__ = [
    "ROLES",
    "SUMMARY_KEY",
    "ChatMessage",
    "ContentBlock",
    "DocumentBlock",
    "FrozenDict",
    "FrozenList",
    "ImageBlock",
    "Role",
    "TextBlock",
    "ThinkingBlock",
    "ToolCallBlock",
    "ToolResultBlock",
    "from_openai",
    "messages_from_json",
    "to_openai",
]
