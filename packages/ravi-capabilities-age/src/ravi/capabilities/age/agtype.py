"""Parsing AGE's agtype text into plain Python values.

AGE returns values as JSON with type annotations: ``{...}::vertex``, ``{...}::edge``, ``[...]::path`` and
``1.5::numeric``. The annotations are removed (outside strings only) and the JSON parsed; vertices and edges
become dicts shaped like Ravi's ``Entity`` and ``Relationship``, paths lists of them.
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

_ANNOTATIONS = ("::vertex", "::edge", "::path", "::numeric")


def _strip(text: str) -> str:
    out: list[str] = []
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
    if isinstance(value, dict):
        if {"id", "label", "properties"} <= value.keys():
            properties = dict(value["properties"] or {})
            if {"start_id", "end_id"} <= value.keys():
                return {
                    "kind": "edge",
                    "id": properties.pop("id", value["id"]),
                    "type": value["label"],
                    "properties": properties,
                    "start": value["start_id"],
                    "end": value["end_id"],
                }
            return {
                "kind": "vertex",
                "id": properties.pop("id", value["id"]),
                "label": value["label"],
                "properties": properties,
                "graph_id": value["id"],
            }
        return {k: _shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_shape(v) for v in value]
    return value


def parse(text: str | None) -> Any:
    """The Python value of one agtype text (``None`` for SQL NULL)."""
    if text is None:
        return None
    return _shape(json.loads(_strip(text), parse_float=_float))


def _float(text: str) -> float | Decimal:
    return float(text)


__all__ = ["parse"]
