"""Strategies from settings: the ``[context]`` section of ``ravi.toml`` (and ``RAVI_CONTEXT__*`` variables) turned
into the pipeline :class:`~ravi.agents.context.config.ContextConfig` runs.

The settings describe; this module builds. It sits above :mod:`ravi.agents.settings` (which builds stores and
knows nothing of strategies), so the settings never import the engine.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ravi.agents.settings import ContextSettings, StrategySettings
from ravi.kernel.agent import CompactionStrategy, HistoryRetention
from ravi.kernel.errors import ConfigurationError, InvalidArgument


def _sized_model(model: str) -> str:
    """``model`` when Ravi's model table can size it, else a ``ConfigurationError`` whose hint says what to write in
    the settings (the library's own hint names a Python argument, ``model_info=``, that no key of ``ravi.toml``
    gives)."""
    from ravi.agents.context.models import MODELS, model_info
    from ravi.kernel.registry import did_you_mean

    try:
        model_info(model)
    except ConfigurationError as error:
        raise ConfigurationError(
            error.message,
            hint=f"{did_you_mean(model, MODELS)}give the budget in tokens beside it, token_budget = N (the window is "
            f"then counted as the model counts), or name a model of the table: {', '.join(sorted(MODELS)[:8])}, ...",
        ) from None
    return model


def build_strategy(
    spec: StrategySettings,
    *,
    default_model: str | None = None,
    summaries: Any = None,
    vectors: Callable[[], Any] | None = None,
) -> CompactionStrategy:
    """One strategy from its settings; unknown parameters are a ``ConfigurationError`` naming them.
    ``vectors`` builds the ``[vector]`` store, for relevant recall that keeps its embeddings there."""
    from ravi.agents.context.compaction import (
        SelectiveToolCallCompactionStrategy,
        SlidingWindowCompaction,
        SummarizationCompaction,
        TokenBudgetComposedStrategy,
        ToolResultCompactionStrategy,
        TruncationStrategy,
    )
    from ravi.agents.tokens import counter_for_model

    params = spec.params()
    where = f"context.pipeline strategy {spec.strategy!r}"
    try:
        if spec.strategy == "token_budget":
            children = [
                build_strategy(c, default_model=default_model, summaries=summaries, vectors=vectors)
                for c in spec.children
            ]
            model = params.pop("model", None)
            if "token_budget" in params:  # a fixed budget, counted as the model named beside it counts
                counter = counter_for_model(model) if model is not None else None
                return TokenBudgetComposedStrategy(children, params.pop("token_budget"), counter=counter, **params)
            model = model or default_model
            if model is None:
                raise ConfigurationError(f"{where} needs token_budget or model")
            return TokenBudgetComposedStrategy.from_model(_sized_model(model), children, **params)
        if spec.strategy == "summarization":
            llm = None
            llm_model = params.pop("llm_model", None)
            if llm_model:
                from ravi.agents.llm.openai import OpenAICompatibleClient

                llm = OpenAICompatibleClient(llm_model, base_url=params.pop("llm_base_url", None))
            return SummarizationCompaction(llm, store=summaries, **params)
        if spec.strategy == "relevant_recall":
            from ravi.agents.context.compaction.relevant_recall import RelevantRecallStrategy

            if "token_budget" not in params:
                model = params.pop("model", None) or default_model
                if model is None:
                    raise ConfigurationError(f"{where} needs token_budget or model")
                from ravi.agents.context.models import input_budget, model_info

                ratio = float(params.pop("trigger_ratio", 0.8))
                params["token_budget"] = int(input_budget(model_info(_sized_model(model))) * ratio)
            from ravi.agents.context.recall_ranking import meaning_setting

            params["meaning"] = meaning_setting(params.pop("meaning", "auto"), vectors)
            return RelevantRecallStrategy(**params)
        factories: dict[str, Callable[..., CompactionStrategy]] = {
            "sliding_window": SlidingWindowCompaction,
            "tool_result": ToolResultCompactionStrategy,
            "selective_tool_call": SelectiveToolCallCompactionStrategy,
            "truncation": TruncationStrategy,
        }
        return factories[spec.strategy](**params)
    except TypeError as error:
        raise ConfigurationError(f"{where}: {error}", hint="check the parameter names in docs/strategies.md") from error


def build_pipeline(
    context: ContextSettings, *, summaries: Any = None, vectors: Callable[[], Any] | None = None
) -> list[CompactionStrategy] | None:
    """The strategies ``context`` settings describe (``None`` means the default sliding window); summarising
    strategies keep their summaries in ``summaries``, relevant recall its embeddings in ``vectors()`` when told
    to."""
    from ravi.agents.context.compaction import (
        SelectiveToolCallCompactionStrategy,
        TokenBudgetComposedStrategy,
        ToolResultCompactionStrategy,
    )
    from ravi.agents.tokens import counter_for_model

    if context.pipeline is not None:
        built: list[CompactionStrategy] = []
        for i, spec in enumerate(context.pipeline):
            try:
                built.append(build_strategy(spec, default_model=context.model, summaries=summaries, vectors=vectors))
            except InvalidArgument as error:  # a parameter out of range: say which strategy of the pipeline
                raise InvalidArgument(error.message, field=f"context.pipeline[{i}]", hint=error.hint) from error
        return built
    if context.model is None and context.token_budget is None:
        return None
    head: list[CompactionStrategy] = [ToolResultCompactionStrategy(), SelectiveToolCallCompactionStrategy()]
    if context.token_budget is not None:  # a fixed budget, counted as the model (when one is named) counts
        counter = counter_for_model(context.model) if context.model is not None else None
        return [*head, TokenBudgetComposedStrategy([], context.token_budget, counter=counter)]
    assert context.model is not None
    return [
        *head,
        TokenBudgetComposedStrategy.from_model(
            _sized_model(context.model),
            trigger_ratio=context.trigger_ratio,
            output_reserve=context.output_reserve,
            reserve=context.tools_reserve,
            safety_margin=context.safety_margin,
        ),
    ]


def uses_strategy(context: ContextSettings, name: str) -> bool:
    """Whether the configured pipeline has strategy ``name`` anywhere, children of children included."""

    def inside(specs: list[StrategySettings]) -> bool:
        return any(s.strategy == name or inside(s.children) for s in specs)

    return inside(context.pipeline or [])


def retention_of(context: ContextSettings) -> HistoryRetention:
    """The retention policy the settings name."""
    return HistoryRetention(context.retention)


__all__ = ["build_pipeline", "build_strategy", "retention_of", "uses_strategy"]
