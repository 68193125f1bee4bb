"""Who said a recalled turn, and on which day: the label relevant recall puts in front of its text.

A turn recalled from weeks ago sits in the window among today's, and "yesterday" in it means the day before it
was written. So a recalled turn from another day than the request starts with that day (``[8 May 2023]``), and
one whose sender has a name (``ChatMessage.name``) that its text does not already start with, with the name
(``Maya: ``). The label is the window's, never the store's: the turn keeps its id, and the stored message is
untouched.
"""

from __future__ import annotations

from datetime import date

from pydantic import BaseModel

from ravi.kernel.messages import ChatMessage, TextBlock


def day_label(day: date) -> str:
    """``[8 May 2023]``."""
    return f"[{day.day} {day:%B} {day.year}]"


def label(message: ChatMessage, today: date | None) -> str:
    """The label ``message`` gets (``""`` for none): a message with text (not a tool result, not a system
    message) written on another day than ``today`` gets its day, and one with a name its text does not start
    with gets the name."""
    if message.role in ("system", "tool"):
        return ""
    text = next((b.text for b in message.content if isinstance(b, TextBlock) and b.text), None)
    if text is None:
        return ""
    out = ""
    day = message.created_at.date()
    if today is not None and day != today:
        out = day_label(day) + " "
    if message.name and not text.startswith(message.name):
        out += f"{message.name}: "
    return out


def annotated(message: ChatMessage, today: date | None) -> ChatMessage:
    """``message`` with its :func:`label` in front of its first text, or itself when it needs none."""
    prefix = label(message, today)
    return labelled(message, prefix) if prefix else message


def labelled(message: ChatMessage, prefix: str) -> ChatMessage:
    """``message`` with ``prefix`` (its :func:`label`, not empty) in front of its first text."""
    key = f"recall:annotated:{prefix}"
    copy: ChatMessage | None = message.memo.get(key)
    if copy is None:  # made once: the copy keeps its own token counts in its memo
        copy = message.memo[key] = _labelled(message, prefix)
    return copy


def _labelled(message: ChatMessage, prefix: str) -> ChatMessage:
    """The copy, built without checking it again: a label joins checked text (the message's name, a date) to
    checked text, which makes valid text, and the other fields are the message's own, already checked."""
    content = list(message.content)
    first = next(k for k, b in enumerate(content) if isinstance(b, TextBlock) and b.text)
    block = content[first]
    assert isinstance(block, TextBlock)
    content[first] = BaseModel.model_copy(block, update={"text": prefix + block.text})
    copy = BaseModel.model_copy(message, update={"content": tuple(content)})
    copy.__dict__.pop("memo", None)  # a memo of its own: the message's holds its counts, not the copy's
    return copy


__all__ = ["annotated", "day_label", "label", "labelled"]
