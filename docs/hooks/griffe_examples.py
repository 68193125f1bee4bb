"""A griffe extension for the API reference: Ravi's docstrings head their doctests ``Example:``, which the Google
style reads as an admonition (Markdown, where ``['hi']`` is a link); as ``Examples:`` they render as code."""

from __future__ import annotations

import re
from typing import Any

import griffe

_HEADING = re.compile(r"^(\s*)Example:\s*$", re.MULTILINE)


class DoctestExamples(griffe.Extension):
    """Read every ``Example:`` section as the Google style's ``Examples:``."""

    def on_object(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = _HEADING.sub(r"\1Examples:", obj.docstring.value)
