"""``AgentContext``: the object an agent loop talks to before and after each model call."""

from __future__ import annotations

import threading
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

from ravi.agents.context.config import ContextConfig
from ravi.agents.context.manifest import Window
from ravi.agents.context.pipeline import WindowRequest, clear_session
from ravi.kernel.agent import HistoryRetention, SessionContext
from ravi.kernel.errors import ConfigurationError, InvalidArgument, MessageConflict
from ravi.kernel.llm import TokenCounter
from ravi.kernel.messages import ChatMessage
from ravi.kernel.storage import check_append, replace_session, stored_body
from ravi.kernel.values import check_scope


class AgentContext:
    """Keeps one agent's conversations and assembles the window for each model call.

    ``get_prompt_window`` reads the session's transcript and passes it through the pipeline; the transcript
    is never changed by it. New turns are recorded per run, and :meth:`end_run` applies the retention policy:
    ``PERMANENT`` keeps them, ``RUN`` removes that run's turns, ``NONE`` never writes them to the store (they
    are held in memory while the run lasts, so the window still sees them).

    Example:
        >>> import asyncio
        >>> async def main():
        ...     context = AgentContext(ContextConfig.default())
        ...     async with context.run("session-1") as run:
        ...         await run.add(ChatMessage.user("What is 2 + 2?"))
        ...         return [m.text for m in await run.window()]
        >>> asyncio.run(main())
        ['What is 2 + 2?']
    """

    def __init__(self, config: ContextConfig | None = None, *, agent_id: str | None = None) -> None:
        if config is not None and not isinstance(config, ContextConfig):
            raise ConfigurationError(
                f"config must be a ContextConfig, got {type(config).__name__}",
                hint="AgentContext(ContextConfig(history, pipeline)) or AgentContext(ContextConfig.default())",
            )
        self.config = config or ContextConfig.default()
        self.agent_id = self.config.agent_id if agent_id is None else agent_id
        check_scope(agent_id=self.agent_id)
        self._unsaved: dict[str, dict[str, list[ChatMessage]]] = {}  # session -> run -> turns (retention NONE)
        # session -> the token count of its last window, when a run's end under RUN or NONE forgot the window:
        # its usage, reported after the run, is still recorded (a count, none of the window's turns)
        self._ended: OrderedDict[str, int] = OrderedDict()
        # over _unsaved and _ended, never held across an await: one context serves threads that each run a loop
        self._guard = threading.Lock()

    async def get_prompt_window(self, session_id: str, *, counter: TokenCounter | None = None) -> list[ChatMessage]:
        """The compacted window for ``session_id``: the stored transcript (plus unsaved turns of runs in
        progress, under retention ``NONE``) passed through the pipeline. When the store can read windows and
        the pipeline allows it, only the newest part of the session is read (``CompactionPipeline.window``).
        ``counter`` counts this window's tokens instead of the configured counter (a model client's own)."""
        return (await self.config.pipeline.window(await self._request(session_id, counter=counter))).messages

    async def _request(
        self, session_id: str, *, explain: bool = False, counter: TokenCounter | None = None
    ) -> WindowRequest:
        check_scope(session_id=session_id)
        with self._guard:  # the turns and the epoch they belong to, together: a clear pops them under this lock
            unsaved = [m for turns in self._unsaved.get(session_id, {}).values() for m in turns]
            epoch = self.config.pipeline.sessions.epoch(self.agent_id, session_id)
        calibration = 1.0
        if self.config.model is not None:
            calibration = await self.config.calibration.factor(self.config.model)
        return WindowRequest(
            self.agent_id,
            session_id,
            history=self.config.history,
            unsaved=unsaved,
            counter=counter,
            calibration=calibration,
            explain=explain,
            epoch=epoch,
        )

    async def record_usage(self, session_id: str, prompt_tokens: int) -> float:
        """Tell Ravi how many prompt tokens the provider reported for the last window of ``session_id``
        (``usage.prompt_tokens``, or ``input_tokens``): the configured model's next windows are sized with the
        correction, so they still fit when the counter undercounts. The report is compared with the window's count
        plus what every request carries beside it that the budget left room for (the tool definitions of
        ``TokenBudgetComposedStrategy.from_model(..., tools=...)``: ``CompactionPipeline.prompt_overhead``), so
        an exact counter gives a correction of 1.0. Returns the correction now in force.

        Raises:
            ConfigurationError: no model is configured (``ContextConfig(model=...)``), so no window would apply
                the correction.
            InvalidArgument: no window was assembled for the session in this process (a window of a run that has
                ended counts, whatever the retention; one of a session cleared since does not), or the count is not a
                positive integer, or it is larger than the model's context window (than the largest of Ravi's
                model table, for a model the table does not know): no call's prompt is.
        """
        check_scope(session_id=session_id)
        if not isinstance(prompt_tokens, int) or isinstance(prompt_tokens, bool) or prompt_tokens <= 0:
            raise InvalidArgument(f"prompt_tokens must be a positive integer, got {prompt_tokens!r}")
        model = self.config.model
        if model is None:  # the correction is the model's: with none, no window would apply it
            raise ConfigurationError(
                "record_usage corrects the windows of the configured model, and none is configured",
                hint="name it: ContextConfig(..., model='gpt-4o')",
            )
        largest = _largest_prompt(model)
        if prompt_tokens > largest:
            # a correction is kept (and shared through the state store) for the model's next windows: a count no
            # call's prompt can have would shrink every one of them to nothing
            raise InvalidArgument(
                f"a prompt of {prompt_tokens} tokens is larger than {self.config.model or 'any known model'} "
                f"takes ({largest}): not the prompt of one call",
                hint="report usage.prompt_tokens (or input_tokens) of the call the window was sent in",
            )
        window = await self.config.pipeline.last_window(self.agent_id, session_id, history=self.config.history)
        counted = self.config.pipeline.window_counter().count_messages(window) if window else 0
        if not window:
            with self._guard:
                counted = self._ended.get(session_id, 0)
        if not counted:
            raise InvalidArgument(
                f"no window was assembled for session {session_id!r} here",
                hint="call get_prompt_window first, then report the usage of the call it was sent in",
            )
        return await self.config.calibration.observe(
            model,
            counted=counted + self.config.pipeline.prompt_overhead,
            reported=prompt_tokens,
        )

    async def explain(self, session_id: str) -> Window:
        """The window for ``session_id`` with its manifest (what happened to each stored message, and why); the
        whole session is read, since every stored message is accounted for."""
        return await self.config.pipeline.window(await self._request(session_id, explain=True))

    def session(self, session_id: str) -> SessionContext:
        """The context ``session_id``'s windows are assembled in: this agent, the configured counter and
        history, and the state the pipeline keeps for the session.

        Raises:
            InvalidArgument: ``session_id`` is not a valid id.
        """
        check_scope(session_id=session_id)
        return self.config.pipeline.session(self.agent_id, session_id, history=self.config.history)

    async def add_messages(self, session_id: str, messages: Sequence[ChatMessage], *, run_id: str = "") -> None:
        """Record new turns of ``run_id`` in ``session_id``."""
        check_scope(session_id=session_id, run_id=run_id)
        if self.config.retention is HistoryRetention.NONE:
            self._keep_unsaved(session_id, run_id, messages)
            return
        await self.config.history.append_many(self.agent_id, messages, session_id=session_id, run_id=run_id)

    def _keep_unsaved(self, session_id: str, run_id: str, messages: Sequence[ChatMessage]) -> None:
        """Add turns under retention ``NONE`` as a store appends them: the batch checked first, a message whose id
        the session's unsaved turns hold skipped (a retry), or the batch refused when it is another message."""
        check_append(self.agent_id, session_id, run_id, messages)
        with self._guard:
            held = {m.id: m for turns in self._unsaved.get(session_id, {}).values() for m in turns}
            fresh: list[ChatMessage] = []
            for message in messages:
                first = held.get(message.id)
                if first is None:
                    held[message.id] = message
                    fresh.append(message)
                elif stored_body(first) != stored_body(message):
                    raise MessageConflict(
                        message.id, hint="give a different message a new id (ChatMessage(...) makes one)"
                    )
            if fresh:
                self._unsaved.setdefault(session_id, {}).setdefault(run_id, []).extend(fresh)

    async def clear(self, session_id: str) -> None:
        """Forget ``session_id``: its transcript and what the history provider derived from it (its ``clear``),
        then what the pipeline's strategies derived from it into other stores (summaries in a summary store of
        their own, recall units in a vector store: :meth:`CompactionPipeline.clear_records`), and the unsaved
        turns under retention ``NONE``. Afterwards nothing derived from the removed messages can be read through
        any of the configured stores.

        Every store is asked, even after one failed (the history's included), so one store that is down keeps no
        other store's records; clearing again finishes the job, and what was erased stays erased.

        Raises:
            RaviError: a store failed: its Ravi error as raised (a ``CompactionError`` naming a strategy for an
                error of another kind); when several failed, one error naming each, the first as its
                ``__cause__``, a ``BackendUnavailable`` when every one was, else a ``CompactionError``.
        """
        check_scope(session_id=session_id)
        with self._guard:
            self._unsaved.pop(session_id, None)
            self._ended.pop(session_id, None)
        await clear_session(self.config.history, self.config.pipeline, self.agent_id, session_id)

    async def replace_messages(self, session_id: str, messages: Sequence[ChatMessage], *, run_id: str = "") -> None:
        """Make ``messages`` the transcript of ``session_id`` (a saved conversation loaded back), as turns of
        ``run_id``: atomically on a store that can (``SessionReplacer``, every store Ravi ships, see
        :func:`~ravi.kernel.storage.replace_session`). Under retention ``NONE`` they replace the unsaved turns.

        Raises:
            InvalidArgument: a bad scope or an item that is not a ``ChatMessage``; nothing is changed.
            MessageConflict: two different messages under one id; nothing is changed.
        """
        check_scope(session_id=session_id, run_id=run_id)
        if self.config.retention is HistoryRetention.NONE:
            check_append(self.agent_id, session_id, run_id, messages)
            await self.config.history.clear(self.agent_id, session_id=session_id)
            with self._guard:
                self._unsaved.pop(session_id, None)
                if messages:
                    self._unsaved[session_id] = {run_id: list(messages)}
        else:
            await replace_session(self.config.history, self.agent_id, messages, session_id=session_id, run_id=run_id)
        with self._guard:
            self._ended.pop(session_id, None)
        await self.config.pipeline.clear_records(self.agent_id, session_id)  # derived from the old transcript

    async def add_message(self, session_id: str, message: ChatMessage, *, run_id: str = "") -> None:
        """Record one new turn."""
        await self.add_messages(session_id, [message], run_id=run_id)

    async def end_run(self, session_id: str, run_id: str) -> None:
        """Finish ``run_id``: under ``RUN`` its turns are removed, under ``NONE`` they are forgotten; either way,
        what the strategies derived from the session into other stores goes too (:meth:`clear`), since it may
        hold them (a recall index's units, a summary of them)."""
        check_scope(session_id=session_id, run_id=run_id)
        forgotten = False
        with self._guard:
            runs = self._unsaved.get(session_id)
            if runs is not None:
                forgotten = bool(runs.pop(run_id, None))
                if not runs:
                    del self._unsaved[session_id]
        removing = self.config.retention is HistoryRetention.RUN
        window = None
        if self.config.model is not None and (forgotten or removing):  # its usage may be reported after the run
            # read before the run's turns are removed: their removal makes a new generation of the session
            window = await self.config.pipeline.last_window(self.agent_id, session_id, history=self.config.history)
        if removing:
            removed = await self.config.history.clear_run(self.agent_id, session_id=session_id, run_id=run_id)
            forgotten = forgotten or removed != 0  # a count, or None from a provider that does not say
        if forgotten:
            if window:
                counted = self.config.pipeline.window_counter().count_messages(window)
                with self._guard:
                    self._ended[session_id] = counted
                    self._ended.move_to_end(session_id)
                    while len(self._ended) > _ENDED_SESSIONS:
                        self._ended.popitem(last=False)
            await self.config.pipeline.clear_records(self.agent_id, session_id)  # derived from the removed turns

    @asynccontextmanager
    async def run(self, session_id: str, run_id: str | None = None) -> AsyncIterator[Run]:
        """A run of the agent in ``session_id`` under ``run_id`` (a fresh id when ``None``; ``""`` is the run
        :meth:`add_messages` records into by default); the run is ended (retention applied) when the block exits.

        Raises:
            InvalidArgument: ``session_id`` or ``run_id`` is not a valid id (before the block runs).
        """
        run_id = uuid.uuid4().hex if run_id is None else run_id
        check_scope(session_id=session_id, run_id=run_id)
        run = Run(self, session_id, run_id)
        try:
            yield run
        finally:
            await self.end_run(session_id, run.run_id)


class Run:
    """One run of an agent in a session: add its turns, get the window. Made by :meth:`AgentContext.run`."""

    def __init__(self, context: AgentContext, session_id: str, run_id: str) -> None:
        self.context = context
        self.session_id = session_id
        self.run_id = run_id

    async def add(self, *messages: ChatMessage) -> None:
        """Record turns of this run."""
        await self.context.add_messages(self.session_id, messages, run_id=self.run_id)

    async def window(self, *, counter: TokenCounter | None = None) -> list[ChatMessage]:
        """The window for the next model call; ``counter`` measures it instead of the configured counter (the
        model's own, see ``ModelContext.counter_for``)."""
        return await self.context.get_prompt_window(self.session_id, counter=counter)


_ENDED_SESSIONS = 1_024
"""How many sessions' last window counts :meth:`AgentContext.end_run` keeps for usage reported late."""


def _largest_prompt(model: str | None) -> int:
    """The most prompt tokens one call to ``model`` can take: its context window when Ravi's model table knows
    it (dated names such as ``gpt-4o-2024-08-06`` by their family), else the largest window in the table."""
    from ravi.agents.context.models import MODELS, model_info

    try:
        return model_info(model).context_window if model else max(m.context_window for m in MODELS.values())
    except ConfigurationError:
        return max(m.context_window for m in MODELS.values())


__all__ = ["AgentContext", "Run"]
