"""The identity of everything derived from a transcript: its session and the session's generation.

A session is ``(agent_id, session_id)``. Its **generation** is an opaque token the history store keeps with the
session and replaces whenever messages are removed or renumbered (``clear``, ``clear_run``, a popped message):
a token is never used twice for the same session, even after the session expired or was forgotten. Every record
derived from a transcript (a summary, a terms index, embedding units, a cached window, running totals, recall
state) is kept under the :class:`Scope` it was derived in, so a record of another generation is never read: a
new conversation in a cleared session starts with nothing derived from the old one, even when it reuses the old
message ids.

Example:
    >>> a = Scope("a\\x1fb", "c", "g1")
    >>> b = Scope("a", "b\\x1fc", "g1")
    >>> a.key() == b.key()
    False
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass

from ravi.kernel.errors import InvalidArgument
from ravi.kernel.values import check_id, check_scope, check_text


def new_generation() -> str:
    """A fresh generation token (32 hex digits), never the same twice."""
    return uuid.uuid4().hex


@dataclass(frozen=True)
class Scope:
    """Whose transcript a derived record comes from, and from which generation of it.

    Attributes:
        agent_id, session_id: The session.
        generation: The session's generation when the record was derived (``None`` when the history store does
            not track generations; such records are then only as fresh as their own keys make them).
    """

    agent_id: str
    session_id: str
    generation: str | None = None

    def __post_init__(self) -> None:
        check_scope(agent_id=self.agent_id, session_id=self.session_id)
        if self.generation is not None:
            if not isinstance(self.generation, str):
                raise InvalidArgument(f"generation must be a string or None, got {type(self.generation).__name__}")
            check_text(self.generation, "generation")
            check_id(self.generation, "generation")

    def key(self) -> str:
        """An injective text encoding of the whole scope (a JSON array): two different scopes never share a key,
        whatever characters their ids hold."""
        return json.dumps([self.agent_id, self.session_id, self.generation], ensure_ascii=False)

    def session_key(self) -> str:
        """An injective text encoding of the session alone, ``(agent_id, session_id)`` (a JSON array)."""
        return json.dumps([self.agent_id, self.session_id], ensure_ascii=False)


__all__ = ["Scope", "new_generation"]
