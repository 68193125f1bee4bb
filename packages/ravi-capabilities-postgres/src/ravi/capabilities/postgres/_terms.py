"""The terms index of the Postgres history: what a message is indexed under, and how lexemes are written.

Terms come from :func:`ravi.kernel.search.terms`, the tokenizer every store shares. Each lexeme carries a digest
of its session, so the one GIN index over every session finds one session's matches without touching the others'.
"""

from __future__ import annotations

import hashlib
from collections import Counter

from ravi.kernel.messages import ChatMessage
from ravi.kernel.search import message_text, terms

_INDEXED_CHARS = 100_000
_LONGEST_TERM = 200


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
    """The terms a message is indexed under, with how often each occurs: those of its first 100,000 characters
    (a tsvector holds at most 1 MB) up to 200 characters long (longer "words" are blobs, never asked for)."""
    counted = Counter(terms(message_text(message)[:_INDEXED_CHARS]))
    for term in [t for t in counted if len(t) > _LONGEST_TERM]:
        del counted[term]
    return counted


def searchable_terms(scope: str, counted: Counter[str]) -> str:
    """The tsvector text of a message's terms (:func:`message_terms`): each prefixed with the session's digest,
    with as many positions as it occurs (at most 256), so a search can weigh repeated terms."""
    return " ".join(f"{quoted(scope + term)}:{_POSITIONS[min(n, 256)]}" for term, n in counted.items())


__all__ = ["message_terms", "quoted", "searchable_terms", "session_digest"]
