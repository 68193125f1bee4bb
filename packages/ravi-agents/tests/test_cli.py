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
    assert report["blob"]["install"]["s3"] == "ravi-capabilities-s3"
