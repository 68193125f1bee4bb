"""Forget: the optional ability of a store to erase what it holds for an agent or one of its sessions.

Privacy requests ("erase this person's data") need every store Ravi writes to to give up what it keeps under a
scope. A store that can do so implements :class:`Forgetter`; ``Stores.forget`` (in ``ravi-agents``) calls it on
every configured store and reports a store without it as not covered.

What each kind of store holds "under a scope" is a convention (docs/privacy.md):

* history: the session's transcript and everything derived from it (summaries kept beside it, search terms,
  embeddings, the session's generation record), so nothing of it is read again by any provider object;
* long-term memory: every memory of the agent (``session_id=None``), or those whose metadata has
  ``session_id`` equal to the session;
* vector store: documents whose metadata has ``agent_id`` (and ``session_id``) equal to the scope's, in every
  collection;
* graph: entities whose properties have ``agent_id`` (and ``session_id``), with their relationships;
* blob store: objects whose key starts with ``agent_id/`` (``agent_id/session_id/`` for a session), each id
  percent-encoded (:func:`blob_prefix`);
* tasks: the task lists of the agent whose conversation id is the session id (all of the agent's with
  ``session_id=None``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Protocol, runtime_checkable
from urllib.parse import quote

from ravi.kernel.storage.blob import MAX_SEGMENT_BYTES
from ravi.kernel.values import check_scope


@runtime_checkable
class Forgetter(Protocol):
    """An optional ability of any store: erase what it holds for ``agent_id`` (for one of its sessions when
    ``session_id`` is given), by the store kind's convention (:mod:`ravi.kernel.storage.forget`).

    ``forget`` is idempotent (a second call removes nothing and succeeds) and leaves nothing of the scope
    readable afterwards by any read path of the store, in this or any other process (cached copies included).
    It never touches another agent's data, nor another session of the same agent when ``session_id`` is given.
    """

    async def forget(self, agent_id: str, *, session_id: str | None = None) -> int:
        """Erase what the store holds for the agent (or its session ``session_id``); returns how many records
        (messages, memories, documents, entities, objects, task lists) it removed."""
        ...


def check_forget(agent_id: object, session_id: object) -> None:
    """What every ``forget`` checks first: a valid agent id, and a valid session id or ``None``
    (``InvalidArgument``)."""
    check_scope(agent_id=agent_id)
    if session_id is not None:
        check_scope(session_id=session_id)


def in_scope(properties: object, agent_id: str, session_id: str | None) -> bool:
    """Whether a record's metadata (or properties) place it under the scope: ``agent_id`` equal to the agent's,
    and, for a session, ``session_id`` equal to it."""
    if not isinstance(properties, Mapping) or properties.get("agent_id") != agent_id:
        return False
    return session_id is None or properties.get("session_id") == session_id


_DIGEST_SEGMENT = "%sha256-"
"""What starts the segment of an id too long to be one percent-encoded: ``%s`` is no percent escape, so no id
encodes to it."""


def blob_prefix(agent_id: str, session_id: str | None = None) -> str:
    """The key prefix of the blobs stored under the scope: ``agent_id/`` or ``agent_id/session_id/``, each id
    percent-encoded (``quote(id, safe="")``: ids of letters, digits, ``-``, ``_``, ``.`` and ``~`` stay as they
    are), so that no agent's prefix is another's: agent ``a/b`` stores under ``a%2Fb/``, never under ``a/``.
    An id whose encoded form is longer than a key segment holds (``MAX_SEGMENT_BYTES``) is
    ``%sha256-<its SHA-256 in hex>`` instead, so every id a store takes has a prefix keys can start with
    (decision 98).

    Raises:
        InvalidArgument: an id that is not a non-empty string of at most ``MAX_ID_BYTES`` UTF-8 bytes.

    Example:
        >>> blob_prefix("alice", "s1") + "upload.pdf"
        'alice/s1/upload.pdf'
    """
    check_forget(agent_id, session_id)
    head = _segment(agent_id) + "/"
    return head if session_id is None else head + _segment(session_id) + "/"


def _segment(ident: str) -> str:
    encoded = quote(ident, safe="")
    if len(encoded) <= MAX_SEGMENT_BYTES:  # percent-encoded: ASCII, one byte a character
        return encoded
    return _DIGEST_SEGMENT + hashlib.sha256(ident.encode("utf-8")).hexdigest()


__all__ = ["Forgetter", "blob_prefix", "check_forget", "in_scope"]
