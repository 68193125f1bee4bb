"""Every Python example in the documentation at least compiles; the quickstart and the SQLite backend run in full
(``docs/examples``)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

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


NOT_RUN = re.compile(r"^# not run here: (\S.*)$")


@pytest.mark.parametrize(("where", "code"), blocks(), ids=[b[0] for b in blocks()])
def test_every_example_runs_or_says_why_not(
    where: str, code: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each Python block runs as printed when saved as a file and run with ``python`` (so no top-level
    ``await``), or starts with ``# not run here: <the reason>`` and at least compiles (a fragment may await)."""
    import ast

    first = code.strip().splitlines()[0]
    if NOT_RUN.match(first):
        compile(code, where, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        return
    compiled = compile(code, where, "exec")
    monkeypatch.chdir(tmp_path)  # no ravi.toml around: the in-memory defaults
    for name in [n for n in __import__("os").environ if n.startswith("RAVI_")]:
        monkeypatch.delenv(name)
    exec(compiled, {"__name__": "__main__"})


INCLUDE = re.compile(r'--8<--\s*"([^"]+)"')
MANGLED = "--8" + " < --"  # the include as a formatter once rewrote it (kept apart so no check mistakes it)


def _text_of(html: str) -> str:
    """The visible text of a rendered page (tags dropped, entities decoded)."""
    from html.parser import HTMLParser

    class Text(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.parts: list[str] = []

        def handle_data(self, data: str) -> None:
            self.parts.append(data)

    parser = Text()
    parser.feed(html)
    return "".join(parser.parts)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The documentation site, built strictly, as a reader gets it."""
    import subprocess
    import sys

    out = tmp_path_factory.mktemp("site")
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "-d", str(out)],
        cwd=DOCS.parent,
        capture_output=True,
        text=True,
        env={**__import__("os").environ, "NO_MKDOCS_2_WARNING": "1"},
        check=False,
    )
    assert built.returncode == 0, built.stderr
    return out


def includes() -> list[tuple[str, str]]:
    return [
        (str(page.relative_to(DOCS)), target)
        for page in sorted(DOCS.rglob("*.md"))
        for target in INCLUDE.findall(page.read_text())
    ]


def test_the_pages_that_show_examples_include_them() -> None:
    assert {page for page, _ in includes()} >= {"quickstart.md"}


@pytest.mark.parametrize(("page", "target"), includes())
def test_every_included_example_appears_on_its_rendered_page(site: Path, page: str, target: str) -> None:
    """An include the build does not resolve shows as literal text (a formatter once spaced its arrows out)."""
    html = (site / page.removesuffix(".md") / "index.html").read_text()
    text = _text_of(html)
    assert "--8<--" not in text and MANGLED not in text, f"{page}: an include directive survived"
    for line in (DOCS.parent / target).read_text().splitlines():
        if line.strip():
            assert line.strip() in text, f"{page}: {target} is not shown whole (missing {line.strip()!r})"


def test_no_include_directive_survives_anywhere(site: Path) -> None:
    for html in site.rglob("*.html"):
        text = _text_of(html.read_text())
        assert "--8<--" not in text and MANGLED not in text, f"{html.relative_to(site)}"


def test_the_test_module_is_not_published(site: Path) -> None:
    assert not list(site.rglob("test_docs.py"))


def test_every_chart_is_there_and_says_when_and_where_it_was_measured(site: Path) -> None:
    """The performance page shows the charts make bench draws; each is on the built site and dated."""
    page = (DOCS / "performance.md").read_text()
    charts = re.findall(r"!\[[^\]]+\]\((images/bench/[^)]+\.svg)\)", page)
    assert len(charts) >= 5, charts
    for chart in charts:
        svg = (DOCS / chart).read_text()
        assert "measured on" in svg and re.search(r"20\d\d-\d\d-\d\d", svg), chart
        assert (site / chart).exists(), f"{chart} is not on the built site"


def _resolve(path: str) -> object:
    import importlib

    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for name in parts[cut:]:
            found = getattr(found, name)
        return found
    raise ModuleNotFoundError(path)


def test_the_design_map_names_what_exists() -> None:
    """Every ``ravi.*`` path on the design map imports as written, and every test it cites exists."""
    import ravi.conformance

    page = (DOCS / "design-map.md").read_text()
    paths = set(re.findall(r"`(ravi\.[\w.]+)`", page))
    assert len(paths) > 60
    for path in sorted(paths):
        assert _resolve(path) is not None, path
    root = DOCS.parent
    for test in sorted(set(re.findall(r"`(test_\w+\.py)`", page))):
        assert list(root.glob(f"packages/*/tests/{test}")) or list(root.glob(f"tests-integration/{test}")), test
    for contract in sorted(set(re.findall(r"`(\w+Contract)`", page))):
        assert hasattr(ravi.conformance, contract), contract
    assert '"amplifier.modules"' in (root / "packages/ravi-agents/pyproject.toml").read_text()


def test_the_readme_example_runs_as_a_script(tmp_path: Path) -> None:
    """The README's example used a top-level ``async with``: a SyntaxError when saved and run as a script."""
    import os
    import subprocess
    import sys

    readme = (DOCS.parent / "README.md").read_text()
    [code] = BLOCK.findall(readme)
    (tmp_path / "example.py").write_text(code)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAVI_")}
    done = subprocess.run(
        [sys.executable, "example.py"], cwd=tmp_path, env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "INV-2291" in done.stdout


def _generator() -> Any:
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location("ravi_docs_generate", DOCS / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_the_generated_pages_are_current() -> None:
    """The API reference and the configuration page's options tables are generated from the code
    (``python docs/generate.py``); a change to a public name or a backend option must regenerate them."""
    assert _generator().main(["--check"]) == 0


def test_the_options_tables_leave_out_other_distributions_backends(monkeypatch: pytest.MonkeyPatch) -> None:
    """A backend of another distribution installed beside Ravi (a SQLite one, say) made its options part of
    Ravi's configuration page, and the generated pages stale."""
    import ravi.kernel.registry as registry

    ravi_own = registry.available

    def with_a_plugin(kind: str) -> dict[str, str]:
        return {**ravi_own(kind), "elsewhere": "third_party_backend:Store"}

    monkeypatch.setattr(registry, "available", with_a_plugin)
    tables = _generator().options_tables()
    assert 'backend = "memory"' in tables
    assert "elsewhere" not in tables and "third_party_backend" not in tables


def test_the_reference_documents_every_public_name(site: Path) -> None:
    """Every name in the ``__all__`` of a public module of the kernel, the agents package, the conformance suite,
    the backends and each integration has its entry (an anchor) in the built reference."""
    import inspect

    generate = _generator()
    anchors = set()
    for html in (site / "reference").rglob("index.html"):
        anchors |= set(re.findall(r'id="(ravi\.[\w.]+)"', html.read_text()))
    missing = []
    for _, _, roots in generate.SECTIONS.values():
        for root in roots:
            for module in generate.public_modules(root):
                for name in getattr(module, "__all__", []):
                    obj = getattr(module, name)
                    if generate._foreign(obj):  # a framework's class re-exported: the framework documents it
                        continue
                    candidates = {f"{module.__name__}.{name}"}
                    if inspect.isclass(obj) or inspect.isfunction(obj):
                        candidates.add(f"{obj.__module__}.{obj.__qualname__}")
                    candidates |= {a for a in anchors if a.endswith(f".{name}")}
                    if not candidates & anchors:
                        missing.append(f"{module.__name__}.{name}")
    assert not missing, missing


def test_the_configuration_page_lists_every_store_kind() -> None:
    """The page's list of store kinds used to omit ``summaries``."""
    from ravi.kernel.registry import GROUPS

    page = (DOCS / "configuration.md").read_text()
    listed = page.split("The store kinds are", 1)[1].split(".", 1)[0]
    assert set(re.findall(r"`(\w+)`", listed)) == set(GROUPS)


def test_the_recall_page_turns_recall_on_by_configuration(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The page showed relevant recall only in code, leaving ``from_settings`` users to find the ``ravi.toml`` keys
    elsewhere; its ``ravi.toml`` builds the strategy, ranking by the offline model when the extra is installed."""
    from ravi.agents.context import ContextConfig, RelevantRecallStrategy

    page = (DOCS / "beyond-recency.md").read_text()
    [toml] = re.findall(r"```toml\n(.*?)```", page, re.DOTALL)
    (tmp_path / "ravi.toml").write_text(toml)
    monkeypatch.chdir(tmp_path)
    for name in [n for n in __import__("os").environ if n.startswith("RAVI_")]:
        monkeypatch.delenv(name)
    [strategy] = ContextConfig.from_settings().pipeline.strategies
    assert isinstance(strategy, RelevantRecallStrategy)
    assert strategy.token_budget == 16_000
    from ravi.agents.embeddings import offline_embeddings_installed

    if not offline_embeddings_installed():
        pytest.skip("the offline model comes with ravi-agents[embeddings]")
    assert strategy.meaning is not None
    assert strategy.meaning.model.startswith("wordllama")


@pytest.mark.parametrize("page", ["langchain", "openai-agents", "autogen", "pydantic-ai"])
def test_the_integration_pages_show_the_window_their_code_sends(
    page: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each framework page's ``ravi window`` line used to be ``--model gpt-4o``, "what the model would be sent",
    while its code sends ``TokenBudgetComposedStrategy.from_model("gpt-4o")`` alone: the command's default
    pipeline for a model shortens tool results too, so it showed a window the code never sends. The page's
    ``ravi.toml`` builds the pipeline its code builds, and the command it shows has no ``--model``."""
    from ravi.agents.context import CompactionPipeline, ContextConfig, TokenBudgetComposedStrategy

    text = (DOCS / "integrations" / f"{page}.md").read_text()
    commands = [line for line in text.splitlines() if line.startswith("ravi window ")]
    assert commands and all("--model" not in line for line in commands)
    toml = re.findall(r"```toml\n(.*?)```", text, re.DOTALL)
    assert toml, "the page shows the ravi.toml that describes its pipeline"
    for name in [n for n in __import__("os").environ if n.startswith("RAVI_")]:
        monkeypatch.delenv(name)
    (tmp_path / "ravi.toml").write_text(toml[-1])
    configured = ContextConfig.from_settings(path=tmp_path / "ravi.toml").pipeline
    coded = CompactionPipeline([TokenBudgetComposedStrategy.from_model("gpt-4o")])
    assert 'TokenBudgetComposedStrategy.from_model("gpt-4o")' in text
    assert repr(configured) == repr(coded)


def test_the_quickstart_says_how_to_fit_the_window_to_a_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The quickstart's default is a sliding window of 100 messages, which fits no model in particular, and neither
    it nor the home page said where to turn for a window sized for the model an agent calls. The quickstart's
    ``ravi.toml`` builds a budget sized for gpt-4o, and the home page links to it."""
    from ravi.agents.context import ContextConfig, TokenBudgetComposedStrategy

    text = (DOCS / "quickstart.md").read_text()
    toml = [block for block in re.findall(r"```toml\n(.*?)```", text, re.DOTALL) if "[context]" in block]
    assert len(toml) == 1
    for name in [n for n in __import__("os").environ if n.startswith("RAVI_")]:
        monkeypatch.delenv(name)
    (tmp_path / "ravi.toml").write_text(toml[0])
    budget = ContextConfig.from_settings(path=tmp_path / "ravi.toml").pipeline.strategies[-1]
    assert isinstance(budget, TokenBudgetComposedStrategy)
    assert budget.token_budget == TokenBudgetComposedStrategy.from_model("gpt-4o").token_budget
    assert "(quickstart.md#a-window-that-fits-your-model)" in (DOCS / "index.md").read_text()


def test_the_telemetry_page_installs_what_its_example_imports() -> None:
    """The telemetry example imports the OpenTelemetry SDK, which the ``otel`` extra does not install (it brings
    the API only): followed as printed in a fresh environment, the example stopped at ``ModuleNotFoundError``."""
    text = (DOCS / "telemetry.md").read_text()
    installs = " ".join(re.findall(r"```sh\n(.*?)```", text, re.DOTALL))
    assert "from opentelemetry.sdk" in text
    assert re.search(r"pip install .*opentelemetry-sdk", installs)


@pytest.mark.parametrize("page", ["langchain", "openai-agents", "autogen", "pydantic-ai"])
def test_the_integration_pages_say_how_to_install_from_a_clone(page: str) -> None:
    """Each framework page opened with ``pip install ravi-integrations-...``, which finds nothing until 0.1.0 is
    published ("No matching distribution found"); the page now gives the install from a clone, the kernel and
    ``ravi-agents`` with it, as the quickstart does."""
    text = (DOCS / "integrations" / f"{page}.md").read_text()
    installs = " ".join(re.findall(r"```sh\n(.*?)```", text, re.DOTALL))
    for package in ("ravi-kernel", "ravi-agents", f"ravi-integrations-{page}"):
        assert f"./packages/{package}" in installs
    for distribution in re.findall(r"packages/([a-z-]+)", installs):
        assert (DOCS.parent / "packages" / distribution / "pyproject.toml").exists()


def test_every_install_from_a_clone_brings_the_kernel() -> None:
    """The section "Meaning without a download" said to install the offline model from a clone with
    ``pip install ./packages/ravi-embeddings-wordllama './packages/ravi-agents[embeddings]'``: in a new virtualenv
    pip then looked for ``ravi-kernel`` on the index and stopped ("No matching distribution found"). Every
    ``pip install`` of a ``./packages`` directory that holds a Ravi distribution needing the kernel names it too."""
    pages = [*sorted(DOCS.rglob("*.md")), DOCS.parent / "README.md"]
    commands = []
    for page in pages:
        text = page.read_text()
        spans = re.findall(r"(?<!`)`(pip install [^`]*)`(?!`)", text)  # inline, perhaps across a line break
        lines = [line for block in re.findall(r"```sh\n(.*?)```", text, re.DOTALL) for line in block.splitlines()]
        commands += [(page.name, c) for c in [*spans, *lines] if "pip install" in c and "./packages/" in c]
    assert any(name == "beyond-recency.md" for name, _ in commands)
    for name, command in commands:
        installed = set(re.findall(r"\./packages/([a-z-]+)", command))
        if installed - {"ravi-kernel", "ravi-embeddings-wordllama"}:
            assert "ravi-kernel" in installed, f"{name}: {command}"


def test_the_conformance_page_installs_the_suite_from_a_clone() -> None:
    """The tutorial's ``pip install -e './ravi-sqlite-history[test]'`` in an environment installed from a clone as
    the quickstart says stopped at "No matching distribution found for ravi-conformance": the page now gives the
    suite's directory with the others."""
    text = (DOCS / "conformance.md").read_text()
    spans = re.findall(r"(?<!`)`(pip install [^`]*)`(?!`)", text)
    assert any("./packages/ravi-conformance" in s and "./packages/ravi-kernel" in s for s in spans), spans
    assert "./packages/ravi-conformance" in (DOCS / "quickstart.md").read_text()


def test_the_conformance_page_shows_the_protocol_of_each_store_its_tutorial_builds(site: Path) -> None:
    """The tutorial builds a history backend and a session-state store, but showed the signatures of
    ``HistoryProvider`` alone; ``ShortTermMemory``'s four methods were nowhere on the page."""
    rendered = (site / "conformance" / "index.html").read_text()
    for method in ("append_many", "count_messages", "get_state", "set_state", "update_state"):
        assert f"{method}" in rendered and re.search(rf'id="[^"]*{method}"', rendered), method
