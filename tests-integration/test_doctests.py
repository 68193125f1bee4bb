"""Every example in a docstring runs as printed (those marked ``# doctest: +SKIP`` need a server or a model)."""

from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent


def modules() -> list[str]:
    found = []
    for source in sorted(ROOT.glob("packages/*/src/ravi/**/*.py")):
        src = next(parent for parent in source.parents if parent.name == "src")
        name = ".".join(p for p in source.relative_to(src).with_suffix("").parts if p != "__init__")
        if name.endswith("__main__"):
            continue
        found.append(name)
    return found


@pytest.mark.parametrize("name", modules())
def test_docstring_examples_run(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} docstring examples of {name} failed"
