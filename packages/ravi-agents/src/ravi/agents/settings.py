"""Settings: which backend each store uses, with what options, and how windows are assembled.

Read from ``ravi.toml`` (in the working directory, or the path given, or ``RAVI_CONFIG``) and from ``RAVI_*``
environment variables, which win (``RAVI_HISTORY__BACKEND=postgres``, ``RAVI_HISTORY__DSN=...``,
``RAVI_CONTEXT__MODEL=gpt-4o``). Built on pydantic-settings, the standard for typed settings from files and the
environment. With no configuration at all, everything is in memory.

Example ``ravi.toml``::

    [history]
    backend = "postgres"
    dsn = "postgresql://ravi@localhost/app"

    [context]
    model = "gpt-4o"          # TokenBudgetComposedStrategy.from_model(...)
    retention = "permanent"

    [[context.pipeline]]      # optional: the strategies, in order
    strategy = "tool_result"
    max_chars = 800
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    SettingsError,
    TomlConfigSettingsSource,
)
from pydantic_settings.sources.utils import parse_env_vars

from ravi.agents.telemetry import instrument_store
from ravi.kernel.config import CONFIG_FILE, check_variables, config_path, read_config, store_sources
from ravi.kernel.env import env_name, read_env, read_prefixed
from ravi.kernel.errors import ConfigurationError, RaviError
from ravi.kernel.registry import GROUPS, backend_factory, check_options

if TYPE_CHECKING:
    from ravi.agents.forget import ForgetReport

StrategyName = Literal[
    "sliding_window",
    "tool_result",
    "selective_tool_call",
    "summarization",
    "truncation",
    "token_budget",
    "relevant_recall",
]


class StoreSettings(BaseModel):
    """One store: ``backend`` (an entry-point name) and any options, passed to the backend as they are."""

    model_config = ConfigDict(extra="allow")
    backend: str = "memory"

    def options(self) -> dict[str, Any]:
        """The backend's options (every key but ``backend``)."""
        return dict(self.model_extra or {})


class StrategySettings(BaseModel):
    """One strategy of the pipeline: its name and its parameters (``children`` for ``token_budget``)."""

    model_config = ConfigDict(extra="allow")
    strategy: StrategyName
    children: list[StrategySettings] = Field(default_factory=list)

    def params(self) -> dict[str, Any]:
        return dict(self.model_extra or {})


class ContextSettings(BaseModel):
    """How windows are assembled. ``pipeline`` lists the strategies; without it, ``model`` or ``token_budget``
    gives [tool_result, selective_tool_call, token_budget], and with neither, one sliding window. With ``model``,
    the budget is ``trigger_ratio`` of the context window less ``output_reserve`` (default: the model's maximum
    output), ``tools_reserve`` (tokens of the tool definitions your requests carry) and ``safety_margin``."""

    model_config = ConfigDict(extra="forbid")
    agent_id: str = Field("agent", min_length=1)
    retention: Literal["permanent", "run", "none"] = "permanent"
    model: str | None = None
    token_budget: int | None = Field(None, gt=0)
    trigger_ratio: float = Field(0.8, gt=0, le=1)
    output_reserve: int | None = Field(None, ge=0)
    tools_reserve: int = Field(0, ge=0)
    safety_margin: int = Field(1_024, ge=0)
    pipeline: list[StrategySettings] | None = None


class _RaviVariables(EnvSettingsSource):
    """``RAVI_*`` variables, read through the environment registry (:mod:`ravi.kernel.env`), Ravi's one reader."""

    def _load_env_vars(self) -> Mapping[str, str | None]:
        check_variables(self.settings_cls.model_fields)  # pydantic ignores a misspelt one: it went unseen
        found = read_prefixed("")
        return parse_env_vars(found, self.case_sensitive, self.env_ignore_empty, self.env_parse_none_str)


class _RaviFile(TomlConfigSettingsSource):
    """``ravi.toml``, less the options of a store whose backend a variable switches to another one: they belong
    to the file's backend (``RAVI_HISTORY__BACKEND=memory`` over a Postgres ``[history]`` drops its ``dsn``)."""

    def __call__(self) -> dict[str, Any]:
        data = super().__call__()
        for kind in GROUPS:
            section = data.get(kind)
            switched = read_env(f"{kind}__backend")
            if isinstance(section, dict) and switched and "backend" in section and section["backend"] != switched:
                data[kind] = {"backend": switched}
        return data


class RaviSettings(BaseSettings):
    """Everything Ravi can be configured with. Build it with :func:`load_settings`."""

    model_config = SettingsConfigDict(
        env_prefix=env_name(""), env_nested_delimiter="__", extra="forbid", env_ignore_empty=True
    )
    toml_path: ClassVar[Path | None] = None

    history: StoreSettings = Field(default_factory=StoreSettings)
    state: StoreSettings = Field(default_factory=StoreSettings)
    longterm: StoreSettings = Field(default_factory=StoreSettings)
    vector: StoreSettings = Field(default_factory=StoreSettings)
    graph: StoreSettings = Field(default_factory=StoreSettings)
    blob: StoreSettings = Field(default_factory=StoreSettings)
    tasks: StoreSettings = Field(default_factory=StoreSettings)
    summaries: StoreSettings | None = None
    context: ContextSettings = Field(default_factory=ContextSettings)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: list[PydanticBaseSettingsSource] = [init_settings, _RaviVariables(settings_cls)]
        if cls.toml_path is not None:
            sources.append(_RaviFile(settings_cls, toml_file=cls.toml_path))
        return tuple(sources)

    def store(self, kind: str) -> StoreSettings:
        """The settings of one store kind. Summaries live beside the history unless configured: the history's
        backend and options when that backend keeps summaries, else in memory (:func:`build_summaries` uses the
        history store itself when it keeps them)."""
        if kind == "summaries" and self.summaries is None:
            from ravi.kernel.registry import available

            beside = self.history.backend in available("summaries")
            return self.history if beside else StoreSettings()
        return getattr(self, kind)  # type: ignore[no-any-return]

    def origins(self, kind: str) -> dict[str, str]:
        """Where each option of the store ``kind`` came from (a variable, the file, or the settings given in
        code), for messages that must say where a stray option was set."""
        if kind == "summaries" and self.summaries is None:
            kind = "history"
        path = type(self).toml_path
        if path is not None:
            known = store_sources(kind, path).origins
        else:
            prefix = env_name(f"{kind}__")
            known = {name[len(prefix) :].lower(): name for name in read_prefixed(f"{kind}__")}
        return {key: known.get(key, "the settings given in code") for key in self.store(kind).options()}


def load_settings(path: str | Path | None = None, **overrides: Any) -> RaviSettings:
    """Settings from ``path`` (else ``RAVI_CONFIG``, else ``./ravi.toml`` if present) and the environment.

    Raises:
        ConfigurationError: the file is missing or not valid TOML, or a value is malformed; the message names
            the key (``context.trigger_ratio``) and what is expected.
    """
    toml = config_path(path)
    read_config(toml)  # a missing or malformed file: one clear error before anything else
    settings_cls = type("RaviSettingsFromFile", (RaviSettings,), {"toml_path": toml})
    try:
        return settings_cls(**overrides)  # type: ignore[no-any-return]
    except SettingsError as error:  # a variable of a whole section (RAVI_HISTORY=x) that is not JSON
        field = re.search(r'field "(\w+)"', str(error))
        name = env_name(field.group(1)) if field else "a RAVI_* variable"
        raise ConfigurationError(
            f"invalid settings in RAVI_* variables: {name} is not a JSON object",
            hint="give each option its own variable (RAVI_HISTORY__BACKEND), or the section as a JSON object",
        ) from None
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in error.errors(include_url=False)
        )
        source = f"{toml} or RAVI_* variables" if toml else "RAVI_* variables"
        raise ConfigurationError(
            f"invalid settings in {source}: {problems}", hint="see docs/configuration.md for every key"
        ) from None


def build_store(kind: str, settings: RaviSettings | None = None) -> Any:
    """The store of ``kind`` that ``settings`` name, built with its options, checked and converted by the
    backend's options model (``RAVI_HISTORY__MAX_SIZE=5`` arrives as the integer 5).

    Raises:
        ConfigurationError: naming the ``[kind]`` section, for an unknown backend, options it rejects (naming
            the option and where it was set), or a constructor that failed (naming its error).
    """
    if kind not in GROUPS:
        raise ConfigurationError(f"unknown store kind {kind!r}", hint=f"one of: {', '.join(GROUPS)}")
    settings = settings or load_settings()
    chosen = settings.store(kind)
    where = f"[{kind}] backend = {chosen.backend!r}"
    try:
        factory = backend_factory(kind, chosen.backend)
    except RaviError as error:
        raise ConfigurationError(f"{where}: {error.message}", hint=error.hint) from error
    options = check_options(kind, chosen.backend, chosen.options(), origins=settings.origins(kind), where=where)
    try:
        return instrument_store(factory(**options), kind, chosen.backend)
    except TypeError as error:  # a backend without an options model
        missing = re.findall(r"'(\w+)'", str(error)) if "missing" in str(error) else []
        hint = "check the option names in the backend's documentation"
        if missing:
            keys = ", ".join(f"{k} (or RAVI_{kind.upper()}__{k.upper()})" for k in missing)
            hint = f"set {keys} in the [{kind}] section of {CONFIG_FILE}"
        raise ConfigurationError(f"{where}: {error}", hint=hint) from error
    except RaviError as error:
        raise ConfigurationError(f"{where}: {error.message}", hint=error.hint) from error
    except Exception as error:  # a third party's constructor: its driver's error must not leak out of Ravi
        raise ConfigurationError(
            f"{where}: could not be built: {type(error).__name__}: {error}",
            hint=f"check its options ({', '.join(sorted(options)) or 'none given'})",
        ) from error


def build_summaries(settings: RaviSettings, history: Any) -> Any:
    """The summary store for ``history``: a ``[summaries]`` section's store when configured, else ``history``
    itself when it keeps summaries (every history store Ravi ships does, beside its transcript, and drops them
    when a session is cleared), else what :func:`build_store` gives."""
    from ravi.kernel.storage import SummaryStore

    if settings.summaries is None and isinstance(history, SummaryStore):
        return history
    return build_store("summaries", settings)


@dataclass
class Stores:
    """Every store an agent leans on, built from settings. Each is built when first asked for.

    The stores it built are its own: close them with :meth:`aclose` (or use it as an async context manager) when
    done, as with ``ContextConfig.from_settings()``.

    Example:
        >>> import asyncio
        >>> async def main() -> dict:
        ...     async with Stores.from_settings() as stores:  # ravi.toml and RAVI_* variables; in memory without them
        ...         await stores.state.set_state("s1", {"step": 1})
        ...         return await stores.state.get_state("s1")
        >>> asyncio.run(main())
        {'step': 1}
    """

    settings: RaviSettings

    @classmethod
    def from_settings(cls, settings: RaviSettings | None = None, *, path: str | Path | None = None) -> Stores:
        """Stores as ``settings`` (or the configuration at ``path``) describe them."""
        return cls(settings or load_settings(path))

    async def forget(self, agent_id: str, *, session_id: str | None = None) -> ForgetReport:
        """Erase the agent (or its session ``session_id``) from every store, for a privacy request: the history
        and everything derived from it, session state, long-term memory, vector documents, graph entities, blobs
        and task lists under the scope (docs/privacy.md says what each store holds under it). Idempotent; after
        a crash halfway, running it again finishes the job.

        Returns:
            What each store removed, and which stores cannot forget (``ForgetReport.not_covered``).
        """
        from ravi.agents.forget import forget

        return await forget(self, agent_id, session_id=session_id)

    async def aclose(self) -> None:
        """Close every store built so far (their connection pools), each once: the history store is also the
        summary store when no ``[summaries]`` is configured. Safe to call again; a store asked for afterwards is
        built anew. When a store fails to close, the others are closed still, and the first error is raised."""
        import inspect

        built = [vars(self).pop(kind) for kind in GROUPS if kind in vars(self)]
        failed: BaseException | None = None
        for i, store in enumerate(built):
            if any(store is other for other in built[:i]):
                continue
            closer = getattr(store, "aclose", None) or getattr(store, "close", None)
            if closer is None:
                continue
            try:
                result = closer()
                if inspect.isawaitable(result):
                    await result
            except Exception as error:
                failed = failed or error
        if failed is not None:
            raise failed

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __getattr__(self, kind: str) -> Any:
        if kind not in GROUPS:
            raise AttributeError(kind)
        if kind == "summaries":
            store = build_summaries(self.settings, self.history)
        else:
            store = build_store(kind, self.settings)
        object.__setattr__(self, kind, store)
        return store


__all__ = [
    "CONFIG_FILE",
    "ContextSettings",
    "RaviSettings",
    "StoreSettings",
    "Stores",
    "StrategySettings",
    "build_store",
    "build_summaries",
    "load_settings",
]
