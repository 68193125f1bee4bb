"""Who said a recalled turn, and on which day: the label relevant recall puts in front of its text.

A turn recalled from weeks ago sits in the window among today's, and "yesterday" in it means the day before it
was written. So a recalled turn from another day than the request starts with that day (``[8 May 2023]``), and
one whose sender has a name (``ChatMessage.name``) that its text does not already start with, with the name
(``Maya: ``). The label is the window's, never the store's: the turn keeps its id, and the stored message is
untouched.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date

from ravi.kernel.messages import ChatMessage, TextBlock


def day_label(day: date) -> str:
    """``[8 May 2023]``."""
    return f"[{day.day} {day:%B} {day.year}]"


def annotated(message: ChatMessage, today: date | None) -> ChatMessage:
    """``message`` with its label, or itself when it needs none: a message with text (not a tool result, not a
    system message) written on another day than ``today``, or with a name its text does not start with."""
    if message.role in ("system", "tool"):
        return message
    first = next((k for k, b in enumerate(message.content) if isinstance(b, TextBlock) and b.text), None)
    if first is None:
        return message
    block = message.content[first]
    assert isinstance(block, TextBlock)
    label = ""
    day = message.created_at.date()
    if today is not None and day != today:
        label = day_label(day) + " "
    if message.name and not block.text.startswith(message.name):
        label += f"{message.name}: "
    if not label:
        return message
    content = list(message.content)
    content[first] = TextBlock(text=label + block.text)
    return message.model_copy(update={"content": tuple(content)})


def annotate_units(units: Sequence[Sequence[ChatMessage]], today: date | None) -> list[tuple[ChatMessage, ...]]:
    """Each unit with its messages labelled (:func:`annotated`)."""
    return [tuple(annotated(m, today) for m in unit) for unit in units]


__all__ = ["annotate_units", "annotated", "day_label"]
