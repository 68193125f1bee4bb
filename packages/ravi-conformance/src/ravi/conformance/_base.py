"""What every contract class shares: declared abilities, helpers, and the guard against silent overrides."""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import json
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import pytest
from hypothesis import HealthCheck
from hypothesis import strategies as st

from ravi.kernel.values import MAX_ID_BYTES


@dataclass(frozen=True)
class Capabilities:
    """Optional abilities of a backend. ``None`` means: find out by trying.

    Attributes:
        ttl: Expiry of stored items (long-term memories, blobs). A backend without it raises
            ``NotImplementedError`` when given a ``ttl``; the TTL contracts are then skipped with that reason.
        ttl_resolution: Seconds to wait beyond a TTL before an item must be gone (backends that expire
            lazily or on a timer need slack).
    """

    ttl: bool | None = None
    ttl_resolution: float = 1.0


def unique(prefix: str) -> str:
    """A fresh id, so tests never see each other's data even on a shared backend."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


PROPERTY_CHECKS = [HealthCheck.function_scoped_fixture, HealthCheck.differing_executors]
"""The health checks a property rule of a contract turns off: every generated example runs against the one
empty backend of its test (each example uses ids of its own), and each backend's subclass runs the rule."""


def hostile_pairs() -> list[tuple[str, str]]:
    """``(agent_id, session_id)`` pairs, all different, that a careless key encoding gives one key: ids joined
    with a separator they contain (``\x1f``, ``:``, ``|``), an escape that does not escape itself (``%7C`` beside
    ``|``), braces of a hash tag, quotes, JSON look-alikes, and the two Unicode spellings of one letter."""
    return [
        ("a\x1fb", "c"),
        ("a", "b\x1fc"),
        ("a:b", "c"),
        ("a", "b:c"),
        ("a|b", "c"),
        ("a", "b|c"),
        ("a%7Cb", "c"),
        ("a}", "{b"),
        ("a", "}{b"),
        ('a"', "b"),
        ("a", '"b'),
        ('["a", "b"]', "c"),
        ("a", "b"),
        ("\u00e9", "s"),
        ("e\u0301", "s"),
        ("a\\", "b"),
        ("a", "\\b"),
        ("a'", "b"),
        ("*", "b"),
        ("a", "*"),
    ]


def hostile_ids() -> st.SearchStrategy[str]:
    """Ids of any text (no NUL, no lone surrogate) that favour the characters key encodings get wrong."""
    tricky = st.sampled_from(["\x1f", ":", "|", "%", "{", "}", "'", '"', "\\", "/", "*", "[", "]", ",", " ", "a", "é"])
    anything = st.characters(exclude_categories=["Cs"], exclude_characters="\x00")
    return st.text(alphabet=tricky | anything, min_size=1, max_size=12)


def at_limit(text: str, tag: str) -> str:
    """An id of exactly :data:`~ravi.kernel.values.MAX_ID_BYTES` UTF-8 bytes: ``text`` (cut at a character where
    it is longer), hex digits of a digest (which a server cannot compress), then ``tag``, which keeps the ids of
    different tests and examples apart."""
    room = MAX_ID_BYTES - len(tag.encode())
    head = text.encode()[:room].decode(errors="ignore")
    fill, seed = "", f"{text}\x1f{tag}".encode(errors="surrogatepass")
    while len(fill) < room - len(head.encode()):
        seed = hashlib.sha256(seed).digest()
        fill += seed.hex()
    out = head + fill[: room - len(head.encode())] + tag
    assert len(out.encode()) == MAX_ID_BYTES
    return out


def past_limit(tag: str) -> dict[str, str]:
    """Ids one UTF-8 byte past :data:`~ravi.kernel.values.MAX_ID_BYTES`, by what their characters take: one ASCII
    id, and one of fewer characters than the limit's bytes (the limit counts bytes, not characters)."""
    return {
        "ascii": at_limit("", tag) + "x",
        "multibyte": "\U0001f680" * (MAX_ID_BYTES // 4 - 1) + "\u00e9\u00e9" + "x",
    }


def id_texts() -> st.SearchStrategy[str]:
    """Any text an id may start with (no NUL, no lone surrogate), up to past the limit: :func:`at_limit` cuts it."""
    return st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\x00"), max_size=MAX_ID_BYTES)


async def refuses_long_ids(calls: Callable[[str], Mapping[str, tuple[str, Callable[[], Awaitable[Any]]]]]) -> None:
    """Each call ``calls(long)`` gives (a description of the call, to the argument it gives ``long`` as and the
    call) raises ``InvalidArgument`` whose message names that argument and
    :data:`~ravi.kernel.values.MAX_ID_BYTES`, for each id of :func:`past_limit`."""
    from ravi.kernel.errors import InvalidArgument

    for kind, long in past_limit(unique("")).items():
        for what, (argument, call) in calls(long).items():
            try:
                await call()
            except InvalidArgument as error:
                text = str(error)
                if argument not in text or str(MAX_ID_BYTES) not in text:
                    pytest.fail(
                        f"{what} ({kind} id) raised InvalidArgument ({text}) naming not {argument} and the limit"
                    )
                continue
            except Exception as other:
                pytest.fail(
                    f"{what} ({kind} id) raised {type(other).__name__} ({other}), not InvalidArgument", pytrace=False
                )
            pytest.fail(f"{what} ({kind} id) did not raise InvalidArgument", pytrace=False)


EXACT_NUMBERS: dict[str, Any] = {
    "e16": 1e16,
    "e17": 1.5e17,
    "max": 1.7976931348623157e308,
    "tiny": 5e-324,
    "small": 1e-7,
    "tenth": 0.1,
    "one": 1.0,
    "big_int": 2**70,
    "low_int": -(2**63) - 1,
    "nested": {"list": [1e20, 2, 2.0, -1e300]},
}
"""JSON numbers a store must give back with their type and value: floats that are whole numbers (a server
that keeps numbers as decimals prints ``1e16`` as ``10000000000000000``, which reads back as an int), the
extremes of a double, and integers beyond 64 bits."""


def json_numbers() -> st.SearchStrategy[int | float]:
    """Any JSON number a store must keep exactly: finite floats (never negative zero, which is refused) and
    integers of any size."""
    floats = st.floats(allow_nan=False, allow_infinity=False).filter(lambda x: x != 0 or str(x) == "0.0")
    return floats | st.integers()


def typed(value: Any) -> str:
    """``value`` as JSON with its keys sorted: equal only when every number has the same type and value
    (``1e16 == 10**16`` in Python, but a float that came back as an int is a changed value)."""
    return json.dumps(value, sort_keys=True)


async def eventually(check: Callable[[], Awaitable[bool]], *, within: float, what: str) -> None:
    """Poll ``check`` until it is true, failing after ``within`` seconds (for time-based behaviour only)."""
    deadline = time.monotonic() + within
    while True:
        if await check():
            return
        if time.monotonic() > deadline:
            pytest.fail(f"{what} did not happen within {within:.1f} s")
        await asyncio.sleep(0.05)


class ContractBase:
    """Base of the contract classes. Not collected by itself (its name does not start with ``Test``)."""

    capabilities: ClassVar[Capabilities] = Capabilities()
    contract_name: ClassVar[str] = "contract"

    @pytest.mark.asyncio  # marked here: a contract whose class is not marked (StrategyContract) runs it too
    async def test_no_overrides_DO_NOT_OVERRIDE(self) -> None:  # noqa: N802 - the name is the warning
        """A subclass may not replace or delete a contract test silently: it must mark its override
        ``@pytest.mark.xfail(reason=...)``, which shows in every report.

        Fix: remove the override, or mark it ``@pytest.mark.xfail(reason="what your backend does instead")``.
        """
        contract = next(
            c
            for c in type(self).__mro__
            if c.__dict__.get("contract_name") and c is not ContractBase and c.__module__.startswith("ravi.conformance")
        )
        silently_changed = []
        for name, member in contract.__dict__.items():
            if not name.startswith("test_") or name == "test_no_overrides_DO_NOT_OVERRIDE":
                continue
            mine = inspect.getattr_static(type(self), name, None)
            if mine is member:
                continue
            marks = getattr(mine, "pytestmark", [])
            if not any(m.name == "xfail" and m.kwargs.get("reason") for m in marks):
                silently_changed.append(name)
        assert not silently_changed, (
            f"{type(self).__name__} overrides contract tests without @pytest.mark.xfail(reason=...): "
            f"{', '.join(silently_changed)}"
        )


async def refuses(error: type[BaseException], calls: Mapping[str, Callable[[], Awaitable[Any]]]) -> None:
    """Each of ``calls`` (a description of the call, as the failure should name it, to the call) raises ``error``.

    A call that raises nothing, or another error, fails the test naming that call: "get_messages(limit=-1) did
    not raise InvalidArgument", not pytest's bare "DID NOT RAISE".
    """
    for what, call in calls.items():
        try:
            await call()
        except error:
            continue
        except Exception as other:
            pytest.fail(f"{what} raised {type(other).__name__} ({other}), not {error.__name__}", pytrace=False)
        pytest.fail(f"{what} did not raise {error.__name__}", pytrace=False)


def protocol_gaps(backend: Any, protocol: type) -> str:
    """What keeps ``backend`` from being a ``protocol`` of :mod:`ravi.kernel.storage`, in words: the methods it
    lacks and those that are not ``async def`` where the Protocol's are; ``""`` when it has them all.

    ``isinstance`` with a ``runtime_checkable`` Protocol checks names only, so a backend with a plain ``def`` passed
    it and failed every test after with "object ... can't be used in 'await' expression".
    """
    missing, sync = [], []
    for name, member in vars(protocol).items():
        if name.startswith("_") or not inspect.isfunction(member):
            continue
        mine = getattr(backend, name, None)
        if not callable(mine):
            missing.append(name)
        elif inspect.iscoroutinefunction(member) and not _is_async(mine):
            sync.append(name)
    gaps = [f"it lacks {', '.join(missing)}"] if missing else []
    if sync:
        gaps.append(f"{', '.join(sync)} {'is' if len(sync) == 1 else 'are'} not `async def`")
    return "; ".join(gaps)


def _is_async(method: Any) -> bool:
    """Whether ``method`` is ``async def``, or a wrapper of one that says so (``functools.wraps`` sets
    ``__wrapped__``: a retry or tracing decorator around an ``async def`` returns its coroutine)."""
    return inspect.iscoroutinefunction(method) or inspect.iscoroutinefunction(inspect.unwrap(method))


def assert_protocol(backend: Any, protocol: type) -> None:
    """Fail naming what :func:`protocol_gaps` finds, if anything."""
    gaps = protocol_gaps(backend, protocol)
    assert not gaps, f"{type(backend).__name__} is not a {protocol.__name__}: {gaps}"


def skip_without(capabilities: Capabilities, ability: str, *, reason: str) -> None:
    """Skip the test when the backend declares it lacks ``ability``."""
    if getattr(capabilities, ability) is False:
        pytest.skip(f"backend lacks {ability}: {reason}")


async def call_or_skip_unsupported(coro: Awaitable[Any], ability: str) -> Any:
    """Await ``coro``; a ``NotImplementedError`` skips the test naming the missing ``ability``."""
    try:
        return await coro
    except NotImplementedError as error:
        pytest.skip(f"backend lacks {ability}: {error or 'NotImplementedError'}")


__all__ = [
    "PROPERTY_CHECKS",
    "assert_protocol",
    "at_limit",
    "id_texts",
    "past_limit",
    "refuses_long_ids",
    "Capabilities",
    "ContractBase",
    "call_or_skip_unsupported",
    "eventually",
    "hostile_ids",
    "hostile_pairs",
    "protocol_gaps",
    "refuses",
    "skip_without",
    "unique",
]
