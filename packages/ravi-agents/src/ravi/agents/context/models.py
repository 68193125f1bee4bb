"""Context windows and output reserves of well-known models, for sizing a token budget by model name."""

from __future__ import annotations

from collections.abc import Mapping

from ravi.agents.tokens import variant_of
from ravi.kernel.errors import ConfigurationError
from ravi.kernel.llm import ModelInfo

SAFETY_MARGIN = 1_024
"""Tokens held back from every budget, for counting error and provider framing."""


def _m(name: str, window: int, output: int) -> tuple[str, ModelInfo]:
    return name, ModelInfo(name=name, context_window=window, max_output_tokens=output)


MODELS: Mapping[str, ModelInfo] = dict(
    [
        _m("gpt-4o", 128_000, 16_384),
        _m("gpt-4o-mini", 128_000, 16_384),
        _m("gpt-4-turbo", 128_000, 4_096),
        _m("gpt-4.1", 1_047_576, 32_768),
        _m("gpt-4.1-mini", 1_047_576, 32_768),
        _m("gpt-4.1-nano", 1_047_576, 32_768),
        _m("gpt-5", 400_000, 128_000),
        _m("gpt-5-mini", 400_000, 128_000),
        _m("gpt-5-nano", 400_000, 128_000),
        _m("gpt-5-chat", 128_000, 16_384),
        _m("gpt-5-pro", 400_000, 272_000),
        _m("gpt-4o-audio-preview", 128_000, 16_384),
        _m("gpt-4o-realtime-preview", 32_000, 4_096),
        _m("gpt-4o-mini-realtime-preview", 16_000, 4_096),
        _m("o1", 200_000, 100_000),
        _m("o1-mini", 128_000, 65_536),
        _m("o1-preview", 128_000, 32_768),
        _m("o1-pro", 200_000, 100_000),
        _m("o3", 200_000, 100_000),
        _m("o3-mini", 200_000, 100_000),
        _m("o3-pro", 200_000, 100_000),
        _m("o4-mini", 200_000, 100_000),
        _m("codex-mini", 200_000, 100_000),
        _m("claude-3-haiku", 200_000, 4_096),
        _m("claude-3-5-sonnet", 200_000, 8_192),
        _m("claude-3-5-haiku", 200_000, 8_192),
        _m("claude-3-7-sonnet", 200_000, 64_000),
        _m("claude-sonnet-4", 200_000, 64_000),
        _m("claude-sonnet-4-5", 200_000, 64_000),
        _m("claude-opus-4", 200_000, 32_000),
        _m("claude-opus-4-1", 200_000, 32_000),
        _m("claude-opus-4-5", 200_000, 64_000),
        _m("claude-haiku-4-5", 200_000, 64_000),
        _m("gemini-2.0-flash", 1_048_576, 8_192),
        _m("gemini-2.0-flash-lite", 1_048_576, 8_192),
        _m("gemini-2.5-flash", 1_048_576, 65_536),
        _m("gemini-2.5-flash-lite", 1_048_576, 65_536),
        _m("gemini-2.5-pro", 1_048_576, 65_536),
        _m("llama-3.1-8b-instruct", 131_072, 4_096),
        _m("llama-3.1-70b-instruct", 131_072, 4_096),
        _m("mistral-large", 131_072, 4_096),
    ]
)
"""Known models. Names match exactly or followed by one of :data:`VARIANT_SUFFIXES` (:func:`model_info`)."""


VARIANT_SUFFIXES: Mapping[str, str] = {
    "-2024-08-06": "a dated snapshot (OpenAI, Google)",
    "-20250514 or @20240620": "a dated snapshot (Anthropic; Vertex AI with @)",
    "-05-06 or -09-2025": "a month and day, or a month and year (Gemini previews)",
    "-0": "the model's first minor version (Anthropic's aliases claude-opus-4-0 and claude-sonnet-4-0)",
    "-001 or -2411": "a version number of three or four digits (Gemini, Mistral)",
    "-latest, -preview, -exp": "a moving alias, a preview or an experiment of the same model",
    "-low, -medium, -high": "a reasoning effort of the same model (OpenRouter's openai/o3-mini-high)",
    "-v1 or -v1:0": "a provider's version of the same model (Bedrock, whose vendor before the name, "
    "anthropic. or us.anthropic., is read past)",
    "_... or :...": "anything after an underscore (an Azure deployment's name) or a colon (a provider's tag)",
}
"""What may follow a known name in a longer one (several may follow each other: ``gemini-2.5-pro-preview-05-06``).
Anything else is another model: ``gpt-4o-banana`` is unknown, not ``gpt-4o``."""


def model_info(name: str, *, models: Mapping[str, ModelInfo] = MODELS) -> ModelInfo:
    """The :class:`ModelInfo` for ``name``: an exact match, else the longest known name it starts with followed by
    :data:`VARIANT_SUFFIXES` only (``"claude-sonnet-4-20250514"`` is ``claude-sonnet-4``, while ``"gpt-4oo"`` and
    ``"gpt-4o-banana"`` are unknown), also after a ``provider/`` prefix or a Bedrock vendor (``us.anthropic.``).
    Case does not matter.

    Raises:
        ConfigurationError: the model is unknown; pass a ``ModelInfo`` instead.
    """
    known = variant_of(name, models)
    if known is not None:
        return models[known]
    raise ConfigurationError(
        f"unknown model {name!r}: its context window is not in Ravi's table",
        hint="pass model_info=ModelInfo(name=..., context_window=..., max_output_tokens=...)",
    )


def input_budget(info: ModelInfo, *, safety_margin: int = SAFETY_MARGIN) -> int:
    """Tokens a prompt may use: window minus output reserve minus ``safety_margin``."""
    return info.input_budget(safety_margin=safety_margin)


__all__ = ["MODELS", "SAFETY_MARGIN", "VARIANT_SUFFIXES", "input_budget", "model_info"]
