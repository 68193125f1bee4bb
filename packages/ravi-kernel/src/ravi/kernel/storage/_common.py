"""What the storage modules share: the JSON and filter types, ids and clocks, the frozen configuration."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from pydantic import ConfigDict

_FROZEN = ConfigDict(frozen=True, allow_inf_nan=False)

JSON = Any
"""A JSON-compatible value: dict, list, str, int, float, bool or None."""

Filter = Mapping[str, JSON]
"""A metadata filter: every key must equal the given value (a list value means "any of these")."""


def _new_id() -> str:
    return uuid.uuid4().hex


def _now() -> datetime:
    return datetime.now(UTC)


__all__ = ["JSON", "Filter"]
