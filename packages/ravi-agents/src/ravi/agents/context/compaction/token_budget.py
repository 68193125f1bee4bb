"""``TokenBudgetComposedStrategy``: apply cheaper strategies only until the window fits a token budget."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ravi.agents.context.compaction._keep import ANCHOR, TAIL_CUT, from_cut, note_cut, system_positions
from ravi.agents.context.models import SAFETY_MARGIN, model_info
from ravi.agents.context.session import counter_of
from ravi.agents.tokens import DEFAULT_COUNTER, check_counter, counter_for_model, tool_tokens
from ravi.kernel.agent import (
    CompactionEvent,
    CompactionStrategy,
    EventBus,
    SessionContext,
    Strategy,
    StrategyTraits,
    as_strategies,
)
from ravi.kernel.errors import ConfigurationError, InvalidArgument
from ravi.kernel.llm import ModelInfo, TokenCounter
from ravi.kernel.messages import ChatMessage
from ravi.kernel.values import check_count, check_share


def fits(messages: Sequence[ChatMessage], budget: int, counter: TokenCounter) -> bool:
    """Whether ``messages`` total at most ``budget`` tokens, counting from the newest end and stopping early."""
    total = 0
    count = counter.count_message
    for i in range(len(messages) - 1, -1, -1):
        total += count(messages[i])
        if total > budget:
            return False
    return True


class TokenBudgetComposedStrategy(Strategy):
    """Fit the window into ``token_budget`` tokens, doing as little as needed.

    A window that already fits is returned as it is. Otherwise the child ``strategies`` run in order, each on
    the previous one's output, and the first result that fits is returned. If none does, the newest whole units
    that fit are kept beside every system message, so the budget is always met when the system messages alone
    fit (when they do not, only they are returned and a ``budget_unmet`` event is emitted).

    With ``low_watermark`` (a share of the budget, say 0.6) the window becomes cache-stable: nothing is dropped
    until it would exceed ``token_budget`` (the high watermark); then it is cut down to ``low_watermark`` of the
    budget in one step, and later windows keep that start, so the prompt's prefix stays byte-identical (and
    cheap, for providers that cache prompt prefixes) until the next crossing. Children should then be
    prefix-stable themselves (``ToolResultCompactionStrategy`` is; summaries and selective folding are not).

    Tokens are counted with ``counter`` when given, else with the pipeline's (``ContextConfig.counter``). A
    request that carries its own budget (``WindowRequest.budget``) is fitted to that budget instead.
    ``strategies`` may be a single strategy.

    Cost: checking the budget reads from the newest end and stops as soon as the budget is passed.

    Example:
        >>> from ravi.agents.context import ToolResultCompactionStrategy
        >>> strategy = TokenBudgetComposedStrategy([ToolResultCompactionStrategy()], token_budget=8_000)
    """

    def __init__(
        self,
        strategies: Strategy | CompactionStrategy | Sequence[Strategy | CompactionStrategy] = (),
        token_budget: int = 100_000,
        *,
        counter: TokenCounter | None = None,
        low_watermark: float | None = None,
    ) -> None:
        check_count(token_budget, "token_budget")
        if low_watermark is not None:
            check_share(low_watermark, "low_watermark")
        check_counter(counter)
        self.low_watermark = low_watermark
        self.strategies = as_strategies(strategies)
        self.token_budget = token_budget
        self.own_counter = counter
        self.prompt_overhead = 0
        """Tokens every request carries beside the window (the tool definitions :meth:`from_model` left room for)."""
        self.events = EventBus()
        for child in self.strategies:
            if child.events is not None:
                child.events.subscribe(self.events.emit)

    @classmethod
    def from_model(
        cls,
        model_name: str,
        strategies: Strategy | CompactionStrategy | Sequence[Strategy | CompactionStrategy] = (),
        trigger_ratio: float = 0.80,
        *,
        model_info: ModelInfo | None = None,
        safety_margin: int = SAFETY_MARGIN,
        counter: TokenCounter | None = None,
        low_watermark: float | None = None,
        tools: Sequence[Any] = (),
        output_reserve: int | None = None,
        reserve: int = 0,
    ) -> TokenBudgetComposedStrategy:
        """A strategy sized for a model: ``trigger_ratio`` of the room its messages have, which is the context
        window less the output reserve (``output_reserve``, else the model's maximum output), the tool
        definitions the requests carry (``tools``, counted with the counter), ``reserve`` more tokens (for what
        else the requests carry) and ``safety_margin``.

        Tokens are counted as the model counts them (:func:`~ravi.agents.tokens.counter_for_model`): exactly for
        OpenAI's models when ``bpe-openai`` is installed, else with the conservative estimate and the family's
        margin, unless ``counter`` is given.

        Raises:
            ConfigurationError: ``model_name`` is not in the model table and no ``model_info`` was given, or the
                reserves leave the model's window no room for messages (a budget below one token).
        """
        check_share(trigger_ratio, "trigger_ratio")
        for name, value in (("output_reserve", output_reserve), ("reserve", reserve)):
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
                raise InvalidArgument(f"{name} must be an integer >= 0, got {value!r}")
        info = model_info or _lookup(model_name)
        counter = counter or counter_for_model(model_name)
        room = info.context_window - (info.max_output_tokens if output_reserve is None else output_reserve)
        definitions = tool_tokens(tools, counter)
        taken = definitions + reserve + safety_margin
        budget = int((room - taken) * trigger_ratio)
        if budget < 1:  # every window would be empty but for its system messages
            raise ConfigurationError(
                f"{info.name}'s context window of {info.context_window} tokens leaves no room for messages: "
                f"{info.context_window - room} are reserved for the output and {taken} for the tool definitions, "
                "the reserve and the safety margin",
                hint="lower output_reserve, tools_reserve or safety_margin, or give a token_budget",
            )
        made = cls(strategies, budget, counter=counter, low_watermark=low_watermark)
        made.prompt_overhead = definitions
        return made

    @property
    def traits(self) -> StrategyTraits:  # type: ignore[override]
        """It cuts; it is suffix-determined when every child is (and searches or derives records when a child
        does); a windowed read starts with its budget; its counter is the one it was given."""
        children = [child.traits for child in self.strategies]
        return StrategyTraits(
            suffix_determined=all(t.suffix_determined for t in children),
            cuts=True,
            searches=any(t.searches for t in children),
            read_hint=self.token_budget,
            counter=self.own_counter,
            derives_records=any(t.derives_records for t in children),
            prompt_overhead=max([self.prompt_overhead, *(t.prompt_overhead for t in children)]),
        )

    def children(self) -> Sequence[Strategy]:
        """The child strategies, in order."""
        return self.strategies

    @property
    def counter(self) -> TokenCounter:
        """The counter named at construction (the default one when none was)."""
        return self.own_counter or DEFAULT_COUNTER

    def fits(self, messages: Sequence[ChatMessage], session: SessionContext | None = None) -> bool:
        """Whether ``messages`` fit the budget."""
        return fits(messages, self.budget(session), counter_of(self.own_counter, session, DEFAULT_COUNTER))

    def budget(self, session: SessionContext | None = None) -> int:
        """``token_budget`` (or the request's budget), divided by the session's calibration (how much more the
        provider reported than was counted, for the session's model), so a calibrated window still fits."""
        if session is None:
            return self.token_budget
        return session.budget_for(self.token_budget)

    async def compact(
        self, raw_history: Sequence[ChatMessage], session: SessionContext | None = None
    ) -> list[ChatMessage]:
        """The window within ``token_budget`` tokens."""
        session = SessionContext.of(session, raw_history)
        if self.low_watermark is not None:
            return await self._watermarked(raw_history, session)
        if not self.strategies:
            return self._trim(raw_history, 1.0, session, remember=False)  # the same as a fit check, then a trim
        if self.fits(raw_history, session):
            return list(raw_history)
        window = list(raw_history)
        for child in self.strategies:
            window = await child.compact(window, session)
            if self.fits(window, session):
                return window
        return self._trim(window, 1.0, session, remember=False)

    def _trim(
        self, window: Sequence[ChatMessage], share: float, session: SessionContext, *, remember: bool
    ) -> list[ChatMessage]:
        """System messages and the newest whole units within ``share`` of the budget (one scan for the system
        messages); if the system messages alone pass the budget, only they, and a ``budget_unmet`` event."""
        counter = counter_of(self.own_counter, session, DEFAULT_COUNTER)
        count = counter.count_message
        systems_at = system_positions(window)
        system_tokens = sum(count(window[i]) for i in systems_at)
        budget = self.budget(session)
        if system_tokens > budget:
            systems = [window[i] for i in systems_at]
            if self.events:
                self.events.emit(
                    CompactionEvent(
                        "budget_unmet",
                        systems,
                        strategy=repr(self),
                        counter=counter,
                        detail={"budget": budget, "system_tokens": system_tokens},
                    )
                )
            if session.partial:
                note_cut(window, len(window), session)
            return systems
        allowance = max(0, int(budget * share) - system_tokens)
        state = session.state
        cut = state.get(self, TAIL_CUT).cut(window, count, allowance)
        if remember:
            state.get(self, ANCHOR).remember(window, cut)
        return from_cut(window, cut, systems_at, session)

    async def _watermarked(self, history: Sequence[ChatMessage], session: SessionContext) -> list[ChatMessage]:
        window: Sequence[ChatMessage] = history
        for child in self.strategies:
            window = await child.compact(window, session)
        anchors = session.state.get(self, ANCHOR)
        anchor = anchors.cut(window)
        if anchor is None and anchors.is_set and session.partial:
            session.need_older()  # the remembered start is older than the part read
        if anchor is not None:
            anchored = from_cut(window, anchor)
            if self.fits(anchored, session):
                if session.partial:
                    session.cut_made()  # the remembered start decides the window, whatever is older
                return anchored  # below the high watermark: the same start as before
        elif self.fits(window, session):
            return list(window)
        assert self.low_watermark is not None
        return self._trim(window, self.low_watermark, session, remember=True)  # crossed: down to the low mark

    def __repr__(self) -> str:
        mark = f", low_watermark={self.low_watermark}" if self.low_watermark is not None else ""
        return f"TokenBudgetComposedStrategy({self.strategies!r}, token_budget={self.token_budget}{mark})"


def _lookup(name: str) -> ModelInfo:
    return model_info(name)


__all__ = ["TokenBudgetComposedStrategy", "fits"]
