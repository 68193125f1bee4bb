"""Every hint that tells a user what to install gives both forms: the command for the package index, and the one
for a clone of Ravi (``./packages/...``), where 0.1.0 is installed from until it is published."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import pytest

from ravi.kernel.errors import ConfigurationError

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted(ROOT.glob("packages/*/src/**/*.py"))


def docstrings(tree: ast.AST) -> set[int]:
    """The ids of the docstring constants of ``tree`` (documentation, not a message a user is given)."""
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def test_no_message_spells_an_install_command_of_its_own() -> None:
    """An install hint written out by hand (``hint="pip install 'ravi-agents[exact]'"``) gave only the index's
    form, which does not work before Ravi is published; every hint goes through ``install_command``, which gives
    both."""
    spelled: list[str] = []
    for path in SOURCES:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skip = docstrings(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and node.name == "install_command":
                skip |= {id(n) for n in ast.walk(node)}
        hints = [n for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
        spelled += [
            f"{path.relative_to(ROOT)}:{n.lineno}: {n.value!r}"
            for n in hints
            if "pip install" in n.value and id(n) not in skip
        ]
    assert not spelled, "\n".join(spelled)


def test_the_hint_of_a_backend_not_installed_gives_both_forms(monkeypatch: pytest.MonkeyPatch) -> None:
    from ravi.kernel import registry

    monkeypatch.setattr(registry, "_entry_points", lambda kind: {})
    for name, (distribution, kinds) in registry.KNOWN_BACKENDS.items():
        if distribution == "ravi-agents":
            continue
        with pytest.raises(ConfigurationError) as raised:
            registry.backend_factory(sorted(kinds)[0], name)
        hint = raised.value.hint or ""
        assert f"pip install {distribution}" in hint, hint
        assert f"./packages/{distribution}" in hint, hint


def test_a_clone_install_names_every_distribution_of_ravi_an_extra_needs() -> None:
    """From a clone, an extra that needs another distribution of Ravi (``ravi-agents[embeddings]`` needs
    ``ravi-embeddings-wordllama``) installs only if that one's directory is given too: pip would look for it on
    the index."""
    from ravi.kernel.registry import install_command

    ours = {p.parent.name for p in ROOT.glob("packages/*/pyproject.toml")}
    for pyproject in ROOT.glob("packages/*/pyproject.toml"):
        project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
        for extra, requirements in project.get("optional-dependencies", {}).items():
            needed = {r.split(">")[0].split("<")[0].split("=")[0].split("[")[0].strip() for r in requirements} & ours
            command = install_command(f"{project['name']}[{extra}]")
            clone = command.split("from a clone")[1]
            assert f"./packages/{project['name']}[{extra}]" in clone, command
            for distribution in needed:
                assert f"./packages/{distribution}" in clone, command


def test_ravi_backends_says_how_to_install_what_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    from ravi.agents.cli import _common, backends

    monkeypatch.setattr(backends, "available", lambda kind: {"memory": "ravi-agents"})
    with _common.console.capture() as captured:
        backends.backends()
    shown = captured.get()
    assert "pip install DISTRIBUTION" in shown and "pip install ./packages/DISTRIBUTION" in shown, shown
