"""JSON text that a jsonb column gives back exactly.

jsonb keeps every number as a PostgreSQL ``numeric`` and prints it without an exponent, keeping the digits
after the decimal point it was given. Python writes a float of 1e16 or more with an exponent (``1e+16``), so
jsonb printed it as ``10000000000000000``, which reads back as an int: a float stored through jsonb came back as
another type. Written in positional notation with a decimal point (``10000000000000000.0``) it reads back as the
same float, since a float's shortest ``repr`` parses back to it. (Negative zero has no ``numeric`` spelling; the
kernel's value checks refuse it.)
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from decimal import Decimal
from typing import Any


def dumps(value: Any, *, ensure_ascii: bool = True) -> str:
    """``value`` (JSON data, already checked) as JSON text whose floats jsonb keeps as floats."""
    if not _has_exponent(value):  # the common case: the standard encoder, in C
        return json.dumps(value, ensure_ascii=ensure_ascii)
    return _encode(value, ensure_ascii)


def _has_exponent(value: Any) -> bool:
    if isinstance(value, float):
        return "e" in repr(value)
    if isinstance(value, Mapping):
        return any(_has_exponent(v) for v in value.values())
    if isinstance(value, list | tuple):
        return any(_has_exponent(v) for v in value)
    return False


def _encode(value: Any, ensure_ascii: bool) -> str:
    if isinstance(value, float):
        return _positional(value)
    if isinstance(value, Mapping):
        items = (f"{json.dumps(k, ensure_ascii=ensure_ascii)}: {_encode(v, ensure_ascii)}" for k, v in value.items())
        return "{" + ", ".join(items) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_encode(v, ensure_ascii) for v in value) + "]"
    return json.dumps(value, ensure_ascii=ensure_ascii)


def _positional(number: float) -> str:
    """The float's shortest digits without an exponent, with a decimal point (``1e+16`` -> ``10000000000000000.0``,
    ``1e-07`` -> ``0.0000001``)."""
    text = repr(number)
    if "e" not in text:
        return text
    text = format(Decimal(text), "f")
    return text if "." in text else text + ".0"
