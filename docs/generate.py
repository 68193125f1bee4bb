"""Pages generated from the code, so they cannot drift from it: the API reference (``docs/reference/``) and the
options tables of the configuration page (from each backend's options model).

    python docs/generate.py          # rewrite them
    python docs/generate.py --check  # exit 1 if any is stale (docs/test_docs.py runs this)
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

DOCS = Path(__file__).resolve().parent

SECTIONS: dict[str, tuple[str, str, list[str]]] = {
    "kernel.md": (
        "`ravi.kernel`",
        "The contracts every other package builds on: messages, the storage Protocols, errors, the backend "
        "registry, configuration, the environment registry, scopes and token counts.",
        ["ravi.kernel"],
    ),
    "agents.md": (
        "`ravi.agents`",
        "Assembly (the context, the pipeline and its strategies, the model contexts, the functional engine), the "
        "in-memory stores, settings, token counters, `ReActAgent`, telemetry and the `ravi` command; the offline "
        "embedding model's files (`ravi-embeddings-wordllama`).",
        ["ravi.agents", "ravi.embeddings.wordllama"],
    ),
    "conformance.md": (
        "`ravi.conformance`",
        "The contract suite: one class per Protocol (each test's docstring is the rule it checks) and the pytest "
        "plugin behind `--ravi-backend` and `ravi conformance`.",
        ["ravi.conformance"],
    ),
    "capabilities.md": (
        "Backends",
        "The production backends, each registered under an entry point, with its options model.",
        ["ravi.capabilities.postgres", "ravi.capabilities.redis", "ravi.capabilities.s3", "ravi.capabilities.age"],
    ),
    "integrations.md": (
        "Integrations",
        "The faces of Ravi in agent frameworks.",
        [
            "ravi.integrations.langchain",
            "ravi.integrations.openai_agents",
            "ravi.integrations.autogen",
            "ravi.integrations.pydantic_ai",
        ],
    ),
}
"""Reference page: (title, what it holds, the packages it documents)."""


def _private(name: str) -> bool:
    return any(part.startswith("_") for part in name.split("."))


def public_modules(root: str) -> list[ModuleType]:
    """``root`` and every module under it whose path has no ``_`` part, imported."""
    package = importlib.import_module(root)
    names = [root]
    if hasattr(package, "__path__"):
        names += [n for _, n, _ in pkgutil.walk_packages(package.__path__, root + ".") if not _private(n)]
    return [importlib.import_module(n) for n in sorted(names)]


def _assigned(module: ModuleType) -> set[str]:
    """Names a module assigns at its top level (constants, aliases), from its source."""
    try:
        tree = ast.parse(inspect.getsource(module))
    except (OSError, TypeError):
        return set()
    names: set[str] = set()
    for node in tree.body:
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        )
        names |= {t.id for t in targets if isinstance(t, ast.Name)}
    return names


def home(module: ModuleType, name: str, modules: list[ModuleType]) -> str:
    """The public module that documents ``module.name``: the one defining it (a class or function by its
    ``__module__``, a constant by the module that assigns it), else ``module`` itself."""
    obj = getattr(module, name)
    defined = getattr(obj, "__module__", None) if inspect.isclass(obj) or inspect.isfunction(obj) else None
    if defined and not _private(defined) and any(m.__name__ == defined for m in modules):
        return str(defined)
    for other in modules:
        if name in _assigned(other) and getattr(other, name, None) is obj:
            return other.__name__
    return module.__name__


def _foreign(obj: object) -> bool:
    """A framework's own class or function that a module re-exports: the framework documents it."""
    named = inspect.isclass(obj) or inspect.isfunction(obj)
    return named and not str(getattr(obj, "__module__", "ravi")).startswith("ravi.")


def _simple(obj: object) -> bool:
    """Small values (strings, numbers) are shared by identity between unrelated names: never dedupe them."""
    return isinstance(obj, str | int | float | bool | type(None))


@dataclass
class Entry:
    """A documented module and the public names it shows."""

    module: str
    names: list[str] = field(default_factory=list)


def public_names(roots: list[str]) -> dict[str, Entry]:
    """Every name in the ``__all__`` of a public module under ``roots``, grouped under the module that shows it:
    the one defining it, or (when that module is private or re-exports a value) the first public module that
    exports it."""
    entries: dict[str, Entry] = {}
    placed: set[int] = set()
    modules = [m for root in roots for m in public_modules(root)]
    for module in modules:
        for name in getattr(module, "__all__", []):
            obj = getattr(module, name)
            if _foreign(obj):
                continue
            if id(obj) in placed and (inspect.isclass(obj) or inspect.isfunction(obj) or not _simple(obj)):
                continue
            where = home(module, name, modules)
            entry = entries.setdefault(where, Entry(where))
            shown = (
                obj.__name__ if (inspect.isclass(obj) or inspect.isfunction(obj)) and where != module.__name__ else name
            )
            if shown not in entry.names:
                entry.names.append(shown)
            placed.add(id(obj))
    return dict(sorted(entries.items()))


def reference_page(filename: str) -> str:
    title, about, roots = SECTIONS[filename]
    lines = [f"# {title}", "", about, "", "<!-- generated by docs/generate.py from the code: do not edit -->", ""]
    for entry in public_names(roots).values():
        lines += [f"::: {entry.module}", "    options:", "      members:"]
        lines += [f"        - {name}" for name in entry.names]
        lines.append("")
    return "\n".join(lines)


def reference_index() -> str:
    lines = [
        "# API reference",
        "",
        "Every public name of Ravi's packages (those in a module's `__all__`), with its signature and docstring,",
        "generated from the code by mkdocstrings and built with the site (`make docs`, strict).",
        "",
        "<!-- generated by docs/generate.py from the code: do not edit -->",
        "",
        "| page | what it documents |",
        "|---|---|",
    ]
    for filename, (title, about, _) in SECTIONS.items():
        lines.append(f"| [{title}]({filename}) | {about} |")
    return "\n".join(lines) + "\n"


# -- options tables -----------------------------------------------------------------------------------------

BEGIN, END = "<!-- options:begin (generated by docs/generate.py) -->", "<!-- options:end -->"


def _default(field_info: Any) -> str:
    from pydantic_core import PydanticUndefined

    if field_info.default is PydanticUndefined:
        return "required"
    if field_info.default is None:
        return "none"
    if isinstance(field_info.default, bool):
        return "`true`" if field_info.default else "`false`"
    if isinstance(field_info.default, str):
        return f'`"{field_info.default}"`'
    return f"`{field_info.default!r}`"


def options_tables() -> str:
    """One table per backend of Ravi's own distributions, of every kind: each option, its type, default, variable
    and meaning."""
    from ravi.kernel.options import describe_type, options_model
    from ravi.kernel.registry import GROUPS, available, backend_factory

    lines: list[str] = []
    for kind in GROUPS:
        for name, path in available(kind).items():
            if not path.startswith("ravi."):  # another distribution's backend: its own docs list its options
                continue
            factory = backend_factory(kind, name)
            model = options_model(factory)
            if model is None:
                continue
            lines += ["", f'### `[{kind}] backend = "{name}"`', ""]
            summary = " ".join((inspect.getdoc(factory) or "").split("\n\n")[0].split())
            lines.append(f"`{path.replace(':', '.')}`: {summary}")
            if not model.model_fields:
                lines += ["", "No options.", ""]
                continue
            lines += ["", "| option | type | default | variable | |", "|---|---|---|---|---|"]
            for field_name, info in model.model_fields.items():
                option = info.alias or field_name
                variable = "code only" if option in model.code_only else f"`RAVI_{kind.upper()}__{option.upper()}`"
                about = (info.description or "").replace("|", "\\|")
                kind_of = describe_type(info.annotation).replace("|", "\\|")
                lines.append(f"| `{option}` | {kind_of} | {_default(info)} | {variable} | {about} |")
            lines.append("")
    return "\n".join([BEGIN, *lines, END])


def configuration_page() -> str:
    page = (DOCS / "configuration.md").read_text()
    if BEGIN not in page:
        raise SystemExit(f"docs/configuration.md has no {BEGIN!r} marker")
    head, rest = page.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return head + options_tables() + tail


def pages() -> dict[Path, str]:
    out = {DOCS / "reference" / filename: reference_page(filename) for filename in SECTIONS}
    out[DOCS / "reference" / "index.md"] = reference_index()
    out[DOCS / "configuration.md"] = configuration_page()
    return out


def main(argv: list[str]) -> int:
    stale = [path for path, text in pages().items() if not path.exists() or path.read_text() != text]
    if "--check" in argv:
        for path in stale:
            print(f"{path.relative_to(DOCS.parent)} is stale: run python docs/generate.py", file=sys.stderr)
        return 1 if stale else 0
    for path, text in pages().items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
