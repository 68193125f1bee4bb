"""Typed backend options: one pydantic model per backend, for ``ravi.toml``, ``RAVI_*`` variables and code alike.

A backend declares its options as a subclass of :class:`BackendOptions` and names it as its ``Options`` class
attribute. The model holds the constructor's types, documentation and defaults; the registry validates the
options of a configured backend with it before calling the constructor (so ``RAVI_HISTORY__MAX_SIZE=5``, a
string, arrives as the integer 5, and ``5.5`` is refused naming the variable), and the constructor validates its
keyword arguments with it too. The configuration page's tables are generated from these models.

Example:
    >>> from pydantic import Field
    >>> class SQLiteOptions(BackendOptions):
    ...     path: str = Field(":memory:", description="The database file.")
    ...     timeout: float = Field(5.0, gt=0, description="Seconds to wait for a lock.")
    >>> SQLiteOptions.parse({"timeout": "2.5"}).given()
    {'timeout': 2.5}
"""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Mapping
from typing import Any, ClassVar, Self

from pydantic import BaseModel, ConfigDict, ValidationError, ValidationInfo, field_validator
from pydantic_core import PydanticUndefined

from ravi.kernel.env import env_name
from ravi.kernel.errors import ConfigurationError

CODE = "a keyword argument"
"""The origin of an option given in code."""


def _mentions(annotation: Any, wanted: type) -> bool:
    if annotation is wanted:
        return True
    return any(_mentions(arg, wanted) for arg in typing.get_args(annotation))


class BackendOptions(BaseModel):
    """Base of every backend's options model: unknown keys are refused, and values are checked and converted
    (strings from variables become numbers, booleans and durations; ``true`` is never taken for a number).

    Attributes:
        code_only: Options that only code can give (a client object, a callable): the configuration page marks
            them, and a configuration that sets one is refused.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)

    code_only: ClassVar[frozenset[str]] = frozenset()

    @field_validator("*", mode="before")
    @classmethod
    def _checked_as_given(cls, value: Any, info: ValidationInfo) -> Any:
        name = info.field_name or ""
        field = cls.model_fields[name]
        if isinstance(value, bool) and not _mentions(field.annotation, bool):
            raise ValueError("expected a number or text, not true/false")
        if (field.alias or name) in cls.code_only and isinstance(value, str | int | float):
            raise ValueError("this option is an object given in code, not a value of the configuration")
        return value

    @classmethod
    def parse(
        cls,
        options: Mapping[str, Any],
        *,
        origins: Mapping[str, str] | None = None,
        where: str | None = None,
        kind: str | None = None,
        strict: bool = False,
    ) -> Self:
        """The options validated: ``options`` from configuration checked and converted (text from a variable
        becomes the number, boolean or duration the option takes).

        Args:
            options: Option name to value.
            origins: Where each option came from (``RAVI_HISTORY__DSN``, ``ravi.toml``), named in errors.
            where: What the options are for, in errors (``the history backend 'postgres'``).
            kind: The store kind, to name the ``[kind]`` table and ``RAVI_<KIND>__<KEY>`` variable of a missing
                option.
            strict: Take each value only as the type it has (keyword arguments in code): ``"10"`` is not a number.

        Raises:
            ConfigurationError: one line naming every bad option, where it came from and what is expected.
        """
        try:
            return cls.model_validate(dict(options), strict=strict)
        except ValidationError as error:
            raise ConfigurationError(
                cls._describe(error, origins or {}, where or cls.__name__, kind), hint=cls._hint(error, kind)
            ) from None

    @classmethod
    def check(cls, **options: Any) -> Self:
        """The keyword arguments of a constructor, validated strictly: each value must have the option's type
        (see :meth:`parse`)."""
        where = f"{cls.__name__.removesuffix('Options')} options"
        return cls.parse(options, origins=dict.fromkeys(options, CODE), where=where, strict=True)

    def given(self) -> dict[str, Any]:
        """The options that were set, by option name (defaults left out, so the constructor's own apply)."""
        fields = type(self).model_fields
        return {fields[name].alias or name: getattr(self, name) for name in self.model_fields_set}

    @classmethod
    def option_names(cls) -> list[str]:
        """Every option of the backend, by the name a configuration uses, in declaration order (a field named
        ``schema_`` to keep clear of pydantic's own names is the option ``schema``)."""
        return [field.alias or name for name, field in cls.model_fields.items()]

    @classmethod
    def required(cls) -> list[str]:
        """The options without a default."""
        return [
            field.alias or name
            for name, field in cls.model_fields.items()
            if field.default is PydanticUndefined and field.default_factory is None
        ]

    @classmethod
    def _describe(cls, error: ValidationError, origins: Mapping[str, str], where: str, kind: str | None) -> str:
        problems: list[str] = []
        errors = error.errors(include_url=False)
        tops = [str(e["loc"][0]) if e["loc"] else "" for e in errors]
        seen: set[str] = set()
        for e, top in zip(errors, tops, strict=True):
            if top and top in seen:
                continue
            seen.add(top)
            origin = f" (from {origins[top]})" if top in origins else ""
            message = e["msg"].removeprefix("Value error, ")
            if tops.count(top) > 1 and len(e["loc"]) > 1:  # one per member of a union: name the union once
                fields = {f.alias or n: f for n, f in cls.model_fields.items()}
                message = f"expected {describe_type(fields[top].annotation)}" if top in fields else message
            if not top:  # a rule between options
                problems.append(message)
            elif e["type"] == "missing":
                problems.append(f"needs {top}")
            elif e["type"] == "extra_forbidden":
                known = ", ".join(cls.option_names()) or "none"
                close = difflib.get_close_matches(top, cls.option_names(), n=1)
                guess = f"; did you mean {close[0]!r}?" if close else ""
                problems.append(f"{top}{origin} is not one of its options ({known}){guess}")
            else:
                problems.append(f"{top} = {e['input']!r}{origin}: {message}")
        return f"{where}: " + "; ".join(problems)

    @classmethod
    def _hint(cls, error: ValidationError, kind: str | None) -> str | None:
        missing = [str(e["loc"][0]) for e in error.errors(include_url=False) if e["type"] == "missing" and e["loc"]]
        if missing and kind:
            keys = ", ".join(f"{k} (or {env_name(f'{kind}__{k}')})" for k in missing)
            return f"set {keys} in the [{kind}] table of ravi.toml"
        if any(e["type"] == "extra_forbidden" for e in error.errors(include_url=False)):
            return "remove it, or choose the backend it belongs to"
        return None


class NoOptions(BackendOptions):
    """The options of a backend that takes none (the in-memory stores): any option is refused, naming it."""


def options_model(factory: Any) -> type[BackendOptions] | None:
    """The options model a backend factory declares as its ``Options`` attribute, or ``None``."""
    model = getattr(factory, "Options", None)
    if isinstance(model, type) and issubclass(model, BackendOptions):
        return model
    return None


_PLAIN = {int: "integer", float: "number", str: "text", bool: "true/false", type(None): "none"}


def describe_type(annotation: Any) -> str:
    """A short, readable name of an option's type: ``integer``, ``number or none``, ``'path' | 'auto'``."""
    if annotation in _PLAIN:
        return _PLAIN[annotation]
    if annotation is Any:
        return "object"
    args = typing.get_args(annotation)
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(describe_type(a) for a in args)
    if origin is typing.Literal:
        return " | ".join(repr(a) for a in args)
    if origin is not None:
        inner = ", ".join(describe_type(a) for a in args)
        return f"{getattr(origin, '__name__', str(origin))}[{inner}]"
    return getattr(annotation, "__name__", str(annotation))


__all__ = ["CODE", "BackendOptions", "NoOptions", "describe_type", "options_model"]
