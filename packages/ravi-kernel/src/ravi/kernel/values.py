"""The checks every store applies to what it is given, so a value is stored exactly or refused.

A backend that stores JSON, text or numbers must give back exactly what it was given. These checks refuse, up
front and with :class:`~ravi.kernel.errors.InvalidArgument`, every value some backend would change or choke on:

* text that is not valid Unicode (lone surrogates cannot be encoded as UTF-8, so no server can keep them);
* ``NaN`` and infinities (JSON has no spelling for them), and negative zero (PostgreSQL's jsonb keeps numbers
  as decimals, which have no negative zero: ``-0.0`` came back as ``0.0``);
* integers of more than :data:`MAX_INT_DIGITS` digits (Python writes and reads no longer ones as JSON text);
* JSON nested deeper than :data:`MAX_DEPTH` (parsers refuse deep documents when reading them back, so a
  deep value would be accepted and then make its whole record unreadable);
* mapping keys that are not strings, and values that are not JSON (sets, bytes, objects);
* a bare string where a sequence of ids or titles is expected (``delete("v1")`` must not mean ``"v", "1"``);
* ids (of agents, sessions, runs, messages, documents, entities, tasks, collections...) longer than
  :data:`MAX_ID_BYTES` UTF-8 bytes (PostgreSQL indexes no longer keys), or holding a NUL (PostgreSQL keeps none
  in text);
* TTLs that are not positive, not finite, or longer than :data:`MAX_TTL_SECONDS`.

Example:
    >>> check_json({"a": [1, 2.5, None]}, "metadata")
    >>> check_json({"a": float("nan")}, "metadata")
    Traceback (most recent call last):
    ...
    ravi.kernel.errors.InvalidArgument: metadata.a: NaN and infinities cannot be stored (JSON has no spelling for them)
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any, ClassVar, NoReturn, Self, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from ravi.kernel.errors import ConfigurationError, InvalidArgument

T = TypeVar("T")

MAX_DEPTH = 64
"""How deeply JSON values (metadata, state, properties, tool arguments) may nest."""

MAX_INT_DIGITS = 4300
"""The most decimal digits of an integer in JSON values: Python converts no longer integer to or from text by
default (``sys.get_int_max_str_digits``), so ``json.dumps`` raised a bare ``ValueError`` writing one, and a store
that kept one could not read it back."""

_INT_LIMIT = 10**MAX_INT_DIGITS

MAX_ID_BYTES = 512
"""The most UTF-8 bytes of an id: an agent, session, run, message, memory, document, entity, relationship, task,
conversation or span id, a namespace, a collection, a generation or a model name. PostgreSQL indexes at most
2,704 bytes of a key, and its stores index up to four ids together (a summary's agent, session, generation and
span): four ids of 512 bytes, with the bytes that frame them, leave room under that (decision 95)."""

MAX_TTL_SECONDS = 100 * 365 * 24 * 3600
"""The longest TTL any store accepts (about 100 years); longer ones cannot be held by every server."""


def check_text(value: str, where: str) -> None:
    """``InvalidArgument`` unless ``value`` is valid Unicode text (no lone surrogates)."""
    if value.isascii():
        return
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as error:
        raise InvalidArgument(
            f"text holds a lone surrogate at position {error.start}, which no store can keep",
            field=where,
            hint="decode bytes with errors='replace' (or fix the producer) before storing",
        ) from None


def check_id(value: str, name: str) -> None:
    """``InvalidArgument`` naming ``name`` unless ``value`` (a string) holds at most :data:`MAX_ID_BYTES` UTF-8
    bytes, which every store can index, and no NUL character, which PostgreSQL keeps in no text (it refused such an
    id, even to read by, while the in-memory and Redis stores kept it)."""
    if "\x00" in value:
        raise InvalidArgument(
            f"an id cannot hold a NUL character (at position {value.index(chr(0))}): PostgreSQL keeps none in text",
            field=name,
            hint="remove it, or use a digest of the id",
        )
    if len(value) * 4 <= MAX_ID_BYTES:  # no character takes more than 4 bytes: the common case encodes nothing
        return
    size = len(value.encode("utf-8", "surrogatepass"))
    if size > MAX_ID_BYTES:
        raise InvalidArgument(
            f"an id may hold at most {MAX_ID_BYTES} UTF-8 bytes (MAX_ID_BYTES), this one has {size}",
            field=name,
            hint="use a shorter id, or a digest of a long one",
        )


def check_json(value: Any, where: str, *, depth: int = 0) -> None:
    """``InvalidArgument`` unless ``value`` is JSON that every store keeps exactly (see the module docs)."""
    if value is None or isinstance(value, bool):
        return
    if isinstance(value, int):
        if not -_INT_LIMIT < value < _INT_LIMIT:
            raise InvalidArgument(
                f"an integer of more than {MAX_INT_DIGITS} digits cannot be stored (JSON text in Python holds no more)",
                field=where,
                hint="store it as a string",
            )
        return
    if isinstance(value, str):
        check_text(value, where)
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidArgument("NaN and infinities cannot be stored (JSON has no spelling for them)", field=where)
        if value == 0.0 and math.copysign(1.0, value) < 0:
            raise InvalidArgument(
                "negative zero cannot be stored (a jsonb column keeps it as 0)", field=where, hint="store 0.0"
            )
    elif isinstance(value, Mapping):
        if depth >= MAX_DEPTH:
            raise InvalidArgument(f"nested deeper than {MAX_DEPTH} levels", field=where, hint="flatten the value")
        for key, item in value.items():
            if not isinstance(key, str):
                raise InvalidArgument(f"keys must be strings, got {type(key).__name__} {key!r}", field=where)
            check_text(key, f"{where} key")
            check_json(item, f"{where}.{key}", depth=depth + 1)
    elif isinstance(value, list | tuple):
        if depth >= MAX_DEPTH:
            raise InvalidArgument(f"nested deeper than {MAX_DEPTH} levels", field=where, hint="flatten the value")
        for i, item in enumerate(value):
            check_json(item, f"{where}[{i}]", depth=depth + 1)
    else:
        raise InvalidArgument(f"{type(value).__name__} is not a JSON value", field=where)


_FIELDS: dict[type[BaseModel], tuple[str, ...]] = {}
"""The field names of each model class :func:`check_model` has seen."""


def check_model(model: BaseModel, where: str = "") -> None:
    """Check every text and JSON value a pydantic model holds (its own fields and nested models')."""
    cls = type(model)
    names = _FIELDS.get(cls)
    if names is None:
        names = _FIELDS[cls] = tuple(cls.model_fields)
    fields = model.__dict__
    for name in names:
        value = fields[name]
        if isinstance(value, str):
            if not value.isascii():  # ASCII is always valid text: the common case builds no path
                check_text(value, f"{where}.{name}" if where else name)
        elif isinstance(value, BaseModel):
            check_model(value, f"{where}.{name}" if where else name)
        elif isinstance(value, Mapping):
            if value:
                check_json(value, f"{where}.{name}" if where else name)
        elif isinstance(value, tuple) and value and isinstance(value[0], BaseModel):
            path = f"{where}.{name}" if where else name
            for i, item in enumerate(value):
                check_model(item, f"{path}[{i}]")


ModelT = TypeVar("ModelT", bound=BaseModel)


def rebuilt(model: ModelT, update: Mapping[str, Any]) -> ModelT:
    """``model`` with ``update`` applied, built by its constructor: checked, and read-only all the way down, as a
    new one is (pydantic's own ``model_copy`` keeps the update's values as they were given, unchecked)."""
    data = {name: getattr(model, name) for name in type(model).model_fields}
    data.update(update)
    return type(model)(**data)


def refuse_change(value: BaseModel, name: str) -> NoReturn:
    """What setting or deleting a field of a frozen kernel value raises: ``AttributeError``, as Python's own
    frozen dataclasses do (pydantic's would be a ``ValidationError``, which reads as bad input)."""
    raise AttributeError(
        f"{type(value).__name__} is immutable: {name!r} cannot change; build a new one with "
        f"model_copy(update={{{name!r}: ...}})"
    )


class Value(BaseModel):
    """Base of the kernel's frozen value types (documents, entities, tasks, ...).

    Building one with bad input raises :class:`~ravi.kernel.errors.InvalidArgument` naming the field, never a
    pydantic ``ValidationError``; text and JSON fields are checked with :func:`check_model`. Setting or
    deleting a field raises ``AttributeError`` (:func:`refuse_change`).
    """

    model_config = ConfigDict(frozen=True, allow_inf_nan=False)

    ID_FIELDS: ClassVar[tuple[str, ...]] = ()
    """The fields that hold ids, which a store indexes: :func:`check_items` refuses an item whose id is longer
    than :data:`MAX_ID_BYTES`. A value read back from a store is not checked, so what was kept stays readable."""

    def __setattr__(self, name: str, value: Any) -> NoReturn:
        refuse_change(self, name)

    def __delattr__(self, name: str) -> NoReturn:
        refuse_change(self, name)

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as error:
            raise invalid(error, type(self).__name__) from error
        check_model(self, type(self).__name__)

    # Values nested in a value are built by pydantic-core alone, without this ``__init__`` (as for pydantic's
    # own): the outermost call checks the whole tree once, instead of validating each nested value twice.
    __init__.__pydantic_base_init__ = True  # type: ignore[attr-defined]

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """A copy with ``update`` applied, built as the constructor builds (:func:`rebuilt`)."""
        return rebuilt(self, update) if update else super().model_copy(deep=deep)

    @classmethod
    def model_validate(cls, obj: Any, **options: Any) -> Self:
        """Build from a dict (or object) with the same checks and errors as the constructor."""
        try:
            model = super().model_validate(obj, **options)
        except ValidationError as error:
            raise invalid(error, cls.__name__) from error
        check_model(model, cls.__name__)
        return model

    @classmethod
    def model_validate_json(cls, json_data: str | bytes | bytearray, **options: Any) -> Self:
        """Build from JSON with the same checks and errors as the constructor."""
        try:
            model = super().model_validate_json(json_data, **options)
        except ValidationError as error:
            raise invalid(error, cls.__name__) from error
        check_model(model, cls.__name__)
        return model


CONTENT_TYPES = frozenset({"text", "image", "document", "thinking", "tool_call", "tool_result"})
"""The ``type`` of each content block (``ravi.kernel.messages``): pydantic puts it in an error's location after
the index of a block it chose by its type."""


def error_path(error: ValidationError) -> str:
    """Where the first problem of a pydantic ``ValidationError`` lies, as the checks name fields
    (``content[0].text``): indexes in brackets, and without the block type pydantic adds after a block's index."""
    path = ""
    loc = error.errors()[0]["loc"]
    for i, part in enumerate(loc):
        if isinstance(part, int):
            path += f"[{part}]"
        elif not (i >= 2 and loc[i - 2] == "content" and isinstance(loc[i - 1], int) and part in CONTENT_TYPES):
            path += f".{part}" if path else str(part)
    return path


def invalid(error: ValidationError, owner: str) -> InvalidArgument:
    """The first problem of a pydantic ``ValidationError`` as an ``InvalidArgument`` naming its field."""
    path = error_path(error)
    return InvalidArgument(error.errors()[0]["msg"], field=f"{owner}.{path}" if path else owner)


def json_copy(value: Mapping[str, Any], what: str = "state") -> dict[str, Any]:
    """A checked deep copy of a JSON object, holding exactly what a database gives back (tuples become lists, and
    every mapping a dict)."""
    if not isinstance(value, Mapping):
        raise InvalidArgument(f"{what} must be a mapping, got {type(value).__name__}")
    check_json(value, what)
    # thawed first: json.dumps takes dicts only, and a MappingProxyType or a UserDict passed check_json
    copied = json.loads(json.dumps(thaw(value), allow_nan=False))
    if not isinstance(copied, dict):  # pragma: no cover - a mapping always dumps to an object
        raise InvalidArgument(f"{what} must be a JSON object")
    return copied


def json_object(raw: str) -> dict[str, Any] | None:
    """``raw`` read as a JSON object every store keeps (:func:`check_json`), or ``None``: text that is not JSON, JSON
    that is not an object, or an object no store keeps (NaN, negative zero, nesting past :data:`MAX_DEPTH`), such as
    the arguments of a tool call a model wrote, which are then kept as the text itself.

    Example:
        >>> json_object('{"q": 1}'), json_object('{"q": NaN}'), json_object('{"q": ')
        ({'q': 1}, None, None)
    """
    try:
        parsed = json.loads(raw)
        if isinstance(parsed, dict):
            check_json(parsed, "arguments")
            return parsed
    except (ValueError, RecursionError):  # InvalidArgument is a ValueError; deep JSON, a RecursionError
        pass
    return None


def thaw(value: Any) -> Any:
    """Plain, mutable JSON data (dicts and lists) from a read-only value, such as a message's metadata, for
    libraries that expect it. The value itself is not changed.

    Example:
        >>> from ravi.kernel.messages import ChatMessage
        >>> thaw(ChatMessage.user("hi", metadata={"tags": ["a"]}).metadata)
        {'tags': ['a']}
    """
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [thaw(v) for v in value]
    return value


def check_scope(**values: object) -> None:
    """``InvalidArgument`` unless every value is a non-empty string of valid text (``run_id`` may be empty) of at
    most :data:`MAX_ID_BYTES` UTF-8 bytes, without a NUL (:func:`check_id`)."""
    for name, value in values.items():
        if not isinstance(value, str):
            raise InvalidArgument(f"{name} must be a string, got {type(value).__name__}")
        if not value and name != "run_id":
            raise InvalidArgument(f"{name} must not be empty")
        check_text(value, name)
        check_id(value, name)


def check_memory(
    agent_id: str, content: str, namespace: str, ttl: timedelta | float | None, metadata: Mapping[str, Any] | None
) -> tuple[float | None, dict[str, Any]]:
    """Check what ``LongTermMemory.save`` was given: ``(ttl in seconds or None, metadata as JSON)``.

    Raises:
        InvalidArgument: an empty scope, content that is not valid text, a ttl no store can hold, or metadata
            that is not JSON.
    """
    check_scope(agent_id=agent_id, namespace=namespace)
    if not isinstance(content, str):
        raise InvalidArgument(f"content must be a string, got {type(content).__name__}")
    check_text(content, "content")
    return ttl_seconds(ttl), json_copy(metadata or {}, "metadata")


def check_span(span_id: object) -> str:
    """``span_id`` (a summary's key) if it is a non-empty string of valid text of at most :data:`MAX_ID_BYTES` UTF-8
    bytes, else ``InvalidArgument``."""
    if not isinstance(span_id, str) or not span_id:
        raise InvalidArgument("span_id must be a non-empty string")
    check_text(span_id, "span_id")
    check_id(span_id, "span_id")
    return span_id


def check_summary(text: object) -> str:
    """``text`` if it is a string of valid text (a summary to keep), else ``InvalidArgument``."""
    if not isinstance(text, str):
        raise InvalidArgument(f"a summary must be a string, got {type(text).__name__}")
    check_text(text, "summary")
    return text


MAX_COUNT = 2**63 - 1
"""The largest limit, offset or count a store is handed: what a server's 64-bit integer holds. No store holds
more than this, so a larger one asks for the same thing: the checks below give it back as this (Postgres and
Redis refused it while the in-memory store took it)."""


def check_page(limit: int | None, offset: int) -> tuple[int | None, int]:
    """``(limit, offset)`` capped at :data:`MAX_COUNT`; ``InvalidArgument`` unless ``limit`` is ``None`` or >= 0
    and ``offset`` >= 0 (both integers)."""
    if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 0):
        raise InvalidArgument(f"limit must be None or an integer >= 0, got {limit!r}")
    if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
        raise InvalidArgument(f"offset must be an integer >= 0, got {offset!r}")
    return (None if limit is None else min(limit, MAX_COUNT)), min(offset, MAX_COUNT)


def check_count(value: int, what: str) -> int:
    """``value`` capped at :data:`MAX_COUNT`; ``InvalidArgument`` unless it is an integer >= 0 (not ``None``, a
    bool or a float)."""
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise InvalidArgument(f"must be an integer >= 0, got {value!r}", field=what)
    return min(value, MAX_COUNT)


def check_instance(value: object, kind: type, message: str, hint: str) -> None:
    """``ConfigurationError`` (``message`` followed by what ``value`` is, and ``hint``) unless ``value`` is ``None``
    or an instance of ``kind`` (a runtime-checkable Protocol: a class has its instances' methods, so it passes the
    protocol's check, and is refused)."""
    if value is not None and (isinstance(value, type) or not isinstance(value, kind)):
        what = f"the class {value.__name__}" if isinstance(value, type) else type(value).__name__
        raise ConfigurationError(f"{message}, got {what}", hint=hint)


def check_share(value: object, what: str) -> float:
    """``value`` as a float, else ``InvalidArgument`` naming ``what``, unless it is a real number in (0, 1] (a bool
    or a string is refused)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 1:
        raise InvalidArgument(f"must be a number in (0, 1], got {value!r}", field=what)
    return float(value)


def check_items(items: object, kind: type[T], what: str) -> list[T]:
    """``items`` as a list of ``kind`` objects, else ``InvalidArgument`` naming ``what`` (a bare string, ``None``
    or anything but a sequence is refused, and so is the first item of another type, or of a :class:`Value` one
    whose id (a field its ``ID_FIELDS`` names) is longer than :data:`MAX_ID_BYTES`)."""
    if isinstance(items, str | bytes) or not isinstance(items, Sequence):
        raise InvalidArgument(
            f"{what} must be a sequence of {kind.__name__}, got {type(items).__name__}",
            hint=f"pass a list, for example [{kind.__name__}(...)]",
        )
    ids: tuple[str, ...] = getattr(kind, "ID_FIELDS", ())
    for i, item in enumerate(items):
        if not isinstance(item, kind):
            raise InvalidArgument(f"{what}[{i}] is a {type(item).__name__}, not a {kind.__name__}")
        for name in ids:
            check_id(getattr(item, name), f"{what}[{i}].{name}")
    return list(items)


def check_ids(ids: object, what: str = "ids") -> list[str]:
    """``ids`` as a list of non-empty strings of at most :data:`MAX_ID_BYTES` UTF-8 bytes; a bare string is refused
    (it is not a list of ids)."""
    if isinstance(ids, str | bytes) or not isinstance(ids, Sequence | set | frozenset):
        raise InvalidArgument(
            f"{what} must be a sequence of strings, got {type(ids).__name__}",
            hint=f"pass a list, for example [{ids!r}]" if isinstance(ids, str) else None,
        )
    out = list(ids)
    for i, item in enumerate(out):
        if not isinstance(item, str) or not item:
            raise InvalidArgument(f"{what}[{i}] must be a non-empty string, got {item!r}")
        check_text(item, f"{what}[{i}]")
        check_id(item, f"{what}[{i}]")
    return out


FLOAT32_TINY = 1.1754943508222875e-38
"""The smallest normal float32."""

FLOAT32_MAX = 3.4028234663852886e38
"""The largest float32."""


def check_length(squared_length: float, what: str) -> None:
    """``InvalidArgument`` unless a vector's squared length (computed in float64) is one float32 arithmetic can
    hold: stores compare embeddings in float32, where a longer vector's length overflows (it scored 0.0 against
    its own direction) and a shorter one's underflows to a zero vector."""
    if not FLOAT32_TINY <= squared_length <= FLOAT32_MAX:
        raise InvalidArgument(
            f"{what}: its squared length {squared_length:.3g} is outside float32's range "
            f"({FLOAT32_TINY:.3g} to {FLOAT32_MAX:.3g}), where cosine similarity cannot be computed",
            hint="scale the vector (cosine similarity ignores length), or give a non-zero one",
        )


MAX_DIMENSIONS = 16_000
"""The most dimensions of an embedding (a document's, a query's, an embedding model's): what pgvector keeps. A
wider one was kept in memory and in Redis and refused by Postgres; every store refuses it."""


def check_dimensions(size: int, what: str) -> None:
    """``InvalidArgument`` unless an embedding of ``size`` dimensions is one every store keeps
    (:data:`MAX_DIMENSIONS`)."""
    if size > MAX_DIMENSIONS:
        raise InvalidArgument(
            f"{what} has {size} dimensions; every store keeps at most {MAX_DIMENSIONS} (pgvector's limit)",
            hint="use a model of fewer dimensions, or shorten its embeddings (many models allow it)",
        )


def check_vector(values: object, what: str = "query_embedding") -> list[float]:
    """``values`` as a list of finite floats; a string, a non-number, NaN or more than :data:`MAX_DIMENSIONS`
    numbers is refused with ``InvalidArgument``."""
    if isinstance(values, str | bytes) or (not isinstance(values, Sequence) and not hasattr(values, "tolist")):
        raise InvalidArgument(f"{what} must be a sequence of numbers, got {type(values).__name__}")
    items = values.tolist() if hasattr(values, "tolist") else list(values)  # type: ignore[call-overload]
    if not isinstance(items, list):
        raise InvalidArgument(f"{what} must be a one-dimensional sequence of numbers")
    check_dimensions(len(items), what)
    out = []
    for i, item in enumerate(items):
        if isinstance(item, bool) or not isinstance(item, int | float):
            raise InvalidArgument(f"must be a number, got {type(item).__name__}", field=f"{what}[{i}]")
        number = float(item) if abs(item) < 2**1000 else math.inf
        if not math.isfinite(number):
            raise InvalidArgument("must be finite", field=f"{what}[{i}]")
        out.append(number)
    return out


def ttl_seconds(ttl: timedelta | float | None, *, name: str = "ttl") -> float | None:
    """A TTL in seconds (``None`` stays ``None``); ``InvalidArgument`` unless positive, finite and at most
    :data:`MAX_TTL_SECONDS`, naming the parameter ``name`` (``expires_in`` for a presigned URL's lifetime).
    Checked before any write, so a store never commits data it then cannot expire."""
    if ttl is None:
        return None
    if isinstance(ttl, timedelta):
        seconds = ttl.total_seconds()
    elif isinstance(ttl, int | float) and not isinstance(ttl, bool):
        seconds = float(ttl) if abs(ttl) < 2**1000 else math.inf
    else:
        raise InvalidArgument(f"{name} must be seconds (a number) or a timedelta, got {type(ttl).__name__}")
    if not math.isfinite(seconds) or not seconds > 0:
        raise InvalidArgument(f"{name} must be positive and finite, got {ttl!r:.40}")
    if seconds > MAX_TTL_SECONDS:
        raise InvalidArgument(
            f"{name} must be at most {MAX_TTL_SECONDS} seconds (about 100 years), got {ttl!r:.40}",
            hint=f"pass {name}=None to keep the value until it is deleted" if name == "ttl" else None,
        )
    return seconds


__all__ = [
    "check_instance",
    "thaw",
    "json_object",
    "refuse_change",
    "MAX_DEPTH",
    "MAX_DIMENSIONS",
    "MAX_ID_BYTES",
    "MAX_INT_DIGITS",
    "Value",
    "invalid",
    "MAX_COUNT",
    "MAX_TTL_SECONDS",
    "check_count",
    "check_dimensions",
    "check_id",
    "check_ids",
    "check_length",
    "check_json",
    "check_memory",
    "check_model",
    "check_page",
    "check_share",
    "check_scope",
    "check_span",
    "check_summary",
    "check_text",
    "check_vector",
    "json_copy",
    "ttl_seconds",
]
