"""What a Cypher query returns, read from its text: the columns of its final ``RETURN``.

AGE needs the column list of a ``cypher()`` call spelled out (``AS (a agtype, b agtype)``), so the query's last
top-level ``RETURN`` clause is split into its items, respecting strings, backticks, brackets and comments.
"""

from __future__ import annotations

import re

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_STOP = {"ORDER", "SKIP", "LIMIT", "UNION"}


def _past_quoted(query: str, i: int) -> int:
    """The position just past the quoted string or backticked name that starts at ``i`` (a backslash escapes the
    character after it)."""
    quote, end, n = query[i], i + 1, len(query)
    while end < n and query[end] != quote:
        end += 2 if query[end] == "\\" else 1
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


__all__ = ["return_columns"]
