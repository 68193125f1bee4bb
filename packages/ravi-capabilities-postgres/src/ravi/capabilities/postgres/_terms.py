"""The terms index of the Postgres history: what a message is indexed under, and how lexemes are written.

Terms come from :func:`ravi.kernel.search.terms`, the tokenizer every store shares. Each lexeme carries a digest
of its session, so the one GIN index over every session finds one session's matches without touching the others'.
"""

from __future__ import annotations

import hashlib
from collections import Counter

from ravi.kernel.messages import ChatMessage
from ravi.kernel.search import indexed_terms

_LEXEME_BYTES = 600_000
"""The most bytes of lexemes and positions one row's tsvector is given (Postgres refuses one past 1 MB)."""


def session_digest(agent_id: str, session_id: str) -> str:
    """The prefix of a session's lexemes: 8 hex digits of a digest of ``(agent_id, session_id)``, so the terms
    index finds one session's matches without touching the others' (a collision only costs a filtered row)."""
    return hashlib.sha256(f"{agent_id}\x00{session_id}".encode()).hexdigest()[:8] + ":"


def quoted(lexeme: str) -> str:
    """``lexeme`` quoted as a tsvector or tsquery literal."""
    if "'" in lexeme or "\\" in lexeme:
        return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"
    return "'" + lexeme + "'"


# A term's positions in the tsvector text: ``1``, ``1,2``, ... up to 256 of them, written once.
_POSITIONS = [",".join(map(str, range(1, n + 1))) for n in range(257)]


def message_terms(message: ChatMessage) -> Counter[str]:
    """The terms a message is indexed under, with how often each occurs (:func:`ravi.kernel.search.indexed_terms`,
    the cap every searching store shares)."""
    return indexed_terms(message)


def searchable_terms(scope: str, counted: Counter[str]) -> str:
    """The tsvector text of a message's terms (:func:`message_terms`): each prefixed with the session's digest,
    with as many positions as it occurs (at most 256), so a search can weigh repeated terms. The first terms
    that fit :data:`_LEXEME_BYTES` are kept, so no message can pass the tsvector's 1 MB (a message of long
    non-Latin words would, at 10,000 terms)."""
    parts = []
    size = 0
    overhead = len(scope.encode()) + 8
    for term, n in counted.items():
        positions = min(n, 256)
        size += len(term.encode()) + overhead + 2 * positions
        if size > _LEXEME_BYTES:
            break
        parts.append(f"{quoted(scope + term)}:{_POSITIONS[positions]}")
    return " ".join(parts)


__all__ = ["message_terms", "quoted", "searchable_terms", "session_digest"]
