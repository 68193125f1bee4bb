"""Calibration from the provider: the prompt sizes a provider reports correct the counts of the next windows."""

from __future__ import annotations

import logging
import math
import re
import threading
import time
import uuid

from ravi.kernel.errors import BackendUnavailable, InvalidArgument
from ravi.kernel.loops import KeyedLocks
from ravi.kernel.storage import JSON, ReservedState, ShortTermMemory

logger = logging.getLogger(__name__)

SCOPE = "ravi.calibration"
"""The name under which a state store keeps the corrections (one key per model and writer), in its place of Ravi's
own records (:meth:`~ravi.kernel.storage.ReservedState.reserved`), which no session id reaches."""

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
    ratios are kept in its place of Ravi's own records (``state.reserved()``, see
    :class:`~ravi.kernel.storage.ReservedState`) under the name :data:`SCOPE`, where no session of the application
    reads, writes or clears them, shared by every process that uses the store, and
    no report is lost to another made at the same instant: each ``Calibration`` writes only a top-level key of
    its own, ``f"{model}\\x1f{instance id}"``, holding its last ``keep`` ratios of the model and when it
    reported (``{"ratios": [...], "at": seconds since the epoch}``), and ``update_state`` merges top-level keys
    atomically. A correction reads every key of the model and uses the entries of the newest ``instances``
    writers; a report empties (sets to ``null``) the keys of older writers, one key at a time, never another
    key. A writer whose key was emptied while it reported (or whose two event loops wrote out of order) writes
    its entry again at its next read, while it is one of the newest ``instances``: what it reported is kept as
    long as the process runs. Emptied keys (``null``) are dropped in one rewrite once there are more than
    :data:`DEAD_KEYS` of them; a report written in that instant may be dropped too, and its writer writes it
    again at its next read.
    While the store cannot be reached, a correction is the one this process read last (1.0 before any), with a
    warning: the windows go on, sized as before the outage.

    A report of a window counted below :data:`MIN_COUNTED` tokens is not kept, and one whose ratio passes
    :data:`MAX_RATIO` is refused; a ratio the store holds past it (or not positive) is ignored. A state store with
    no such place (one that is not a ``ReservedState``) keeps no corrections: they are kept in this process, with a
    warning.

    Example:
        >>> import asyncio
        >>> calibration = Calibration()
        >>> asyncio.run(calibration.observe("gpt-4o", counted=1_000, reported=1_150))
        1.15
    """

    def __init__(self, state: ShortTermMemory | None = None, *, keep: int = 20, instances: int = 16) -> None:
        for name, value in (("keep", keep), ("instances", instances)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise InvalidArgument(f"{name} must be an integer >= 1, got {value!r}", field=name)
        self.state = state
        self._store: ShortTermMemory | None = None  # where the corrections are: the state store's reserved place
        if isinstance(state, ReservedState):
            self._store = state.reserved()
        elif state is not None:
            logger.warning(
                "the state store %s has no place of its own for the corrections (reserved()): they are kept in "
                "this process, not shared",
                type(state).__name__,
            )
        self.keep = keep
        self.instances = instances
        self.id = uuid.uuid4().hex
        self._ratios: dict[str, list[float]] = {}  # without a state store: the ratios; with one: the last read
        self._mine: dict[str, dict[str, JSON]] = {}  # per model, the entry this object last wrote
        self._guard = threading.Lock()  # over _ratios and _mine, never held across an await
        self._reports: KeyedLocks[str] = KeyedLocks()  # one report of a model at a time, per event loop
        self._down = False  # the state store could not be reached at the last read

    def _key(self, model: str) -> str:
        return f"{model}{SEPARATOR}{self.id}"

    async def factor(self, model: str) -> float:
        """The correction for ``model`` (1.0 when nothing was reported), as the state store holds it now."""
        if self._store is not None:
            try:
                entries = _entries(await self._store.get_state(SCOPE), model)
                await self._restore(model, entries)
            except BackendUnavailable as error:
                if not self._down:  # once an outage, not once a window
                    self._down = True
                    logger.warning("the corrections' state store is unavailable (%s); using the last read", error)
            else:
                with self._guard:
                    self._ratios[model] = self._newest(entries)
                self._down = False
        with self._guard:
            return max([1.0, *self._ratios.get(model, [])])

    def _newest(self, entries: dict[str, tuple[float, list[float]]]) -> list[float]:
        """The ratios of the newest ``instances`` writers' entries."""
        newest = sorted(entries.items(), key=lambda item: (item[1][0], item[0]), reverse=True)[: self.instances]
        return [r for _, (_, ratios) in newest for r in ratios]

    async def _restore(self, model: str, entries: dict[str, tuple[float, list[float]]]) -> None:
        """Write this object's entry again when the store lost it (emptied by a writer that pruned it as it was
        written, or replaced by an older write of another event loop), while it is one of the newest."""
        assert self._store is not None
        key = self._key(model)
        with self._guard:
            mine = self._mine.get(model)
        if mine is None or _entry(mine) == entries.get(key):
            return
        at = _entry(mine)[0]  # type: ignore[index]
        newer = sum(1 for k, (when, _) in entries.items() if k != key and (when, k) > (at, key))
        if newer >= self.instances:  # pruned as it should be: the next report starts a new list
            with self._guard:
                if self._mine.get(model) is mine:
                    del self._mine[model]
            return
        await self._store.update_state(SCOPE, {key: mine})
        entries[key] = _entry(mine)  # type: ignore[assignment]

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
        if self._store is None:
            with self._guard:
                ratios = [*self._ratios.get(model, []), ratio][-self.keep :]
                self._ratios[model] = ratios
            return max([1.0, *ratios])
        # this object's own key only: update_state merges top-level keys atomically, so no other writer's report
        # is replaced; the reports of one event loop one at a time
        key = self._key(model)
        async with self._reports(model):
            with self._guard:
                before = self._mine.get(model)
                kept = list(before["ratios"]) if before is not None else []
                mine: dict[str, JSON] = {"ratios": [*kept, ratio][-self.keep :], "at": time.time()}
                self._mine[model] = mine
            try:
                merged = await self._store.update_state(SCOPE, {key: mine})
            except BaseException:  # not kept: a later read must not write it after all
                with self._guard:
                    if self._mine.get(model) is mine:
                        if before is None:
                            del self._mine[model]
                        else:
                            self._mine[model] = before
                raise
            entries = _entries(merged, model)
            entries[key] = _entry(mine)  # type: ignore[assignment]
            newest = sorted(entries.items(), key=lambda item: (item[1][0], item[0]), reverse=True)
            # only keys no newest writer holds, each emptied on its own (a list from before keys per writer is left)
            stale: dict[str, JSON] = {k: None for k, _ in newest[self.instances :] if k != model}
            if stale:
                merged = await self._store.update_state(SCOPE, stale)
            if sum(1 for v in merged.values() if v is None) > DEAD_KEYS:
                # the emptied keys of writers long gone, dropped in one rewrite: a report written at the same
                # instant may be dropped with them, and its writer writes it again at its next read
                await self._store.set_state(SCOPE, {k: v for k, v in merged.items() if v is not None})
        ratios = self._newest(entries)
        with self._guard:
            self._ratios[model] = ratios
        return max([1.0, *ratios])


DEAD_KEYS = 256
"""How many emptied keys (writers pruned, most of them processes that ended) the calibration state keeps before a
report drops them all in one rewrite, so the state a window reads stays small however many processes came and
went."""

SEPARATOR = "\x1f"
"""Between a model's name and a writer's id in the keys under :data:`SCOPE`."""

_ID = re.compile(r"[0-9a-f]{32}")


def _ratios(stored: object) -> list[float] | None:
    """The ratios a report may give, of a stored list: one past MAX_RATIO (kept before reports were capped, or by
    a worker that does not cap them) would empty every window of the model until it was pushed out."""
    if not isinstance(stored, list):
        return None
    return [
        float(r)
        for r in stored
        if isinstance(r, int | float) and not isinstance(r, bool) and 0 < r <= MAX_RATIO and math.isfinite(r)
    ]


def _entry(value: object) -> tuple[float, list[float]] | None:
    """``(when, ratios)`` of a writer's stored entry, or ``None`` for anything else (``null`` once pruned)."""
    if not isinstance(value, dict):
        return None
    at, ratios = value.get("at"), _ratios(value.get("ratios"))
    if ratios is None or not isinstance(at, int | float) or isinstance(at, bool) or not math.isfinite(at):
        return None
    return float(at), ratios


def _entries(state: dict[str, JSON], model: str) -> dict[str, tuple[float, list[float]]]:
    """The entries of ``model``'s writers in the calibration state, by key; a list kept under the model's own name
    (before keys per writer) is the oldest entry."""
    entries: dict[str, tuple[float, list[float]]] = {}
    prefix = model + SEPARATOR
    for key, value in state.items():
        if key.startswith(prefix) and _ID.fullmatch(key[len(prefix) :]):
            entry = _entry(value)
            if entry is not None:
                entries[key] = entry
    legacy = _ratios(state.get(model))
    if legacy:
        entries[model] = (-math.inf, legacy)
    return entries


__all__ = ["DEAD_KEYS", "MAX_RATIO", "MIN_COUNTED", "SCOPE", "SEPARATOR", "Calibration"]
