"""Realistic agent transcripts, generated deterministically from a seed.

A coding agent works through user requests: it reads files, searches, runs tests and commands, gets large tool
outputs (200 to 8,000 characters), sometimes errors, sometimes several calls at once, and answers. The same seed
always gives the same transcript (ids and timestamps included), so demos and benchmarks are reproducible.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

from ravi.kernel.messages import ChatMessage, ToolCallBlock

_REQUESTS = [
    "The CI run for the payments service fails on test_refund_partial; find out why and fix it.",
    "Add retry with exponential backoff to the HTTP client in clients/http.py.",
    "Why is the nightly export job taking 40 minutes now? It used to take 5.",
    "Rename the config key `db_url` to `database_url` everywhere and keep the old one working.",
    "Write a migration that adds an index on orders(customer_id, created_at).",
    "The dashboard shows yesterday's totals twice. Track down the duplicate.",
    "Upgrade pydantic to v2 in the billing package and fix what breaks.",
    "Summarise what changed in the auth module since the last release.",
]
_FILES = [
    "src/payments/refunds.py",
    "src/clients/http.py",
    "jobs/export.py",
    "src/config.py",
    "db/migrations/",
    "src/dashboard/totals.py",
    "billing/models.py",
    "src/auth/tokens.py",
    "tests/test_refunds.py",
]
_TOOLS = ["read_file", "grep", "run_tests", "shell", "list_dir", "git_log"]
_WORDS = [
    "order",
    "customer",
    "refund",
    "amount",
    "total",
    "invoice",
    "retry",
    "backoff",
    "session",
    "token",
    "config",
    "database",
    "export",
    "job",
    "index",
    "migration",
    "query",
    "cursor",
    "batch",
    "timeout",
    "latency",
    "cache",
    "handler",
    "request",
    "response",
    "status",
    "error",
    "value",
    "field",
    "schema",
    "model",
    "record",
    "window",
    "budget",
]


def _code(rng: random.Random, chars: int) -> str:
    lines: list[str] = []
    size = 0
    while size < chars:
        kind = rng.random()
        a, b = rng.choice(_WORDS), rng.choice(_WORDS)
        if kind < 0.2:
            line = f"def {a}_{b}(self, {rng.choice(_WORDS)}: int) -> {b.title()}:"
        elif kind < 0.4:
            line = f"    {a} = self.{b}.get({rng.randint(0, 999)})  # {rng.choice(_WORDS)} {rng.choice(_WORDS)}"
        elif kind < 0.6:
            line = f"    if {a}_{b} > {rng.randint(1, 100)}:\n        raise ValueError('{a} {b} out of range')"
        elif kind < 0.8:
            line = f"{rng.choice(_FILES)}:{rng.randint(1, 900)}: {a} {b} {rng.choice(_WORDS)}"
        else:
            line = f"PASSED tests/test_{a}.py::test_{b}_{rng.randint(1, 40)} [{rng.randint(1, 99)}%]"
        lines.append(line)
        size += len(line) + 1
    return "\n".join(lines)[:chars]


def model_calls(seed: int = 7, *, requests: int = 8, max_steps: int = 6) -> Iterator[list[ChatMessage]]:
    """The conversation as the agent loop sees it: each item is the list of messages that arrive before one
    model call (a user turn, or the results of the previous call's tools), followed by the model's reply.

    The first item starts with the system prompt. Ids and timestamps are derived from ``seed``.
    """
    rng = random.Random(seed)
    clock = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
    counter = 0

    def stamp() -> dict[str, Any]:
        nonlocal clock, counter
        counter += 1
        clock += timedelta(seconds=rng.randint(1, 40))
        return {"id": f"m{seed:x}-{counter:07d}", "created_at": clock}

    system = ChatMessage.system(
        "You are a careful coding agent. Use the tools to inspect and change the repository. "
        "Never guess file contents; read them. Report what you changed.",
        **stamp(),
    )
    pending: list[ChatMessage] = [system]
    for r in range(requests):
        request = _REQUESTS[(r + seed) % len(_REQUESTS)]
        pending.append(ChatMessage.user(f"{request} (ticket {rng.randint(1000, 9999)})", **stamp()))
        steps = rng.randint(2, max_steps)
        for step in range(steps):
            last = step == steps - 1
            if last:
                reply = ChatMessage.assistant(
                    f"Done: {rng.choice(_WORDS)} {rng.choice(_WORDS)} fixed in {rng.choice(_FILES)}; "
                    f"{rng.randint(3, 60)} tests pass.",
                    **stamp(),
                )
                yield [*pending, reply]
                pending = []
                break
            calls: list[ToolCallBlock] = []
            for _ in range(1 if rng.random() < 0.7 else rng.randint(2, 3)):
                tool = rng.choice(_TOOLS)
                args = (
                    {"path": rng.choice(_FILES)}
                    if tool in ("read_file", "list_dir")
                    else {"pattern": rng.choice(_WORDS)}
                    if tool == "grep"
                    else {"cmd": f"pytest -x -k {rng.choice(_WORDS)}"}
                )
                calls.append(ToolCallBlock(id=f"call-{seed:x}-{counter:07d}-{len(calls)}", name=tool, arguments=args))
            thought = f"Let me check {rng.choice(_FILES)}." if rng.random() < 0.5 else None
            reply = ChatMessage.assistant(thought, tool_calls=calls, **stamp())
            yield [*pending, reply]
            pending = []
            for call in calls:
                if rng.random() < 0.1:
                    pending.append(
                        ChatMessage.tool(
                            call.id,
                            f"Error: {call.name} failed: {json.dumps(dict(call.arguments))} "
                            f"-> {rng.choice(['timeout after 30s', 'file not found', 'exit status 1'])}",
                            is_error=True,
                            **stamp(),
                        )
                    )
                else:
                    size = int(rng.triangular(200, 8_000, 1_200))
                    pending.append(ChatMessage.tool(call.id, _code(rng, size), **stamp()))


def agentic_transcript(n_messages: int, seed: int = 7) -> list[ChatMessage]:
    """A transcript of ``n_messages`` messages, one fewer if that would end on a call without its results."""
    out: list[ChatMessage] = []
    while len(out) < n_messages:
        for batch in model_calls(seed, requests=max(8, n_messages // 20)):
            out.extend(batch)
            if len(out) >= n_messages:
                break
        seed += 1
    # never end on a dangling call without its results
    out = out[:n_messages]
    while out and out[-1].tool_calls:
        out.pop()
    return out


__all__ = ["agentic_transcript", "model_calls"]
