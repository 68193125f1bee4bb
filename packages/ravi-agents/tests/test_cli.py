import json
import subprocess
import sys
from pathlib import Path

import pytest
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


def run_ravi(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    import subprocess

    return subprocess.run(
        [sys.executable, "-c", "from ravi.agents.cli import main; main()", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
    )


def test_conformance_runs_inside_a_project_with_its_own_pytest_settings(tmp_path: Path) -> None:
    """A project whose pytest config has ``addopts`` used to make it fail ("unrecognized arguments: -ra"), print
    an empty table and exit 0."""
    (tmp_path / "pyproject.toml").write_text('[tool.pytest.ini_options]\naddopts = "-ra --strict-markers -x"\n')
    done = run_ravi(tmp_path, "conformance", "history=memory", "--json")
    assert done.returncode == 0, done.stderr
    results = json.loads(done.stdout)
    assert results and all(r["outcome"] != "failed" for r in results)
    assert sum(r["outcome"] == "passed" for r in results) > 20


def test_conformance_that_runs_nothing_is_an_error(tmp_path: Path) -> None:
    done = run_ravi(tmp_path, "conformance", "nothing=memory")
    assert done.returncode == 1
    assert "error:" in done.stderr, done.stdout


def test_demo_with_a_config_honours_the_budget_and_says_where_it_stored(tmp_path: Path) -> None:
    """``--config ravi.toml --budget 300`` used to ignore the budget while its title said 300."""
    (tmp_path / "ravi.toml").write_text('[context]\nmodel = "gpt-4o"\n')
    done = run_ravi(tmp_path, "demo", "--requests", "4", "--config", "ravi.toml", "--budget", "300", "--json")
    assert done.returncode == 0, done.stderr
    assert all(row["window_tokens"] <= 300 for row in json.loads(done.stdout))
    shown = run_ravi(tmp_path, "demo", "--requests", "2", "--config", "ravi.toml")
    assert "ravi history show demo-" in shown.stdout


def test_a_misspelt_demo_backend_gets_the_right_choices(tmp_path: Path) -> None:
    """``--backend postgress`` used to offer s3 (not a history backend), and ``--backend s3`` started SeaweedFS
    and then failed."""
    for wrong in ("postgress", "s3"):
        done = run_ravi(tmp_path, "demo", "--backend", wrong)
        assert done.returncode == 1
        assert "not a history backend" in done.stderr and "s3" not in done.stderr.split("choose one of:")[1]
    assert "did you mean 'postgres'" in run_ravi(tmp_path, "demo", "--backend", "postgress").stderr


def test_malformed_backend_options_are_one_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Malformed backend options used to give one cut-off failure per contract test; the options now come from
    ravi.toml and RAVI_<KIND>__<KEY>, as everywhere else, and the old JSON variable says what replaced it."""
    (tmp_path / "ravi.toml").write_text("[history\nbackend = ")
    done = run_ravi(tmp_path, "conformance", "history=memory")
    assert done.returncode == 1 and "is not valid TOML" in done.stderr and "failed" not in done.stdout
    (tmp_path / "ravi.toml").unlink()
    monkeypatch.setenv("RAVI_HISTORY_OPTIONS", '{"dsn": "x"}')
    done = run_ravi(tmp_path, "conformance", "history=memory")
    assert done.returncode == 1 and "RAVI_HISTORY_OPTIONS is no longer read" in done.stderr
    assert "RAVI_HISTORY__DSN" in done.stderr


def test_the_demo_reads_well_at_80_columns(tmp_path: Path) -> None:
    """The strategy column used to read ``tool-resu…`` at 80 columns, and one run printed 216 lines."""
    import os

    env = {**os.environ, "COLUMNS": "80"}
    run = lambda *extra: subprocess.run(  # noqa: E731
        [sys.executable, "-c", "from ravi.agents.cli import main; main()", "demo", *extra],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    done = run()
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) < 40
    assert all(len(line) <= 80 for line in lines)
    assert "…" not in done.stdout
    assert "tool,fold,budget" in done.stdout
    assert len(run("--verbose").stdout.splitlines()) > 80  # every call


def test_an_unknown_session_is_an_error_that_lists_the_sessions_there_are(tmp_path: Path) -> None:
    """An unknown session used to print an empty table and exit 0."""
    (tmp_path / "ravi.toml").write_text('[history]\nbackend = "memory"\n')
    done = run_ravi(tmp_path, "history", "list", "nope")
    assert done.returncode == 1
    assert "agent 'agent' has no session 'nope'" in done.stderr
    assert "has no sessions here" in done.stderr  # a fresh in-memory store: nothing to list
