"""The environment registry of 002: one sanctioned way to read environment variables."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ravi.kernel.env import ENV_PREFIX, env_name, environment, ravi_home, read_env, read_prefixed, read_raw
from ravi.kernel.errors import InvalidArgument


def test_env_name_brands_a_suffix() -> None:
    """002: "env_name uppercases the suffix and replaces - with _ before prefixing"."""
    assert ENV_PREFIX == "RAVI"
    assert env_name("home") == "RAVI_HOME"
    assert env_name("agent-dir") == "RAVI_AGENT_DIR"


@pytest.mark.parametrize("read", [env_name, read_env, read_raw, read_prefixed])
def test_a_name_that_is_not_a_string_is_refused(read: object) -> None:
    """A variable is named by a string: anything else is ``InvalidArgument``, not an ``AttributeError`` from
    inside."""
    with pytest.raises(InvalidArgument, match="must be a string, got int"):
        read(5)  # type: ignore[operator]


def test_read_env_and_read_raw(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAVI_LOG", "debug")
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    monkeypatch.delenv("RAVI_NOT_SET", raising=False)
    assert read_env("log") == "debug"
    assert read_env("not-set") is None
    assert read_raw("AWS_REGION") == "eu-west-1"


def test_the_home_directory(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """``$RAVI_HOME`` (expanded) when set, otherwise ``~/.ravi``."""
    monkeypatch.delenv("RAVI_HOME", raising=False)
    assert ravi_home() == Path.home() / ".ravi"
    monkeypatch.setenv("STATE", str(tmp_path))
    monkeypatch.setenv("RAVI_HOME", "$STATE/ravi")
    assert ravi_home() == tmp_path / "ravi"


def test_nothing_else_reads_the_environment_directly() -> None:
    """002: "Subsystems do not touch os.environ directly — they go through these helpers"."""
    root = Path(__file__).resolve().parents[3]
    reads = re.compile(r"os\.environ\b|os\.getenv|\bgetenv\(|\benviron\.")
    offenders = [
        str(source.relative_to(root))
        for source in root.glob("packages/*/src/ravi/**/*.py")
        if source.name != "env.py" and reads.search(source.read_text())
    ]
    assert offenders == []


def test_every_variable_under_a_prefix(monkeypatch: pytest.MonkeyPatch) -> None:
    """What ``ravi.kernel.config`` reads for a store's ``RAVI_<KIND>__<KEY>`` options: set, non-empty variables
    under the prefix, whatever the case of their names."""
    monkeypatch.setenv("RAVI_HISTORY__DSN", "postgresql://x")
    monkeypatch.setenv("ravi_history__max_size", "5")
    monkeypatch.setenv("RAVI_HISTORY__EMPTY", "")
    monkeypatch.setenv("RAVI_HISTORYX", "not under the prefix")
    found = read_prefixed("history__")
    assert found["RAVI_HISTORY__DSN"] == "postgresql://x" and found["ravi_history__max_size"] == "5"
    assert "RAVI_HISTORY__EMPTY" not in found and "RAVI_HISTORYX" not in found
    monkeypatch.setenv("SOME_TOOL_HOME", "/opt/tool")
    copy = environment()
    assert copy["SOME_TOOL_HOME"] == "/opt/tool"
    copy["SOME_TOOL_HOME"] = "changed"
    assert environment()["SOME_TOOL_HOME"] == "/opt/tool"
