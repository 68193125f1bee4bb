"""``ravi conformance``: run the contract suite against registered backends and report rule by rule.

The suite (``ravi-conformance``) is a pytest plugin; this command finds it through its ``pytest11`` entry point
and runs it through pytest, so ``ravi.agents`` never imports it (it is a test dependency, not a runtime one).
"""

from __future__ import annotations

import json
import sys
import tempfile
from importlib.metadata import entry_points
from pathlib import Path
from types import ModuleType
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from ravi.agents.cli._common import JsonOption, console
from ravi.kernel.errors import ConfigurationError
from ravi.kernel.registry import install_command

PLUGIN = "ravi_conformance"
"""The suite's pytest plugin, by its ``pytest11`` entry-point name."""


def suite_plugin() -> ModuleType:
    """The conformance suite's pytest plugin module, loaded through its entry point.

    Raises:
        ConfigurationError: the suite (or pytest) is not installed.
    """
    found = [ep for ep in entry_points(group="pytest11") if ep.name == PLUGIN]
    if not found:
        raise ConfigurationError(
            "the conformance suite is not installed",
            hint=install_command("ravi-conformance"),
        )
    try:
        module = found[0].load()
    except ImportError as error:
        raise ConfigurationError(
            f"the conformance suite failed to import: {error}", hint=install_command("ravi-conformance", upgrade=True)
        ) from error
    return module  # type: ignore[no-any-return]


def _unload_suite(loaded: set[str]) -> None:
    """Forget the suite's modules that loading the plugin for the preflight imported outside pytest (those not in
    ``loaded``, the modules there were before): pytest then imports them again itself, with their assertions
    rewritten, so a failed ``assert`` reports the values it compared instead of a bare ``AssertionError``."""
    suite = [name for name in sys.modules if name == "ravi.conformance" or name.startswith("ravi.conformance.")]
    for name in suite:
        if name not in loaded:
            del sys.modules[name]


class _Collect:
    """A pytest plugin that keeps one row per contract test: outcome, and for a failure the rule, what broke
    and how to fix it (from the suite's report properties)."""

    def __init__(self) -> None:
        self.results: list[dict[str, str]] = []

    def pytest_runtest_logreport(self, report: Any) -> None:
        if not (report.when == "call" or (report.when == "setup" and report.outcome != "passed")):
            return
        parts = report.nodeid.split("::")
        row = {
            "contract": parts[-2].removeprefix("Test") if len(parts) >= 2 else "?",
            "test": parts[-1],
            "outcome": report.outcome,
            "reason": "",
            "rule": "",
            "detail": "",
            "fix": "",
        }
        properties = dict(report.user_properties)
        if report.skipped and isinstance(report.longrepr, tuple):
            row["reason"] = str(report.longrepr[2]).removeprefix("Skipped: ")
        elif report.failed:
            row["rule"] = str(properties.get("ravi_rule", ""))
            row["detail"] = str(properties.get("ravi_detail", ""))
            row["fix"] = str(properties.get("ravi_fix", ""))
            row["reason"] = row["rule"] or row["detail"]
        self.results.append(row)


def conformance(
    specs: Annotated[
        list[str],
        typer.Argument(help="KIND or KIND=NAME, for example history or history=postgres (repeatable)."),
    ],
    isolate: Annotated[
        list[str] | None,
        typer.Option(
            help="KIND=OPTION: a fresh value of that option for every test, e.g. history=path; the backend's "
            "async destroy() removes it after each test (repeatable)."
        ),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Run the conformance suite against registered backends and print a contract-by-contract report.

    The backend and its options come from the configuration: the [KIND] table of ravi.toml and RAVI_<KIND>__<KEY>
    variables (RAVI_HISTORY__DSN=...); NAME overrides the configured backend (and drops the file's options of
    another one). A preflight checks each choice once before any test: the backend is installed, its options
    are valid, its server answers. Ravi's persistent backends give every test a scope of its own, dropped
    afterwards (postgres: schema, redis: prefix, s3: key_prefix, age: graph); --isolate names that option for
    other backends. A failed test shows the rule it checks, the call that broke it and how to fix it.
    """
    loaded = set(sys.modules)
    plugin = suite_plugin()
    import pytest  # the suite depends on pytest, so it is there once the suite is

    plugin.preflight(specs, isolate or [])  # one line for a wrong name, a missing option or a dead server
    _unload_suite(loaded)
    collect = _Collect()
    with tempfile.TemporaryDirectory(prefix="ravi-conformance-") as root:
        # A configuration of its own: the project's pytest settings (addopts, plugins) are not the suite's.
        ini = Path(root) / "pytest.ini"
        ini.write_text("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
        # Nothing written where the command was started: the property tests' example database goes to the
        # temporary directory, and pytest-benchmark (which makes .benchmarks) is not the suite's.
        from hypothesis.configuration import set_hypothesis_home_dir  # the suite's dependency

        set_hypothesis_home_dir(Path(root) / ".hypothesis")
        args = ["-c", str(ini), "--rootdir", root, "-p", "no:cacheprovider", "-p", "no:terminal", "-p", "no:benchmark"]
        args.append("--ravi-no-preflight")
        for spec in specs:
            args += ["--ravi-backend", spec]
        for spec in isolate or []:
            args += ["--ravi-isolate", spec]
        try:
            code = pytest.main([*args, "--pyargs", "ravi.conformance.run"], plugins=[collect])
        finally:
            set_hypothesis_home_dir(None)  # back to the default, for a caller in the same process
    results = collect.results
    if code not in (0, 1) or not results:
        raise ConfigurationError(
            f"the conformance suite did not run (pytest exit code {int(code)}): no contract test was executed",
            hint="check the KIND=NAME arguments and the [KIND] tables of ravi.toml; `ravi backends` lists what is "
            "installed",
        )
    if as_json:
        typer.echo(json.dumps(results, indent=2))
    else:
        _print(specs, results)
    if code != 0 or any(r["outcome"] == "failed" for r in results):
        raise typer.Exit(1)


def _print(specs: list[str], results: list[dict[str, str]]) -> None:
    table = Table(title=f"conformance: {', '.join(specs)}")
    for name in ("contract", "test", "outcome", "rule, what broke it, how to fix it / reason"):
        table.add_column(name, overflow="fold")  # a cut name ("test_canary_fixture_gi…") names no test
    style = {"passed": "green", "failed": "red", "skipped": "yellow"}
    for r in results:
        reason = escape(r["reason"])
        if r["outcome"] == "failed":
            reason = escape(r["rule"] or "(no rule stated)")
            if r["detail"]:
                reason += f"\n[red]broke:[/] {escape(r['detail'])}"
            if r["fix"]:
                reason += f"\n[cyan]fix:[/] {escape(r['fix'])}"
        table.add_row(r["contract"], r["test"], f"[{style.get(r['outcome'], '')}]{r['outcome']}[/]", reason)
    console.print(table)
    counts = {k: sum(1 for r in results if r["outcome"] == k) for k in ("passed", "failed", "skipped")}
    console.print(", ".join(f"{v} {k}" for k, v in counts.items()))


__all__ = ["conformance", "suite_plugin"]
