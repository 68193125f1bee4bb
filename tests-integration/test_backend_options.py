"""Every backend's options, typed once: the same keys work from ``RAVI_*`` variables, from ``ravi.toml`` and from
code, one variable switches a backend, and the constructors agree with their models. No server is needed: the
stores are built, never connected."""

from __future__ import annotations

import inspect
import os
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from ravi.agents.settings import build_store, load_settings
from ravi.kernel.errors import ConfigurationError
from ravi.kernel.options import BackendOptions, options_model
from ravi.kernel.registry import GROUPS, available, backend_factory, check_options

REQUIRED = {
    "dsn": "postgresql://ravi@127.0.0.1:1/none",
    "url": "redis://127.0.0.1:1/0",
    "bucket": "ravi-bucket",
}
"""Values for the options without a default (none of them is ever connected to)."""

SAMPLES: dict[str, tuple[str, Any]] = {
    "ttl": ("3600", 3600.0),
    "endpoint_url": ("http://127.0.0.1:1", "http://127.0.0.1:1"),
    "access_key": ("key", "key"),
    "secret_key": ("secret", "secret"),
}
"""An option whose default is none, as a variable sets it and as it must arrive."""


def backends() -> list[tuple[str, str, type[BackendOptions]]]:
    found = []
    for kind in GROUPS:
        for name in available(kind):
            model = options_model(backend_factory(kind, name))
            assert model is not None, f"the {kind} backend {name!r} declares no options model"
            found.append((kind, name, model))
    return found


BACKENDS = backends()


def as_variable(value: Any) -> str:
    """What an operator writes in a variable for ``value``."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, timedelta):
        return str(value.total_seconds())
    return str(value)


def settable(model: type[BackendOptions]) -> dict[str, tuple[str, Any]]:
    """Each option configuration can set, as a variable's text and as the typed value it must become: a value
    other than the default where one is easy to find, so that a value that does not arrive shows."""
    out: dict[str, tuple[str, Any]] = {}
    for name, field in model.model_fields.items():
        option = field.alias or name
        if option in model.code_only:
            continue
        if option in REQUIRED:
            out[option] = (REQUIRED[option], REQUIRED[option])
        elif option in SAMPLES:
            out[option] = SAMPLES[option]
        elif isinstance(field.default, bool):
            out[option] = (as_variable(not field.default), not field.default)
        elif isinstance(field.default, int):
            out[option] = (str(field.default + 1), field.default + 1)
        elif isinstance(field.default, float):
            out[option] = (str(field.default + 0.5), field.default + 0.5)
        elif option == "addressing_style":
            out[option] = ("path", "path")
        elif option in ("schema", "graph"):
            out[option] = ("ravi_other", "ravi_other")
        elif option == "table_prefix":
            out[option] = ("app_", "app_")
        elif option == "key_prefix":
            out[option] = ("app/", "app/")
        elif option == "prefix":
            out[option] = ("app", "app")
        elif option == "region":
            out[option] = ("eu-west-1", "eu-west-1")
        else:
            raise AssertionError(f"no sample value for {model.__name__}.{option}: add one to the test")
    return out


@pytest.fixture(autouse=True)
def no_configuration(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in [n for n in os.environ if n.startswith("RAVI_")]:
        monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)


@pytest.mark.parametrize(("kind", "name", "model"), BACKENDS, ids=[f"{k}={n}" for k, n, _ in BACKENDS])
def test_every_option_works_from_a_variable_as_from_the_file(
    kind: str, name: str, model: type[BackendOptions], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``RAVI_HISTORY__MAX_SIZE=5``, ``__STATEMENT_CACHE_SIZE=0``, ``__TTL=3600``, ``RAVI_BLOB__CREATE_BUCKET=false``:
    numbers and booleans from variables used to fail ("'<' not supported between 'str' and 'int'", "got '5.5'")
    or arrive as text (``"false"``, a true value); the same keys in ravi.toml worked."""
    values = settable(model)
    typed = {option: value for option, (_, value) in values.items()}
    monkeypatch.setenv(f"RAVI_{kind.upper()}__BACKEND", name)
    for option, (text, _) in values.items():
        monkeypatch.setenv(f"RAVI_{kind.upper()}__{option.upper()}", text)
    settings = load_settings()
    from_variables = check_options(kind, name, settings.store(kind).options())
    assert from_variables == typed
    build_store(kind, settings)  # the constructor takes what the variables said, as typed values
    for option in values:
        monkeypatch.delenv(f"RAVI_{kind.upper()}__{option.upper()}")
    toml = "\n".join(f"{option} = {toml_value(value)}" for option, value in typed.items())
    (tmp_path / "ravi.toml").write_text(f'[{kind}]\nbackend = "{name}"\n{toml}\n')
    from_file = check_options(kind, name, load_settings().store(kind).options())
    assert from_file == from_variables


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    return repr(value)


@pytest.mark.parametrize(
    ("variable", "value", "expected"),
    [
        ("RAVI_HISTORY__MAX_SIZE", "5.5", "max_size = '5.5' (from RAVI_HISTORY__MAX_SIZE)"),
        ("RAVI_HISTORY__MIN_SIZE", "20", "min_size <= max_size"),
        ("RAVI_HISTORY__COMMAND_TIMEOUT", "soon", "command_timeout = 'soon' (from RAVI_HISTORY__COMMAND_TIMEOUT)"),
        ("RAVI_HISTORY__CACHE_SESSIONS", "-1", "cache_sessions = '-1' (from RAVI_HISTORY__CACHE_SESSIONS)"),
        ("RAVI_HISTORY__STATEMENT_CACHE_SIZE", "true", "statement_cache_size = 'true'"),
    ],
)
def test_a_bad_number_from_a_variable_names_the_variable(variable: str, value: str, expected: str) -> None:
    """The error used to be a raw ``TypeError`` or a hint to "check the option names"."""
    os.environ["RAVI_HISTORY__BACKEND"] = "postgres"
    os.environ["RAVI_HISTORY__DSN"] = REQUIRED["dsn"]
    os.environ[variable] = value
    try:
        with pytest.raises(ConfigurationError) as info:
            build_store("history", load_settings())
    finally:
        for name in ("RAVI_HISTORY__BACKEND", "RAVI_HISTORY__DSN", variable):
            del os.environ[name]
    assert expected in str(info.value)
    assert str(info.value).startswith("[history] backend = 'postgres'")


def test_a_redis_ttl_from_a_variable_is_seconds(monkeypatch: pytest.MonkeyPatch) -> None:
    """``RAVI_HISTORY__TTL=5.5`` used to be refused with "got '5.5'"."""
    monkeypatch.setenv("RAVI_HISTORY__BACKEND", "redis")
    monkeypatch.setenv("RAVI_HISTORY__URL", REQUIRED["url"])
    monkeypatch.setenv("RAVI_HISTORY__TTL", "5.5")
    assert check_options("history", "redis", load_settings().store("history").options())["ttl"] == 5.5
    build_store("history", load_settings())


POSTGRES_FILE = (
    f'[history]\nbackend = "postgres"\ndsn = "{REQUIRED["dsn"]}"\nmax_size = 4\n\n[context]\nagent_id = "bot"\n'
)


def test_one_variable_switches_a_backend_over_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``RAVI_HISTORY__BACKEND=memory`` over a Postgres ravi.toml used to fail: "InMemoryHistoryProvider got an
    unexpected keyword 'dsn'". The file's options belong to the file's backend and are dropped."""
    from ravi.agents.context import ContextConfig, InMemoryHistoryProvider
    from ravi.kernel.config import store_sources

    (tmp_path / "ravi.toml").write_text(POSTGRES_FILE)
    assert type(build_store("history", load_settings())).__name__ == "PostgresHistoryProvider"
    monkeypatch.setenv("RAVI_HISTORY__BACKEND", "memory")
    assert isinstance(build_store("history", load_settings()), InMemoryHistoryProvider)
    assert isinstance(ContextConfig.from_settings().history, InMemoryHistoryProvider)
    assert load_settings().context.agent_id == "bot"  # the rest of the file still holds
    sources = store_sources("history")
    assert (sources.backend, sources.options, sources.dropped) == ("memory", {}, ("dsn", "max_size"))
    monkeypatch.setenv("RAVI_HISTORY__BACKEND", "postgres")  # naming the file's own backend drops nothing
    assert check_options("history", "postgres", load_settings().store("history").options())["max_size"] == 4


def test_a_stray_option_says_where_it_was_set(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "ravi.toml").write_text('[history]\ndsn = "postgresql://file/db"\n')  # no backend: memory
    with pytest.raises(ConfigurationError) as info:
        build_store("history", load_settings())
    assert "dsn (from ravi.toml [history]) is not one of its options" in str(info.value)
    (tmp_path / "ravi.toml").unlink()
    monkeypatch.setenv("RAVI_HISTORY__BACKEND", "memory")
    monkeypatch.setenv("RAVI_HISTORY__DSN", "postgresql://env/db")
    with pytest.raises(ConfigurationError) as info:
        build_store("history", load_settings())
    assert "dsn (from RAVI_HISTORY__DSN) is not one of its options" in str(info.value)
    assert str(info.value).startswith("[history] backend = 'memory'")


def test_a_missing_option_names_the_key_and_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAVI_HISTORY__BACKEND", "postgres")
    with pytest.raises(ConfigurationError) as info:
        build_store("history", load_settings())
    assert "needs dsn" in str(info.value) and "dsn (or RAVI_HISTORY__DSN)" in str(info.value)


@pytest.mark.parametrize(("kind", "name", "model"), BACKENDS, ids=[f"{k}={n}" for k, n, _ in BACKENDS])
def test_each_constructor_takes_exactly_its_model(kind: str, name: str, model: type[BackendOptions]) -> None:
    """The model is the constructor's types and defaults: every keyword the constructor takes is an option with
    the same default (objects given in code aside), and nothing else is."""
    factory = backend_factory(kind, name)
    parameters = dict(inspect.signature(factory).parameters)
    accepted: dict[str, Any] = {}
    for parameter in parameters.values():
        if parameter.kind is parameter.VAR_KEYWORD:
            continue  # ``**options: Unpack[...]``: the model's options beyond the named ones
        accepted[parameter.name] = parameter.default
    options = model.option_names()
    assert set(accepted) <= set(options), f"{factory.__name__} takes keywords its model lacks"
    if not any(p.kind is p.VAR_KEYWORD for p in parameters.values()):
        assert set(accepted) == set(options), f"{model.__name__} has options {factory.__name__} does not take"
    defaults = {(f.alias or n): f.default for n, f in model.model_fields.items()}
    for option, default in accepted.items():
        if option in model.code_only or default is inspect.Parameter.empty:
            continue
        assert defaults[option] == default, f"{factory.__name__}({option}=...) defaults to {default!r}"


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (
            lambda: __import__("ravi.capabilities.postgres").capabilities.postgres.PostgresHistoryProvider(
                REQUIRED["dsn"], max_size="5"
            ),
            "max_size = '5' (from a keyword argument)",
        ),
        (
            lambda: __import__("ravi.capabilities.redis").capabilities.redis.RedisHistoryProvider(
                REQUIRED["url"], cache_sessions=True
            ),
            "cache_sessions = True",
        ),
        (
            lambda: __import__("ravi.capabilities.s3").capabilities.s3.S3FileStore("bucket", create_bucket="false"),
            "create_bucket = 'false'",
        ),
    ],
)
def test_keyword_arguments_are_taken_as_given(build: Any, message: str) -> None:
    """In code, a value has the type it has: ``"5"`` is not a pool size and ``"false"`` not a boolean (the
    constructor used to compare ``"5"`` with an integer, or keep ``"false"``, a true value)."""
    with pytest.raises(ConfigurationError) as info:
        build()
    assert message in str(info.value)


def test_a_misspelt_option_gets_the_closest_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAVI_HISTORY__BACKEND", "postgres")
    monkeypatch.setenv("RAVI_HISTORY__DSN", "postgresql://nowhere.invalid/db")
    monkeypatch.setenv("RAVI_HISTORY__MAX_SIZ", "4")
    with pytest.raises(ConfigurationError) as info:
        build_store("history", load_settings())
    assert "max_siz (from RAVI_HISTORY__MAX_SIZ) is not one of its options" in str(info.value)
    assert "did you mean 'max_size'?" in str(info.value)


class _NoDimension:
    dimension = 0

    async def embed(self, texts: list[str]) -> list[list[float]]:
        return [[1.0] for _ in texts]


@pytest.mark.parametrize("client", ["class", "no dimension"])
@pytest.mark.parametrize(
    ("kind", "name"), [("longterm", "postgres"), ("longterm", "redis"), ("vector", "postgres")], ids=str
)
def test_a_server_stores_embedding_client_that_is_a_class_or_has_no_dimension_is_refused(
    kind: str, name: str, client: str
) -> None:
    """``embedding_client=HashingEmbeddingClient`` (the class, without the parentheses) or a client of no
    dimensions is refused when the store is built, as the in-memory stores refuse it, not at its first use."""
    from ravi.kernel.embeddings import HashingEmbeddingClient
    from ravi.kernel.errors import InvalidArgument

    factory = backend_factory(kind, name)
    given = HashingEmbeddingClient if client == "class" else _NoDimension()
    required = {k: v for k, v in REQUIRED.items() if k in inspect.signature(factory).parameters}
    with pytest.raises(InvalidArgument):
        factory(**required, embedding_client=given)
