"""The layer contracts are enforced: import-linter passes on the real tree and catches an upward import."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def tree_with(tmp_path: Path, extra: dict[str, str]) -> Path:
    """A copy of every package's ``src/ravi`` merged into one tree, plus ``extra`` modules."""
    tree = tmp_path / "tree"
    for src in sorted(ROOT.glob("packages/*/src")):
        shutil.copytree(src, tree, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))
    for relative, code in extra.items():
        (tree / "ravi" / relative).write_text(code)
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    roots = "".join(f"\n    {r}" for r in config["root_packages"])
    lines = [
        "[importlinter]",
        f"root_packages ={roots}",
        f"include_external_packages = {config['include_external_packages']}",
    ]
    for i, contract in enumerate(config["contracts"]):
        lines.append(f"\n[importlinter:contract:{i}]")
        for key, value in contract.items():
            if isinstance(value, list):
                lines.append(f"{key} =\n" + "\n".join(f"    {v}" for v in value))
            else:
                lines.append(f"{key} = {value}")
    (tree / ".importlinter").write_text("\n".join(lines) + "\n")
    return tree


def lint(tree: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT_IMPORTS), "--config", str(tree / ".importlinter"), "--no-cache"],
        cwd=tree,
        env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.mark.skipif(not LINT_IMPORTS.exists(), reason="import-linter is not installed (make setup installs it)")
def test_the_tree_keeps_its_layers(tmp_path: Path) -> None:
    result = lint(tree_with(tmp_path, {}))
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.skipif(not LINT_IMPORTS.exists(), reason="import-linter is not installed (make setup installs it)")
@pytest.mark.parametrize(
    ("module", "code", "broken"),
    [
        ("kernel/_upward.py", "import ravi.agents.context\n", "Layers"),
        ("agents/_upward.py", "import ravi.capabilities.redis\n", "Layers"),
        ("capabilities/redis/_sideways.py", "import ravi.capabilities.postgres\n", "independent"),
        ("conformance/_upward.py", "import ravi.agents.storage\n", "conformance suite depends on the kernel"),
        ("kernel/_numpy.py", "import numpy\n", "pydantic and the standard library"),
        ("embeddings/wordllama/_code.py", "import ravi.kernel.errors\n", "offline embedding model is data"),
    ],
)
def test_a_forbidden_import_is_caught(tmp_path: Path, module: str, code: str, broken: str) -> None:
    result = lint(tree_with(tmp_path, {module: code}))
    assert result.returncode != 0
    assert "BROKEN" in result.stdout and broken in result.stdout, result.stdout
