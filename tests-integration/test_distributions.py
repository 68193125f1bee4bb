"""Each distribution installs and imports on its own, with only the dependencies it declares."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
UV = shutil.which("uv") or str(ROOT / ".tools" / "bin" / "uv")
pytestmark = pytest.mark.skipif(not Path(UV).exists(), reason="uv is not installed (make setup installs it)")

LOCAL = {
    "ravi-kernel": [],
    "ravi-agents": ["ravi-kernel"],
    "ravi-conformance": ["ravi-kernel"],
    "ravi-capabilities-redis": ["ravi-kernel"],
    "ravi-capabilities-postgres": ["ravi-kernel"],
    "ravi-capabilities-s3": ["ravi-kernel"],
    "ravi-capabilities-age": ["ravi-kernel"],
}
IMPORTS = {
    "ravi-kernel": "ravi.kernel",
    "ravi-agents": "ravi.agents.context",
    "ravi-conformance": "ravi.conformance",
    "ravi-capabilities-redis": "ravi.capabilities.redis",
    "ravi-capabilities-postgres": "ravi.capabilities.postgres",
    "ravi-capabilities-s3": "ravi.capabilities.s3",
    "ravi-capabilities-age": "ravi.capabilities.age",
}


def install(tmp_path: Path, dist: str) -> Path:
    venv = tmp_path / "venv"
    subprocess.run([UV, "venv", "--quiet", str(venv)], check=True)
    python = venv / "bin" / "python"
    paths = [str(ROOT / "packages" / d) for d in [*LOCAL[dist], dist]]
    subprocess.run([UV, "pip", "install", "--quiet", "--python", str(python), *paths], check=True)
    return python


@pytest.mark.parametrize("dist", list(LOCAL))
def test_installs_and_imports_alone(tmp_path: Path, dist: str) -> None:
    python = install(tmp_path, dist)
    result = subprocess.run([str(python), "-c", f"import {IMPORTS[dist]}"], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr


def test_the_kernel_needs_only_pydantic(tmp_path: Path) -> None:
    python = install(tmp_path, "ravi-kernel")
    listed = subprocess.run(
        [UV, "pip", "list", "--python", str(python), "--format", "freeze"], capture_output=True, text=True, check=True
    ).stdout
    names = {line.split("==")[0].lower() for line in listed.splitlines() if line}
    # pydantic and what pydantic itself needs
    assert names == {
        "ravi-kernel",
        "pydantic",
        "pydantic-core",
        "annotated-types",
        "typing-extensions",
        "typing-inspection",
    }, names


@pytest.mark.parametrize("dist", [d for d in LOCAL if d.startswith("ravi-capabilities-")])
def test_a_capability_brings_the_kernel_and_its_driver_only(tmp_path: Path, dist: str) -> None:
    """A capability used to bring typer, rich and pydantic-settings through ravi-agents."""
    python = install(tmp_path, dist)
    listed = subprocess.run(
        [UV, "pip", "list", "--python", str(python), "--format", "freeze"], capture_output=True, text=True, check=True
    ).stdout
    names = {line.split("==")[0].lower() for line in listed.splitlines() if line}
    assert not names & {"ravi-agents", "typer", "rich", "pydantic-settings", "click"}, names
    assert "ravi-kernel" in names
