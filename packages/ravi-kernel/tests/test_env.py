"""The environment registry of 002: one sanctioned way to read environment variables."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ravi.kernel.env import ENV_PREFIX, env_name, ravi_home, read_env, read_raw


def test_env_name_brands_a_suffix() -> None:
    """002: "env_name uppercases the suffix and replaces - with _ before prefixing"."""
    assert ENV_PREFIX == "RAVI"
    assert env_name("home") == "RAVI_HOME"
    assert env_name("agent-dir") == "RAVI_AGENT_DIR"


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
    reads = re.compile(r"os\.environ\.get|os\.getenv|os\.environ\[")
    offenders = [
        str(source.relative_to(root))
        for source in root.glob("packages/*/src/ravi/**/*.py")
        if source.name != "env.py" and reads.search(source.read_text())
    ]
    assert offenders == []
