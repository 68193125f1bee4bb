"""Each runtime-checkable Protocol recognises a trivial implementation and rejects an incomplete one."""

from typing import Any

import pytest

from ravi.kernel.agent import AgentContextProtocol, CompactionStrategy
from ravi.kernel.llm import EmbeddingClient, LLMClient, TokenCounter
from ravi.kernel.protocols import conforms
from ravi.kernel.storage import (
    BlobStore,
    CypherCapable,
    GraphStore,
    HistoryProvider,
    LongTermMemory,
    ShortTermMemory,
    TaskStore,
    VectorStore,
)


def trivial(*names: str, props: tuple[str, ...] = ()) -> type:
    async def method(self: Any, *args: Any, **kwargs: Any) -> None:
        return None

    namespace: dict[str, Any] = {name: method for name in names}
    namespace.update({p: property(lambda self: 3) for p in props})
    return type("Trivial", (), namespace)


CASES = [
    (HistoryProvider, ("append", "append_many", "get_messages", "clear", "clear_run", "count_messages"), ()),
    (ShortTermMemory, ("get_state", "set_state", "update_state", "clear"), ()),
    (LongTermMemory, ("save", "search", "get", "delete", "clear"), ()),
    (VectorStore, ("add", "upsert", "search", "get", "delete", "list_collections", "delete_collection"), ()),
    (
        GraphStore,
        ("add_entities", "add_relationships", "get_entity", "get_neighbors", "delete_entity", "delete_relationship"),
        (),
    ),
    (CypherCapable, ("query_cypher",), ()),
    (BlobStore, ("connect", "disconnect", "upload", "download", "delete", "presign_url"), ()),
    (
        TaskStore,
        (
            "create_task_list",
            "get_task_list",
            "add_tasks",
            "update_status",
            "increment_retry",
            "force_retry",
            "settle_conversation",
        ),
        (),
    ),
    (CompactionStrategy, ("compact",), ()),
    (AgentContextProtocol, ("get_prompt_window", "add_messages", "end_run"), ()),
    (LLMClient, ("complete",), ()),
    (EmbeddingClient, ("embed",), ("dimension",)),
    (TokenCounter, ("count_text", "count_message", "count_messages"), ()),
]


@pytest.mark.parametrize(("protocol", "methods", "props"), CASES, ids=[c[0].__name__ for c in CASES])
def test_trivial_implementation_conforms(protocol: type, methods: tuple[str, ...], props: tuple[str, ...]) -> None:
    assert isinstance(trivial(*methods, props=props)(), protocol)
    missing_one = trivial(*methods[:-1], props=props) if len(methods) > 1 else trivial(props=props)
    assert not isinstance(missing_one(), protocol)


@pytest.mark.parametrize(("protocol", "methods", "props"), CASES, ids=[c[0].__name__ for c in CASES])
def test_conforms_answers_as_isinstance_and_keeps_what_the_class_decides(
    protocol: type, methods: tuple[str, ...], props: tuple[str, ...]
) -> None:
    """``conforms`` gives ``isinstance``'s answer for whole and incomplete implementations, asked again (kept)
    or not; and an instance that adds a missing member itself does not decide for the others of its class."""
    whole = trivial(*methods, props=props)
    missing_one = trivial(*methods[:-1], props=props) if len(methods) > 1 else trivial(props=props)
    for _ in range(2):
        assert conforms(whole(), protocol) is isinstance(whole(), protocol) is True
        assert conforms(missing_one(), protocol) is isinstance(missing_one(), protocol) is False
    completed = missing_one()
    setattr(completed, methods[-1], lambda *a, **k: None)
    assert conforms(completed, protocol) is isinstance(completed, protocol)
    assert conforms(missing_one(), protocol) is False
    assert conforms(None, protocol) is isinstance(None, protocol) is False
    assert conforms(None, protocol) is False


def test_conforms_forgets_a_class_that_goes_away() -> None:
    """What ``conforms`` keeps of a class does not keep the class alive."""
    import gc
    import weakref

    cls = trivial("compact")
    assert conforms(cls(), CompactionStrategy)
    gone = weakref.ref(cls)
    del cls
    gc.collect()
    assert gone() is None
