"""What the commands share: the console, the options every command that reads a session takes, and previews."""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.text import Text

from ravi.kernel.messages import ChatMessage

console = Console(emoji=False)  # ":smile:" in a stored message is shown as written, not as an emoji

ConfigOption = Annotated[
    Path | None,
    typer.Option("--config", help="ravi.toml to read (default: the file RAVI_CONFIG names, else ./ravi.toml)."),
]
AgentOption = Annotated[str | None, typer.Option("--agent", help="Agent id (default: [context] agent_id).")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON instead of a table.")]


async def known_sessions(history: Any, agent_id: str) -> str:
    """What to say about the sessions that do exist."""
    lister = getattr(history, "list_sessions", None)
    if lister is None:
        return "check the session id, and --agent (default: [context] agent_id)"
    try:
        known = await lister(agent_id, limit=21)
    except NotImplementedError:
        return "check the session id, and --agent (default: [context] agent_id)"
    if not known:
        from ravi.agents.context import InMemoryHistoryProvider

        if isinstance(history, InMemoryHistoryProvider):  # the default: nothing outlives the process that wrote it
            return (
                f"agent {agent_id!r} has no sessions here: the history is in memory, so nothing survives"
                " between processes; point --config (or RAVI_HISTORY__*) at the store your agent writes to"
            )
        return f"agent {agent_id!r} has no sessions here; check --agent (default: [context] agent_id) and --config"
    more = ", ..." if len(known) > 20 else ""
    return f"its sessions: {', '.join(shown(name) for name in known[:20])}{more}"


def count_of(n: int, noun: str) -> str:
    """``"1 message"``, ``"2 messages"``: ``n`` and ``noun``, plural unless ``n`` is 1."""
    return f"{n:,} {noun}" if n == 1 else f"{n:,} {noun}s"


def preview(message: ChatMessage, width: int = 70) -> str:
    """One line of a message: its text, or its tool calls, or its tool output, cut to ``width``; a character the
    terminal would act on (an escape sequence, a bell, a direction override) is written as its escape."""
    if message.role == "tool" and message.tool_result is not None:
        text = ("ERROR " if message.tool_result.is_error else "") + message.tool_result.content
    else:
        text = message.text or " ".join(f"{c.name}({json.dumps(dict(c.arguments))})" for c in message.tool_calls)
    text = shown(" ".join(text.split()))
    return text if len(text) <= width else text[: width - 1] + "…"


def shown(text: str, *, keep: str = "", as_json: bool = False) -> str:
    """``text`` safe to print: every character a terminal would act on or that changes how the text around it
    is shown is written as its escape (``\\x1b``, ``\\u202e``): controls (Unicode category Cc: an escape
    sequence, a bell), format characters (Cf: direction overrides and isolates, zero-width spaces and joiners,
    the byte-order mark), line and paragraph separators, surrogates, private-use and unassigned code points.
    The characters of ``keep`` (``"\\n"`` for text printed over several lines) are written as they are. With
    ``as_json``, ``text`` is JSON and the escapes are JSON's (``\\u009b``, a surrogate pair beyond U+FFFF), so it
    reads back as the same value.

    Everything the command prints of stored data (message text, ids, session and agent ids, error messages)
    goes through this function; what it returns holds only printable characters, so escaping twice changes
    nothing."""
    escaped = _json_escaped if as_json else _escaped
    return "".join(c if c in keep or not _acts(c) else escaped(c) for c in text)


def _acts(char: str) -> bool:
    """Whether a terminal would act on ``char`` rather than show it (or show it invisibly)."""
    return unicodedata.category(char)[0] == "C" or char in "\u2028\u2029"


def _escaped(char: str) -> str:
    """A character the terminal would act on (an escape, a bell, a direction override), written as its escape."""
    code = ord(char)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def _json_escaped(char: str) -> str:
    """``char`` as a JSON string escape (a character beyond U+FFFF as its surrogate pair)."""
    code = ord(char)
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def plain(text: str) -> Text:
    """``text`` as Rich shows it exactly: never read as markup (a stored ``[/x]`` is text, not a closing tag), and
    with what a terminal would act on written as its escape (:func:`shown`)."""
    return Text(shown(text))


def describe_counter(counter: Any) -> str:
    """How a counter counts, in a few words."""
    from ravi.agents.tokens import ConservativeTokenCounter, ExactTokenCounter, HeuristicTokenCounter

    if isinstance(counter, ExactTokenCounter):
        return f"exact {counter.encoding}"
    if isinstance(counter, ConservativeTokenCounter):
        return "the conservative estimate" + (f" x{counter.scale:g}" if counter.scale != 1.0 else "")
    if isinstance(counter, HeuristicTokenCounter):
        return "the heuristic (chars / 4)"
    return type(counter).__name__


async def close_store(store: Any) -> None:
    """Close ``store`` with whichever close it has (``aclose`` or ``close``, awaited when it is a coroutine)."""
    import inspect

    closer = getattr(store, "aclose", None) or getattr(store, "close", None)
    if closer is not None:
        result = closer()
        if inspect.isawaitable(result):
            await result
