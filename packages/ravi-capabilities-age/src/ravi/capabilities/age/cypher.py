"""What a Cypher query returns, read from its text: the columns of its final ``RETURN``; and the integer
literals in it that AGE would not keep.

AGE needs the column list of a ``cypher()`` call spelled out (``AS (a agtype, b agtype)``), so the query's last
top-level ``RETURN`` clause is split into its items, respecting strings, backticks, brackets and comments.
AGE reads an integer literal past 64 bits as a float (``123456789012345678901234567890`` comes back as
``1.2345678901234568e+29``, even cast to ``numeric``), so :func:`oversized_integers` finds them to be refused.
"""

from __future__ import annotations

import re

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_STOP = {"ORDER", "SKIP", "LIMIT", "UNION"}
_INTEGER = re.compile(r"(?<![\w$.])(0[xX][0-9A-Fa-f]+|[0-9]+)(?![\w.])")
_INT64_MAX = 2**63 - 1
_KEYWORDS = {
    "RETURN", "WITH", "WHERE", "AND", "OR", "XOR", "NOT", "IN", "CASE", "WHEN", "THEN", "ELSE", "BY", "SKIP",
    "LIMIT", "UNWIND", "SET", "DISTINCT", "CONTAINS", "IS",
}  # fmt: skip
"""Words after which a ``-`` is a unary minus (one after any other word, a variable's name, subtracts)."""


def _past_quoted(query: str, i: int) -> int:
    """The position just past the quoted string or backticked name that starts at ``i`` (in a string a backslash
    escapes the character after it; in a backticked name it is a character like any other, and a backtick is
    written twice, which reads as two names side by side)."""
    quote, end, n = query[i], i + 1, len(query)
    while end < n and query[end] != quote:
        end += 2 if query[end] == "\\" and quote != "`" else 1
    return end + 1


def _without_comments(query: str) -> str:
    """``query`` with its ``//`` and ``/* */`` comments (outside strings and backticks) turned into spaces, so every
    position stays where it was: a comma or a word in a comment is not part of the ``RETURN`` clause."""
    out = list(query)
    i, n = 0, len(query)
    while i < n:
        ch = query[i]
        if ch in "'\"`":
            i = _past_quoted(query, i)
            continue
        if query.startswith("//", i):
            end = query.find("\n", i)
            end = n if end < 0 else end
        elif query.startswith("/*", i):
            end = query.find("*/", i + 2)
            end = n if end < 0 else end + 2
        else:
            i += 1
            continue
        out[i:end] = " " * (end - i)
        i = end
    return "".join(out)


def _tokens(query: str) -> list[tuple[int, str]]:
    """Top-level words and commas with their positions (skipping strings and nested brackets)."""
    out: list[tuple[int, str]] = []
    depth = 0
    i, n = 0, len(query)
    while i < n:
        ch = query[i]
        if ch in "'\"`":
            i = _past_quoted(query, i)
            continue
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif depth == 0:
            if ch == ",":
                out.append((i, ","))
            else:
                m = _WORD.match(query, i)
                if m and (i == 0 or not (query[i - 1].isalnum() or query[i - 1] in "_$.")):
                    out.append((i, m.group().upper()))
                    i = m.end()
                    continue
        i += 1
    return out


def oversized_integers(query: str) -> list[str]:
    """The integer literals of ``query`` (outside strings, backticks and comments) that do not fit in 64 bits,
    as written; ``-9223372036854775808`` fits."""
    text = list(_without_comments(query))
    i, n = 0, len(text)
    while i < n:
        if text[i] in "'\"`":
            end = min(_past_quoted(query, i), n)
            text[i:end] = "\x00" * (end - i)  # not a space: a minus after a string or a name subtracts
            i = end
            continue
        i += 1
    blanked = "".join(text)
    found = []
    for m in _INTEGER.finditer(blanked):
        value = int(m.group(), 0) if m.group()[:2].lower() == "0x" else int(m.group())
        if value > _INT64_MAX + (1 if _negated(blanked, m.start()) else 0):
            found.append(m.group())
    return found


def _negated(text: str, start: int) -> bool:
    """Whether the literal at ``start`` is written right after a unary minus (``-9223372036854775808``, AGE's
    smallest integer), not a subtraction's (``n-9223372036854775808`` subtracts a literal AGE reads as a float):
    the ``-`` must follow an operator, an opening bracket, a comma, a keyword or nothing."""
    if start == 0 or text[start - 1] != "-":
        return False
    before = text[: start - 1].rstrip()
    if not before:
        return True
    if before[-1] in "([{,:=<>+-*/%^|":
        return True
    word = re.search(r"[A-Za-z_][A-Za-z0-9_]*$", before)
    return (
        word is not None
        and word.group().upper() in _KEYWORDS
        and (word.start() == 0 or not (before[word.start() - 1].isalnum() or before[word.start() - 1] in "_$.`"))
    )


def return_columns(query: str) -> list[str]:
    """The names of the columns ``query`` returns (its ``AS`` aliases, else the expressions' text); ``[]`` when
    it returns nothing."""
    query = _without_comments(query)
    tokens = _tokens(query)
    starts = [k for k, (_, word) in enumerate(tokens) if word == "RETURN"]
    if not starts:
        return []
    k = starts[-1]
    begin = tokens[k][0] + len("RETURN")
    end = len(query)
    for pos, word in tokens[k + 1 :]:
        if word in _STOP:
            end = pos
            break
    commas = [pos for pos, word in tokens[k + 1 :] if word == "," and pos < end]
    bounds = [begin, *[c + 1 for c in commas]]
    stops = [*commas, end]
    items = [query[a:b].strip() for a, b in zip(bounds, stops, strict=True)]
    if items and items[0].upper().startswith("DISTINCT "):
        items[0] = items[0][9:].strip()
    names = []
    for item in items:
        alias = re.search(r"\s+AS\s+(?:`((?:[^`]|``)+)`|([^\s`]+))\s*$", item, re.IGNORECASE)
        if alias is None:
            names.append(item)
        else:  # a quoted alias doubles its backticks
            names.append(alias.group(2) if alias.group(1) is None else alias.group(1).replace("``", "`"))
    return names


__all__ = ["oversized_integers", "return_columns"]
