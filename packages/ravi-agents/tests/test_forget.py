"""``Stores.forget`` and ``ravi forget`` on the in-memory stores: every store forgets, a store that cannot is
reported, relevant recall's collections go with the session, and the command asks before it erases."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ravi.agents.cli import app
from ravi.agents.forget import recall_collections
from ravi.agents.settings import RaviSettings, Stores
from ravi.kernel.agent import SessionContext
from ravi.kernel.messages import ChatMessage
from ravi.kernel.storage import Document, Entity, blob_prefix


async def write(stores: Stores, agent: str, session: str) -> None:
    await stores.history.append_many(
        agent, [ChatMessage.user("hi"), ChatMessage.assistant("hello")], session_id=session
    )
    await stores.state.set_state(session, {"k": 1})
    await stores.longterm.save(agent, "a fact", metadata={"session_id": session})
    scope = {"agent_id": agent, "session_id": session}
    await stores.vector.add([Document(content="d", embedding=(1.0, 0.0), metadata=scope)], collection="docs")
    await stores.graph.add_entities([Entity(id=f"{agent}/{session}", properties=scope)])
    await stores.blob.upload(blob_prefix(agent, session) + "f", b"x")
    await stores.tasks.create_task_list(session, agent, ["t"])


async def test_forget_a_session_then_the_agent() -> None:
    stores = Stores(RaviSettings())
    for agent, session in (("a", "s1"), ("a", "s2"), ("b", "s1")):
        await write(stores, agent, session)
    report = await stores.forget("a", session_id="s1")
    assert report.complete
    assert report.removed == {
        "state": 1,
        "recall": 0,
        "longterm": 1,
        "vector": 1,
        "graph": 1,
        "blob": 1,
        "tasks": 1,
        "history": 2,
    }
    again = await stores.forget("a", session_id="s1")  # nothing is left to remove, state included
    assert again.removed == dict.fromkeys(report.removed, 0)
    everything = await stores.forget("a")
    assert everything.sessions == ("s2",) and everything.removed["history"] == 2
    assert await stores.history.list_sessions("a") == []
    assert await stores.history.list_sessions("b") == ["s1"]
    assert await stores.tasks.get_task_list("s1", "b") is not None
    assert json.loads(json.dumps(everything.as_dict()))["complete"] is True


async def test_a_store_that_cannot_forget_is_reported_not_covered() -> None:
    class Blobs:  # a third-party blob store without the ability
        async def delete(self, key: str) -> bool:
            return False

    stores = Stores(RaviSettings())
    object.__setattr__(stores, "blob", Blobs())
    await stores.history.append("a", ChatMessage.user("hi"), session_id="s")
    report = await stores.forget("a", session_id="s")
    assert not report.complete
    assert list(report.not_covered) == ["blob"] and "Blobs" in report.not_covered["blob"]
    assert report.removed["history"] == 1  # everything else is still erased


async def test_relevant_recall_collections_go_with_the_session() -> None:
    from ravi.agents.context import RelevantRecallStrategy
    from ravi.agents.context.recall_index import EmbeddingIndex
    from ravi.agents.storage import HashingEmbeddingClient

    stores = Stores(RaviSettings())
    index = EmbeddingIndex(HashingEmbeddingClient(), stores.vector)
    strategy = RelevantRecallStrategy(token_budget=600, index=index)
    history = [ChatMessage.user("The staging database lives on host db-staging-3.")]
    history += [ChatMessage.user(f"filler turn {i} " + "w" * 300) for i in range(20)]
    history.append(ChatMessage.user("Which host is the staging database on?"))
    await stores.history.append_many("agent", history, session_id="s")
    for session in ("s", "t"):
        await strategy.compact(history, SessionContext("agent", session))
    [mine] = set(recall_collections("agent", "s")) & set(await stores.vector.list_collections())
    report = await stores.forget("agent", session_id="s")
    assert report.removed["recall"] == 1
    collections = await stores.vector.list_collections()
    assert mine not in collections
    assert set(recall_collections("agent", "t")) & set(collections)  # another session's stays


def test_ravi_forget_asks_first_and_reports(tmp_path: Path) -> None:
    config = tmp_path / "ravi.toml"
    config.write_text('[history]\nbackend = "memory"\n')
    runner = CliRunner()
    refused = runner.invoke(app, ["forget", "a", "--config", str(config)], input="n\n")
    assert refused.exit_code == 1 and "Erase every session of agent 'a'" in refused.output
    done = runner.invoke(app, ["forget", "a", "--session", "s", "--yes", "--json", "--config", str(config)])
    assert done.exit_code == 0, done.output
    report = json.loads(done.stdout)
    assert report["session_id"] == "s" and report["complete"] and report["removed"]["history"] == 0
    assert "nothing was stored for session 's' of agent 'a'" in done.stderr  # said apart from the report
    table = runner.invoke(app, ["forget", "a", "--yes", "--config", str(config)], terminal_width=100)
    assert table.exit_code == 0 and "history" in table.output


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["x" * 513], "agent_id: an id may hold at most 512"),
        (["a", "--session", "\u00e9" * 257], "session_id: an id may hold at most 512"),
    ],
)
def test_ravi_forget_refuses_an_id_no_store_takes_before_asking(tmp_path: Path, args: list[str], said: str) -> None:
    """An id past ``MAX_ID_BYTES`` was shown in the confirmation ("Erase every session of agent ...?"), and only
    refused once the user had agreed to erase it."""
    config = tmp_path / "ravi.toml"
    config.write_text('[history]\nbackend = "memory"\n')
    done = CliRunner().invoke(app, ["forget", *args, "--config", str(config)], input="y\n")
    assert done.exit_code == 1 and said in str(done.exception), done.exception
    assert "Erase" not in done.output


async def test_a_history_that_cannot_list_sessions_leaves_state_and_recall_reported() -> None:
    class Unlisted:  # forgets, but cannot say which sessions an agent has
        async def forget(self, agent_id: str, *, session_id: str | None = None) -> int:
            return 0

    stores = Stores(RaviSettings())
    object.__setattr__(stores, "history", Unlisted())
    report = await stores.forget("a")
    assert set(report.not_covered) == {"state", "recall"}
    # not also reported as removing nothing: `ravi forget` printed "state 0" and "state not covered" both
    assert not set(report.removed) & set(report.not_covered)
    assert (await stores.forget("a", session_id="s")).complete  # a named session needs no list


@pytest.mark.parametrize("text", ["a", "\u00e9", "/", "\U0001f680"])
async def test_blobs_of_ids_up_to_the_limit_are_kept_and_forgotten_under_their_prefix(text: str) -> None:
    """Every agent and session id a store takes (up to ``MAX_ID_BYTES``) has a blob prefix a key can start with:
    an id whose percent-encoded form passes a key segment's ``MAX_SEGMENT_BYTES`` (an ASCII id of 256 bytes, a
    ``/`` or non-ASCII one of 86) made a prefix no blob key could hold, so its blobs could be neither uploaded
    nor forgotten by the convention. Short ids keep their prefix; long ones get one of their own each."""
    from ravi.agents.storage import InMemoryFileStore
    from ravi.kernel.storage import check_blob_key
    from ravi.kernel.values import MAX_ID_BYTES

    def long(tag: str) -> str:
        body = text * (MAX_ID_BYTES // len(text.encode()))
        return body[: len(body) - len(tag)] + tag if text.isascii() else body[:-1] + tag

    agents = [long("x"), long("y")]
    store = InMemoryFileStore()
    for agent in agents:
        for session in ("s1", long("z")):
            key = blob_prefix(agent, session) + "f"
            assert check_blob_key(key) == key and len(agent.encode()) <= MAX_ID_BYTES
            await store.upload(key, b"x")
    assert len({blob_prefix(a, s) for a in agents for s in ("s1", long("z"))}) == 4
    assert await store.forget(agents[0], session_id=long("z")) == 1
    assert await store.forget(agents[0]) == 1
    assert await store.download(blob_prefix(agents[1], long("z")) + "f")
    assert blob_prefix("alice", "s1") == "alice/s1/" and blob_prefix("a/b") == "a%2Fb/"


@pytest.mark.parametrize("agent", [5, "", "x" * 513])
def test_a_blob_prefix_refuses_what_is_no_id(agent: object) -> None:
    from ravi.kernel.errors import InvalidArgument

    with pytest.raises(InvalidArgument, match="agent_id"):
        blob_prefix(agent)  # type: ignore[arg-type]
