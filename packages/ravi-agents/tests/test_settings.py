from __future__ import annotations

import os
from pathlib import Path

import pytest

from ravi.agents.context import (
    AgentContext,
    ContextConfig,
    InMemoryHistoryProvider,
    SelectiveToolCallCompactionStrategy,
    SlidingWindowCompaction,
    TokenBudgetComposedStrategy,
    ToolResultCompactionStrategy,
)
from ravi.agents.settings import Stores, load_settings
from ravi.agents.storage import InMemoryFileStore, InMemoryVectorStore, TaskStore
from ravi.kernel.agent import HistoryRetention
from ravi.kernel.errors import ConfigurationError, InvalidArgument
from ravi.kernel.messages import ChatMessage


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import os

    for name in list(os.environ):
        if name.startswith("RAVI_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)


def test_no_configuration_means_everything_in_memory() -> None:
    config = ContextConfig.from_settings()
    assert isinstance(config.history, InMemoryHistoryProvider)
    assert [type(s) for s in config.pipeline.strategies] == [SlidingWindowCompaction]
    assert config.retention is HistoryRetention.PERMANENT
    stores = Stores.from_settings()
    assert isinstance(stores.vector, InMemoryVectorStore)
    assert isinstance(stores.blob, InMemoryFileStore)
    assert isinstance(stores.tasks, TaskStore)
    assert stores.vector is stores.vector  # built once


def test_ravi_toml_in_the_working_directory_is_read(tmp_path: Path) -> None:
    (tmp_path / "ravi.toml").write_text(
        '[context]\nretention = "run"\nagent_id = "bot"\n\n'
        '[[context.pipeline]]\nstrategy = "tool_result"\nmax_chars = 50\n\n'
        '[[context.pipeline]]\nstrategy = "token_budget"\ntoken_budget = 900\n'
        '[[context.pipeline.children]]\nstrategy = "selective_tool_call"\nkeep_recent_groups = 1\n'
    )
    settings = load_settings()
    assert settings.context.agent_id == "bot"
    config = ContextConfig.from_settings(settings)
    first, budget = config.pipeline.strategies
    assert isinstance(first, ToolResultCompactionStrategy) and first.max_chars == 50
    assert isinstance(budget, TokenBudgetComposedStrategy) and budget.token_budget == 900
    assert isinstance(budget.strategies[0], SelectiveToolCallCompactionStrategy)
    assert config.retention is HistoryRetention.RUN


async def test_the_configured_agent_id_is_the_one_the_context_stores_under(tmp_path: Path) -> None:
    """``AgentContext(ContextConfig.from_settings())`` used to store under "agent" whatever ``[context] agent_id``
    said, so ``ravi history list`` (which reads the configured agent) showed nothing."""
    (tmp_path / "ravi.toml").write_text('[context]\nagent_id = "support"\n')
    config = ContextConfig.from_settings(path=tmp_path / "ravi.toml")
    context = AgentContext(config)
    assert context.agent_id == "support"
    await context.add_message("session-42", ChatMessage.user("hello"))
    assert await config.history.count_messages("support", session_id="session-42") == 1
    assert AgentContext(config, agent_id="other").agent_id == "other"  # an explicit agent id still wins


def test_environment_overrides_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "ravi.toml").write_text('[context]\nmodel = "gpt-4o"\n')
    monkeypatch.setenv("RAVI_CONTEXT__MODEL", "claude-sonnet-4")
    config = ContextConfig.from_settings()
    budget = config.pipeline.strategies[-1]
    assert isinstance(budget, TokenBudgetComposedStrategy)
    assert budget.token_budget == int((200_000 - 64_000 - 1_024) * 0.8)


def test_a_given_path_must_exist(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="does not exist"):
        load_settings(tmp_path / "missing.toml")


def test_unknown_backend_names_the_section(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAVI_HISTORY__BACKEND", "postgress")
    with pytest.raises(ConfigurationError) as info:
        ContextConfig.from_settings()
    assert "[history] backend = 'postgress'" in str(info.value)
    assert "installed: memory" in str(info.value)


def test_a_backend_that_cannot_be_built_names_the_section_and_its_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A backend whose constructor opens its store (a SQLite file in a missing folder) leaked the driver's
    ``sqlite3.OperationalError`` out of ``from_settings`` (and a traceback out of every ``ravi`` command)."""
    from importlib.metadata import EntryPoint

    from ravi.kernel import registry

    eps = [EntryPoint("sqlite", "sqlite3:connect", "ravi.history")]
    monkeypatch.setattr(registry, "entry_points", lambda group: eps if group == "ravi.history" else [])
    monkeypatch.setenv("RAVI_HISTORY__BACKEND", "sqlite")
    monkeypatch.setenv("RAVI_HISTORY__DATABASE", str(tmp_path / "missing" / "history.db"))
    with pytest.raises(ConfigurationError) as info:
        ContextConfig.from_settings()
    assert "[history] backend = 'sqlite': could not be built: OperationalError: unable to open database" in str(
        info.value
    )


def test_missing_option_names_the_key_to_set(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("ravi.capabilities.postgres")
    monkeypatch.setenv("RAVI_HISTORY__BACKEND", "postgres")
    with pytest.raises(ConfigurationError) as info:
        ContextConfig.from_settings()
    assert "dsn (or RAVI_HISTORY__DSN)" in str(info.value)


@pytest.mark.parametrize(
    ("toml", "key"),
    [
        ("[context]\ntrigger_ratio = 1.5\n", "context.trigger_ratio"),
        ('[context]\nretention = "forever"\n', "context.retention"),
        ('[contxt]\nmodel = "gpt-4o"\n', "contxt"),
        ('[[context.pipeline]]\nstrategy = "magic"\n', "context.pipeline.0.strategy"),
    ],
)
def test_malformed_values_name_the_key(tmp_path: Path, toml: str, key: str) -> None:
    (tmp_path / "ravi.toml").write_text(toml)
    with pytest.raises(ConfigurationError) as info:
        load_settings()
    assert key in str(info.value)


def test_invalid_toml_says_so(tmp_path: Path) -> None:
    (tmp_path / "ravi.toml").write_text("[context\n")
    with pytest.raises(ConfigurationError, match="not valid TOML"):
        load_settings()


def test_a_file_that_is_not_utf8_is_a_configuration_error(tmp_path: Path) -> None:
    """A ``ravi.toml`` in another encoding used to raise ``UnicodeDecodeError`` (TOML is UTF-8)."""
    (tmp_path / "ravi.toml").write_bytes('[context]\nagent_id = "caf\u00e9"\n'.encode("latin-1"))
    with pytest.raises(ConfigurationError, match=r"not valid TOML.*UTF-8"):
        load_settings()


@pytest.mark.parametrize("value", ["x", "{", "{'backend': 'memory'}"])
def test_a_malformed_store_variable_is_a_configuration_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    """``RAVI_HISTORY=x`` used to raise pydantic-settings' ``SettingsError``."""
    monkeypatch.setenv("RAVI_HISTORY", value)
    with pytest.raises(ConfigurationError, match="RAVI_HISTORY"):
        load_settings()


def test_a_folder_given_as_the_file_is_named_a_folder(tmp_path: Path) -> None:
    """``--config .`` used to say the folder "does not exist"."""
    with pytest.raises(ConfigurationError, match="is a folder"):
        load_settings(tmp_path)


def test_unknown_strategy_parameters_are_refused(tmp_path: Path) -> None:
    (tmp_path / "ravi.toml").write_text('[[context.pipeline]]\nstrategy = "sliding_window"\nmax_msgs = 3\n')
    with pytest.raises(ConfigurationError, match="sliding_window"):
        ContextConfig.from_settings()


@pytest.mark.parametrize("value", ["nan", "inf", "900.5", '"900"', "true"])
def test_a_budget_that_is_not_a_whole_number_is_refused_naming_it(tmp_path: Path, value: str) -> None:
    """``token_budget = nan`` (TOML has nan and inf) raised a bare ValueError from int(); ``900.5`` was cut to
    900 silently."""
    (tmp_path / "ravi.toml").write_text(f'[[context.pipeline]]\nstrategy = "token_budget"\ntoken_budget = {value}\n')
    with pytest.raises(InvalidArgument, match="token_budget"):
        ContextConfig.from_settings()


def test_summaries_live_beside_the_history_unless_configured(monkeypatch: pytest.MonkeyPatch) -> None:
    from ravi.agents.settings import build_store
    from ravi.agents.storage import InMemorySummaryStore

    assert isinstance(build_store("summaries", load_settings()), InMemorySummaryStore)
    pytest.importorskip("ravi.capabilities.postgres")
    monkeypatch.setenv("RAVI_HISTORY__BACKEND", "postgres")
    monkeypatch.setenv("RAVI_HISTORY__DSN", "postgresql://nowhere.invalid/db")
    store = build_store("summaries", load_settings())  # built, not connected
    assert type(store).__name__ == "PostgresSummaryStore"
    monkeypatch.setenv("RAVI_SUMMARIES__BACKEND", "memory")
    assert isinstance(build_store("summaries", load_settings()), InMemorySummaryStore)


def test_summaries_default_to_the_history_store_itself(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Unless a ``[summaries]`` section names a store, summaries live in the history store object itself (it
    keeps them beside the transcript and drops them with a clear): not in a second store of the same backend."""
    from ravi.agents.context import SummarizationCompaction
    from ravi.agents.settings import Stores

    (tmp_path / "ravi.toml").write_text('[[context.pipeline]]\nstrategy = "summarization"\n')
    config = ContextConfig.from_settings()
    summariser = config.pipeline.strategies[0]
    assert isinstance(summariser, SummarizationCompaction)
    assert summariser.store is config.history
    stores = Stores.from_settings()
    assert stores.summaries is stores.history
    monkeypatch.setenv("RAVI_SUMMARIES__BACKEND", "memory")
    stores = Stores.from_settings()
    assert stores.summaries is not stores.history


def test_nested_summarisation_gets_the_configured_summary_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ravi.agents.context import SummarizationCompaction

    pytest.importorskip("ravi.capabilities.postgres")
    monkeypatch.setenv("RAVI_SUMMARIES__BACKEND", "postgres")
    monkeypatch.setenv("RAVI_SUMMARIES__DSN", "postgresql://nowhere.invalid/db")  # built, never connected
    (tmp_path / "ravi.toml").write_text(
        '[[context.pipeline]]\nstrategy = "token_budget"\ntoken_budget = 900\n'
        '[[context.pipeline.children]]\nstrategy = "token_budget"\ntoken_budget = 1200\n'
        '[[context.pipeline.children.children]]\nstrategy = "summarization"\n'
    )
    config = ContextConfig.from_settings()
    outer = config.pipeline.strategies[0]
    assert isinstance(outer, TokenBudgetComposedStrategy)
    inner = outer.strategies[0]
    assert isinstance(inner, TokenBudgetComposedStrategy)
    summariser = inner.strategies[0]
    assert isinstance(summariser, SummarizationCompaction)
    assert type(summariser.store).__name__ == "PostgresSummaryStore"  # the configured one, two levels down


def test_relevant_recall_can_be_named_in_the_settings(tmp_path: Path) -> None:
    """``relevant_recall`` used to be missing from the strategies the settings can name."""
    from ravi.agents.context import RelevantRecallStrategy

    (tmp_path / "ravi.toml").write_text(
        '[[context.pipeline]]\nstrategy = "relevant_recall"\ntoken_budget = 4000\nrecall_share = 0.5\n\n'
        '[[context.pipeline]]\nstrategy = "relevant_recall"\nmodel = "gpt-4o"\n'
    )
    fixed, sized = ContextConfig.from_settings(path=tmp_path / "ravi.toml").pipeline.strategies
    assert isinstance(fixed, RelevantRecallStrategy) and (fixed.token_budget, fixed.recall_share) == (4000, 0.5)
    assert isinstance(sized, RelevantRecallStrategy) and sized.token_budget > 50_000


def test_the_conformance_plugin_reads_store_options_as_the_settings_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One configuration model: ``ravi.kernel.config.store_config`` (what the conformance plugin reads, below the
    agents layer) gives every store the backend and options ``RaviSettings`` gives it."""
    from ravi.kernel.config import store_config

    monkeypatch.chdir(tmp_path)
    for name in [n for n in os.environ if n.startswith("RAVI_")]:
        monkeypatch.delenv(name)
    (tmp_path / "ravi.toml").write_text(
        '[history]\nbackend = "postgres"\ndsn = "postgresql://file"\nmin_size = 2\n\n[vector]\nbackend = "memory"\n'
    )
    monkeypatch.setenv("RAVI_HISTORY__DSN", "postgresql://env")
    monkeypatch.setenv("RAVI_HISTORY__MAX_SIZE", "7")
    monkeypatch.setenv("RAVI_BLOB__BACKEND", "s3")
    settings = load_settings()
    for kind in ("history", "vector", "blob", "graph"):
        chosen = settings.store(kind)
        assert store_config(kind) == {"backend": chosen.backend, **chosen.options()}, kind
    assert store_config("history") == {
        "backend": "postgres",
        "dsn": "postgresql://env",
        "min_size": 2,
        "max_size": "7",
    }


@pytest.mark.parametrize("name", ["RAVI_HISTROY__BACKEND", "RAVI_CONTEXTS__MODEL", "ravi_sumaries__backend"])
def test_a_variable_of_a_misspelt_section_is_a_configuration_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, name: str
) -> None:
    """A RAVI_<SECTION>__<KEY> variable whose section is misspelt was ignored: RAVI_HISTROY__BACKEND=postgres ran
    the agent in memory, where a misspelt key of a known section, or a section of ravi.toml, is refused."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(name, "postgres")
    with pytest.raises(ConfigurationError, match=f"{name} names no section"):
        load_settings()
    with pytest.raises(ConfigurationError, match=f"{name} names no section"):
        ContextConfig.from_settings()
    monkeypatch.delenv(name)
    for other in ("RAVI_TEST_POSTGRES_DSN", "RAVI_HOME", "RAVI_HISTORY__BACKEND"):
        monkeypatch.setenv(other, "memory")
    assert load_settings().history.backend == "memory"


@pytest.mark.parametrize(
    ("name", "hint"),
    [
        ("RAVI_HISTORY_BACKEND", "RAVI_HISTORY__BACKEND"),
        ("RAVI_context_model", "RAVI_context__model"),
        ("RAVI_STATE_URL", "RAVI_STATE__URL"),
        ("RAVI_HISTORY_OPTIONS", "RAVI_HISTORY__DSN"),
    ],
)
def test_a_section_variable_with_one_underscore_is_a_configuration_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, name: str, hint: str
) -> None:
    """RAVI_HISTORY_BACKEND=postgres (one underscore) was ignored, so the agent ran in memory."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(name, "postgres")
    for load in (load_settings, ContextConfig.from_settings):
        with pytest.raises(ConfigurationError, match=f"{name} is not read") as raised:
            load()
        assert hint in (raised.value.hint or "")
    monkeypatch.delenv(name)
    for other in ("RAVI_TEST_POSTGRES_DSN", "RAVI_HOME", "RAVI_AGENT_DIR", "RAVI_BENCH_MEMORY"):
        monkeypatch.setenv(other, "x")
    assert load_settings().history.backend == "memory"


def test_a_strategy_parameter_out_of_range_is_refused_naming_where_it_is(tmp_path: Path) -> None:
    """``max_messages = -3`` in the second strategy said only "max_messages: must be an integer >= 0": the
    message did not say which strategy of which pipeline, in a file with several."""
    (tmp_path / "ravi.toml").write_text(
        '[[context.pipeline]]\nstrategy = "tool_result"\n\n'
        '[[context.pipeline]]\nstrategy = "token_budget"\ntoken_budget = 900\n\n'
        '  [[context.pipeline.children]]\n  strategy = "sliding_window"\n  max_messages = -3\n'
    )
    with pytest.raises(InvalidArgument, match=r"^context\.pipeline\[1\]: .*max_messages.*-3"):
        ContextConfig.from_settings()


@pytest.mark.parametrize(
    "toml",
    [
        '[context]\nmodel = "gpt4o"\n',
        '[[context.pipeline]]\nstrategy = "token_budget"\nmodel = "gpt4o"\n',
        '[[context.pipeline]]\nstrategy = "relevant_recall"\nmodel = "gpt4o"\n',
    ],
)
def test_an_unknown_model_in_the_settings_says_what_to_write_there(tmp_path: Path, toml: str) -> None:
    """An unknown model named in ``ravi.toml`` used to get the library's hint, ``pass model_info=ModelInfo(...)``:
    a Python argument no key of the file can give. The hint names the closest model and the key that works."""
    (tmp_path / "ravi.toml").write_text(toml)
    with pytest.raises(ConfigurationError, match="unknown model 'gpt4o'") as info:
        ContextConfig.from_settings(path=tmp_path / "ravi.toml")
    assert info.value.hint is not None
    assert "did you mean 'gpt-4o'?" in info.value.hint and "token_budget = N" in info.value.hint
    assert "model_info" not in info.value.hint
