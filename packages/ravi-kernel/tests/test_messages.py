import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ravi.kernel.errors import InvalidMessage
from ravi.kernel.messages import (
    ChatMessage,
    DocumentBlock,
    FrozenList,
    ImageBlock,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
    from_openai,
    to_openai,
)
from ravi.kernel.storage.blob import Blob
from ravi.kernel.storage.graph import Entity, Relationship
from ravi.kernel.storage.memory import Memory
from ravi.kernel.storage.tasks import Task
from ravi.kernel.storage.vector import Document
from ravi.kernel.values import thaw

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3),
    max_leaves=8,
)
texts = st.text()
ids = st.text(min_size=1, max_size=12)
tool_calls = st.builds(ToolCallBlock, id=ids, name=ids, arguments=st.dictionaries(st.text(max_size=5), json_values))
user_blocks = st.one_of(
    st.builds(TextBlock, text=texts),
    st.builds(ImageBlock, url=texts, detail=st.sampled_from([None, "low", "high", "auto"])),
    st.builds(DocumentBlock, data=texts, media_type=st.none() | st.just("application/pdf")),
    st.builds(ThinkingBlock, thinking=texts, signature=st.none() | texts),
)
messages = st.one_of(
    st.builds(
        ChatMessage,
        role=st.sampled_from(["system", "user"]),
        content=st.lists(user_blocks, max_size=3).map(tuple),
        name=st.none() | ids,
        metadata=st.dictionaries(st.text(max_size=5), json_values, max_size=3),
    ),
    st.builds(lambda t, c: ChatMessage.assistant(t, tool_calls=c), st.none() | texts, st.lists(tool_calls, max_size=3)),
    st.builds(lambda i, c, e: ChatMessage.tool(i, c, is_error=e), ids, texts, st.booleans()),
)


@given(messages)
def test_openai_round_trip_is_lossless(message: ChatMessage) -> None:
    assert ChatMessage.from_openai(message.to_openai()) == message
    # and the dict survives JSON, as it would on the wire or in a database
    assert ChatMessage.from_openai(json.loads(json.dumps(message.to_openai()))) == message


assistant_blocks = st.one_of(
    st.builds(TextBlock, text=texts), st.builds(ThinkingBlock, thinking=texts, signature=st.none() | texts), tool_calls
)


@given(st.lists(assistant_blocks, max_size=5).map(tuple))
def test_openai_round_trip_keeps_text_and_tool_calls_in_their_order(content: tuple[Any, ...]) -> None:
    """An assistant message that says something after a tool call (``[call, text]``, or Claude's
    ``[text, call, text, call]``) came back with every call moved to the end: OpenAI's dict keeps the calls
    apart from the content, so ``ravi history export`` and ``to_openai`` changed the message."""
    message = ChatMessage(role="assistant", content=content)
    assert ChatMessage.from_openai(message.to_openai()) == message
    assert ChatMessage.from_openai(json.loads(json.dumps(message.to_openai()))) == message
    provider = message.to_openai(extras=False)  # what an endpoint takes: no key of Ravi's own
    assert set(provider) <= {"role", "content", "tool_calls", "name"}


def test_tool_call_positions_that_do_not_fit_are_refused() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    for positions in ([5], [0, 1], ["0"], [-1], "0", [True]):
        with pytest.raises(InvalidMessage) as raised:
            ChatMessage.from_openai(
                {"role": "assistant", "content": "x", "tool_calls": [call], "tool_call_positions": positions}
            )
        assert raised.value.field == "tool_call_positions"


@given(messages)
def test_json_round_trip_is_lossless(message: ChatMessage) -> None:
    assert ChatMessage.model_validate_json(message.model_dump_json()) == message


def test_provider_form_has_only_what_endpoints_accept() -> None:
    call = ToolCallBlock(id="c1", name="search", arguments={"q": "ravi"})
    msgs = [ChatMessage.user("hi"), ChatMessage.assistant(tool_calls=[call]), ChatMessage.tool("c1", "found")]
    assert to_openai(msgs) == [
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "search", "arguments": '{"q": "ravi"}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "found"},
    ]


def test_openai_dicts_from_an_api_are_read() -> None:
    data = [
        {"role": "system", "content": "be brief"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "look"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}},
            ],
        },
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "a", "type": "function", "function": {"name": "f", "arguments": ""}}],
        },
        {"role": "tool", "tool_call_id": "a", "content": [{"type": "text", "text": "ok"}]},
    ]
    out = from_openai(data)
    assert [m.role for m in out] == ["system", "user", "assistant", "tool"]
    assert isinstance(out[1].content[1], ImageBlock)
    assert out[2].tool_calls[0].arguments == {}
    assert out[3].tool_result == ToolResultBlock(tool_call_id="a", content="ok")


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"content": "x"}, "role"),
        ({"role": "robot", "content": "x"}, "role"),
        ({"role": "tool", "content": "x"}, "tool_call_id"),
        ({"role": "tool", "tool_call_id": "", "content": "x"}, "tool_call_id"),
        (
            {"role": "assistant", "tool_calls": [{"id": "a", "function": {"name": "f", "arguments": "{oops"}}]},
            "tool_calls[0].function.arguments",
        ),
        (
            {"role": "assistant", "tool_calls": [{"id": "a", "function": {"name": "f", "arguments": "[1, 2]"}}]},
            "tool_calls[0].function.arguments",
        ),
        ({"role": "assistant", "tool_calls": [{"function": {"name": "f"}}]}, "tool_calls[0].id"),
        ({"role": "user", "tool_calls": [{"id": "a", "function": {"name": "f"}}]}, "tool_calls"),
        ({"role": "user", "content": [{"type": "video"}]}, "content[0].type"),
        ({"role": "user", "content": 42}, "content"),
    ],
)
def test_invalid_dicts_name_the_field(data: dict, field: str) -> None:
    with pytest.raises(InvalidMessage) as info:
        ChatMessage.from_openai(data)
    assert info.value.field == field
    assert field in str(info.value)
    assert isinstance(info.value, ValueError)


def test_list_conversion_names_the_index() -> None:
    with pytest.raises(InvalidMessage) as info:
        from_openai([{"role": "user", "content": "ok"}, {"role": "nobody"}])
    assert info.value.field == "[1].role"


def test_blocks_must_fit_the_role() -> None:
    with pytest.raises(InvalidMessage):
        ChatMessage(role="user", content=(ToolCallBlock(id="a", name="f"),))
    with pytest.raises(InvalidMessage):
        ChatMessage(role="assistant", content=(ToolResultBlock(tool_call_id="a", content="x"),))
    with pytest.raises(InvalidMessage):
        ChatMessage(role="tool", content=(TextBlock(text="x"),))
    with pytest.raises(InvalidMessage, match="role"):
        ChatMessage(role="wizard")


def test_messages_are_immutable_all_the_way_down() -> None:
    message = ChatMessage.assistant(
        tool_calls=[ToolCallBlock(id="a", name="f", arguments={"k": 1})], metadata={"source": "test"}
    )
    with pytest.raises(AttributeError, match="ChatMessage is immutable: 'role' cannot change"):
        message.role = "user"  # type: ignore[misc]
    with pytest.raises(AttributeError, match="immutable"):
        message.tool_calls[0].name = "g"  # type: ignore[misc]
    with pytest.raises(AttributeError, match="immutable"):
        del message.metadata
    with pytest.raises(TypeError):
        message.metadata["source"] = "changed"
    with pytest.raises(TypeError):
        message.tool_calls[0].arguments["k"] = 2
    assert message.metadata == {"source": "test"}


def test_nested_values_are_read_only_and_not_the_callers() -> None:
    """A list or dict inside metadata or a tool call's arguments is the message's own, read-only copy: the caller
    changing what it passed, or a reader changing what it got, changes no message (an in-memory store hands the
    same object to every reader)."""
    tags = ["a"]
    query = {"terms": ["x"], "filter": {"k": [1, 2]}}
    message = ChatMessage.assistant(
        tool_calls=[ToolCallBlock(id="a", name="f", arguments={"query": query})], metadata={"tags": tags, "t": (1, [2])}
    )
    tags.append("writer")
    query["terms"].append("y")
    query["filter"]["k"].append(3)
    assert message.metadata == {"tags": ["a"], "t": [1, [2]]}  # a tuple is stored as the array it is in JSON
    assert message.tool_calls[0].arguments == {"query": {"terms": ["x"], "filter": {"k": [1, 2]}}}
    nested = [
        message.metadata["tags"],
        message.metadata["t"][1],
        message.tool_calls[0].arguments["query"],
        message.tool_calls[0].arguments["query"]["terms"],
        message.tool_calls[0].arguments["query"]["filter"]["k"],
    ]
    mutations = [
        lambda v: v.append(0), lambda v: v.extend([0]), lambda v: v.insert(0, 0), lambda v: v.pop(),
        lambda v: v.clear(), lambda v: v.sort(), lambda v: v.reverse(), lambda v: v.__setitem__(0, 0),
        lambda v: v.__delitem__(0), lambda v: v.__iadd__([0]), lambda v: v.__imul__(2), lambda v: v.remove(1),
    ]  # fmt: skip
    for value in nested:
        for mutate in mutations if isinstance(value, list) else [lambda v: v.__setitem__("k", 0), lambda v: v.clear()]:
            with pytest.raises(TypeError, match="read-only"):
                mutate(value)
    assert message.metadata == {"tags": ["a"], "t": [1, [2]]}  # a tuple is stored as the array it is in JSON
    assert message.tool_calls[0].arguments == {"query": {"terms": ["x"], "filter": {"k": [1, 2]}}}


@pytest.mark.parametrize(
    ("make", "field"),
    [
        (lambda m: Document(text="x", metadata=m), "metadata"),
        (lambda m: Entity(id="e", properties=m), "properties"),
        (lambda m: Relationship(source_id="a", target_id="b", type="KNOWS", properties=m), "properties"),
        (lambda m: Task(title="t", metadata=m), "metadata"),
        (lambda m: Memory(id="m", agent_id="a", namespace="n", content="c", metadata=m), "metadata"),
        (lambda m: Blob(key="k", data=b"", metadata=m), "metadata"),
    ],
)
def test_the_stores_values_keep_their_nested_values_too(make: Any, field: str) -> None:
    given = {"tags": ["a"], "inner": {"k": [1]}}
    value = make(given)
    given["tags"].append("writer")
    given["inner"]["k"].append(2)
    assert getattr(value, field) == {"tags": ["a"], "inner": {"k": [1]}}
    with pytest.raises(TypeError, match="read-only"):
        getattr(value, field)["inner"]["k"].append(3)


def test_a_tuple_is_read_back_as_every_store_reads_it() -> None:
    """A tuple in metadata stayed a tuple in memory while every server store read it back as a list: the message
    did not equal its own round trip through JSON. It is a read-only list from the start."""
    message = ChatMessage.user("x", metadata={"k": (1, 2), "nested": {"t": ((3,),)}})
    assert message.metadata == {"k": [1, 2], "nested": {"t": [[3]]}}
    assert isinstance(message.metadata["k"], FrozenList)
    assert ChatMessage.model_validate_json(message.model_dump_json()) == message


def test_read_only_values_copy_pickle_serialise_and_thaw_as_plain_ones() -> None:
    import copy
    import pickle

    message = ChatMessage.user("hi", metadata={"tags": ["a", {"b": [1]}]})
    for again in (
        copy.copy(message),
        copy.deepcopy(message),
        pickle.loads(pickle.dumps(message)),
        ChatMessage.model_validate_json(message.model_dump_json()),
        ChatMessage.model_validate(message.model_dump()),
    ):
        assert again == message
        assert isinstance(again.metadata["tags"], FrozenList)
    assert json.loads(message.model_dump_json())["metadata"] == {"tags": ["a", {"b": [1]}]}
    assert message.model_dump(mode="json")["metadata"] == {"tags": ["a", {"b": [1]}]}
    plain = thaw(message.metadata)
    plain["tags"][1]["b"].append(2)  # a plain copy: the caller's to change
    assert type(plain["tags"]) is list and message.metadata == {"tags": ["a", {"b": [1]}]}


def test_model_copy_validates_and_forgets_derived_values() -> None:
    message = ChatMessage.user("hello")
    message.memo["tokens"] = 99
    copy = message.model_copy(update={"content": (TextBlock(text="bye"),)})
    assert copy.id == message.id and copy.text == "bye" and copy.memo == {}
    assert message.model_copy().memo == {}
    with pytest.raises(InvalidMessage):
        message.model_copy(update={"role": "nobody"})


def test_memo_is_not_part_of_the_value() -> None:
    a = ChatMessage.user("x", id="same")
    b = a.model_copy()
    a.memo["k"] = 1
    assert a == b
    assert "memo" not in a.model_dump()


def test_document_needs_one_source() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        DocumentBlock()


def test_equality_ignores_the_memo_even_when_it_refers_to_the_message() -> None:
    """Two reads of one stored message are equal whatever each has cached (a strategy may cache the message
    itself, as "nothing to shorten"), and comparing them never recurses."""
    a = ChatMessage.user("x", id="m1")
    b = ChatMessage.model_validate_json(a.model_dump_json())
    a.memo["shortened"] = a
    b.memo["shortened"] = b
    b.memo["tokens:other"] = 3
    assert a == b
    assert a != ChatMessage.user("y", id="m1", created_at=a.created_at)


_BAD_NESTED = [
    ({"role": "user", "content": [{"type": "text", "text": "bad \ud800"}]}, "content[0].text", "surrogate"),
    (
        {"role": "assistant", "content": [{"type": "tool_call", "id": "c", "name": "f", "arguments": {"x": "\udc00"}}]},
        "content[0].arguments.x",
        "surrogate",
    ),
    ({"role": "user", "content": [{"type": "text"}]}, "content[0].text", "required"),
    ({"role": "user", "metadata": {"k": ["\ud800"]}}, "metadata.k[0]", "surrogate"),
]


@pytest.mark.parametrize(("data", "field", "reason"), _BAD_NESTED)
@pytest.mark.parametrize("build", ["constructor", "model_validate", "model_validate_json"])
def test_every_way_in_refuses_a_bad_nested_part_naming_it(data: dict, field: str, reason: str, build: str) -> None:
    """Parts nested in a message are validated by pydantic-core, not by their own constructor: the message's
    check still reaches every level, whichever way the message is built. (JSON cannot even spell a lone
    surrogate: its parser refuses the escape, so the error names the message.)"""
    builders = {
        "constructor": lambda: ChatMessage(**data),
        "model_validate": lambda: ChatMessage.model_validate(data),
        "model_validate_json": lambda: ChatMessage.model_validate_json(json.dumps(data)),
    }
    with pytest.raises(InvalidMessage, match=reason if build != "model_validate_json" else None) as info:
        builders[build]()
    lone = reason == "surrogate" and build == "model_validate_json"
    assert info.value.field == ("message" if lone else field)


def test_a_part_built_alone_is_checked() -> None:
    with pytest.raises(InvalidMessage, match="surrogate"):
        TextBlock(text="\ud800")
    with pytest.raises(InvalidMessage, match="Invalid JSON"):
        ToolResultBlock.model_validate_json('{"tool_call_id": "c", "content": "\\ud800"}')
    with pytest.raises(InvalidMessage):
        ToolCallBlock.model_validate({"id": "", "name": "f"})


def test_the_block_types_errors_leave_out_are_the_block_types() -> None:
    from ravi.kernel.values import CONTENT_TYPES

    blocks = (TextBlock, ImageBlock, DocumentBlock, ThinkingBlock, ToolCallBlock, ToolResultBlock)
    assert {block.model_fields["type"].default for block in blocks} == CONTENT_TYPES


def test_a_value_names_a_bad_nested_block_as_a_message_does() -> None:
    from ravi.kernel.errors import InvalidArgument
    from ravi.kernel.storage import Document

    with pytest.raises(InvalidArgument) as info:
        Document.model_validate_json('{"id": "d", "content": [{"type": "text", "text": 1}]}')
    assert info.value.field == "Document.content[0].text"


def test_messages_read_in_bulk_are_the_messages_stored() -> None:
    from ravi.kernel.messages import messages_from_json
    from ravi.kernel.tokens import STORED_COUNTER

    stored = [ChatMessage.user("hello"), ChatMessage.assistant("hi there", metadata={"k": [1, "二"]})]
    read = messages_from_json([m.model_dump_json() for m in stored], [7, None])
    assert read == stored
    assert read[0].memo[STORED_COUNTER.key] == 7 and STORED_COUNTER.key not in read[1].memo
    assert messages_from_json([m.model_dump_json().encode() for m in stored]) == stored


@pytest.mark.parametrize("running", [True, False])
def test_reading_in_bulk_leaves_the_garbage_collector_as_it_was(running: bool) -> None:
    """The collector is paused while messages are built, and left as it was found, also when a body is bad."""
    import gc

    from ravi.kernel.messages import messages_from_json

    was = gc.isenabled()
    (gc.enable if running else gc.disable)()
    try:
        messages_from_json([ChatMessage.user("x").model_dump_json()])
        assert gc.isenabled() is running
        with pytest.raises(InvalidMessage):
            messages_from_json([ChatMessage.user("x").model_dump_json(), '{"role": "nobody"}'])
        assert gc.isenabled() is running
    finally:
        (gc.enable if was else gc.disable)()


def test_initialising_a_read_only_value_again_changes_nothing() -> None:
    """``__init__`` called again on a built value (``dict.__init__`` fills in place, ``list.__init__`` empties and
    refills) would change a message every reader shares."""
    message = ChatMessage.user("hi", metadata={"tags": ["a"], "inner": {"k": 1}})
    message.metadata.__init__({"injected": True})  # type: ignore[misc]
    message.metadata["tags"].__init__(["b", "c"])  # type: ignore[misc]
    assert message.metadata == {"tags": ["a"], "inner": {"k": 1}}
