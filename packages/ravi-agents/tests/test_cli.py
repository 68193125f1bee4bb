import json

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
