"""The worked third-party strategy (``docs/examples/keep_last_turns``) as its author runs it: copied out of the
repository, so none of Ravi's pytest configuration applies, and tested with its own."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "docs" / "examples" / "keep_last_turns"


def test_the_example_strategy_passes_the_contract_outside_the_repository(tmp_path: Path) -> None:
    project = tmp_path / "keep_last_turns"
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns("__pycache__"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAVI_", "PYTEST_"))}
    env["PYTHONPATH"] = str(project / "src")  # the package, as `pip install -e .` would give it
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "error::pytest.PytestWarning"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert " passed" in done.stdout and "skipped" not in done.stdout
