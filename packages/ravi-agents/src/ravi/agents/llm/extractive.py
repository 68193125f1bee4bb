"""``ExtractiveSummarizer``: a summariser that needs no model, no network and gives the same text every time."""

from __future__ import annotations

import re
from collections.abc import Sequence

from ravi.agents.llm._request import check_positive, check_request
from ravi.kernel.cancel import CancelToken
from ravi.kernel.messages import ChatMessage

_HEADERS = frozenset({"Transcript:", "Previous summary:"})
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_SIGNAL = re.compile(r"\d|[A-Z][a-z]+[A-Z]|[/_.:@#]\w|error|fail|must|never|always|decid|because|todo", re.I)


class ExtractiveSummarizer:
    """An :class:`~ravi.kernel.llm.LLMClient` that summarises by picking lines instead of writing them.

    It reads the last message it is given (a transcript, one entry per line, as
    :func:`~ravi.agents.context.compaction.summarization.render_transcript` writes it) and keeps, in order and
    within ``max_tokens`` (4 characters a token), the lines that carry the most: every user request and tool
    error first, then lines with numbers, identifiers, paths and decisions, each shortened to its first
    sentence. Deterministic, offline and fast: the default for tests, demos and deployments without a model.

    Raises:
        InvalidArgument: ``line_chars`` (the longest line kept, in characters) is not an integer > 0.
    """

    def __init__(self, *, line_chars: int = 240) -> None:
        check_positive(line_chars, "line_chars")
        self.line_chars = line_chars

    async def complete(
        self, messages: Sequence[ChatMessage], *, max_tokens: int | None = None, cancel: CancelToken | None = None
    ) -> str:
        """An extract of the transcript in ``messages[-1]``, at most ``max_tokens`` tokens long (800 when
        ``None``).

        Raises:
            InvalidArgument: ``messages`` are not ``ChatMessage`` objects, ``max_tokens`` is neither ``None`` nor
                an integer > 0, or ``cancel`` is not a ``CancelToken``.
            CancelledByToken: ``cancel`` was cancelled.
        """
        check_request(messages, max_tokens, cancel)
        if cancel is not None:
            cancel.raise_if_cancelled()
        if not messages:
            return ""
        budget = 4 * (800 if max_tokens is None else max_tokens)
        entries = [line for line in messages[-1].text.splitlines() if line.strip() and line not in _HEADERS]
        scored = []
        for index, line in enumerate(entries):
            short = self._shorten(line)
            if line.startswith(("user:", "tool error:", "- ")):
                rank = 0
            elif _SIGNAL.search(line):
                rank = 1
            elif line.startswith("assistant:"):
                rank = 2
            else:
                rank = 3
            scored.append((rank, index, short))
        chosen: list[tuple[int, str]] = []
        used = 0
        for _, index, short in sorted(scored):
            if used + len(short) + 1 > budget:
                continue
            chosen.append((index, short))
            used += len(short) + 1
        return "\n".join(f"- {text}" for _, text in sorted(chosen))

    def _shorten(self, line: str) -> str:
        first = _SENTENCE.split(line, maxsplit=1)[0]
        if len(first) > self.line_chars:
            first = first[: self.line_chars] + "…"
        return first


__all__ = ["ExtractiveSummarizer"]
