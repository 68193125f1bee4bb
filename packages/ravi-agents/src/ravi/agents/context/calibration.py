"""Calibration from the provider: the prompt sizes a provider reports correct the counts of the next windows."""

from __future__ import annotations

import logging
import math
import threading

from ravi.kernel.errors import BackendUnavailable, InvalidArgument
from ravi.kernel.loops import KeyedLocks
from ravi.kernel.storage import ShortTermMemory

logger = logging.getLogger(__name__)

SCOPE = "ravi.calibration"
"""The session id under which a state store keeps the corrections (one key per model)."""

MIN_COUNTED = 1_000
"""A report of a window counted below this many tokens is not kept: what a request carries beside the window (a
system prompt or tools the budget was not told of) is then much of the report, and the ratio says little of the
counter. (A window that small fits whatever the correction.)"""

MAX_RATIO = 4.0
"""The largest ratio of reported to counted tokens a report may give. The conservative estimate, Ravi's least exact
counter, undercounts by up to about this much (text of one token per character, counted at four characters a
token); a larger ratio is not the counter's error but a report of more than the window, and would shrink every
window of the model."""


class Calibration:
    """Per-model corrections: the ratios of reported to counted prompt tokens, the last ``keep`` of each model.

    The correction of a model is the largest of its recent ratios (never below 1), so a window assembled after a
    report still fits even if the counter undercounts that much. With a session-state store (``state``), the
    ratios are kept there under the session id :data:`SCOPE`, shared by every process that uses the store: each
    correction is read from the store, and each report adds its ratio to the list the store holds then (reports of
    one event loop one after another, so none is lost to another of the same loop). The store has no atomic
    append: two processes reporting on the same model in the same instant may each write the list without the
    other's ratio, and one of the two reports is lost (a limit of the ``ShortTermMemory`` protocol, which merges
    top-level keys only).
    While the store cannot be reached, a correction is the one this process read last (1.0 before any), with a
    warning: the windows go on, sized as before the outage.

    A report of a window counted below :data:`MIN_COUNTED` tokens is not kept, and one whose ratio passes
    :data:`MAX_RATIO` is refused; a ratio the store holds past it (or not positive) is ignored.

    Example:
        >>> import asyncio
        >>> calibration = Calibration()
        >>> asyncio.run(calibration.observe("gpt-4o", counted=1_000, reported=1_150))
        1.15
    """

    def __init__(self, state: ShortTermMemory | None = None, *, keep: int = 20) -> None:
        if not isinstance(keep, int) or keep < 1:
            raise InvalidArgument(f"keep must be an integer >= 1, got {keep!r}")
        self.state = state
        self.keep = keep
        self._ratios: dict[str, list[float]] = {}  # without a state store: the ratios; with one: the last read
        self._guard = threading.Lock()  # over _ratios, never held across an await
        self._reports: KeyedLocks[str] = KeyedLocks()  # one report of a model at a time, per event loop
        self._down = False  # the state store could not be reached at the last read

    async def factor(self, model: str) -> float:
        """The correction for ``model`` (1.0 when nothing was reported), as the state store holds it now."""
        if self.state is not None:
            try:
                ratios = await self._stored(model)
            except BackendUnavailable as error:
                if not self._down:  # once an outage, not once a window
                    self._down = True
                    logger.warning("the corrections' state store is unavailable (%s); using the last read", error)
            else:
                with self._guard:
                    self._ratios[model] = ratios
                self._down = False
        with self._guard:
            return max([1.0, *self._ratios.get(model, [])])

    async def _stored(self, model: str) -> list[float]:
        assert self.state is not None
        stored = (await self.state.get_state(SCOPE)).get(model)
        if not isinstance(stored, list):
            return []
        # only the ratios a report may give: one past MAX_RATIO (kept before reports were capped, or by a worker
        # that does not cap them) would empty every window of the model until ``keep`` reports pushed it out
        return [
            float(r)
            for r in stored
            if isinstance(r, int | float) and not isinstance(r, bool) and 0 < r <= MAX_RATIO and math.isfinite(r)
        ]

    async def observe(self, model: str, *, counted: int, reported: int) -> float:
        """Record that a window counted as ``counted`` tokens was billed ``reported`` prompt tokens by the
        provider (``usage.prompt_tokens`` or ``input_tokens``); returns the model's correction from now on."""
        for name, value in (("counted", counted), ("reported", reported)):
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise InvalidArgument(f"{name} must be a positive integer, got {value!r}")
        ratio = round(reported / counted, 4)
        if counted < MIN_COUNTED:  # what the request carries beside so small a window would decide the ratio
            return await self.factor(model)
        if ratio > MAX_RATIO:
            raise InvalidArgument(
                f"a report of {reported} tokens for a window counted as {counted} (x{ratio:g}) is more than the "
                "window: no counter undercounts that much",
                hint="report usage.prompt_tokens of the call the window was sent in; declare the tools the request "
                "carries (from_model(..., tools=...)), or leave out of the report what the request adds to the window",
            )
        if self.state is None:
            with self._guard:
                ratios = [*self._ratios.get(model, []), ratio][-self.keep :]
                self._ratios[model] = ratios
            return max([1.0, *ratios])
        # the store has no compare-and-set: read what every worker reported and add to it, one report at a time
        async with self._reports(model):
            ratios = [*await self._stored(model), ratio][-self.keep :]
            await self.state.update_state(SCOPE, {model: ratios})
        with self._guard:
            self._ratios[model] = ratios
        return max([1.0, *ratios])


__all__ = ["MAX_RATIO", "MIN_COUNTED", "SCOPE", "Calibration"]
