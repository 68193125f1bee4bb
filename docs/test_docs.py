"""Every Python example in the documentation at least compiles; the quickstart and the SQLite backend run in full
(``docs/examples``)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOCS = Path(__file__).parent
BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)


def blocks() -> list[tuple[str, str]]:
    found = []
    for page in sorted(DOCS.rglob("*.md")):
        for i, code in enumerate(BLOCK.findall(page.read_text())):
            if "--8<--" not in code:  # included from docs/examples, which run as tests
                found.append((f"{page.relative_to(DOCS)}#{i}", code))
    return found


@pytest.mark.parametrize(("where", "code"), blocks(), ids=[b[0] for b in blocks()])
def test_example_compiles(where: str, code: str) -> None:
    # examples use top-level await as in an async REPL or notebook
    compile(code, where, "exec", flags=0x2000)  # PyCF_ALLOW_TOP_LEVEL_AWAIT
