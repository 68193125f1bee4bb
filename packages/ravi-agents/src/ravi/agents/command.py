"""The ``ravi`` command's entry point: the command line needs the ``cli`` extra (typer and rich), which the
library does not, so a missing extra is reported with the command that installs it."""

from __future__ import annotations

import sys


def main() -> None:
    """Run the ``ravi`` command, or say how to install what it needs."""
    try:
        from ravi.agents.cli import main as run
    except ImportError as error:
        if (error.name or "").split(".")[0] in {"typer", "rich", "click"}:
            from ravi.kernel.registry import install_command

            print(
                f"error: the ravi command needs {error.name}, which is not installed\n"
                f"hint: {install_command('ravi-agents[cli]')}",
                file=sys.stderr,
            )
            raise SystemExit(1) from None
        raise
    except Exception as error:  # a setting refused while Ravi is imported (RAVI_LOG), before the command's own
        # error handling exists: its error class is whatever ravi.kernel.errors defined
        errors = sys.modules.get("ravi.kernel.errors")
        if errors is not None and isinstance(error, errors.RaviError):
            print(f"error: {error}", file=sys.stderr)
            raise SystemExit(1) from None
        raise
    run()


__all__ = ["main"]
