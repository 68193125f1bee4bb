"""The conformance tutorial, from the page's own text: its files are written into a fresh directory, the package
is built and installed offline (into a directory of its own, beside the workspace's packages), and the page's
commands run as printed."""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGE = (ROOT / "docs" / "conformance.md").read_text()
FILE = re.compile(r'```\w+ title="([^"]+)"\n(.*?)```', re.DOTALL)
SHELL = re.compile(r"```sh\n(.*?)```", re.DOTALL)
TEXT = re.compile(r"```text\n(.*?)```", re.DOTALL)


def page_files() -> dict[str, str]:
    return dict(FILE.findall(PAGE))


def page_commands() -> list[str]:
    return [line for block in SHELL.findall(PAGE) for line in block.splitlines() if line.strip()]


@dataclass
class Installed:
    """The tutorial's package, built from the page and installed, and a shell to run the page's commands in."""

    project: Path
    target: Path

    def env(self) -> dict[str, str]:
        clean = {k: v for k, v in os.environ.items() if not k.startswith("RAVI_")}
        bin_dir = str(Path(sys.executable).parent)
        return {**clean, "PATH": f"{bin_dir}{os.pathsep}{clean.get('PATH', '')}", "PYTHONPATH": str(self.target)}

    def run(self, command: str) -> subprocess.CompletedProcess[str]:
        """``command`` as the page prints it, in a shell, from the directory holding the package."""
        return subprocess.run(
            ["bash", "-c", command], cwd=self.project, env=self.env(), capture_output=True, text=True, check=False
        )


def uv() -> str:
    found = ROOT / ".tools" / "bin" / "uv"
    if found.exists():
        return str(found)
    on_path = shutil.which("uv")
    if on_path is None:
        pytest.skip("uv is not installed (make setup installs it into .tools/)")
    return on_path


def install(project: Path, target: Path, files: dict[str, str]) -> Installed:
    for name, text in files.items():
        path = project / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    package = project / "ravi-sqlite-history"
    built = subprocess.run(
        [
            uv(),
            "pip",
            "install",
            "--python",
            sys.executable,
            "--target",
            str(target),
            "--no-deps",
            "--no-build-isolation",  # built by the workspace's hatchling, offline
            "--offline",
            "--quiet",
            str(package),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert built.returncode == 0, built.stderr
    return Installed(project, target)


@pytest.fixture
def tutorial(tmp_path: Path) -> Installed:
    return install(tmp_path / "project", tmp_path / "site-packages", page_files())


def test_the_page_holds_the_package_and_registers_it_under_its_group() -> None:
    """conformance.md never showed the entry-point group to register under (``ravi.history``) as a
    ``pyproject.toml`` snippet, nor that ``destroy()`` must be async; the recipe's file backend failed the canary
    ("state leaked") unless ``--ravi-isolate`` was added, and left its file behind."""
    files = page_files()
    assert set(files) == {
        "ravi-sqlite-history/pyproject.toml",
        "ravi-sqlite-history/src/ravi_sqlite_history/__init__.py",
        "ravi-sqlite-history/tests/test_contract.py",
    }
    assert '[project.entry-points."ravi.history"]' in files["ravi-sqlite-history/pyproject.toml"]
    assert '[project.entry-points."ravi.state"]' in files["ravi-sqlite-history/pyproject.toml"]
    assert "async def destroy(self) -> None:" in files["ravi-sqlite-history/src/ravi_sqlite_history/__init__.py"]
    assert "--isolate history=path" in PAGE


def test_the_package_declares_every_distribution_its_backend_imports() -> None:
    """The backend imported pydantic (its options model) while its ``pyproject.toml`` declared ravi-kernel alone."""
    files = page_files()
    source = files["ravi-sqlite-history/src/ravi_sqlite_history/__init__.py"]
    dependencies = tomllib.loads(files["ravi-sqlite-history/pyproject.toml"])["project"]["dependencies"]
    declared = {re.split(r"[<>=!~; \[]", d, maxsplit=1)[0] for d in dependencies}
    distribution = {"ravi": "ravi-kernel"}
    imported = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            imported.add(node.module.split(".")[0])
    third_party = {name for name in imported if name not in sys.stdlib_module_names and name != "__future__"}
    assert third_party, "the module imports something beyond the standard library"
    for name in third_party:
        assert distribution.get(name, name) in declared, f"{name} is imported but not a dependency"


def test_the_backend_is_found_and_passes_the_contract_leaving_nothing(tutorial: Installed) -> None:
    """The page's backend had none of the optional abilities the assembly engine uses, and no store of another
    kind, so a backend author had no worked example of either."""
    listed = tutorial.run("ravi backends --json")
    assert listed.returncode == 0, listed.stderr
    installed = json.loads(listed.stdout)
    assert installed["history"]["installed"]["sqlite"] == "ravi_sqlite_history:SQLiteHistoryProvider"
    assert installed["state"]["installed"]["sqlite"] == "ravi_sqlite_history:SQLiteStateStore"
    [command] = [c for c in page_commands() if "ravi conformance" in c]
    done = tutorial.run(command + " --json")
    assert done.returncode == 0, done.stderr
    results = json.loads(done.stdout)
    assert not [r for r in results if r["outcome"] == "failed"]
    passed = {r["contract"] for r in results if r["outcome"] == "passed"}
    assert {"HistoryProvider", "WindowReader", "ShortTermMemory"} <= passed
    assert sum(r["outcome"] == "passed" for r in results) > 80
    skipped = " ".join(r["reason"] for r in results if r["outcome"] == "skipped")
    # every ability the page implements runs
    for ability in ("generation", "read_window", "replace_last", "replace_session", "peer"):
        assert ability not in skipped, skipped
    assert list(tutorial.project.glob("*.db*")) == []  # each test's file removed by destroy()


def test_the_same_run_through_pytest(tutorial: Installed) -> None:
    [command] = [c for c in page_commands() if c.startswith("RAVI_HISTORY__PATH") and " pytest " in f" {c} "]
    done = tutorial.run(command + " -p no:cacheprovider -q")
    assert done.returncode == 0, done.stdout[-3_000:]
    assert list(tutorial.project.glob("*.db*")) == []
    own = tutorial.run("pytest ravi-sqlite-history/tests -p no:cacheprovider -q")
    assert own.returncode == 0, own.stdout[-3_000:]


def test_without_isolation_the_canary_says_what_leaked_and_how_to_fix_it(tutorial: Installed) -> None:
    [command] = [c for c in page_commands() if "ravi conformance" in c]
    done = tutorial.run(command.replace(" --isolate history=path", "") + " --json")
    assert done.returncode == 1
    [row] = [r for r in json.loads(done.stdout) if r["outcome"] == "failed"]
    assert row["test"] == "test_canary_fixture_gives_an_empty_backend_second"
    shown = " ".join(TEXT.findall(PAGE)[0].split())  # the failure as the page prints it

    def flat(text: str) -> str:
        return " ".join(text.replace("`", "").split())

    assert flat(row["rule"]) in shown and flat(row["detail"]) in shown and flat(row["fix"]) in shown
    for path in tutorial.project.glob("history.db*"):
        path.unlink()


def test_isolation_without_an_async_destroy_is_refused_in_one_line(tmp_path: Path) -> None:
    """``--isolate`` without ``destroy()`` silently left 52 database files."""
    files = page_files()
    module = "ravi-sqlite-history/src/ravi_sqlite_history/__init__.py"
    for broken, expected in [
        (files[module].replace("async def destroy(self)", "def forget(self)"), "needs SQLiteHistoryProvider.destroy()"),
        (files[module].replace("async def destroy(self)", "def destroy(self)"), "destroy() must be async"),
    ]:
        where = tmp_path / expected.split()[0].strip(".(")
        installed = install(where / "project", where / "site-packages", {**files, module: broken})
        [command] = [c for c in page_commands() if "ravi conformance" in c]
        done = installed.run(command)
        assert done.returncode == 1 and done.stdout == ""
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and expected in lines[0], done.stderr
        assert list(installed.project.glob("history.db*")) == []


def test_a_misspelt_backend_gets_the_closest_name(tutorial: Installed) -> None:
    done = tutorial.run("ravi conformance history=sqlit")
    assert done.returncode == 1
    assert "did you mean 'sqlite'?" in done.stderr


def test_a_misspelt_isolating_option_gets_the_closest_name(tutorial: Installed) -> None:
    """``--isolate history=pth`` said to remove the option from a configuration nobody wrote."""
    done = tutorial.run("ravi conformance history=sqlite --isolate history=pth")
    assert done.returncode == 1 and done.stdout == ""
    assert "'pth' is not an option of the 'sqlite' history backend (its options: path)" in done.stderr
    assert "did you mean 'path'?" in done.stderr
    done = tutorial.run("ravi conformance history=memory --isolate history=path")
    assert done.returncode == 1 and "'path' is not an option of the 'memory' history backend" in done.stderr
