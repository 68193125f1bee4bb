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
    "ravi-embeddings-wordllama": [],
    "ravi-conformance": ["ravi-kernel"],
    "ravi-capabilities-redis": ["ravi-kernel"],
    "ravi-capabilities-postgres": ["ravi-kernel"],
    "ravi-capabilities-s3": ["ravi-kernel"],
    "ravi-capabilities-age": ["ravi-kernel", "ravi-capabilities-postgres"],
    "ravi-integrations-langchain": ["ravi-kernel", "ravi-agents"],
    "ravi-integrations-openai-agents": ["ravi-kernel", "ravi-agents"],
    "ravi-integrations-autogen": ["ravi-kernel", "ravi-agents"],
    "ravi-integrations-pydantic-ai": ["ravi-kernel", "ravi-agents"],
}
IMPORTS = {
    "ravi-kernel": "ravi.kernel",
    "ravi-agents": "ravi.agents.context",
    "ravi-embeddings-wordllama": "ravi.embeddings.wordllama",
    "ravi-conformance": "ravi.conformance",
    "ravi-capabilities-redis": "ravi.capabilities.redis",
    "ravi-capabilities-postgres": "ravi.capabilities.postgres",
    "ravi-capabilities-s3": "ravi.capabilities.s3",
    "ravi-capabilities-age": "ravi.capabilities.age",
    "ravi-integrations-langchain": "ravi.integrations.langchain",
    "ravi-integrations-openai-agents": "ravi.integrations.openai_agents",
    "ravi-integrations-autogen": "ravi.integrations.autogen",
    "ravi-integrations-pydantic-ai": "ravi.integrations.pydantic_ai",
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


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every distribution built as ``make dist`` builds it: a wheel and an sdist each."""
    out = tmp_path_factory.mktemp("dist")
    subprocess.run([UV, "build", "--quiet", "--all-packages", "--out-dir", str(out)], cwd=ROOT, check=True)
    return out


def built(wheels: Path, dist: str, *, extra: str = "") -> list[str]:
    """Requirements naming the built wheel of ``dist`` and of the Ravi distributions it needs, as direct file
    references (``name[extra] @ file:///...whl``): installed from exactly those files, their other dependencies
    from the ordinary package index."""
    out = []
    for name in [*LOCAL[dist], dist]:
        wheel = next(wheels.glob(f"{name.replace('-', '_')}-*.whl"))
        out.append(f"{name}{extra if name == dist else ''} @ {wheel.as_uri()}")
    return out


def test_every_distribution_builds_and_passes_twine_check(wheels: Path) -> None:
    built = sorted(p.name for p in wheels.glob("ravi_*"))
    for dist in LOCAL:
        stem = dist.replace("-", "_")
        assert f"{stem}-0.1.0-py3-none-any.whl" in built and f"{stem}-0.1.0.tar.gz" in built, built
    twine = ROOT / ".venv" / "bin" / "twine"
    result = subprocess.run(
        [str(twine), "check", "--strict", *map(str, sorted(wheels.glob("ravi_*")))], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(
    ("dist", "driver"),
    [
        ("ravi-capabilities-s3", "boto3"),
        ("ravi-capabilities-postgres", "asyncpg"),
        ("ravi-capabilities-redis", "redis"),
        ("ravi-capabilities-age", "asyncpg"),
    ],
)
def test_a_capability_wheel_brings_the_kernel_pydantic_and_its_driver(
    tmp_path: Path, wheels: Path, dist: str, driver: str
) -> None:
    """Installed from the built wheels (not the source tree): the closure is the kernel, pydantic and the driver,
    never the assembly engine or the command line's dependencies."""
    venv = tmp_path / "venv"
    subprocess.run([UV, "venv", "--quiet", str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run([UV, "pip", "install", "--quiet", "--python", str(python), *built(wheels, dist)], check=True)
    listed = subprocess.run(
        [UV, "pip", "list", "--python", str(python), "--format", "freeze"], capture_output=True, text=True, check=True
    ).stdout
    names = {line.split("==")[0].lower() for line in listed.splitlines() if line}
    assert {dist, "ravi-kernel", "pydantic", driver} <= names, names
    assert not names & {"ravi-agents", "typer", "rich", "pydantic-settings", "click"}, names
    files = subprocess.run(
        [str(python), "-c", f"import importlib.metadata as m; print(m.distribution({dist!r}).read_text('RECORD'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert ".pth" not in files  # a real install from the wheel, not an editable one
    result = subprocess.run([str(python), "-c", f"import {IMPORTS[dist]}"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_the_library_leaves_the_command_line_to_its_extra(tmp_path: Path, wheels: Path) -> None:
    """``ravi-agents`` alone brings no typer or rich; its ``ravi`` command then says which extra to install."""
    venv = tmp_path / "venv"
    subprocess.run([UV, "venv", "--quiet", str(venv)], check=True)
    python = venv / "bin" / "python"
    install = [UV, "pip", "install", "--quiet", "--python", str(python)]
    subprocess.run([*install, *built(wheels, "ravi-agents")], check=True)
    listed = subprocess.run(
        [UV, "pip", "list", "--python", str(python), "--format", "freeze"], capture_output=True, text=True, check=True
    ).stdout
    assert not {line.split("==")[0].lower() for line in listed.splitlines()} & {"typer", "rich"}
    result = subprocess.run([str(venv / "bin" / "ravi"), "--help"], capture_output=True, text=True)
    assert result.returncode == 1 and "pip install 'ravi-agents[cli]'" in result.stderr, result.stderr
    subprocess.run([*install, *built(wheels, "ravi-agents", extra="[cli]")], check=True)
    result = subprocess.run([str(venv / "bin" / "ravi"), "--help"], capture_output=True, text=True)
    assert result.returncode == 0 and "demo" in result.stdout, result.stderr


def test_the_embeddings_extra_embeds_offline_without_the_hugging_face_libraries(tmp_path: Path, wheels: Path) -> None:
    """``ravi-agents[embeddings]`` from the built wheels brings the model's data and sentencepiece, not
    ``tokenizers``, ``huggingface-hub`` or ``hf-xet``, and embeds with the network switched off for the hub."""
    venv = tmp_path / "venv"
    subprocess.run([UV, "venv", "--quiet", str(venv)], check=True)
    python = venv / "bin" / "python"
    install = [UV, "pip", "install", "--quiet", "--python", str(python)]
    subprocess.run(
        [*install, *built(wheels, "ravi-agents", extra="[embeddings]"), *built(wheels, "ravi-embeddings-wordllama")],
        check=True,
    )
    listed = subprocess.run(
        [UV, "pip", "list", "--python", str(python), "--format", "freeze"], capture_output=True, text=True, check=True
    ).stdout
    names = {line.split("==")[0].lower() for line in listed.splitlines() if line}
    assert {"ravi-embeddings-wordllama", "sentencepiece", "numpy"} <= names, names
    assert not names & {"tokenizers", "huggingface-hub", "hf-xet", "wordllama", "safetensors", "torch"}, names
    script = (
        "from ravi.agents.embeddings import offline_embedding_client\n"
        "[a, b, c] = offline_embedding_client().embed_now(['a puppy', 'a dog', 'the tax return'])\n"
        "print(round(float(a @ b), 2), round(float(a @ c), 2))"
    )
    result = subprocess.run(
        [str(python), "-c", script], capture_output=True, text=True, env={"HF_HUB_OFFLINE": "1", "PATH": ""}
    )
    assert result.returncode == 0, result.stderr
    near, far = map(float, result.stdout.split())
    assert near > far + 0.2, result.stdout
