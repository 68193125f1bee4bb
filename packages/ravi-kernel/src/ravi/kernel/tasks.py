"""``TaskLifecycle`` lives in :mod:`ravi.kernel.storage.tasks`; importable here too."""

from ravi.kernel.storage.tasks import TaskLifecycle

__all__ = ["TaskLifecycle"]
