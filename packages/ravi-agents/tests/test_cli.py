import json
from pathlib import Path

from typer.testing import CliRunner

from ravi.agents.cli import app

runner = CliRunner()


def test_demo_replays_and_saves_tokens() -> None:
    result = runner.invoke(app, ["demo", "--requests", "6", "--budget", "1500", "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    assert rows[0]["turn"] == 1 and len(rows) > 10
    assert all(r["window_tokens"] <= 1_500 for r in rows)
    assert rows[-1]["stored_tokens"] > rows[-1]["window_tokens"]
    assert any("budget" in r["fired"] for r in rows)


def test_backends_lists_memory_history() -> None:
    result = runner.invoke(app, ["backends", "--json"])
    assert result.exit_code == 0
    report = json.loads(result.output)
    assert "memory" in report["history"]["installed"]
    # every backend Ravi publishes for a kind is either installed or listed with what to install
    from ravi.kernel.registry import KNOWN_BACKENDS

    for name, (dist, kinds) in KNOWN_BACKENDS.items():
        for kind in kinds:
            row = report[kind]
            assert name in row["installed"] or row["install"].get(name) == dist


def test_help_shows_bracketed_names() -> None:
    """Rich markup used to eat "[context]" from every --agent help line."""
    result = runner.invoke(app, ["history", "list", "--help"])
    assert result.exit_code == 0
    assert "[context] agent_id" in result.output


def test_errors_keep_their_bracketed_names(tmp_path: Path) -> None:
    """``error:  backend = 'postgress'`` used to lose its "[history]" to rich markup."""
    import subprocess
    import sys

    (tmp_path / "ravi.toml").write_text('[history]\nbackend = "postgress"\n')
    done = subprocess.run(
        [sys.executable, "-c", "from ravi.agents.cli import main; main()", "history", "list", "s"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1
    assert "[history] backend = 'postgress'" in done.stderr, done.stderr
