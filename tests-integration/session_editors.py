"""What the other process of ``test_recall_cleared_mid_window.py`` runs (a module of its own, so that a spawned
process imports it by name): one change to a session of a Postgres history, through a provider of its own."""

from __future__ import annotations

import asyncio
import multiprocessing

from ravi.capabilities.postgres import PostgresHistoryProvider
from ravi.kernel.messages import ChatMessage

FINISH = 120.0
"""Seconds after which the other process counts as hung: a guard, not a measure of speed."""

TOPICS = ["walrus", "staging", "invoice", "kettle", "harbour", "lantern", "orchard", "violin"]
REQUEST = "what did we say about the walrus?"


def turns_of(tag: str, *, turns: int = 200) -> list[ChatMessage]:
    """A system message and ``turns`` questions and answers about rotating topics; the ids depend only on the
    positions, so two tags give different messages under the same ids."""
    messages = [ChatMessage.system("be brief", id="system")]
    for i in range(turns):
        topic = TOPICS[i % len(TOPICS)]
        messages += [
            ChatMessage.user(f"{tag} question {i} about the {topic} " + "detail " * 40, id=f"q{i}"),
            ChatMessage.assistant(f"{tag} answer {i}: the {topic} is fine " + "more " * 40, id=f"a{i}"),
        ]
    return messages


def conversation(tag: str, *, turns: int = 200) -> list[ChatMessage]:
    """:func:`turns_of`, then the request (its text marked with ``tag``)."""
    return [*turns_of(tag, turns=turns), ChatMessage.user(f"{tag}: {REQUEST}", id="request")]


async def _edit(dsn: str, schema: str, agent: str, session: str, change: str) -> None:
    history = PostgresHistoryProvider(dsn, schema=schema)
    try:
        if change == "clear":
            await history.clear(agent, session_id=session)
        elif change == "refill":  # cleared, then other messages under the same ids
            await history.clear(agent, session_id=session)
            await history.append_many(agent, conversation("new"), session_id=session, run_id="new")
        elif change == "clear_run":
            await history.clear_run(agent, session_id=session, run_id="old")
        elif change == "replace_last":
            newest = (await history.get_messages(agent, session_id=session))[-1]
            replacement = ChatMessage.user(f"new: {REQUEST}", id=newest.id)
            assert await history.replace_last(
                agent, session_id=session, message_id=newest.id, messages=[replacement], run_id="new"
            )
        else:
            raise ValueError(change)
    finally:
        await history.aclose()


def edit(dsn: str, schema: str, agent: str, session: str, change: str) -> None:
    """The other process's work: ``change`` the session (``clear``, ``refill``, ``clear_run``, ``replace_last``)."""
    asyncio.run(_edit(dsn, schema, agent, session, change))


def edit_in_another_process(dsn: str, schema: str, agent: str, session: str, change: str) -> None:
    """Run :func:`edit` in a spawned process and wait for it to finish."""
    process = multiprocessing.get_context("spawn").Process(
        target=edit, args=(dsn, schema, agent, session, change), name=f"editor-{change}"
    )
    process.start()
    process.join(FINISH)
    if process.is_alive():
        process.kill()
        raise AssertionError(f"the other process did not {change} the session within {FINISH} s")
    assert process.exitcode == 0, f"the other process failed to {change} the session (its traceback is on stderr)"
