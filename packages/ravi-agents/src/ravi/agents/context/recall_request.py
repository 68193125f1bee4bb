"""What relevant recall reads in a request: whether it refers to the past or follows up the last turn, the period
it names, and whether it asks for the newest or the first of several facts.

The reading is a handful of English cues, deliberately simple: it decides how much of the budget goes to older
turns (:func:`recall_share`) and adds two rankings among the units a search found (:mod:`recall_fusion`). A
request in another language gets the default share and no period, which is what Ravi did before.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from ravi.kernel.messages import ChatMessage
from ravi.kernel.search import MAX_QUERY_CHARS, STOPWORDS

_WORDS = re.compile(r"[a-z0-9']+")
_MONTHS = {name.lower(): k for k, name in enumerate(calendar.month_name) if name}
_MONTHS.update({name.lower(): k for k, name in enumerate(calendar.month_abbr) if name})
_MONTHS.pop("may", None)  # "may" is a verb as often as a month: a month only beside a year or a day
_YEAR = re.compile(r"\b(19[5-9]\d|20\d\d)\b")
_MONTH_YEAR = re.compile(r"\b(" + "|".join(sorted({*_MONTHS, "may"}, key=len, reverse=True)) + r")\.?,?\s+(\d{4})\b")
_DAY_MONTH = re.compile(
    r"\b(\d{1,2})(?:st|nd|rd|th)?\s+(" + "|".join(sorted({*_MONTHS, "may"}, key=len, reverse=True)) + r")\b"
)
_IN_MONTH = re.compile(
    r"\b(?:in|during|since|early|late|mid)\s+(" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\b"
)
_RELATIVE = {
    "yesterday": (1, 1),
    "last week": (14, 5),
    "last weekend": (9, 4),
    "last month": (62, 25),
    "last year": (730, 330),
    "this week": (7, 0),
    "this month": (31, 0),
    "recently": (45, 0),
    "lately": (45, 0),
}
_PAST = re.compile(
    r"\b(remember|recall|earlier|before|previous(ly)?|last time|ago|mention(ed)?|told|said|again|originally|"
    r"used to|back when|history|first time|did|was|were|had|happened|when)\b"
)
_PRESENT = re.compile(r"\b(now|currently|current|these days|at the moment|still|latest|most recent|anymore|today)\b")
_FIRST = re.compile(r"\b(first|originally|initially|at first|earliest|to begin with)\b")
_FOLLOW = re.compile(
    r"^(and|but|so|also|then|ok|okay|yes|yeah|no|nope|sure|thanks|thank you|why|how come|what about|go on|"
    r"continue|do it|more|again|great|perfect|fine|right)\b"
)
_ANAPHORA = {"it", "that", "this", "those", "these", "them", "there", "he", "she", "they"}
_QUESTION = re.compile(
    r"^(what|when|where|who|whom|whose|which|how|why|did|do|does|is|are|was|were|have|has|can|could)\b"
)


@dataclass(frozen=True)
class Request:
    """The current request as recall reads it.

    Attributes:
        text: The request's text (the latest user turn).
        past: Whether it refers to earlier turns (what was done or said, a remembered thing, a named period).
        question: Whether it is a question (other than a follow-up).
        follow_up: Whether it only follows up the last turns ("why?", "and then?", "ok, do it").
        working: Whether the agent is at work on it (messages came after it: tool calls and results), so the
            newest turns matter most.
        period: The days it names (first, last), inclusive, or ``None``.
        order: ``"newest"`` when it asks how things are now, ``"first"`` when it asks how they began, else
            ``None``.
        day: The day it was written (UTC).
    """

    text: str
    past: bool = False
    question: bool = False
    follow_up: bool = False
    working: bool = False
    period: tuple[date, date] | None = None
    order: str | None = None
    day: date | None = None


def read_request(history: Sequence[ChatMessage]) -> Request:
    """The latest user turn of ``history``, read (an empty request when there is none)."""
    for k in range(len(history) - 1, -1, -1):
        message = history[k]
        if message.role == "user" and message.text:
            working = any(m.role in ("tool", "assistant") for m in history[k + 1 :])
            return _read(message.text, message.created_at, working)
    return Request("")


def _read(text: str, at: datetime, working: bool) -> Request:
    # A long request is read at its ends, as its search terms are (``query_terms``): what it asks is there, and
    # a pasted megabyte in between would otherwise cost every window a scan of it by each pattern below.
    half = MAX_QUERY_CHARS // 2
    read = text if len(text) <= MAX_QUERY_CHARS else f"{text[:half]}\n{text[-half:]}"
    lowered = read.lower()
    words = _WORDS.findall(lowered)
    content = [w for w in words if w not in STOPWORDS and w not in _ANAPHORA]
    period = _period(lowered, at)
    question = read.rstrip().endswith("?") or bool(_QUESTION.match(lowered.lstrip()))
    follow = len(words) <= 8 and (bool(_FOLLOW.match(lowered.lstrip())) or len(content) <= 1) and period is None
    past = period is not None or (bool(_PAST.search(lowered)) and not follow)
    order = "newest" if _PRESENT.search(lowered) else "first" if _FIRST.search(lowered) else None
    return Request(
        text, past=past, question=question and not follow, follow_up=follow, working=working, period=period,
        order=order, day=_utc(at).date(),
    )  # fmt: skip


MIN_SHARE = 0.25
"""The least :func:`recall_share` gives: the newest turns take at most the rest of the budget."""


def recall_share(request: Request) -> float:
    """The share of the budget that goes to older turns when none is configured: most of it for a request about
    the past (0.85) or another question (0.75), little for a follow-up of the last turns or while the agent
    works on the request (0.25), 0.4 otherwise (a new instruction)."""
    if request.working or request.follow_up:
        return MIN_SHARE
    if request.past:
        return 0.85
    if request.question:
        return 0.75
    return 0.4


def _period(text: str, at: datetime) -> tuple[date, date] | None:
    """The days a request names: a month and year ("in March 2023", "May 2023"), a year ("in 2022"), a day and
    month ("on 8 May"), a month alone ("in March": the last one before the request), or a relative span
    ("last week", "yesterday"), relative to ``at``."""
    today = _utc(at).date()
    if found := _DAY_MONTH.search(text):
        month = _MONTHS.get(found.group(2), 5)
        year = int(y.group(1)) if (y := _YEAR.search(text)) else _latest_year(today, month)
        day = min(int(found.group(1)), calendar.monthrange(year, month)[1])
        if day >= 1:
            return date(year, month, day), date(year, month, day)
    if found := _MONTH_YEAR.search(text):
        month, year = _MONTHS.get(found.group(1), 5), int(found.group(2))
        return date(year, month, 1), date(year, month, calendar.monthrange(year, month)[1])
    if found := _IN_MONTH.search(text):
        month = _MONTHS[found.group(1)]
        year = _latest_year(today, month)
        return date(year, month, 1), date(year, month, calendar.monthrange(year, month)[1])
    if found := _YEAR.search(text):
        year = int(found.group(1))
        return date(year, 1, 1), date(year, 12, 31)
    for phrase, (back, until) in _RELATIVE.items():
        if re.search(r"\b" + phrase + r"\b", text):
            return today - timedelta(days=back), today - timedelta(days=until)
    return None


def _utc(at: datetime) -> datetime:
    return at.astimezone(UTC) if at.tzinfo else at.replace(tzinfo=UTC)


def _latest_year(today: date, month: int) -> int:
    """The year of the latest ``month`` that began by ``today``."""
    return today.year if month <= today.month else today.year - 1


__all__ = ["MIN_SHARE", "Request", "read_request", "recall_share"]
