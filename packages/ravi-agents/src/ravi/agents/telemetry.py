"""OpenTelemetry traces and metrics of window assembly and store calls, for operators. Off until :func:`enable`.

``pip install 'ravi-agents[otel]'`` brings ``opentelemetry-api``; the application configures the SDK (exporters,
sampling) as for any other instrumented library, then calls :func:`enable`. Until then nothing of OpenTelemetry
is imported and an assembly costs one check of a module variable (``make bench`` measures it).

Spans follow the OpenTelemetry semantic conventions:

* ``assemble_window {agent}`` (GenAI conventions): ``gen_ai.operation.name`` = ``assemble_window``,
  ``gen_ai.agent.id``, ``gen_ai.conversation.id`` (the session), ``gen_ai.usage.input_tokens`` (the window's
  tokens, what the model call will be sent), and ``ravi.window.*`` counts;
* ``{operation} {kind}`` for each call of a store built from settings while enabled (database conventions):
  ``db.system.name`` (``postgresql``, ``redis``, ...), ``db.operation.name`` (``append_many``, ``read_window``),
  ``db.collection.name`` (the store kind), ``error.type`` on failure.

Metrics: ``ravi.window.tokens`` (histogram), ``ravi.window.assembly.duration`` (histogram, s),
``ravi.window.messages.removed`` (counter; ``ravi.removal`` = ``dropped`` or ``summarised``, of the messages the
window was assembled from), ``ravi.window.recalled`` (counter: older messages relevant recall brought back),
``ravi.window.prefix_cache`` (counter; ``ravi.prefix_cache.result`` = ``hit`` when the session's previous window
is a prefix of the new one, so a provider's prompt cache can serve it, else ``miss``) and
``db.client.operation.duration`` (histogram, s) per store call.

Example:
    >>> from ravi.agents import telemetry
    >>> telemetry.enabled()
    False
"""

from __future__ import annotations

import functools
import inspect
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, TypeVar

from ravi.kernel.errors import ConfigurationError
from ravi.kernel.messages import SUMMARY_KEY
from ravi.kernel.registry import install_command

if TYPE_CHECKING:
    from ravi.kernel.agent import SessionContext
    from ravi.kernel.messages import ChatMessage

_log = logging.getLogger(__name__)

SYSTEMS = {"postgres": "postgresql", "age": "postgresql", "redis": "redis", "s3": "aws.s3", "memory": "ravi.memory"}
"""``db.system.name`` of Ravi's backends, by entry-point name (others report their own name)."""

_in_store_call: ContextVar[bool] = ContextVar("ravi_telemetry_in_store_call", default=False)
"""Set while a traced store call runs, so the store's calls of its own methods are not spans of their own."""

_LIFECYCLE = frozenset({"aclose", "close", "connect", "disconnect", "destroy"})
"""A store's own opening and closing: not operations on its data."""

F = TypeVar("F", bound=Callable[..., Awaitable[Any]])


class _Instruments:
    """The tracer and the metric instruments, made once by :func:`enable`."""

    def __init__(self, tracer_provider: Any, meter_provider: Any) -> None:
        from opentelemetry import metrics, trace

        version = _version()
        self.trace = trace
        self.tracer = trace.get_tracer("ravi", version, tracer_provider=tracer_provider)
        meter = metrics.get_meter("ravi", version, meter_provider=meter_provider)
        self.window_tokens = meter.create_histogram(
            "ravi.window.tokens", unit="{token}", description="Tokens of each assembled window."
        )
        self.window_duration = meter.create_histogram(
            "ravi.window.assembly.duration", unit="s", description="Time to assemble a window, reads included."
        )
        self.removed = meter.create_counter(
            "ravi.window.messages.removed",
            unit="{message}",
            description="Messages a window was assembled from but does not hold: dropped or summarised.",
        )
        self.recalled = meter.create_counter(
            "ravi.window.recalled", unit="{message}", description="Older messages relevant recall brought back."
        )
        self.prefix_cache = meter.create_counter(
            "ravi.window.prefix_cache",
            unit="{window}",
            description="Windows whose session's previous window is their prefix (hit) or not (miss).",
        )
        self.store_duration = meter.create_histogram(
            "db.client.operation.duration", unit="s", description="Duration of a store call."
        )


_active: _Instruments | None = None


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("ravi-agents")
    except PackageNotFoundError:
        return "unknown"


def enable(*, tracer_provider: Any = None, meter_provider: Any = None) -> None:
    """Start tracing window assembly and store calls (stores built from settings from now on).

    Args:
        tracer_provider, meter_provider: OpenTelemetry providers; by default the global ones the application
            configured (``opentelemetry.trace.set_tracer_provider``, ...).

    Raises:
        ConfigurationError: ``opentelemetry-api`` is not installed (the message says what to install).
    """
    global _active
    try:
        _active = _Instruments(tracer_provider, meter_provider)
    except ImportError:
        raise ConfigurationError(
            "telemetry needs opentelemetry-api, which is not installed", hint=install_command("ravi-agents[otel]")
        ) from None


def disable() -> None:
    """Stop tracing; stores already instrumented stop reporting too."""
    global _active
    _active = None


def enabled() -> bool:
    """Whether :func:`enable` was called (and not undone by :func:`disable`)."""
    return _active is not None


def traced_window(method: F) -> F:
    """Trace the engine's entry, ``window(self, request)``: one span per window, and its metrics. Off, the
    entry's own coroutine is returned as it is: the cost is one call and one check."""

    @functools.wraps(method)
    def entry(self: Any, request: Any) -> Any:
        instruments = _active
        if instruments is None:
            return method(self, request)
        return _traced_window(instruments, method, self, request)

    return entry  # type: ignore[return-value]


def traced_pass(method: F) -> F:
    """Note what one pass of the strategies (``_run(self, messages, session, explain, unsaved)``) assembled the
    window from, for the traced window around it (a windowed read may take more than one pass; the last one is the
    window's). Outside a traced window, the pass's own coroutine is returned as it is."""

    @functools.wraps(method)
    def run(self: Any, history: Sequence[ChatMessage], session: SessionContext, explain: bool, unsaved: int = 0) -> Any:
        passes = _passes.get()
        if passes is None:
            return method(self, history, session, explain, unsaved)
        return _noted_pass(passes, method, self, history, session, explain, unsaved)

    return run  # type: ignore[return-value]


_passes: ContextVar[list[tuple[list[ChatMessage], SessionContext]] | None] = ContextVar(
    "ravi_telemetry_passes", default=None
)
"""Inside a traced window: what its last pass of the strategies was given, and for which session."""


async def _noted_pass(
    passes: list[tuple[list[ChatMessage], SessionContext]],
    method: Callable[..., Awaitable[Any]],
    pipeline: Any,
    history: Sequence[ChatMessage],
    session: SessionContext,
    explain: bool,
    unsaved: int,
) -> Any:
    window = await method(pipeline, history, session, explain, unsaved)
    passes[:] = [(list(history), session)]
    return window


async def _traced_window(
    instruments: _Instruments, method: Callable[..., Awaitable[Any]], pipeline: Any, request: Any
) -> Any:
    agent, conversation = request.agent_id or "anonymous", request.session_id
    # the window kept before this one, and its generation: not the previous window once the session was cleared
    previous, previous_generation = (
        pipeline._held_window(request.agent_id, request.session_id) if request.agent_id else (None, None)
    )
    passes: list[tuple[list[ChatMessage], SessionContext]] = []
    started = time.perf_counter()
    noting = _passes.set(passes)
    try:
        with instruments.tracer.start_as_current_span(
            f"assemble_window {agent}",
            attributes={
                "gen_ai.operation.name": "assemble_window",
                "gen_ai.agent.id": agent,
                "gen_ai.conversation.id": conversation,
                "ravi.pipeline.strategies": [s.name for s in pipeline.strategies],
            },
        ) as span:
            window = await method(pipeline, request)
            if passes:
                source, session = passes[-1]
                if session.generation != previous_generation:
                    previous = None
                seconds = time.perf_counter() - started
                _record(instruments, span, pipeline, session, source, window.messages, previous, seconds, agent)
    finally:
        _passes.reset(noting)
    return window


def _strategies(strategies: Sequence[Any]) -> Iterator[Any]:
    for strategy in strategies:
        yield strategy
        yield from _strategies(strategy.children())


def _record(
    instruments: _Instruments,
    span: Any,
    pipeline: Any,
    session: SessionContext,
    source: list[ChatMessage],
    window: Sequence[ChatMessage],
    previous: Sequence[ChatMessage] | None,
    seconds: float,
    agent: str,
) -> None:
    kept = {m.id for m in window}
    position = {m.id: i for i, m in enumerate(source)}
    covered: set[str] = set()
    for message in window:
        covers = message.metadata.get(SUMMARY_KEY)
        if isinstance(covers, dict) and covers.get("first") in position and covers.get("last") in position:
            covered |= {m.id for m in source[position[covers["first"]] : position[covers["last"]] + 1]}
    removed = [m.id for m in source if m.id not in kept]
    summarised = sum(1 for i in removed if i in covered)
    dropped = len(removed) - summarised
    recalled = sum(len(strategy.recalled(session)) for strategy in _strategies(pipeline.strategies))
    tokens = pipeline.window_counter(session.counter).count_messages(window)
    hit = previous is not None and [m.id for m in window[: len(previous)]] == [m.id for m in previous]
    span.set_attributes(
        {
            "gen_ai.usage.input_tokens": tokens,
            "ravi.window.messages": len(window),
            "ravi.window.source_messages": len(source),
            "ravi.window.dropped": dropped,
            "ravi.window.summarised": summarised,
            "ravi.window.recalled": recalled,
            "ravi.window.prefix_cache_hit": hit,
        }
    )
    attributes = {"gen_ai.agent.id": agent}
    instruments.window_tokens.record(tokens, attributes)
    instruments.window_duration.record(seconds, attributes)
    if dropped:
        instruments.removed.add(dropped, {**attributes, "ravi.removal": "dropped"})
    if summarised:
        instruments.removed.add(summarised, {**attributes, "ravi.removal": "summarised"})
    if recalled:
        instruments.recalled.add(recalled, attributes)
    if previous is not None:
        instruments.prefix_cache.add(1, {**attributes, "ravi.prefix_cache.result": "hit" if hit else "miss"})


def instrument_store(store: Any, kind: str, backend: str) -> Any:
    """``store`` with each of its public coroutine methods traced while telemetry is enabled (the methods are
    wrapped on the instance: its type, and what it is an instance of, do not change). Returns ``store``."""
    if _active is None:
        return store
    system = SYSTEMS.get(backend, backend)
    for name, member in inspect.getmembers(type(store)):
        if name.startswith("_") or name in _LIFECYCLE or not inspect.iscoroutinefunction(member):
            continue
        setattr(store, name, _traced_call(getattr(store, name), name, kind, system))
    return store


def _traced_call(call: Callable[..., Awaitable[Any]], operation: str, kind: str, system: str) -> Any:
    @functools.wraps(call)
    async def traced(*args: Any, **kwargs: Any) -> Any:
        instruments = _active
        if instruments is None or _in_store_call.get():  # a store's call of its own methods is one operation
            return await call(*args, **kwargs)
        attributes = {"db.system.name": system, "db.operation.name": operation, "db.collection.name": kind}
        started = time.perf_counter()
        with instruments.tracer.start_as_current_span(
            f"{operation} {kind}", kind=instruments.trace.SpanKind.CLIENT, attributes=attributes
        ) as span:
            inside = _in_store_call.set(True)
            try:
                return await call(*args, **kwargs)
            except BaseException as error:
                attributes = {**attributes, "error.type": type(error).__qualname__}
                span.set_attribute("error.type", type(error).__qualname__)
                raise
            finally:
                _in_store_call.reset(inside)
                instruments.store_duration.record(time.perf_counter() - started, attributes)

    return traced


_LOGGED: OrderedDict[tuple[str, str], None] = OrderedDict()
_LOGGED_MAX = 256


def log_failure_once(logger: logging.Logger, what: str, error: BaseException) -> None:
    """Log ``what`` failed with ``error`` as a warning, once per distinct reason (a model that stays down is one
    line, not one per window); the same reason is logged again only after 256 others."""
    key = (what, f"{type(error).__name__}: {error}")
    if key in _LOGGED:
        _LOGGED.move_to_end(key)
        return
    _LOGGED[key] = None
    while len(_LOGGED) > _LOGGED_MAX:
        _LOGGED.popitem(last=False)
    logger.warning("%s failed: %s: %s", what, type(error).__name__, error)


__all__ = [
    "SYSTEMS",
    "disable",
    "enable",
    "enabled",
    "instrument_store",
    "log_failure_once",
    "traced_pass",
    "traced_window",
]
