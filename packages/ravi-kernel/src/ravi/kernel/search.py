"""Searching a transcript: terms in any script, BM25 scores, and the units a search returns.

One tokenizer serves every store that searches a session (:func:`terms`), so a query matches the same words in
memory and on a server. Words are case-folded and stripped of accents (:func:`fold`), and English inflections
are taken off (:func:`stem`: "adopted" and "adopts" match "adopt"); scripts written without spaces between words
become overlapping character pairs.

A search returns whole *units* (:func:`unit_at`): a message, or an assistant message that makes tool calls
together with the tool results (and the system messages among them) that follow it, so a recalled tool result
always comes with its call.
"""

from __future__ import annotations

import functools
import heapq
import math
import re
import unicodedata
from bisect import bisect_left
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import islice

from ravi.kernel.messages import ChatMessage, TextBlock, ToolCallBlock, ToolResultBlock

_WORD = re.compile(r"\w+(?:[-.]\w+)*")
_ASCII_WORD = re.compile(r"\w+(?:[-.]\w+)*", re.ASCII)  # the same words in ASCII text, found faster
# Scripts written without spaces between words: kana, CJK ideographs, Thai, Lao, Myanmar, Khmer.
_UNSPACED = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff]+")
MAX_INDEXED_CHARS = 32_768
"""How much of a message's searchable text is indexed (its first characters; the offline embedder reads as
much)."""
MAX_TERM_CHARS = 200
"""The longest term indexed or asked for: longer "words" are blobs (hashes, base64), never searched for."""
MAX_MESSAGE_TERMS = 4_096
"""The most distinct terms one message is indexed under (its first ones), so no message can pass a store's limit
(Postgres keeps at most 1 MB of lexemes per row) or make indexing it cost more than a few milliseconds."""
MAX_QUERY_TERMS = 64
"""The most distinct terms a search looks up (:func:`query_terms`)."""
MAX_QUERY_CHARS = 8_000
"""How much of a long request :func:`query_terms` reads: its first and last halves of this many characters."""
STOPWORDS = frozenset(
    "a an and are as at be but by can could did do does for from had has have how i if in into is it its me my "
    "no not of on or our please so than that the their them then there these they this to us was we were what "
    "when where which who why will with would you your".split()
)


def message_text(message: ChatMessage, *, limit: int = 4_000) -> str:
    """The searchable text of a message: who sent it (its ``name``), its text, tool calls and tool results (long
    results cut)."""
    parts: list[str] = [message.name] if message.name else []
    for block in message.content:
        if isinstance(block, TextBlock):
            parts.append(block.text)
        elif isinstance(block, ToolCallBlock):
            parts.append(f"{block.name} {' '.join(str(v) for v in block.arguments.values())}")
        elif isinstance(block, ToolResultBlock):
            parts.append(block.content[:limit])
    return " ".join(parts)


def fold(text: str) -> str:
    """``text`` case-folded (``Straße`` becomes ``strasse``) and without the accents of Latin, Greek and Cyrillic
    letters (``café`` becomes ``cafe``), so a query matches however either side was typed.

    The rule, a character at a time: case-fold, decompose (NFKD), drop each combining mark that follows a kept
    character below U+0530 (Latin, Greek, Cyrillic, or a kept mark), recompose (NFKC). ASCII text is only
    lower-cased, and only the runs of combining marks are walked, which is what makes it fast.
    """
    if text.isascii():
        return text.lower()
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    return unicodedata.normalize("NFKC", _marks().sub(_strip_marks, decomposed))


def _strip_marks(match: re.Match[str]) -> str:
    """A run of combining marks, less those the rule of :func:`fold` drops."""
    start = match.start()
    previous = match.string[start - 1] if start else ""
    kept = []
    for char in match.group():
        if previous < "\u0530":
            continue
        kept.append(char)
        previous = char
    return "".join(kept)


@functools.cache
def _marks() -> re.Pattern[str]:
    """Runs of combining characters (non-zero canonical combining class), found once, on first use. Every such
    character lies in the first two planes (the last is U+1E94A), so only they are scanned."""
    combining = unicodedata.combining
    codes = [code for code in range(0x300, 0x20000) if combining(chr(code))]
    ranges: list[list[int]] = []
    for code in codes:
        if ranges and ranges[-1][1] == code - 1:
            ranges[-1][1] = code
        else:
            ranges.append([code, code])
    return re.compile("[" + "".join(f"{chr(a)}-{chr(b)}" for a, b in ranges) + "]+")


def _form(word: str) -> str:
    """Porter's consonant (``c``) and vowel (``v``) pattern of a lower-case ASCII word: ``y`` after a consonant
    is a vowel."""
    out = []
    previous = "v"
    for char in word:
        kind = "v" if char in "aeiou" or (char == "y" and previous == "c") else "c"
        out.append(kind)
        previous = kind
    return "".join(out)


def _measure(word: str) -> int:
    """Porter's measure: how many vowel-consonant sequences ``word`` has."""
    form = _form(word)
    return sum(1 for i in range(1, len(form)) if form[i - 1] == "v" and form[i] == "c")


def _short(word: str) -> bool:
    """Whether ``word`` ends consonant-vowel-consonant, the last not ``w``, ``x`` or ``y`` (``hop``, not ``hoop``)."""
    form = _form(word)
    return form.endswith("cvc") and word[-1] not in "wxy"


@functools.lru_cache(maxsize=65_536)
def stem(word: str) -> str:
    """``word`` without its English inflection: plurals, ``-ed`` and ``-ing``, a final ``-y`` and ``-e``
    (``puppies`` -> ``puppi``, ``adopted`` -> ``adopt``, ``hiking`` -> ``hike``, ``practising`` -> ``practis``).

    Steps 1 and 5a of Porter's algorithm, the "light" stemming that finds most inflected forms and merges few
    unrelated words. Only lower-case ASCII words of more than three letters are stemmed; identifiers (with digits,
    ``-`` or ``.``) and other scripts stay as they are. The standard library has no stemmer, and the kernel needs
    only pydantic, so the two steps are written here (the rule is small and fixed: a store's terms index depends
    on it never changing).
    """
    if len(word) <= 3 or not (word.isascii() and word.isalpha() and word.islower()):
        return word
    w = word
    if w.endswith("sses") or w.endswith("ies"):
        w = w[:-2]
    elif w.endswith("s") and not w.endswith(("ss", "us", "is")):
        w = w[:-1]
    if w.endswith("eed"):
        if _measure(w[:-3]) > 0:
            w = w[:-1]
    else:
        for suffix in ("ed", "ing"):
            if w.endswith(suffix) and "v" in _form(w[: -len(suffix)]):
                w = w[: -len(suffix)]
                if w.endswith(("at", "bl", "iz")):
                    w += "e"
                elif len(w) >= 2 and w[-1] == w[-2] and w[-1] not in "aeioulsz":
                    w = w[:-1]
                elif _measure(w) == 1 and _short(w):
                    w += "e"
                break
    if w.endswith("y") and len(w) > 2 and "v" in _form(w[:-1]):
        w = w[:-1] + "i"
    if w.endswith("e") and len(w) > 3:
        measure = _measure(w[:-1])
        if measure > 1 or (measure == 1 and not _short(w[:-1])):
            w = w[:-1]
    return w


def terms(text: str) -> list[str]:
    """The searchable terms of ``text``, in any script.

    Words (letters and digits of any script) are folded (:func:`fold`), English stop words dropped and English
    inflections taken off (:func:`stem`); identifiers such as ``db-staging-3`` stay whole. Runs of scripts
    written without spaces (Chinese, Japanese, Thai, ...) become overlapping character pairs, the usual unit
    for searching them.
    """
    folded = fold(text)
    if folded.isascii():  # no script without spaces: words only
        return [stem(w) for w in _ASCII_WORD.findall(folded) if w not in STOPWORDS]
    out: list[str] = []
    for run in _UNSPACED.findall(folded):
        out.extend(run[i : i + 2] for i in range(len(run) - 1)) if len(run) > 1 else out.append(run)
    out.extend(stem(w) for w in _WORD.findall(_UNSPACED.sub(" ", folded)) if w not in STOPWORDS)
    return out


RANKED = 2_000
"""How many messages a search scores at most beyond those holding its rarest term (:meth:`Bm25.scores`)."""
MEANING_LOOKBACK = 5_000
"""How many of a session's newest messages (before the part a window keeps) a search by meaning compares with
the request: every store bounds it the same way, so its cost is a window's, not the session's."""


def indexed_terms(message: ChatMessage) -> Counter[str]:
    """The terms a store indexes ``message`` under, with how often each occurs: the :func:`terms` of the first
    :data:`MAX_INDEXED_CHARS` characters of its :func:`message_text`, none longer than :data:`MAX_TERM_CHARS`,
    and at most :data:`MAX_MESSAGE_TERMS` distinct ones (the first to occur). Every searching store indexes
    these, so none can be broken or swamped by one huge message."""
    counted = Counter(terms(message_text(message)[:MAX_INDEXED_CHARS]))
    long = [t for t in counted if len(t) > MAX_TERM_CHARS]
    for term in long:
        del counted[term]
    if len(counted) > MAX_MESSAGE_TERMS:  # a Counter keeps its keys in order of first occurrence
        counted = Counter(dict(islice(counted.items(), MAX_MESSAGE_TERMS)))
    return counted


def query_terms(text: str, limit: int = MAX_QUERY_TERMS) -> list[str]:
    """The distinct terms a search for ``text`` looks up, at most ``limit``, so the cost of a search does not
    grow with the size of its request.

    A request of at most :data:`MAX_QUERY_CHARS` characters is read whole; of a longer one, its first and last
    halves of that many. Terms longer than :data:`MAX_TERM_CHARS` are never indexed, so never asked for. When
    more than ``limit`` distinct terms remain, those nearest either end of the request are kept, half from each
    end: a request that pastes a document or a log puts its question before or after it, and the middle of what
    was pasted says least about what is asked. Deterministic, in order of first occurrence.

    Example:
        >>> query_terms("Where is the invoice INV-2291?")
        ['invoic', 'inv-2291']
        >>> query_terms("alpha beta gamma delta epsilon", limit=2)
        ['alpha', 'epsilon']
    """
    if len(text) > MAX_QUERY_CHARS:
        half = MAX_QUERY_CHARS // 2
        text = f"{text[:half]} {text[-half:]}"
    found = [t for t in terms(text) if len(t) <= MAX_TERM_CHARS]
    first = dict.fromkeys(found)
    if len(first) <= limit:
        return list(first)
    kept: dict[str, None] = {}
    forward, backward = iter(first), iter(dict.fromkeys(reversed(found)))
    while len(kept) < limit:
        for side in (forward, backward):
            term = next((t for t in side if t not in kept), None)
            if term is not None and len(kept) < limit:
                kept[term] = None
    order = {t: i for i, t in enumerate(first)}
    return sorted(kept, key=order.__getitem__)


@dataclass
class Bm25:
    """Okapi BM25 postings over a growing list of messages (``k1``, ``b`` as usual), extended as it grows.

    Example:
        >>> index = Bm25()
        >>> index.extend([ChatMessage.user("the cache is cold"), ChatMessage.user("lunch?")])
        >>> sorted(index.scores("cold cache"))
        [0]
    """

    k1: float = 1.2
    b: float = 0.75
    size: int = 0
    total: int = 0  # the sum of ``lengths``, kept as they grow
    lengths: list[int] = field(default_factory=list)
    postings: defaultdict[str, dict[int, int]] = field(default_factory=lambda: defaultdict(dict))

    def extend(self, messages: Sequence[ChatMessage]) -> None:
        """Index ``messages[self.size:]``: those appended since the last call."""
        for i in range(self.size, len(messages)):
            words = indexed_terms(messages[i])
            length = sum(words.values())
            self.lengths.append(length)
            self.total += length
            for word, tf in words.items():
                self.postings[word][i] = tf
        self.size = max(self.size, len(messages))

    def scores(self, query: str, *, ranked: int = RANKED) -> dict[int, float]:
        """The BM25 score of each indexed message that shares a term with ``query``, by position.

        Terms are taken from the rarest: the rarest always, then each next one while the messages they hold stay
        within ``ranked`` in all (a message that holds only common terms scores too little to be recalled, and
        scoring every message that holds one would cost the whole session). Postgres's search takes the same
        terms."""
        n = self.size
        if not n:
            return {}
        average = (self.total / n) or 1.0
        k1, b, lengths = self.k1, self.b, self.lengths
        out: dict[int, float] = defaultdict(float)
        held = sorted((len(p), w) for w in query_terms(query) if (p := self.postings.get(w)))
        total = 0
        for df, word in held:
            if total and total + df > ranked:
                break
            total += df
            posting = self.postings[word]
            idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
            for i, tf in posting.items():
                out[i] += idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * lengths[i] / average))
        return dict(out)


def opens_group(message: ChatMessage) -> bool:
    """Whether ``message`` is an assistant message with tool calls."""
    return message.role == "assistant" and any(isinstance(b, ToolCallBlock) for b in message.content)


def unit_end(messages: Sequence[ChatMessage], start: int, stop: int | None = None) -> int:
    """Where the unit that begins at ``start`` ends (exclusive), looking no further than ``stop``: after the
    tool results (and system messages among them) of an assistant message that makes tool calls, else after
    ``start`` itself."""
    stop = len(messages) if stop is None else stop
    j = start + 1
    if opens_group(messages[start]):
        while j < stop and messages[j].role in ("tool", "system"):
            j += 1
        while j - 1 > start and messages[j - 1].role == "system":  # trailing system messages stand alone
            j -= 1
    return j


def unit_at(messages: Sequence[ChatMessage], i: int) -> tuple[int, int]:
    """The unit ``[start, end)`` that holds ``messages[i]``: a tool result's unit starts at its call (a result
    without one stands alone)."""
    if messages[i].role == "tool":
        k = i
        while k > 0 and messages[k - 1].role in ("tool", "system"):
            k -= 1
        if k > 0 and opens_group(messages[k - 1]):
            end = unit_end(messages, k - 1)
            if i < end:
                return k - 1, end
        return i, i + 1
    return i, unit_end(messages, i) if messages[i].role != "system" else i + 1


@dataclass(frozen=True)
class UnitMatch:
    """One unit a search found, with its score (higher is more relevant).

    Attributes:
        score: How well the unit matches: the best score of its messages.
        messages: The unit as stored, oldest first (with any system message among its tool results).
        offset: The stored tokens before the unit in the session (where it sits).
        after_system: The id of the newest system message before the unit, or ``None``: a window places the
            unit right after it.
    """

    score: float
    messages: tuple[ChatMessage, ...]
    offset: int
    after_system: str | None = None


def spread(
    messages: Sequence[ChatMessage], scores: Mapping[int, float], *, stop: int, weight: float
) -> dict[int, float]:
    """``scores`` (of ``messages[:stop]``) with each message's neighbours scored too: the nearest message on each
    side that is not a system message gets ``weight`` times the score, unless it scores more itself.

    In a conversation the turn that answers often sits beside the one that shares the request's words (the
    question it answers, the reply that repeats its keywords), so a search that keeps the neighbours of its
    matches finds it. Costs O(matches)."""
    out: dict[int, float] = {}
    for i, score in scores.items():
        if i >= stop or score <= 0 or messages[i].role == "system":
            continue
        if score > out.get(i, 0.0):
            out[i] = score
        if weight <= 0:
            continue
        near = score * weight
        j = i - 1
        while j >= 0 and messages[j].role == "system":
            j -= 1
        if j >= 0 and near > out.get(j, 0.0):
            out[j] = near
        j = i + 1
        while j < stop and messages[j].role == "system":
            j += 1
        if j < stop and near > out.get(j, 0.0):
            out[j] = near
    return out


def _by_score(item: tuple[int, float]) -> float:
    return item[1]


def match_units(
    messages: Sequence[ChatMessage],
    scores: Mapping[int, float],
    *,
    before: Sequence[int],
    systems: Sequence[int],
    stop: int,
    limit: int,
) -> list[UnitMatch]:
    """The reference ranking of a search: the units of ``messages[:stop]`` that hold a scored message that is
    not a system message, each scored by its best such message, best first (the newer first among equals), at
    most ``limit``. ``before[i]`` is the stored tokens before ``messages[i]``, ``systems`` the positions of
    the system messages, in order. Costs O(matches) to order the scores, and finds the units of only as many of
    the best messages as it takes to fill ``limit`` units, never O(session)."""
    if limit <= 0:
        return []
    take = max(4 * limit, 64)
    while True:
        if take < len(scores):
            candidates = heapq.nlargest(take, scores.items(), key=_by_score)
        else:
            candidates = sorted(scores.items(), key=_by_score, reverse=True)
        best: dict[tuple[int, int], float] = {}
        floor = None  # once ``limit`` units are found: the score below which no unit can enter
        settled = take >= len(scores)  # every score was looked at, or one below the floor was reached
        for i, score in candidates:
            if floor is not None and score < floor:
                settled = True
                break
            if i >= stop or score <= 0 or messages[i].role == "system":
                continue
            span = unit_at(messages, i)
            if span[1] > stop:
                continue
            if score > best.get(span, 0.0):
                best[span] = score
            if floor is None and len(best) >= limit:
                floor = score
        if settled:
            break
        take *= 4  # the best messages held too few units, or ties at the floor may lie further: look further
    ranked = sorted(best.items(), key=lambda item: (-item[1], -item[0][0]))[:limit]
    out = []
    for (start, end), score in ranked:
        k = bisect_left(systems, start)
        anchor = messages[systems[k - 1]].id if k else None
        out.append(UnitMatch(score, tuple(messages[start:end]), before[start], anchor))
    return out


__all__ = [
    "MEANING_LOOKBACK",
    "RANKED",
    "MAX_INDEXED_CHARS",
    "MAX_MESSAGE_TERMS",
    "MAX_QUERY_CHARS",
    "MAX_QUERY_TERMS",
    "MAX_TERM_CHARS",
    "STOPWORDS",
    "Bm25",
    "UnitMatch",
    "fold",
    "indexed_terms",
    "match_units",
    "message_text",
    "opens_group",
    "query_terms",
    "spread",
    "stem",
    "terms",
    "unit_at",
    "unit_end",
]
