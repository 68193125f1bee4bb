"""Regenerate the frameworks' own tests of their memory interfaces, ported to Ravi's adapters.

Each suite below is a framework distribution whose source distribution ships tests. For each one, this script
downloads the sdist of the version installed here (``pip download --no-binary :all: --no-deps``; PyPI through
pip's own configuration), and copies into ``packages/<integration>/tests/upstream/<suite>/``:

* the listed test files, as published, except one added line after each import of a name Ravi rebinds
  (``from ravi_port import SQLiteSession  # ravi: ...``): the framework's class, built from the same arguments,
  is then Ravi's adapter;
* every module of the sdist's ``tests`` package those files import (helpers, fixtures), every ``conftest.py``
  and ``__init__.py`` on their way, unchanged;
* the sdist's licence, a ``pytest.ini`` holding the upstream pytest options the files rely on, and
  ``MANIFEST.json`` (version, files, which tests run whole and which only where they build the rebound
  object, the added lines).

What does not apply to Ravi, and why, is not decided here: ``ravi_port.py`` beside the suites lists it, with
the stand-ins. ``scripts/upstream/ravi_upstream.py`` is the pytest plugin that applies it.

Usage (an upgrade: bump the framework, ``make lock``, then this; or ``make upstream``)::

    python scripts/upstream/port.py                 # every suite
    python scripts/upstream/port.py langchain-core  # one
    python scripts/upstream/port.py --sdist DIR     # from sdists already downloaded into DIR
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import importlib.metadata
import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
import tomllib
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

ROOT = Path(__file__).resolve().parents[2]
MARK = "# ravi: rebound to the Ravi adapter, built from the same arguments"


@dataclass(frozen=True)
class Suite:
    """One framework distribution's tests, ported into one integration package."""

    dist: str
    package: str
    rebind: tuple[str, ...]
    whole: tuple[str, ...] = ()
    """Test files that run whole (every test in them exercises the interface)."""
    selected: tuple[str, ...] = ()
    """Test files (globs) of which only the tests whose source names a rebound object run."""
    license: str = "LICENSE"
    pytest_keys: tuple[str, ...] = ("asyncio_mode", "asyncio_default_fixture_loop_scope", "markers", "filterwarnings")
    data: tuple[str, ...] = ()
    """Data files (globs) the tests read: specifications, stored snapshots."""
    skip_conftests: tuple[str, ...] = field(default=())
    """Upstream conftest files not copied (their fixtures need a service or tool a port does not use)."""

    @property
    def folder(self) -> Path:
        return ROOT / "packages" / self.package / "tests" / "upstream" / self.dist.replace("-", "_")


SDK_SESSION_CLASSES = (
    "SQLiteSession",
    "AsyncSQLiteSession",
    "SQLAlchemySession",
    "RedisSession",
)

SUITES = (
    Suite(
        "openai-agents",
        "ravi-integrations-openai-agents",
        rebind=SDK_SESSION_CLASSES,
        whole=(
            "tests/memory/test_session.py",
            "tests/memory/test_session_limit.py",
            "tests/extensions/memory/test_async_sqlite_session.py",
            "tests/extensions/memory/test_sqlalchemy_session.py",
            "tests/extensions/memory/test_redis_session.py",
        ),
        selected=(
            "tests/extensions/memory/test_encrypt_session.py",
            "tests/memory/test_openai_responses_compaction_session.py",
            "tests/memory/test_compaction_suffix.py",
            "tests/memory/test_compaction_model_visibility.py",
            "tests/memory/test_session_context_wrapper.py",
            "tests/deferred_session_writes/test_compaction.py",
            "tests/test_agent_runner.py",
            "tests/test_agent_runner_streamed.py",
            "tests/test_max_turns.py",
            "tests/test_tool_batch_failure_history.py",
            "tests/test_native_tool_failure_history.py",
            "tests/test_run_impl_resume_paths.py",
            "tests/test_soft_cancel.py",
            "tests/test_tool_failure_boundaries.py",
            "tests/test_programmatic_tool_calling.py",
        ),
    ),
    Suite(
        "langchain-core",
        "ravi-integrations-langchain",
        rebind=("InMemoryChatMessageHistory",),
        whole=("tests/unit_tests/chat_history/test_chat_history.py", "tests/unit_tests/runnables/test_history.py"),
    ),
    Suite(
        "langchain-postgres",
        "ravi-integrations-langchain",
        rebind=("PostgresChatMessageHistory",),
        whole=("tests/unit_tests/v1/test_chat_histories.py",),
    ),
    Suite(
        "langchain",
        "ravi-integrations-langchain",
        rebind=("create_agent",),
        selected=("tests/unit_tests/agents/**/test_*.py",),
        data=(
            "tests/unit_tests/agents/specifications/*",
            "tests/unit_tests/agents/**/__snapshots__/*",
            "tests/cassettes/*",
        ),
    ),
    Suite(
        "autogen-core",
        "ravi-integrations-autogen",
        rebind=(
            "BufferedChatCompletionContext",
            "HeadAndTailChatCompletionContext",
            "TokenLimitedChatCompletionContext",
            "UnboundedChatCompletionContext",
        ),
        whole=("tests/test_model_context.py",),
        license="LICENSE-CODE",
    ),
    Suite(
        "autogen-agentchat",
        "ravi-integrations-autogen",
        rebind=("AssistantAgent",),
        selected=("tests/test_assistant_agent.py",),
        license="LICENSE-CODE",
    ),
)


def download(dist: str, version: str, into: Path) -> Path:
    """The sdist of ``dist==version``, downloaded into ``into`` by pip (with pip's own configuration)."""
    pythons = [sys.executable, str(ROOT / ".tools" / "bin" / "python"), "python3"]
    for python in pythons:
        if subprocess.run([python, "-m", "pip", "--version"], capture_output=True, check=False).returncode == 0:
            break
    else:
        raise SystemExit("no pip found: run `make setup` (it installs one in .tools/)")
    command = [python, "-m", "pip", "download", "--quiet", "--no-binary", ":all:", "--no-deps"]
    subprocess.run([*command, f"{dist}=={version}", "-d", str(into)], check=True)
    found = find_sdist(dist, version, into)
    if found is None:
        raise SystemExit(f"pip downloaded no sdist of {dist}=={version}")
    return found


def find_sdist(dist: str, version: str, folder: Path) -> Path | None:
    stem = dist.replace("-", "_")
    for candidate in (f"{stem}-{version}.tar.gz", f"{dist}-{version}.tar.gz"):
        if (folder / candidate).exists():
            return folder / candidate
    return None


def tests_imported(source: str, module: PurePosixPath) -> set[PurePosixPath]:
    """The modules of the ``tests`` package that ``source`` (the file at ``module``) imports, as paths."""
    found: set[PurePosixPath] = set()
    for node in ast.walk(ast.parse(source)):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.parent
                for _ in range(node.level - 1):
                    base = base.parent
                dotted = ".".join([*base.parts, *(node.module.split(".") if node.module else [])])
            else:
                dotted = node.module or ""
            names = [dotted] + [f"{dotted}.{alias.name}" for alias in node.names]
        for name in names:
            if name == "tests" or name.startswith("tests."):
                found.add(PurePosixPath(*name.split(".")))
    return found


def resolve(candidate: PurePosixPath, sdist: Path) -> PurePosixPath | None:
    for path in (candidate.with_suffix(".py"), candidate / "__init__.py"):
        if (sdist / path).is_file():
            return path
    return None


def closure(suite: Suite, sdist: Path, tests: list[PurePosixPath]) -> list[PurePosixPath]:
    """The test files, and every file of the ``tests`` package they need to import and run."""
    wanted: set[PurePosixPath] = set()
    todo = list(tests)
    while todo:
        path = todo.pop()
        if path in wanted or str(path) in suite.skip_conftests:
            continue
        wanted.add(path)
        for parent in path.parents:  # packages and conftests on the way
            if parent == PurePosixPath(".") or not str(parent).startswith("tests"):
                continue
            for name in ("__init__.py", "conftest.py"):
                if (sdist / parent / name).is_file():
                    todo.append(parent / name)
        module = path.with_suffix("") if path.name != "__init__.py" else path.parent
        for imported in tests_imported((sdist / path).read_text(), module):
            found = resolve(imported, sdist) or resolve(imported.parent, sdist)
            if found is not None:
                todo.append(found)
    return sorted(wanted)


def rebound(source: str, names: tuple[str, ...]) -> tuple[str, list[dict[str, object]]]:
    """``source`` with a rebinding line after every import of one of ``names``; and the lines added."""
    lines = source.splitlines(keepends=True)
    inserts: list[tuple[int, str, list[str]]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module != "ravi_port":
            bound = [a.asname or a.name for a in node.names if a.name in names and (a.asname or a.name) == a.name]
            if bound:
                indent = lines[node.lineno - 1][: node.col_offset]
                inserts.append((node.end_lineno or node.lineno, indent, bound))
    added = []
    for end, indent, bound in sorted(inserts, reverse=True):
        line = f"{indent}from ravi_port import {', '.join(bound)}  {MARK}\n"
        lines.insert(end, line)
        added.append({"after_line": end, "line": line.rstrip("\n")})
    return "".join(lines), sorted(added, key=lambda a: int(str(a["after_line"])))


def pytest_ini(suite: Suite, sdist: Path) -> str:
    """A ``pytest.ini`` with the upstream options the files rely on, and the plugin that ports them."""
    options = tomllib.loads((sdist / "pyproject.toml").read_text()).get("tool", {}).get("pytest", {})
    options = options.get("ini_options", {})
    out = [
        "# Generated by scripts/upstream/port.py: the upstream pytest options these tests rely on, and the",
        "# plugin (scripts/upstream/ravi_upstream.py) that runs them on Ravi.",
        "[pytest]",
        "testpaths = tests",
        "pythonpath = . .. ../../../../../scripts/upstream",
        f"ravi_suite = {suite.dist}",
        "addopts = -p ravi_upstream -p no:cacheprovider -p no:valkey -p no:ravi_conformance -rs",
        "xfail_strict = false",
    ]
    for key in suite.pytest_keys:
        value = options.get(key)
        if value is None:
            continue
        if isinstance(value, list):
            out.append(f"{key} =")
            out += [f"    {v}" for v in value]
        else:
            out.append(f"{key} = {value}")
    return "\n".join(out) + "\n"


def port(suite: Suite, sdists: Path) -> None:
    version = importlib.metadata.version(suite.dist)
    archive = find_sdist(suite.dist, version, sdists) or download(suite.dist, version, sdists)
    with tempfile.TemporaryDirectory() as scratch:
        with tarfile.open(archive) as tar:
            tar.extractall(scratch, filter="data")
        (sdist,) = Path(scratch).iterdir()
        tests: list[PurePosixPath] = []
        for pattern in suite.whole + suite.selected:
            matches = sorted(PurePosixPath(p.relative_to(sdist).as_posix()) for p in sdist.glob(pattern))
            if not matches:
                raise SystemExit(f"{suite.dist} {version}: no file {pattern} in its sdist")
            tests += matches
        folder = suite.folder
        if (folder / "tests").exists():
            shutil.rmtree(folder / "tests")
        folder.mkdir(parents=True, exist_ok=True)
        files = []
        for path in closure(suite, sdist, tests):
            source = (sdist / path).read_text()
            text, added = rebound(source, suite.rebind) if path.name.startswith("test_") else (source, [])
            target = folder / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
            digest = hashlib.sha256(source.encode()).hexdigest()
            files.append({"path": str(path), "upstream_sha256": digest, "added": added})
        for pattern in suite.data:
            for found in sorted(sdist.glob(pattern)):
                path = PurePosixPath(found.relative_to(sdist).as_posix())
                (folder / path).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(found, folder / path)
                digest = hashlib.sha256(found.read_bytes()).hexdigest()
                files.append({"path": str(path), "upstream_sha256": digest, "added": []})
        shutil.copyfile(sdist / suite.license, folder / "LICENSE")
        (folder / "pytest.ini").write_text(pytest_ini(suite, sdist))
        selected = [str(t) for t in tests if not any(t.match(w) or str(t) == w for w in suite.whole)]
        manifest = {
            "dist": suite.dist,
            "version": version,
            "rebind": list(suite.rebind),
            "whole": [str(t) for t in tests if str(t) not in selected],
            "selected": selected,
            "files": files,
        }
        (folder / "MANIFEST.json").write_text(json.dumps(manifest, indent=2) + "\n")
        print(f"{suite.dist} {version}: {len(tests)} test files, {len(files)} files into {folder.relative_to(ROOT)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("suites", nargs="*", help="the suites to port (default: all)")
    parser.add_argument("--sdist", type=Path, help="a folder holding the sdists already downloaded")
    args = parser.parse_args()
    chosen = [s for s in SUITES if not args.suites or s.dist in args.suites]
    unknown = set(args.suites) - {s.dist for s in SUITES}
    if unknown:
        raise SystemExit(f"unknown suites {sorted(unknown)}; known: {[s.dist for s in SUITES]}")
    with tempfile.TemporaryDirectory() as downloads:
        for suite in chosen:
            port(suite, args.sdist or Path(downloads))


if __name__ == "__main__":
    main()
