"""The ``ravi`` command: watch Ravi assemble windows, inspect sessions, run local servers and the contract suite.

Built on Typer (arguments, help, completion) and Rich (tables, progress), both well-kept and widely used, so
the command behaves like the CLIs people already know. One module per command: :mod:`.demo`, :mod:`.backends`,
:mod:`.sessions` (``ravi history``), :mod:`.window`, :mod:`.conformance`, :mod:`.dev`, :mod:`.forget`,
:mod:`.export` and :mod:`.imports` (``ravi import``).
"""

from __future__ import annotations

import contextlib
import os
import sys
from importlib.metadata import PackageNotFoundError, version
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from ravi.agents.cli import backends, conformance, demo, dev, export, forget, imports, sessions, window
from ravi.agents.cli._common import shown
from ravi.kernel.errors import RaviError

# Help texts are plain text: rich markup would eat bracketed names such as "[context] agent_id".
app = typer.Typer(
    help="Ravi: memory for LLM agents.", no_args_is_help=True, add_completion=False, rich_markup_mode=None
)


def installed_version() -> str:
    """The installed version of ``ravi-agents`` (the distribution that provides the command)."""
    try:
        return version("ravi-agents")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"


def _print_version(given: bool) -> None:
    if given:
        typer.echo(f"ravi {installed_version()}")
        raise typer.Exit()


@app.callback()
def _root(
    show_version: Annotated[
        bool,
        typer.Option("--version", help="Print the installed version and exit.", callback=_print_version, is_eager=True),
    ] = False,
) -> None:
    """Ravi: memory for LLM agents."""


app.command()(demo.demo)
app.command()(backends.backends)
app.add_typer(sessions.history_app, name="history")
app.command()(window.window)
app.command()(conformance.conformance)
app.command()(dev.dev)
app.command()(forget.forget)
app.command()(export.export)
app.command("import")(imports.import_)


def main() -> None:
    """Entry point of the ``ravi`` command: Ravi errors, and output that cannot be written, print one line and exit
    with status 1."""
    try:
        app()
    except RaviError as error:
        Console(stderr=True, soft_wrap=True).print(f"[bold red]error:[/] {escape(shown(str(error), keep=chr(10)))}")
        raise SystemExit(1) from None
    except OSError as error:  # what was printed could not be written: a full disk (/dev/full), a quota
        # what is still buffered would fail again when the interpreter flushes it on the way out
        with contextlib.suppress(OSError, ValueError, AttributeError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        where = f" ({error.filename})" if error.filename else ""
        said = shown(f"{error.strerror or error}{where}")
        Console(stderr=True, soft_wrap=True).print(f"[bold red]error:[/] {escape(said)}")
        raise SystemExit(1) from None


__all__ = ["app", "installed_version", "main"]
