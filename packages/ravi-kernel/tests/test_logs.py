"""``RAVI_LOG`` (002: ``log_level = read_env("log")``) sets the level of Ravi's loggers, and only theirs."""

from __future__ import annotations

import logging
import os
import subprocess
import sys

import pytest

from ravi.kernel._logs import apply_log_level, log_level
from ravi.kernel.errors import ConfigurationError

SHOW = """
import logging, ravi.kernel
{before}
logging.getLogger("ravi.agents.context.pipeline").debug("ravi debug record")
logging.getLogger("ravi.tokens").info("ravi info record")
logging.getLogger("other.library").warning("other warning record")
logging.getLogger("other.library").debug("other debug record")
print("root", logging.getLogger().level, len(logging.getLogger().handlers))
"""


def run(code: str, log: str | None) -> subprocess.CompletedProcess[str]:
    """``code`` in a fresh interpreter, ``RAVI_LOG`` set to ``log`` (unset for ``None``)."""
    env = {k: v for k, v in os.environ.items() if k != "RAVI_LOG"}
    if log is not None:
        env["RAVI_LOG"] = log
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False)


@pytest.mark.parametrize("log", ["debug", "DEBUG", " Debug "])
def test_ravi_log_debug_shows_ravis_debug_records_and_leaves_the_root_logger_alone(log: str) -> None:
    """``RAVI_LOG=debug`` was read nowhere: Ravi's debug records were never made."""
    done = run(SHOW.format(before=""), log)
    assert done.returncode == 0, done.stderr
    assert "DEBUG ravi.agents.context.pipeline: ravi debug record" in done.stderr
    assert "INFO ravi.tokens: ravi info record" in done.stderr
    assert "other warning record" in done.stderr  # Python's last-resort handler, as without RAVI_LOG
    assert "other debug record" not in done.stderr
    assert done.stdout.strip() == "root 30 0"  # the root logger: WARNING, no handler


def test_once_the_application_configures_logging_ravis_records_go_to_its_handlers_once() -> None:
    before = 'logging.basicConfig(format="app %(name)s %(message)s")'
    done = run(SHOW.format(before=before), "debug")
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("ravi debug record") == 1
    assert "app ravi.agents.context.pipeline ravi debug record" in done.stderr
    assert "other debug record" not in done.stderr
    assert done.stdout.strip() == "root 30 1"


def test_ravi_log_info_leaves_debug_records_out_and_unset_changes_nothing() -> None:
    info = run(SHOW.format(before=""), "info")
    assert "ravi info record" in info.stderr and "ravi debug record" not in info.stderr
    for unset in (None, ""):
        done = run(SHOW.format(before=""), unset)
        assert done.returncode == 0, done.stderr
        assert "ravi info record" not in done.stderr and "ravi debug record" not in done.stderr


def test_an_unknown_level_is_a_configuration_error_at_import() -> None:
    done = run("import ravi.kernel", "loud")
    assert done.returncode != 0
    assert "ConfigurationError: RAVI_LOG='loud' is not a log level" in done.stderr


@pytest.mark.parametrize(
    ("value", "level"),
    [("debug", logging.DEBUG), ("Info", logging.INFO), ("warn", logging.WARNING), ("CRITICAL", logging.CRITICAL)],
)
def test_the_level_named(monkeypatch: pytest.MonkeyPatch, value: str, level: int) -> None:
    monkeypatch.setenv("RAVI_LOG", value)
    assert log_level() == level


@pytest.mark.parametrize("value", ["verbose", "10", "notset", "debug,info"])
def test_what_names_no_level_is_refused(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("RAVI_LOG", value)
    with pytest.raises(ConfigurationError, match=f"RAVI_LOG={value!r} is not a log level"):
        log_level()
    with pytest.raises(ConfigurationError):
        apply_log_level()


def test_applied_in_process_ravis_records_reach_the_applications_handlers(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    ravi = logging.getLogger("ravi")
    level, handlers = ravi.level, list(ravi.handlers)
    monkeypatch.setenv("RAVI_LOG", "debug")
    try:
        apply_log_level()
        apply_log_level()  # applied again: still one handler of its own
        assert len(ravi.handlers) == len(handlers) + 1
        assert logging.getLogger().level == logging.WARNING  # the root's own level does not count
        logging.getLogger("ravi.agents.tokens").debug("counted")
        assert [r.getMessage() for r in caplog.records] == ["counted"]
    finally:
        ravi.setLevel(level)
        ravi.handlers[:] = handlers


@pytest.mark.parametrize(
    ("where", "propagate"), [("ravi", True), ("ravi", False), ("ravi.agents", True), ("ravi.agents", False)]
)
def test_an_application_handler_on_ravis_loggers_gets_each_record_once(where: str, propagate: bool) -> None:
    """An application that configures a handler on a Ravi logger (and none on the root) gets Ravi's records there
    only: they were written to standard error as well, each record twice."""
    before = (
        f"h = logging.StreamHandler(); h.setFormatter(logging.Formatter('app %(name)s %(message)s'))\n"
        f"logging.getLogger({where!r}).addHandler(h)\n"
        f"logging.getLogger({where!r}).propagate = {propagate}\n"
    )
    done = run(SHOW.format(before=before).replace("ravi.agents.context.pipeline", "ravi.agents.pipeline"), "debug")
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("ravi debug record") == 1
    assert "app ravi.agents.pipeline ravi debug record" in done.stderr
    assert done.stdout.strip() == "root 30 0"


def test_a_reloaded_module_keeps_one_handler_of_its_own() -> None:
    """``importlib.reload`` of the module makes a new handler class: applied again, Ravi's records were written
    twice."""
    code = (
        "import importlib, logging, ravi.kernel, ravi.kernel._logs as logs\n"
        "importlib.reload(logs).apply_log_level()\n"
        "logging.getLogger('ravi.x').debug('ravi debug record')\n"
        "print(len(logging.getLogger('ravi').handlers))\n"
    )
    done = run(code, "debug")
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("ravi debug record") == 1
    assert done.stdout.strip() == "1"
