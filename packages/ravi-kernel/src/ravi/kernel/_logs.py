"""``RAVI_LOG``: the level of Ravi's loggers (``ravi`` and every ``ravi.*`` logger), read through 002's registry
(``read_env("log")``) when ``ravi.kernel`` is imported.

``RAVI_LOG=debug`` (or ``info``, ``warning``, ``error``, ``critical``; any case, ``warn`` for ``warning``) sets the
``ravi`` logger's level; the root logger is left as the application set it. Until the application configures
logging (the root logger has a handler, as ``logging.basicConfig`` gives it, or a Ravi logger has one of the
application's), Ravi's records at that level are written to standard error, as Python's last-resort handler
writes warnings; from then on they reach only the application's handlers, once. Unset or empty, nothing is
changed. Any other value is a ``ConfigurationError``.
"""

from __future__ import annotations

import logging

from ravi.kernel.env import env_name, read_env
from ravi.kernel.errors import ConfigurationError

_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "warn": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
}


def log_level() -> int | None:
    """The level ``RAVI_LOG`` names, or ``None`` when it is unset or empty.

    Raises:
        ConfigurationError: ``RAVI_LOG`` names no level.
    """
    value = read_env("log")
    if value is None or not value.strip():
        return None
    level = _LEVELS.get(value.strip().lower())
    if level is None:
        raise ConfigurationError(
            f"{env_name('log')}={value!r} is not a log level",
            hint="one of debug, info, warning, error, critical; or leave it unset",
        )
    return level


_MARK = "_ravi_until_configured"
"""The attribute that marks Ravi's own handler, whatever class object made it (a reloaded module makes another)."""


class _UntilConfigured(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes Ravi's records to standard error while the application has configured no logging of its own: no
    handler but this one on the loggers a record passes (the root's, or one the application put on a Ravi
    logger)."""

    def handle(self, record: logging.LogRecord) -> bool:
        logger: logging.Logger | None = logging.getLogger(record.name)
        while logger is not None:
            if any(not getattr(handler, _MARK, False) for handler in logger.handlers):
                return False  # the application's handlers have it
            if not logger.propagate:
                break
            logger = logger.parent
        return super().handle(record)


def apply_log_level() -> None:
    """Set the ``ravi`` logger to the level ``RAVI_LOG`` names (see the module's documentation).

    Raises:
        ConfigurationError: ``RAVI_LOG`` names no level.
    """
    level = log_level()
    if level is None:
        return
    logger = logging.getLogger("ravi")
    logger.setLevel(level)
    if not any(getattr(handler, _MARK, False) for handler in logger.handlers):
        handler = _UntilConfigured()
        setattr(handler, _MARK, True)
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        logger.addHandler(handler)
