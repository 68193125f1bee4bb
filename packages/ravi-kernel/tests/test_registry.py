from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

from ravi.kernel import registry
from ravi.kernel.errors import ConfigurationError


def test_unknown_kind_lists_the_kinds() -> None:
    with pytest.raises(ConfigurationError, match="unknown store kind 'histroy'") as info:
        registry.available("histroy")
    assert "history" in str(info.value)


def test_missing_published_backend_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "entry_points", lambda group: [])
    with pytest.raises(ConfigurationError) as info:
        registry.load_backend("history", "postgres", dsn="postgresql://x")
    message = str(info.value)
    assert "no history backend named 'postgres'" in message
    assert "installed: none" in message
    assert "pip install ravi-capabilities-postgres" in message


def test_unknown_name_lists_installed_and_explains(monkeypatch: pytest.MonkeyPatch) -> None:
    eps = [EntryPoint("memory", "ravi.agents.context.history:InMemoryHistoryProvider", "ravi.history")]
    monkeypatch.setattr(registry, "entry_points", lambda group: eps if group == "ravi.history" else [])
    with pytest.raises(ConfigurationError) as info:
        registry.load_backend("history", "mongo")
    assert "installed: memory" in str(info.value)
    assert "misspelled or not installed" in str(info.value)


def test_conflicting_registrations_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    eps = [EntryPoint("memory", "a.b:C", "ravi.history"), EntryPoint("memory", "x.y:Z", "ravi.history")]
    monkeypatch.setattr(registry, "entry_points", lambda group: eps)
    with pytest.raises(ConfigurationError, match="two installed distributions register"):
        registry.available("history")


def test_listing_imports_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    eps = [EntryPoint("broken", "module.that.does.not.exist:Thing", "ravi.vector")]
    monkeypatch.setattr(registry, "entry_points", lambda group: eps)
    assert registry.available("vector") == {"broken": "module.that.does.not.exist:Thing"}
    with pytest.raises(ConfigurationError, match="failed to import"):
        registry.load_backend("vector", "broken")


def test_bad_options_are_a_configuration_error(monkeypatch: pytest.MonkeyPatch) -> None:
    eps = [EntryPoint("dict", "builtins:dict", "ravi.state"), EntryPoint("int", "builtins:int", "ravi.state")]
    monkeypatch.setattr(registry, "entry_points", lambda group: eps)
    assert registry.load_backend("state", "dict", a=1) == {"a": 1}
    with pytest.raises(ConfigurationError, match="bad options"):
        registry.load_backend("state", "int", nonsense=True)


def test_a_constructor_that_fails_is_a_configuration_error_naming_its_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A backend whose constructor opens its store (a SQLite file in a missing folder) leaked the driver's
    ``sqlite3.OperationalError`` out of ``load_backend``, and ``ravi conformance`` printed its traceback."""
    eps = [EntryPoint("sqlite", "sqlite3:connect", "ravi.history")]
    monkeypatch.setattr(registry, "entry_points", lambda group: eps if group == "ravi.history" else [])
    missing = tmp_path / "missing" / "history.db"
    with pytest.raises(ConfigurationError) as raised:
        registry.load_backend("history", "sqlite", database=str(missing))
    assert "the history backend 'sqlite' could not be built: OperationalError: unable to open database" in str(
        raised.value
    )
    assert "database" in str(raised.value.hint)
    registry.load_backend("history", "sqlite", database=":memory:").close()


def test_a_misspelt_kind_or_backend_gets_a_did_you_mean() -> None:
    """``histroy`` and ``memroy`` used to get only the lists."""
    from ravi.kernel.registry import available, backend_factory

    with pytest.raises(ConfigurationError) as info:
        available("histroy")
    assert "did you mean 'history'?" in str(info.value)
    with pytest.raises(ConfigurationError) as info:
        backend_factory("history", "memroy")
    assert "did you mean 'memory'?" in str(info.value)


@pytest.mark.parametrize(
    ("target", "error"),
    [
        ("ravi.kernel.registry:NoSuchBackend", "has no attribute 'NoSuchBackend'"),  # a misspelt object name
        ("ravi.kernel.registry:GROUPS.nothing", "has no attribute 'nothing'"),
    ],
)
def test_an_entry_point_naming_what_its_module_lacks_is_a_configuration_error(
    monkeypatch: pytest.MonkeyPatch, target: str, error: str
) -> None:
    """An entry point whose module imports but lacks the object it names leaked ``AttributeError`` (with its
    traceback, from ``ravi conformance``) instead of saying which entry point to correct."""
    eps = [EntryPoint("typo", target, "ravi.history")]
    monkeypatch.setattr(registry, "entry_points", lambda group: eps if group == "ravi.history" else [])
    with pytest.raises(ConfigurationError) as raised:
        registry.backend_factory("history", "typo")
    assert f"the history backend 'typo' ({target}) failed to load" in str(raised.value)
    assert error in str(raised.value)
    assert "entry point" in str(raised.value.hint)
    assert "'ravi.history'" in str(raised.value.hint)


def test_a_backend_module_that_fails_while_importing_is_a_configuration_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A backend module that raises while it is imported (not an ``ImportError``) leaked that exception."""
    (tmp_path / "ravi_raises_on_import.py").write_text("raise RuntimeError('no driver configured')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    eps = [EntryPoint("raising", "ravi_raises_on_import:Backend", "ravi.state")]
    monkeypatch.setattr(registry, "entry_points", lambda group: eps if group == "ravi.state" else [])
    with pytest.raises(ConfigurationError) as raised:
        registry.backend_factory("state", "raising")
    assert "failed to import: RuntimeError: no driver configured" in str(raised.value)


def test_an_entry_point_naming_a_missing_module_points_at_the_entry_point(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A module path misspelt in the entry point got the hint to reinstall the distribution's dependencies,
    which is the hint for a backend whose driver is missing."""
    (tmp_path / "ravi_needs_a_driver.py").write_text("import ravi_no_such_driver\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    eps = [
        EntryPoint("own", "ravi.kernel.no_such_module:Backend", "ravi.history"),
        EntryPoint("driver", "ravi_needs_a_driver:Backend", "ravi.history"),
    ]
    monkeypatch.setattr(registry, "entry_points", lambda group: eps if group == "ravi.history" else [])
    with pytest.raises(ConfigurationError) as raised:
        registry.backend_factory("history", "own")
    assert "No module named 'ravi.kernel.no_such_module'" in str(raised.value)
    assert "check the module its entry point names in the group 'ravi.history'" in str(raised.value.hint)
    with pytest.raises(ConfigurationError) as raised:
        registry.backend_factory("history", "driver")
    assert "No module named 'ravi_no_such_driver'" in str(raised.value)
    assert "with its dependencies" in str(raised.value.hint)


def test_a_constructor_missing_an_argument_says_where_to_set_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """A backend without an options model whose constructor needs ``dsn`` got "missing 1 required positional
    argument: 'dsn'" and the hint to read the backend's documentation, not where configuration sets it."""
    eps = [EntryPoint("needs", "ravi_test_needs:Needs", "ravi.history")]
    monkeypatch.setattr(registry, "entry_points", lambda group: eps if group == "ravi.history" else [])

    class Needs:
        def __init__(self, dsn: str, *, table_name: str) -> None:
            self.dsn = dsn

    monkeypatch.setattr(registry, "backend_factory", lambda kind, name: Needs)
    with pytest.raises(ConfigurationError) as raised:
        registry.build_backend("history", "needs", {})
    assert "missing 1 required positional argument: 'dsn'" in str(raised.value)
    assert raised.value.hint == "set dsn (or RAVI_HISTORY__DSN) in the [history] table of ravi.toml"
    with pytest.raises(ConfigurationError) as raised:
        registry.build_backend("history", "needs", {"dsn": "x"})
    assert raised.value.hint == "set table_name (or RAVI_HISTORY__TABLE_NAME) in the [history] table of ravi.toml"


def test_an_install_command_gives_the_index_form_and_the_clone_form() -> None:
    from ravi.kernel.registry import install_command

    assert install_command("ravi-capabilities-redis") == (
        "pip install ravi-capabilities-redis; from a clone of Ravi, at its root: "
        "pip install ./packages/ravi-capabilities-redis"
    )
    assert install_command("ravi-agents[otel]") == (
        "pip install 'ravi-agents[otel]'; from a clone of Ravi, at its root: pip install './packages/ravi-agents[otel]'"
    )
    assert install_command("ravi-agents[embeddings]") == (
        "pip install 'ravi-agents[embeddings]'; from a clone of Ravi, at its root: "
        "pip install ./packages/ravi-embeddings-wordllama './packages/ravi-agents[embeddings]'"
    )
    assert install_command("ravi-conformance", upgrade=True) == (
        "pip install --upgrade ravi-conformance; from a clone of Ravi, at its root: "
        "pip install --upgrade ./packages/ravi-conformance"
    )
