"""Parsing AGE's agtype text into plain Python values.

AGE returns values as JSON with type annotations: ``{...}::vertex``, ``{...}::edge``, ``[...]::path`` and
``1.5::numeric``. The annotations are removed (outside strings only) and the JSON parsed; vertices and edges
become dicts shaped like Ravi's ``Entity`` and ``Relationship``, paths lists of them. A ``numeric`` comes back
as a :class:`~decimal.Decimal` with every digit AGE printed (a float would keep about 17 of them), including
``NaN`` and the infinities; AGE's own integers and floats (64-bit) come back as ``int`` and ``float``. Only a
value AGE annotates as a vertex or an edge is reshaped: a map that merely has the keys ``id``, ``label`` and
``properties`` (a property's value, a parameter) comes back as it is.

Parameters go the other way (:func:`dumps`): JSON, except that a :class:`~decimal.Decimal` (what a ``numeric``
comes back as) is written as an agtype ``numeric`` literal with its digits as they are (``2.50::numeric``), so it
goes back exactly, never through a float.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from ravi.kernel.errors import InvalidArgument
from ravi.kernel.values import check_json

_ANNOTATIONS = ("::vertex", "::edge", "::path", "::numeric")
_SHAPED = ("::vertex", "::edge")
_MARK = "\x00ravi-graph-element"  # AGE refuses NUL in strings, so no stored value can be this
_NUMERIC = "\x00ravi-numeric"
_ENDS = ",[{:"  # what can come just before a scalar in AGE's output (besides whitespace)


def _strip(text: str) -> str:
    """The JSON of an agtype text: annotations removed, each vertex or edge ``{...}`` wrapped as
    ``[_MARK, {...}]`` so that :func:`_shape` reshapes those and no other map, and each ``numeric`` turned into
    ``[_NUMERIC, "digits"]`` so that :func:`_shape` reads it as a ``Decimal``, not a float."""
    out: list[str] = []
    opened: list[int] = []  # where each open object starts in ``out``
    i, n = 0, len(text)
    in_string = False
    while i < n:
        ch = text[i]
        if in_string:
            out.append(ch)
            if ch == "\\":
                out.append(text[i + 1])
                i += 2
                continue
            if ch == '"':
                in_string = False
            i += 1
            continue
        if ch == '"':
            in_string = True
            out.append(ch)
            i += 1
            continue
        if ch == "{":
            opened.append(len(out))
        elif ch == "}":
            start = opened.pop()
            if text.startswith(_SHAPED, i + 1):
                out.insert(start, f"[{json.dumps(_MARK)},")
                out.append("}]")
                i += 1
                continue
        if ch == ":" and text.startswith("::numeric", i):
            start = len(out)
            while start > 0 and out[start - 1] not in _ENDS and not out[start - 1].isspace():
                start -= 1
            out[start:] = [f"[{json.dumps(_NUMERIC)},{json.dumps(''.join(out[start:]))}]"]
            i += len("::numeric")
            continue
        if ch == ":" and text.startswith("::", i):
            for annotation in _ANNOTATIONS:
                if text.startswith(annotation, i):
                    i += len(annotation)
                    break
            else:
                out.append(ch)
                i += 1
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def _shape(value: Any) -> Any:
    if isinstance(value, list) and len(value) == 2 and value[0] == _NUMERIC:
        return Decimal(value[1])
    if isinstance(value, list) and len(value) == 2 and value[0] == _MARK:
        element = value[1]
        properties = {k: _shape(v) for k, v in (element["properties"] or {}).items()}
        if {"start_id", "end_id"} <= element.keys():
            return {
                "kind": "edge",
                "id": properties.pop("id", element["id"]),
                "type": element["label"],
                "properties": properties,
                "start": element["start_id"],
                "end": element["end_id"],
            }
        return {
            "kind": "vertex",
            "id": properties.pop("id", element["id"]),
            "label": element["label"],
            "properties": properties,
            "graph_id": element["id"],
        }
    if isinstance(value, dict):
        return {k: _shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_shape(v) for v in value]
    return value


def parse(text: str | None) -> Any:
    """The Python value of one agtype text (``None`` for SQL NULL)."""
    if text is None:
        return None
    return _shape(json.loads(_strip(text), parse_float=_float))


def _float(text: str) -> float:
    return float(text)


def _without_decimals(value: Any, where: str) -> Any:
    """``value`` with each ``Decimal`` checked (finite) and replaced by ``0``, for :func:`check_json` to check the
    rest."""
    if isinstance(value, Decimal):
        if not value.is_finite():
            raise InvalidArgument(
                f"{value} cannot be a parameter: NaN and infinities are not kept as numeric values",
                field=where,
                hint="pass a finite Decimal, or None",
            )
        return 0
    if isinstance(value, Mapping):
        return {k: _without_decimals(v, f"{where}.{k}") for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_without_decimals(v, f"{where}[{i}]") for i, v in enumerate(value)]
    return value


def check_params(params: Any, where: str = "params") -> None:
    """``InvalidArgument`` unless ``params`` is JSON every store keeps (``check_json``) or a finite ``Decimal``
    anywhere a number may be."""
    check_json(_without_decimals(params, where), where)


def dumps(value: Any) -> str:
    """The agtype text of a checked parameter value: JSON, with each ``Decimal`` a ``numeric`` literal of its own
    digits."""
    if isinstance(value, Decimal):
        return f"{value}::numeric"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{json.dumps(k, ensure_ascii=False)}: {dumps(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(dumps(v) for v in value) + "]"
    return json.dumps(value, ensure_ascii=False)


__all__ = ["check_params", "dumps", "parse"]
