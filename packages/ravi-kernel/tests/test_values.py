"""A value is stored exactly or refused: the kernel's checks, and the errors its value types raise."""

from __future__ import annotations

import json
import math
import re
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ravi.kernel.errors import InvalidArgument, InvalidMessage
from ravi.kernel.messages import ChatMessage, FrozenList, ToolCallBlock
from ravi.kernel.scope import Scope
from ravi.kernel.storage import (
    MAX_NAME_LENGTH,
    Document,
    Entity,
    Relationship,
    Task,
    check_relationship_types,
)
from ravi.kernel.values import (
    MAX_DEPTH,
    MAX_ID_BYTES,
    MAX_INT_DIGITS,
    check_ids,
    check_items,
    check_json,
    check_scope,
    check_span,
    json_copy,
    json_object,
    ttl_seconds,
)


def nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


finite = st.floats(allow_nan=False, allow_infinity=False).filter(lambda x: x != 0 or str(x) == "0.0")  # no -0.0
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | finite | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@given(st.dictionaries(st.text(), json_values, max_size=5))
def test_every_accepted_json_object_comes_back_exactly(value: dict[str, Any]) -> None:
    check_json(value, "value")
    assert json.loads(json.dumps(value)) == value
    assert json_copy(value) == value


@pytest.mark.parametrize(
    ("value", "field"),
    [
        ({"k": float("nan")}, "metadata.k"),
        ({"k": [1, float("inf")]}, "metadata.k[1]"),
        ({"k": [0.0, -0.0]}, "metadata.k[1]"),
        ({"k": "lone \ud800 surrogate"}, "metadata.k"),
        ({"k\udfff": 1}, "metadata key"),
        ({"k": {1, 2}}, "metadata.k"),
        ({"k": b"bytes"}, "metadata.k"),
        ({"k": {1: "int key"}}, "metadata.k"),
        ({"k": [10**MAX_INT_DIGITS]}, "metadata.k[0]"),
        ({"k": -(10**MAX_INT_DIGITS)}, "metadata.k"),
    ],
)
def test_values_no_store_can_keep_are_refused_naming_the_field(value: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidArgument) as caught:
        check_json(value, "metadata")
    assert caught.value.field == field


def test_an_integer_of_more_digits_than_json_reads_back_is_refused_not_a_value_error() -> None:
    """Python writes and reads integers of at most 4,300 digits as text: a longer one passed the check, then
    ``json.dumps`` raised a bare ``ValueError`` inside every store (and a store that kept it could not read it
    back). The longest one allowed comes back exactly; a longer one is ``InvalidArgument``, as are models
    holding one."""
    from ravi.kernel.storage import Document, Task

    widest = 10**MAX_INT_DIGITS - 1
    check_json({"n": widest, "m": -widest}, "state")
    assert json_copy({"n": widest}) == {"n": widest}
    with pytest.raises(InvalidArgument, match="digits"):
        json_copy({"n": 10**5000})
    with pytest.raises(InvalidArgument, match="digits"):
        Task(title="t", metadata={"n": 10**5000})
    with pytest.raises(InvalidArgument, match="digits"):
        Document(id="d", content="x", metadata={"n": [-(10**5000)]})


def test_depth_is_bounded_and_deep_values_are_refused_not_crashed() -> None:
    check_json(nested(MAX_DEPTH), "state")
    with pytest.raises(InvalidArgument, match="nested deeper"):
        check_json(nested(MAX_DEPTH + 1), "state")
    with pytest.raises(InvalidArgument, match="nested deeper"):  # not a RecursionError
        json_copy(nested(5_000))


def test_messages_refuse_what_a_store_would_change_or_choke_on() -> None:
    """A message with metadata nested ~200 deep used to be accepted, then made every read of its session fail."""
    with pytest.raises(InvalidMessage):
        ChatMessage.user("hi", metadata=nested(200))
    with pytest.raises(InvalidMessage):
        ChatMessage.user("lone \ud800")
    with pytest.raises(InvalidMessage):
        ChatMessage.user("hi", metadata={"n": float("nan")})
    with pytest.raises(InvalidMessage):
        ChatMessage.user("hi", id="id-\udc80")
    with pytest.raises(InvalidMessage):  # from a dict too, not only through the constructor
        ChatMessage.model_validate({"role": "user", "metadata": nested(200)})
    with pytest.raises(InvalidArgument):
        Entity.model_validate({"id": "e", "properties": {"n": float("nan")}})


@pytest.mark.parametrize(
    "build",
    [
        lambda: ToolCallBlock(id="", name="x"),
        lambda: Document(id=""),
        lambda: Document(embedding=(1.0, float("nan"))),
        lambda: Entity(id=""),
        lambda: Entity(id="e", properties={"x": float("inf")}),
        lambda: Relationship(source_id="a", target_id="", type="R"),
        lambda: Task(title="t", status="bogus"),
        lambda: Task(title="lone \ud800"),
    ],
)
def test_value_types_raise_invalid_argument_never_pydantic_errors(build: Any) -> None:
    with pytest.raises(InvalidArgument):
        build()


@pytest.mark.parametrize("ttl", [0, -1, float("inf"), float("nan"), 1e17, 10**400, -(10**400), "60", True])
def test_ttls_no_server_can_hold_are_refused_up_front(ttl: Any) -> None:
    with pytest.raises(InvalidArgument):
        ttl_seconds(ttl)


def test_ttls_in_range_are_kept() -> None:
    assert ttl_seconds(None) is None
    assert ttl_seconds(1.5) == 1.5
    assert ttl_seconds(timedelta(days=365)) == 365 * 24 * 3600
    assert math.isclose(ttl_seconds(100 * 365 * 24 * 3600) or 0, 100 * 365 * 24 * 3600)


def test_a_bare_string_is_not_a_list_of_ids() -> None:
    with pytest.raises(InvalidArgument, match="sequence of strings"):
        check_ids("v1")
    with pytest.raises(InvalidArgument):
        check_ids(["ok", ""])
    assert check_ids(("a", "b")) == ["a", "b"]


def test_model_copy_with_an_update_checks_and_freezes_it_as_building_does() -> None:
    # the advice of a refused change is model_copy(update=...): what it builds holds to the same rules
    doc = Document(id="d", content="c").model_copy(update={"metadata": {"tags": ["a"]}})
    assert type(doc.metadata["tags"]) is FrozenList
    with pytest.raises(TypeError):
        doc.metadata["tags"].append("b")
    with pytest.raises(InvalidArgument, match=r"Document\.metadata"):
        Document(id="d", content="c").model_copy(update={"metadata": {"x": float("nan")}})
    with pytest.raises(InvalidArgument, match="64 bits"):
        Entity(id="e").model_copy(update={"properties": {"n": 2**70}})
    call = ToolCallBlock(id="c", name="f").model_copy(update={"arguments": {"l": [1]}})
    assert type(call.arguments["l"]) is FrozenList
    with pytest.raises(InvalidMessage):
        call.model_copy(update={"name": 5})
    assert doc.model_copy() == doc and doc.model_copy(deep=True) == doc


class _Counted(int):
    """An int subclass (as IntEnum and HTTPStatus are) that fails a test comparing it one by one."""

    def __eq__(self, other: object) -> bool:
        raise AssertionError("compared with each 64-bit integer in turn")

    __hash__ = int.__hash__


def test_graph_properties_check_an_int_subclass_at_once_and_refuse_cycles_and_deep_nesting() -> None:
    # a range's ``in`` walks every integer for an int subclass: an IntEnum property hung the constructor
    assert int(Entity(id="e", properties={"n": _Counted(5)}).properties["n"]) == 5
    with pytest.raises(InvalidArgument, match="64 bits"):
        Relationship(source_id="a", target_id="b", type="T", properties={"n": [_Counted(2**64)]})
    cyclic: dict[str, Any] = {}
    cyclic["self"] = cyclic
    deep: Any = 1
    for _ in range(5 * MAX_DEPTH * 20):
        deep = [deep]
    for properties in (cyclic, {"deep": deep}):
        with pytest.raises(InvalidArgument, match="nested deeper"):
            Entity(id="e", properties=properties)


_NAME_CHARACTERS = st.characters(codec="utf-8", exclude_categories=["Cs"])


@given(
    name=st.one_of(
        st.text(_NAME_CHARACTERS, max_size=70),
        st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,70}", fullmatch=True),
        st.from_regex(r"_[aA][gG]_[A-Za-z0-9_]{0,5}", fullmatch=True),
    )
)
def test_a_label_or_a_type_is_taken_exactly_when_it_can_name_a_table(name: str) -> None:
    """A label or relationship type is taken exactly when it is an ASCII identifier of at most MAX_NAME_LENGTH
    characters not starting with ``_ag_``: what Apache AGE names a table by (the in-memory store kept any text)."""
    fits = name.isascii() and name.isidentifier() and len(name) <= MAX_NAME_LENGTH
    fits = fits and not name.lower().startswith("_ag_")
    for build in (lambda: Entity(id="e", label=name), lambda: Relationship(source_id="a", target_id="b", type=name)):
        try:
            build()
        except InvalidArgument:
            assert not fits, name
        else:
            assert fits, name
    try:
        check_relationship_types([name])
    except InvalidArgument:
        assert not fits, name
    else:
        assert fits, name


def test_id_is_no_property_of_an_entity_or_relationship() -> None:
    with pytest.raises(InvalidArgument, match="reserved"):
        Entity(id="e", properties={"id": "f"})
    with pytest.raises(InvalidArgument, match="reserved"):
        Relationship(source_id="a", target_id="b", type="T", properties={"id": 1})
    assert Entity(id="e", properties={"nested": {"id": 1}, "ID": 2}).properties["ID"] == 2


def test_json_object_reads_only_an_object_every_store_keeps() -> None:
    assert json_object('{"q": [1, {"r": null}]}') == {"q": [1, {"r": None}]}
    deepest = '{"x": ' + "[" * 100_000 + "]" * 100_000 + "}"
    for raw in ('{"q": NaN}', '{"q": -0.0}', '{"q": "\\ud800"}', deepest, "[1]", '{"q": ', ""):
        assert json_object(raw) is None


@pytest.mark.parametrize("expires_in", [0, -5, float("nan"), 1e17, "60"])
def test_a_duration_is_refused_by_the_name_it_was_given(expires_in: Any) -> None:
    """``presign_url(key, expires_in=0)`` said "ttl must be positive": a parameter the call does not have."""
    with pytest.raises(InvalidArgument, match=r"^expires_in "):
        ttl_seconds(expires_in, name="expires_in")


def test_an_embedding_wider_than_every_store_keeps_is_refused_everywhere() -> None:
    """pgvector keeps vectors of at most 16,000 dimensions: a wider document, query or embedding model was kept
    by the in-memory and Redis stores and refused by Postgres's. Each is refused up front, on every store; the
    widest one allowed is kept."""
    from ravi.kernel.embeddings import HashingEmbeddingClient, check_embedding_client
    from ravi.kernel.storage import Document
    from ravi.kernel.values import MAX_DIMENSIONS, check_vector

    assert MAX_DIMENSIONS == 16_000
    assert len(Document(id="d", embedding=(1.0,) * MAX_DIMENSIONS).embedding or ()) == MAX_DIMENSIONS
    assert len(check_vector([1.0] * MAX_DIMENSIONS)) == MAX_DIMENSIONS
    check_embedding_client(HashingEmbeddingClient(MAX_DIMENSIONS))
    with pytest.raises(InvalidArgument, match="16000"):
        Document(id="d", embedding=(1.0,) * (MAX_DIMENSIONS + 1))
    with pytest.raises(InvalidArgument, match="16000"):
        check_vector([1.0] * (MAX_DIMENSIONS + 1))
    with pytest.raises(InvalidArgument, match="16000"):
        check_embedding_client(HashingEmbeddingClient(MAX_DIMENSIONS + 1))


@given(st.text(st.characters(exclude_categories=["Cs"]), max_size=MAX_ID_BYTES // 2 + 16))
def test_an_id_is_held_to_its_utf8_bytes_by_every_check(text: str) -> None:
    """Any text is an id exactly when it holds at most ``MAX_ID_BYTES`` UTF-8 bytes (not characters) and no NUL, for
    every check that takes ids; a longer one is ``InvalidArgument`` naming the argument and the limit, and one with
    a NUL (which PostgreSQL keeps in no text) is ``InvalidArgument`` naming the argument and the NUL."""
    ident = text + "é" * max(0, (MAX_ID_BYTES - len(text.encode())) // 2 - 2) + "x" * (len(text) % 7)
    fits = len(ident.encode()) <= MAX_ID_BYTES and "\x00" not in ident
    if not ident:
        return
    checks = {
        "agent_id": lambda: check_scope(agent_id=ident),
        "ids[0]": lambda: check_ids([ident]),
        "span_id": lambda: check_span(ident),
        "entities[0].id": lambda: check_items([Entity(id=ident)], Entity, "entities"),
        "generation": lambda: Scope("a", "s", ident),
    }
    for name, check in checks.items():
        if fits:
            check()
            continue
        reason = "NUL" if "\x00" in ident else str(MAX_ID_BYTES)
        with pytest.raises(InvalidArgument, match=rf"{re.escape(name)}.*{reason}"):
            check()
