"""One store's configuration from ``ravi.toml`` and ``RAVI_*`` variables, and where each part came from."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ravi.kernel.config import store_config, store_sources
from ravi.kernel.errors import ConfigurationError


@pytest.fixture(autouse=True)
def clean(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in [n for n in os.environ if n.startswith("RAVI_")]:
        monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)


def test_variables_over_the_file_with_their_origins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "ravi.toml").write_text('[history]\nbackend = "postgres"\ndsn = "postgresql://file"\nmin_size = 2\n')
    monkeypatch.setenv("RAVI_HISTORY__DSN", "postgresql://env")
    sources = store_sources("history")
    assert sources.backend == "postgres"
    assert sources.options == {"dsn": "postgresql://env", "min_size": 2}
    assert sources.origins == {
        "dsn": "RAVI_HISTORY__DSN",
        "min_size": "ravi.toml [history]",
        "backend": "ravi.toml [history]",
    }
    assert store_config("history") == {"backend": "postgres", "dsn": "postgresql://env", "min_size": 2}


def test_a_variable_that_switches_the_backend_drops_the_file_options(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``RAVI_HISTORY__BACKEND=memory`` over ``backend = "postgres"`` used to keep the file's ``dsn``, which the
    memory backend then refused."""
    (tmp_path / "ravi.toml").write_text('[history]\nbackend = "postgres"\ndsn = "postgresql://file"\n')
    monkeypatch.setenv("RAVI_HISTORY__BACKEND", "memory")
    sources = store_sources("history")
    assert (sources.backend, sources.options, sources.dropped) == ("memory", {}, ("dsn",))
    assert sources.origins["backend"] == "RAVI_HISTORY__BACKEND"
    monkeypatch.setenv("RAVI_HISTORY__DSN", "postgresql://env")  # a variable's own option stays, and says so
    assert store_sources("history").origins["dsn"] == "RAVI_HISTORY__DSN"


def test_a_file_without_a_backend_keeps_its_options_for_the_chosen_one(tmp_path: Path) -> None:
    """A table of options with no ``backend`` (``ravi conformance history=redis`` over ``url = ...``)."""
    (tmp_path / "ravi.toml").write_text('[history]\nurl = "redis://file"\n')
    sources = store_sources("history", backend="redis")
    assert (sources.backend, sources.options, sources.dropped) == ("redis", {"url": "redis://file"}, ())
    assert store_sources("history", backend="redis").origins["backend"] == "the caller"


def test_the_callers_choice_switches_like_a_variable(tmp_path: Path) -> None:
    (tmp_path / "ravi.toml").write_text('[history]\nbackend = "postgres"\ndsn = "postgresql://file"\n')
    assert store_sources("history", backend="memory").options == {}
    assert store_sources("history", backend="postgres").options == {"dsn": "postgresql://file"}


@pytest.mark.parametrize(
    ("name", "error"),
    [
        ("RAVI_HISTORY_BACKEND", "RAVI_HISTORY_BACKEND is not read"),
        ("RAVI_HISTROY__BACKEND", "RAVI_HISTROY__BACKEND names no section"),
    ],
)
def test_one_store_read_alone_refuses_a_misspelt_variable(
    monkeypatch: pytest.MonkeyPatch, name: str, error: str
) -> None:
    """A store read on its own (ravi conformance history) ran the memory backend, and passed, while a misspelt
    variable named postgres: it is refused as the settings refuse it."""
    monkeypatch.setenv(name, "postgres")
    with pytest.raises(ConfigurationError, match=error):
        store_sources("history")
    monkeypatch.delenv(name)
    for other in ("RAVI_TEST_POSTGRES_DSN", "RAVI_HOME", "RAVI_AGENT_DIR", "RAVI_CONTEXT__MODEL"):
        monkeypatch.setenv(other, "x")
    assert store_sources("history").backend == "memory"
