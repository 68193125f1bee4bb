"""The pytest plugin: ``--ravi-backend KIND[=NAME]`` runs the contract of KIND against a registered backend.

The backend and its options come from Ravi's configuration, as everywhere else: the ``[KIND]`` table of
``ravi.toml`` and ``RAVI_<KIND>__<KEY>`` variables (``RAVI_HISTORY__DSN=postgresql://localhost/ravi``). ``NAME``
overrides the configured backend. Run the suite with::

    RAVI_HISTORY__DSN=postgresql://localhost/ravi pytest --ravi-backend history=postgres --pyargs ravi.conformance.run

Before any test runs, a preflight (:func:`preflight`) checks each choice once: the kind exists, the backend is
installed and loads, its options are valid, it has every method of its kind's Protocol (each ``async def``),
isolation can be undone (the backend has an async ``destroy()``), and its server answers. A mistake is one line,
not one failure per test. ``ravi conformance`` runs the same preflight.
"""

from __future__ import annotations

import asyncio
import inspect
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from ravi.conformance._base import protocol_gaps
from ravi.kernel import storage
from ravi.kernel.config import store_sources
from ravi.kernel.env import env_name, read_env
from ravi.kernel.errors import BackendUnavailable, ConfigurationError, PermissionDenied, RaviError
from ravi.kernel.options import options_model
from ravi.kernel.registry import (
    GROUPS,
    PROTOCOLS,
    available,
    backend_factory,
    build_backend,
    check_options,
    did_you_mean,
)

ISOLATION = {"postgres": "schema", "redis": "prefix", "s3": "key_prefix", "age": "graph"}
"""The option that gives each test a scope of its own, for Ravi's persistent backends (used when no
``--ravi-isolate`` names one for the kind)."""

SHARED_IN_PROCESS = {"memory"}
"""Backends whose one instance is the whole store: another provider "on the same store" is the instance itself."""


@dataclass(frozen=True)
class Target:
    """One backend the suite runs against: its kind, its registered name, its configured options (with where each
    came from) and the option that isolates each test, if any."""

    kind: str
    name: str
    options: dict[str, Any] = field(default_factory=dict)
    origins: dict[str, str] = field(default_factory=dict)
    isolate: str | None = None

    def test_options(self) -> dict[str, Any]:
        """The options for one test: those configured, the isolating one with a fresh value."""
        options = dict(self.options)
        if self.isolate:
            fresh = uuid.uuid4().hex[:12]
            if self.isolate == "key_prefix":  # a folder of its own under the configured one (S3 wants the slash)
                options[self.isolate] = f"{options.get(self.isolate) or ''}ravi_{fresh}/"
            else:
                options[self.isolate] = f"{options.get(self.isolate) or 'ravi'}_{fresh}"
        return options


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("ravi", "Ravi conformance")
    group.addoption(
        "--ravi-backend",
        action="append",
        default=[],
        metavar="KIND[=NAME]",
        help="run the conformance contract of KIND against the backend registered as NAME, or the one ravi.toml "
        f"and RAVI_<KIND>__BACKEND configure (kinds: {', '.join(GROUPS)}); repeatable",
    )
    group.addoption(
        "--ravi-isolate",
        action="append",
        default=[],
        metavar="KIND=OPTION",
        help="give the backend option OPTION (a schema, a key prefix, a file path) a fresh value for every test, "
        "so a persistent backend starts empty each time; the backend's async destroy() removes it after; "
        "repeatable",
    )
    group.addoption(
        "--ravi-no-preflight",
        action="store_true",
        default=False,
        help="skip the preflight (backend found, options valid, server reachable); for runners that did it",
    )


def parse_spec(spec: str) -> tuple[str, str | None]:
    """``(kind, name)`` from ``KIND`` or ``KIND=NAME`` (``name`` is ``None`` for a bare kind).

    Raises:
        ConfigurationError: the kind is unknown (with the closest kind) or ``NAME`` is empty.
    """
    kind, sep, name = spec.partition("=")
    if kind not in GROUPS:
        raise ConfigurationError(
            f"{spec}: unknown store kind {kind!r}",
            hint=f"{did_you_mean(kind, GROUPS)}write KIND or KIND=NAME with KIND one of {', '.join(GROUPS)}",
        )
    if sep and not name:
        raise ConfigurationError(f"{spec}: no backend name after '='", hint=f"write {kind} or {kind}=NAME")
    return kind, name or None


def _legacy(kind: str) -> None:
    if read_env(f"{kind}-options") is not None:
        raise ConfigurationError(
            f"{env_name(f'{kind}-options')} is no longer read",
            hint=f"set each option as {env_name(kind)}__<KEY> (for example {env_name(kind)}__DSN) or in the "
            f"[{kind}] table of ravi.toml",
        )


def resolve(specs: Sequence[str], isolate: Sequence[str] = ()) -> list[Target]:
    """The targets ``specs`` (``KIND`` or ``KIND=NAME``) and ``isolate`` (``KIND=OPTION``) name, checked without
    touching a server: kinds exist, backends are installed (with the closest names when not), options are valid.

    Raises:
        ConfigurationError: one line naming the first mistake and its fix.
    """
    chosen: dict[str, str | None] = {}
    for spec in specs:
        kind, name = parse_spec(spec)
        chosen[kind] = name
    isolating: dict[str, str] = {}
    for spec in isolate:
        kind, sep, named = spec.partition("=")
        if not sep or not named:
            raise ConfigurationError(f"isolate {spec!r}: expected KIND=OPTION", hint="for example history=path")
        parse_spec(kind)
        if kind not in chosen:
            raise ConfigurationError(f"isolate {spec!r}: {kind} is not among the kinds being run")
        isolating[kind] = named
    targets = []
    for kind, name in chosen.items():
        _legacy(kind)
        sources = store_sources(kind, backend=name)
        where = f"{kind}={sources.backend}"
        try:
            backend_factory(kind, sources.backend)
        except ConfigurationError as error:
            installed = available(kind)
            if sources.backend in installed:  # registered, but it failed to load: say why
                raise ConfigurationError(f"{where}: {error.message}", hint=error.hint) from None
            raise ConfigurationError(
                f"{where}: no {kind} backend named {sources.backend!r} is installed "
                f"(installed: {', '.join(installed) or 'none'})",
                hint=error.hint,
            ) from None
        check_options(kind, sources.backend, sources.options, origins=sources.origins, where=where)
        isolated = isolating.get(kind) or ISOLATION.get(sources.backend)
        target = Target(kind, sources.backend, sources.options, sources.origins, isolated)
        factory = backend_factory(kind, sources.backend)
        model = options_model(factory)
        if isolating.get(kind) and model is not None and isolated not in model.option_names():
            names = model.option_names()
            raise ConfigurationError(
                f"--isolate {kind}={isolated}: {isolated!r} is not an option of the {sources.backend!r} {kind} backend"
                f" (its options: {', '.join(names) or 'none'})",
                hint=f"{did_you_mean(str(isolated), names)}isolate by the option that names where its data lives",
            )
        if inspect.isclass(factory):  # checked before one is built, so a refusal leaves nothing behind
            check_protocol(target, factory)
            check_destroy(target, factory)
        targets.append(target)
    return targets


async def _touch(kind: str, backend: Any) -> None:
    """One read of the kind's Protocol, which reaches the server (and creates the backend's tables if needed)."""
    from ravi.kernel.scope import Scope

    probe = "ravi-preflight"
    if kind == "history":
        await backend.count_messages(probe, session_id=probe)
    elif kind == "state":
        await backend.get_state(probe)
    elif kind == "longterm":
        await backend.get(probe, probe)
    elif kind == "vector":
        await backend.list_collections()
    elif kind == "graph":
        await backend.get_entity(probe)
    elif kind == "blob":
        await backend.connect()
    elif kind == "tasks":
        await backend.get_task_list(probe, probe)
    elif kind == "summaries":
        await backend.get_summary(Scope(probe, probe, "0"), probe)


async def close_backend(kind: str, backend: Any) -> None:
    """Close a backend the suite built, as its kind closes (a blob store disconnects)."""
    closer = getattr(backend, "disconnect" if kind == "blob" else "close", None) or getattr(backend, "aclose", None)
    if closer is not None:
        result = closer()
        if inspect.isawaitable(result):
            await result


def check_protocol(target: Target, backend: Any) -> None:
    """The backend has every method of its kind's Protocol, each ``async def`` (the contract's first rule,
    checked once here rather than failing every test). ``backend`` is the backend, or its class.

    Raises:
        ConfigurationError: naming the methods it lacks and those that are not ``async def``.
    """
    protocol = getattr(storage, PROTOCOLS[target.kind])
    gaps = protocol_gaps(backend, protocol)
    if gaps:
        name = backend.__name__ if inspect.isclass(backend) else type(backend).__name__
        raise ConfigurationError(
            f"{target.kind}={target.name}: {name} is not a {protocol.__name__}: {gaps}",
            hint=f"every method of ravi.kernel.storage.{protocol.__name__} is `async def`; give {name} each one, "
            "with the Protocol's signature",
        )


def check_destroy(target: Target, backend: Any) -> None:
    """An isolated backend must be able to remove what each test made: ``destroy`` exists and is async.
    ``backend`` is the backend, or its class (checked before one is built, so a refusal leaves nothing).

    Raises:
        ConfigurationError: without it every test would leave its scope (a file, a schema) behind.
    """
    if not target.isolate:
        return
    destroy = getattr(backend, "destroy", None)
    where = f"{target.kind}={target.name}"
    name = backend.__name__ if inspect.isclass(backend) else type(backend).__name__
    if destroy is None:
        raise ConfigurationError(
            f"{where}: isolating each test by {target.isolate!r} needs {name}.destroy(), which removes what one "
            f"test made; without it every test would leave its {target.isolate} behind",
            hint=f"give {name} an `async def destroy(self) -> None` that removes everything its {target.isolate} holds",
        )
    if not inspect.iscoroutinefunction(destroy):
        raise ConfigurationError(f"{where}: {name}.destroy() must be async (`async def destroy(self) -> None`)")


async def reach(target: Target) -> None:
    """Build the backend as a test would, reach its server once, and undo what that did.

    Raises:
        ConfigurationError: the backend refused its options, lacks a method of its kind's Protocol, or cannot
            undo isolation.
        BackendUnavailable: its server does not answer (the message says where it was looked for).
    """
    where = f"{target.kind}={target.name}"
    backend = build_backend(target.kind, target.name, target.test_options(), origins=target.origins)
    try:
        check_protocol(target, backend)
        check_destroy(target, backend)
        try:
            await asyncio.wait_for(_touch(target.kind, backend), timeout=60)
        except (BackendUnavailable, PermissionDenied, ConfigurationError) as error:
            detail = " ".join(str(error.message).split())
            raise type(error)(f"{where}: the backend cannot be reached: {detail}", hint=error.hint) from error
        except TimeoutError:
            raise BackendUnavailable(f"{where}: the backend did not answer within 60 s") from None
        except Exception:
            pass
        if target.isolate:
            await backend.destroy()
    finally:
        await close_backend(target.kind, backend)


def preflight(specs: Sequence[str], isolate: Sequence[str] = ()) -> list[Target]:
    """Check every choice once before any test runs: :func:`resolve`, then :func:`reach` for each target.

    Raises:
        RaviError: one line naming the first mistake: a wrong kind or name (with the closest ones), an invalid
            or missing option (with where to set it), a method of the Protocol missing or not ``async def``,
            isolation without ``destroy()``, a server that does not answer.
    """
    targets = resolve(specs, isolate)

    async def reach_all() -> None:
        for target in targets:
            await reach(target)

    asyncio.run(reach_all())
    return targets


def selected_backends(config: pytest.Config) -> dict[str, str]:
    """``kind -> name`` from ``--ravi-backend`` options (a bare KIND takes the configured backend)."""
    return {t.kind: t.name for t in targets(config)}


def targets(config: pytest.Config) -> list[Target]:
    """The targets ``--ravi-backend`` and ``--ravi-isolate`` name (resolved once per run)."""
    found: list[Target] | None = getattr(config, "_ravi_targets", None)
    if found is None:
        found = resolve(config.getoption("ravi_backend") or [], config.getoption("ravi_isolate") or [])
        config._ravi_targets = found  # type: ignore[attr-defined]
    return found


def isolated_options(config: pytest.Config) -> dict[str, str]:
    """``kind -> option`` that isolates each test, from ``--ravi-isolate`` or Ravi's own persistent backends."""
    return {t.kind: t.isolate for t in targets(config) if t.isolate}


def backend_options(kind: str, *, isolate: str | None = None) -> dict[str, Any]:
    """Options for the backend of ``kind``: its ``[kind]`` table in ``ravi.toml`` with ``RAVI_<KIND>__<KEY>``
    variables over it (:func:`ravi.kernel.config.store_sources`), ``backend`` left out. With ``isolate``, that
    option gets a fresh value (its configured value, or ``ravi``, plus a random suffix).

    Raises:
        ConfigurationError: the configuration file is invalid, or ``RAVI_<KIND>_OPTIONS`` (no longer read) is set.
    """
    _legacy(kind)
    return Target(kind, "", store_sources(kind).options, isolate=isolate).test_options()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "ravi_kind(kind): the store kind a conformance test class checks")
    if not config.getoption("ravi_backend"):
        return
    try:  # one usage error before any test, not a failure per test
        chosen = targets(config)
        if not config.getoption("ravi_no_preflight"):

            async def reach_all() -> None:
                for target in chosen:
                    await reach(target)

            asyncio.run(reach_all())
    except RaviError as error:
        raise pytest.UsageError(f"--ravi-backend {error}") from None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    chosen = selected_backends(config) if config.getoption("ravi_backend") else {}
    if not chosen:
        return
    keep, drop = [], []
    for item in items:
        marker = item.get_closest_marker("ravi_kind")
        if marker is None or marker.args[0] in chosen:
            keep.append(item)
        else:
            drop.append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def _paragraphs(doc: str) -> list[str]:
    text = inspect.cleandoc(doc).replace("``", "`")  # a report is read as plain text: one backtick quotes code
    return [" ".join(p.split()) for p in text.split("\n\n") if p.strip()]


def contract_rule(item: pytest.Item) -> str | None:
    """The rule a contract test checks: its contract's name and the first paragraph of its docstring."""
    found = _contract_doc(item)
    if found is None:
        return None
    contract, paragraphs = found
    return f"{contract}: {paragraphs[0]}"


FIX_PREFIXES = ("Fix:", "Troubleshooting:")
"""How a paragraph of a contract test's docstring that says how to fix its failure starts."""


def contract_fix(item: pytest.Item) -> str | None:
    """How to fix a failure of a contract test: the paragraph of its docstring that starts with ``Fix:`` or
    ``Troubleshooting:``."""
    found = _contract_doc(item)
    if found is None:
        return None
    for paragraph in found[1]:
        for prefix in FIX_PREFIXES:
            if paragraph.startswith(prefix):
                return paragraph.removeprefix(prefix).strip()
    return None


def _contract_doc(item: pytest.Item) -> tuple[str, list[str]] | None:
    function = getattr(item, "function", None)
    cls = getattr(item, "cls", None)
    if function is None or cls is None:
        return None
    for owner in cls.__mro__:
        if function.__name__ in owner.__dict__ and owner.__module__.startswith("ravi.conformance."):
            paragraphs = _paragraphs(owner.__dict__[function.__name__].__doc__ or "")
            if not paragraphs:
                return None
            return getattr(owner, "contract_name", owner.__name__), paragraphs
    return None


def failure_detail(report: pytest.TestReport) -> str:
    """What broke, in one line: the assertion's message (which call broke which rule), not its file and line."""
    crash = getattr(report.longrepr, "reprcrash", None)
    message = str(getattr(crash, "message", "") or "")
    if not message:
        return str(report.longrepr).strip().splitlines()[-1] if report.longrepr else ""
    lines = [line for line in message.splitlines() if line.strip()]
    first = lines[0] if lines else message
    # "AssertionError: a reader saw a message twice" or "Failed: get_messages(limit=-1) did not raise ..."
    for prefix in ("AssertionError: ", "Failed: "):
        first = first.removeprefix(prefix)
    return " ".join(first.split())[:300]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """A failing contract test prints the rule it checks and how to fix it, beside pytest's own report; both are
    in the report's ``user_properties`` (``ravi_rule``, ``ravi_fix``, ``ravi_detail``) for runners."""
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        rule = contract_rule(item)
        if rule is not None:
            report.sections.append(("the contract rule that failed", rule))
            report.user_properties.append(("ravi_rule", rule))
            fix = contract_fix(item)
            if fix:
                report.sections.append(("how to fix it", fix))
                report.user_properties.append(("ravi_fix", fix))
        report.user_properties.append(("ravi_detail", failure_detail(report)))


__all__ = [
    "ISOLATION",
    "SHARED_IN_PROCESS",
    "Target",
    "backend_options",
    "check_destroy",
    "check_protocol",
    "close_backend",
    "contract_fix",
    "contract_rule",
    "failure_detail",
    "isolated_options",
    "parse_spec",
    "preflight",
    "reach",
    "resolve",
    "selected_backends",
    "targets",
]
