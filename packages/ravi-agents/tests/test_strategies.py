from __future__ import annotations

from collections.abc import Sequence

import pytest

from ravi.agents.context import (
    CompactionEvent,
    CompactionPipeline,
    SelectiveToolCallCompactionStrategy,
    SlidingWindowCompaction,
    SummarizationCompaction,
    TokenBudgetComposedStrategy,
    ToolResultCompactionStrategy,
    TruncationStrategy,
    WindowRequest,
)
from ravi.agents.context.compaction.summarization import SUMMARY_KEY, is_summary
from ravi.agents.context.models import model_info
from ravi.agents.tokens import counter_for_model
from ravi.conformance.strategy import check_window
from ravi.kernel.agent import SessionContext
from ravi.kernel.cancel import CancelledByToken, CancelToken
from ravi.kernel.errors import ConfigurationError, InvalidArgument
from ravi.kernel.llm import ModelInfo
from ravi.kernel.messages import ChatMessage, ToolCallBlock

from .doubles import RecordingLLM


def group(call_id: str, result: str, *, error: bool = False, thought: str | None = None) -> list[ChatMessage]:
    call = ToolCallBlock(id=call_id, name="read_file", arguments={"path": call_id})
    return [ChatMessage.assistant(thought, tool_calls=[call]), ChatMessage.tool(call_id, result, is_error=error)]


async def test_tool_result_compaction_marks_what_it_cut_and_spares_errors() -> None:
    history = [ChatMessage.user("go"), *group("a", "x" * 1200), *group("b", "E" * 1200, error=True)]
    out = await ToolResultCompactionStrategy(max_chars=500).compact(history)
    assert out[2].tool_result is not None
    assert out[2].tool_result.content == "x" * 500 + "\n[700 chars truncated]"
    assert out[2].id == history[2].id
    assert out[4] is history[4]  # the error result is untouched
    assert history[2].tool_result is not None and len(history[2].tool_result.content) == 1200


async def test_selective_keeps_recent_groups_and_the_assistant_text_of_old_ones() -> None:
    history = [ChatMessage.user("go")]
    for i in range(4):
        history += group(f"c{i}", f"result {i}", thought=f"thinking {i}" if i == 0 else None)
    out = await SelectiveToolCallCompactionStrategy(keep_recent_groups=2).compact(history)
    assert [m.text for m in out[:2]] == ["go", "thinking 0"]
    assert out[1].tool_calls == ()  # the old call is folded away with its result
    assert [c.id for m in out for c in m.tool_calls] == ["c2", "c3"]
    check_window(history, out)


async def test_sliding_window_moves_the_cut_to_keep_pairs() -> None:
    history = [ChatMessage.system("rules"), ChatMessage.user("q"), *group("a", "r"), ChatMessage.user("thanks")]
    out = await SlidingWindowCompaction(max_messages=2).compact(history)
    assert [m.role for m in out] == ["system", "user"]  # the group would have been split, so it goes whole
    out = await SlidingWindowCompaction(max_messages=3).compact(history)
    assert [m.role for m in out] == ["system", "assistant", "tool", "user"]


async def test_truncation_caps_messages_and_window_characters() -> None:
    """000: "TruncationStrategy — Hard backstop: drops oldest until under max_messages and/or max_chars"."""
    history = [ChatMessage.system("s" * 50), *[ChatMessage.user(f"{i}" * 30) for i in range(5)]]
    out = await TruncationStrategy(max_messages=2).compact(history)
    assert out == [history[0], history[4], history[5]]
    out = await TruncationStrategy(max_chars=50 + 60).compact(history)  # the system message, then two of 30
    assert out == [history[0], history[4], history[5]]  # whole messages, the oldest dropped, nothing cut
    out = await TruncationStrategy(max_messages=1, max_chars=1_000).compact(history)
    assert out == [history[0], history[5]]
    assert await TruncationStrategy(max_chars=10).compact(history) == [history[0]]


async def test_token_budget_applies_children_only_until_it_fits() -> None:
    calls: list[str] = []

    class Spy:
        def __init__(self, name: str, keep: int) -> None:
            self.name, self.keep = name, keep

        async def compact(self, history: Sequence[ChatMessage]) -> list[ChatMessage]:
            calls.append(self.name)
            return list(history[-self.keep :])

    history = [ChatMessage.user("x" * 400) for _ in range(10)]
    strategy = TokenBudgetComposedStrategy([Spy("first", 5), Spy("second", 2), Spy("third", 1)], token_budget=250)
    out = await strategy.compact(history)
    assert calls == ["first", "second"] and len(out) == 2
    calls.clear()
    assert await strategy.compact(history[:2]) == history[:2] and calls == []


async def test_budget_below_the_system_prompt_keeps_only_it_and_says_so() -> None:
    strategy = TokenBudgetComposedStrategy([], token_budget=5)
    events: list[CompactionEvent] = []
    strategy.events.subscribe(events.append)
    history = [ChatMessage.system("a long system prompt " * 5), ChatMessage.user("hi")]
    assert await strategy.compact(history) == history[:1]
    assert [e.kind for e in events] == ["budget_unmet"]


def test_from_model_sizes_the_budget_from_the_table() -> None:
    strategy = TokenBudgetComposedStrategy.from_model("gpt-4o-2024-08-06")
    assert strategy.token_budget == int((128_000 - 16_384 - 1_024) * 0.8)
    assert (
        TokenBudgetComposedStrategy.from_model("anthropic/claude-sonnet-4-20250514", trigger_ratio=1).token_budget
        == 200_000 - 64_000 - 1_024
    )
    with pytest.raises(ConfigurationError, match="unknown model 'my-llm'") as info:
        TokenBudgetComposedStrategy.from_model("my-llm")
    assert "ModelInfo" in str(info.value)
    custom = ModelInfo(name="my-llm", context_window=10_000, max_output_tokens=1_000)
    assert TokenBudgetComposedStrategy.from_model("my-llm", model_info=custom, safety_margin=0).token_budget == 7_200


@pytest.mark.parametrize("name", [None, 42, b"gpt-4o", ["gpt-4o"]])
def test_a_model_name_that_is_not_a_string_is_a_configuration_error(name: object) -> None:
    """``from_model(None)``, ``model_info(42)`` and ``counter_for_model(b"gpt-4o")`` raised Python's own
    ``AttributeError`` or ``TypeError`` from inside the name matcher; they say what a model name is, as
    ``ContextConfig(model=42)`` does."""
    for call in (TokenBudgetComposedStrategy.from_model, model_info, counter_for_model):
        with pytest.raises(ConfigurationError, match="must be a model's name"):
            call(name)  # type: ignore[operator]


@pytest.mark.parametrize("typo", ["gpt-4oo", "o1x", "gpt-4.1x", "claude-sonnet-45"])
def test_a_known_name_with_letters_run_on_is_an_unknown_model(typo: str) -> None:
    """A known name matches as the start of a longer one only up to a separator (a date, a version, a
    provider's suffix): ``gpt-4oo`` was sized as ``gpt-4o``."""
    with pytest.raises(ConfigurationError, match=f"unknown model '{typo}'"):
        model_info(typo)


@pytest.mark.parametrize(
    ("name", "known"),
    [
        ("gpt-4o-2024-08-06", "gpt-4o"),
        ("openai/gpt-4o", "gpt-4o"),
        ("claude-3-5-sonnet@20240620", "claude-3-5-sonnet"),
        ("llama-3.1-8b-instruct:free", "llama-3.1-8b-instruct"),
        ("gpt-4o-mini-2024-07-18", "gpt-4o-mini"),
        ("GPT-4o", "gpt-4o"),
        ("o1-mini-2024-09-12", "o1-mini"),
        ("claude-opus-4-5-20251101", "claude-opus-4-5"),
    ],
)
def test_dated_and_qualified_names_match_the_known_model(name: str, known: str) -> None:
    assert model_info(name).name == known


@pytest.mark.parametrize(
    "name", ["gpt-4o-banana", "gpt-4o-mini-banana", "claude-sonnet-4-6", "gpt-4o.x", "o3-turbo", "gpt-5-codex"]
)
def test_a_known_name_followed_by_something_else_is_an_unknown_model(name: str) -> None:
    """Only a listed variant suffix (a date, a version, ``-latest``...) may follow a known name: ``gpt-4o-banana``
    was sized as ``gpt-4o`` and ``claude-sonnet-4-6`` as ``claude-sonnet-4``."""
    with pytest.raises(ConfigurationError, match=f"unknown model '{name}'"):
        model_info(name)
    with pytest.raises(ConfigurationError, match=f"unknown model '{name}'"):
        TokenBudgetComposedStrategy.from_model(name)


@pytest.mark.parametrize(
    ("name", "known"),
    [
        ("gemini-2.5-pro-preview-05-06", "gemini-2.5-pro"),
        ("gemini-2.0-flash-001", "gemini-2.0-flash"),
        ("mistral-large-2411", "mistral-large"),
        ("mistral-large-latest", "mistral-large"),
        ("claude-3-5-sonnet-latest", "claude-3-5-sonnet"),
        ("claude-sonnet-4@20250514", "claude-sonnet-4"),
        ("claude-3-7-sonnet-20250219-v1:0", "claude-3-7-sonnet"),
        ("gemini-2.0-flash-exp", "gemini-2.0-flash"),
        ("gemini-2.5-flash-preview-09-2025", "gemini-2.5-flash"),
        ("gemini-2.5-flash-preview-09-2025_eu", "gemini-2.5-flash"),
        ("claude-opus-4-0", "claude-opus-4"),
        ("claude-sonnet-4-0", "claude-sonnet-4"),
        ("anthropic/claude-sonnet-4-0", "claude-sonnet-4"),
        ("anthropic.claude-3-5-sonnet-20240620-v1:0", "claude-3-5-sonnet"),
        ("us.anthropic.claude-sonnet-4-20250514-v1:0", "claude-sonnet-4"),
        ("mistral.mistral-large-2407-v1:0", "mistral-large"),
        ("openai/o3-mini-high", "o3-mini"),
        ("openai/o4-mini-high", "o4-mini"),
        (
            "arn:aws:bedrock:eu-west-1:123456789012:inference-profile/eu.anthropic.claude-3-7-sonnet-20250219-v1:0",
            "claude-3-7-sonnet",
        ),
    ],
)
def test_listed_variant_suffixes_match_the_known_model(name: str, known: str) -> None:
    assert model_info(name).name == known


@pytest.mark.parametrize(
    ("name", "window", "output"),
    [
        ("o1-pro", 200_000, 100_000),
        ("o1-pro-2025-03-19", 200_000, 100_000),
        ("o3-pro", 200_000, 100_000),
        ("openai/o3-pro-2025-06-10", 200_000, 100_000),
        ("gpt-5-chat-latest", 128_000, 16_384),
        ("gpt-5-pro", 400_000, 272_000),
        ("gpt-4o-audio-preview", 128_000, 16_384),
        ("gpt-4o-audio-preview-2025-06-03", 128_000, 16_384),
        ("gpt-4o-realtime-preview", 32_000, 4_096),
        ("gpt-4o-mini-realtime-preview-2024-12-17", 16_000, 4_096),
        ("codex-mini-latest", 200_000, 100_000),
        ("o1-preview", 128_000, 32_768),  # not o1 with a "-preview" suffix: a smaller model of its own
        ("o1-preview-2024-09-12", 128_000, 32_768),
    ],
)
def test_openai_models_users_pass_today_are_known(name: str, window: int, output: int) -> None:
    """OpenAI's ``o1-pro``, ``o3-pro``, ``gpt-5-chat-latest``, audio and realtime previews were unknown once a known
    name matched only exactly or with a variant suffix; each is sized as OpenAI documents it and counted with its
    encoding."""
    info = model_info(name)
    assert (info.context_window, info.max_output_tokens) == (window, output)
    assert counter_for_model(name).key == "tokens:exact:o200k_base"


@pytest.mark.parametrize(
    ("name", "window", "output"),
    [
        ("gemini-2.5-flash-lite", 1_048_576, 65_536),
        ("google/gemini-2.5-flash-lite-preview-06-17", 1_048_576, 65_536),
        ("gemini-2.0-flash-lite", 1_048_576, 8_192),
        ("gemini-2.0-flash-lite-001", 1_048_576, 8_192),
    ],
)
def test_gemini_flash_lite_models_are_known(name: str, window: int, output: int) -> None:
    """``gemini-2.5-flash-lite`` is not ``gemini-2.5-flash`` followed by a variant suffix, so it was unknown."""
    info = model_info(name)
    assert (info.context_window, info.max_output_tokens) == (window, output)
    assert counter_for_model(name).scale == 1.10


@pytest.mark.parametrize(
    "name", ["claude-3-haiku", "claude-3-haiku-20240307", "anthropic.claude-3-haiku-20240307-v1:0"]
)
def test_claude_3_haiku_is_known(name: str) -> None:
    """Claude 3 Haiku, still served, was unknown; its output is 4,096 tokens, not a later Haiku's."""
    info = model_info(name)
    assert (info.name, info.context_window, info.max_output_tokens) == ("claude-3-haiku", 200_000, 4_096)


def test_a_long_name_of_variant_like_pieces_is_read_in_time_linear_in_its_length() -> None:
    """``-2024-08-06`` is one dated snapshot, or ``-2024`` then ``-08-06``: the variant pattern tried every way of
    cutting a name into suffixes, so ``gpt-4o`` followed by 24 dates and a letter took seconds and 60 of them never
    ended; each suffix is now read once. (On the pattern before, this test does not finish.)"""
    name = "gpt-4o" + "-2024-08-06" * 60
    assert model_info(name).name == "gpt-4o"
    with pytest.raises(ConfigurationError, match="unknown model"):
        model_info(name + "x")
    assert counter_for_model(name + "x").scale == 1.30


@pytest.mark.parametrize(
    ("name", "known"),
    [("gpt-4o_prod", "gpt-4o"), ("azure/gpt-4o-mini_eastus2", "gpt-4o-mini"), ("gpt-4.1_2025-04-14", "gpt-4.1")],
)
def test_a_deployment_name_with_an_underscore_after_the_model_matches_it(name: str, known: str) -> None:
    """Azure OpenAI deployment names (letters, digits, ``-``, ``_`` and ``.``) often put an underscore after the
    model's name; they were sized as the model before names matched only up to a separator."""
    assert model_info(name).name == known


def test_bad_parameters_are_refused() -> None:
    with pytest.raises(InvalidArgument):
        SlidingWindowCompaction(-1)
    with pytest.raises(InvalidArgument):
        ToolResultCompactionStrategy(-5)
    with pytest.raises(InvalidArgument):
        TokenBudgetComposedStrategy.from_model("gpt-4o", trigger_ratio=1.5)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), 2.5, "100", None, True])
def test_sizes_that_are_not_whole_numbers_are_refused(bad: object) -> None:
    """A budget or a count that is NaN, a float, a string, None or a bool is refused with InvalidArgument when the
    strategy is built: NaN used to pass every ``< 0`` check, then broke or disabled the window at assembly."""
    builds = {
        "SlidingWindowCompaction(max_messages)": lambda: SlidingWindowCompaction(bad),  # type: ignore[arg-type]
        "ToolResultCompactionStrategy(max_chars)": lambda: ToolResultCompactionStrategy(bad),  # type: ignore[arg-type]
        "TokenBudgetComposedStrategy(token_budget)": lambda: TokenBudgetComposedStrategy([], bad),  # type: ignore[arg-type]
        "SelectiveToolCallCompactionStrategy(keep_recent_groups)": lambda: SelectiveToolCallCompactionStrategy(bad),  # type: ignore[arg-type]
        "SummarizationCompaction(recent_token_budget)": lambda: SummarizationCompaction(
            RecordingLLM(),
            recent_token_budget=bad,  # type: ignore[arg-type]
        ),
        "SummarizationCompaction(min_old_tokens)": lambda: SummarizationCompaction(
            RecordingLLM(),
            min_old_tokens=bad,  # type: ignore[arg-type]
        ),
        "SummarizationCompaction(max_summary_tokens)": lambda: SummarizationCompaction(
            RecordingLLM(),
            max_summary_tokens=bad,  # type: ignore[arg-type]
        ),
    }
    for what, build in builds.items():
        try:
            build()
        except InvalidArgument:
            continue
        except Exception as other:
            pytest.fail(f"{what}={bad!r} raised {type(other).__name__}: {other}")
        pytest.fail(f"{what}={bad!r} was accepted")


def long_chat(n: int) -> list[ChatMessage]:
    out = [ChatMessage.system("rules")]
    for i in range(n):
        out += [ChatMessage.user(f"question {i} " + "q" * 200), ChatMessage.assistant(f"answer {i} " + "a" * 200)]
    return out


async def test_summarization_replaces_the_old_part_with_one_summary() -> None:
    llm = RecordingLLM()
    history = long_chat(10)
    out = await SummarizationCompaction(llm, recent_token_budget=300, min_old_tokens=100).compact(history)
    assert out[0] is history[0]
    assert is_summary(out[1]) and out[1].text.endswith("summary #1")
    assert out[2:] == history[-len(out) + 2 :]
    assert "question 0" in llm.prompts[0]
    assert out[1].metadata[SUMMARY_KEY]["first"] == history[1].id


async def test_an_existing_summary_is_updated_not_stacked() -> None:
    llm = RecordingLLM()
    strategy = SummarizationCompaction(llm, recent_token_budget=300, min_old_tokens=100)
    first = await strategy.compact(long_chat(10))
    grown = first + long_chat(6)[1:]  # the conversation goes on after the summarised window
    second = await strategy.compact(grown)
    summaries = [m for m in second if is_summary(m)]
    assert len(summaries) == 1
    assert "Previous summary" in llm.prompts[-1] and "summary #1" in llm.prompts[-1]
    assert summaries[0].metadata[SUMMARY_KEY]["replaces"] == [first[1].id]


async def test_the_same_span_is_summarised_once() -> None:
    llm = RecordingLLM()
    strategy = SummarizationCompaction(llm, recent_token_budget=300, min_old_tokens=100)
    history = long_chat(10)
    session = SessionContext("agent", "s")
    assert await strategy.compact(history, session) == await strategy.compact(history, session)
    assert len(llm.prompts) == 1


async def test_summarization_failure_returns_the_input_and_reports_it() -> None:
    class Broken:
        async def complete(self, messages: Sequence[ChatMessage], **kwargs: object) -> str:
            raise TimeoutError("model timed out")

    strategy = SummarizationCompaction(Broken(), recent_token_budget=300, min_old_tokens=100)
    pipeline = CompactionPipeline([strategy])
    events: list[CompactionEvent] = []
    pipeline.subscribe(events.append)
    history = long_chat(10)
    assert await pipeline.compact(history) == history
    failed = [e for e in events if e.kind == "summarization_failed"]
    assert len(failed) == 1 and isinstance(failed[0].error, TimeoutError)


async def test_summarization_honours_its_cancel_token() -> None:
    token = CancelToken()
    token.cancel("user stopped")
    strategy = SummarizationCompaction(RecordingLLM(), recent_token_budget=300, min_old_tokens=100, cancel_token=token)
    with pytest.raises(CancelledByToken, match="user stopped"):
        await strategy.compact(long_chat(10))
    # too little old content: no model call, so nothing to cancel
    short = long_chat(1)
    assert await strategy.compact(short) == short


async def test_pipeline_events_carry_counts() -> None:
    pipeline = CompactionPipeline([ToolResultCompactionStrategy(max_chars=10), SlidingWindowCompaction(10)])
    events: list[CompactionEvent] = []
    dispose = pipeline.subscribe(events.append)
    history = [ChatMessage.user("a"), *group("c", "r" * 100), ChatMessage.user("b")]
    await pipeline.compact(history)
    assert [(e.kind, e.strategy, e.changed, e.message_count) for e in events] == [
        ("pre_compact", None, False, 4),
        ("strategy_applied", "ToolResultCompactionStrategy", True, 4),
        ("strategy_applied", "SlidingWindowCompaction", False, 4),
        ("post_compact", None, False, 4),
    ]
    assert events[0].tokens > events[-1].tokens
    dispose()
    await pipeline.compact(history)
    assert len(events) == 4


async def test_empty_pipeline_is_a_no_op_and_a_single_strategy_needs_none() -> None:
    history = long_chat(3)
    assert await CompactionPipeline().compact(history) == history
    assert len(await SlidingWindowCompaction(2).compact(history)) == 3


async def test_the_manifest_says_what_happened_to_every_message() -> None:
    llm = RecordingLLM()
    history = long_chat(10)
    history += group("big", "z" * 2_000) + group("err", "E" * 2_000, error=True)
    pipeline = CompactionPipeline(
        [
            ToolResultCompactionStrategy(max_chars=100),
            SummarizationCompaction(llm, recent_token_budget=600, min_old_tokens=100),
            TokenBudgetComposedStrategy([], token_budget=5_000),
        ]
    )
    explained = await pipeline.window(WindowRequest("a", "s", messages=history, explain=True))
    assert explained.messages == (await pipeline.window(WindowRequest("a", "s", messages=history))).messages
    by_id = {e.message_id: e for e in explained.manifest}
    assert [e.message_id for e in explained.manifest] == [m.id for m in history]
    assert by_id[history[0].id].status == "kept"  # the system message
    big_result = history[-3]
    assert by_id[big_result.id].status == "truncated"
    assert by_id[big_result.id].strategy == "ToolResultCompactionStrategy"
    assert by_id[big_result.id].chars_removed == 2_000 - 100 - len("\n[1900 chars truncated]")
    assert by_id[history[-1].id].status == "kept"  # the error result is whole
    summary = next(m for m in explained.messages if is_summary(m))
    summarised = [e for e in explained.manifest if e.status == "summarised"]
    assert summarised and all(e.summary_id == summary.id for e in summarised)
    assert all(e.strategy == "SummarizationCompaction" for e in summarised)
    assert explained.counts()["summarised"] == len(summarised)


async def test_the_manifest_names_recalled_and_dropped_messages() -> None:
    from ravi.agents.context import RelevantRecallStrategy

    history = [ChatMessage.system("rules"), ChatMessage.user("My locker code is QUARTZ-4411, remember it.")]
    history += [ChatMessage.user(f"filler turn {i} " + "w" * 300) for i in range(20)]
    history.append(ChatMessage.user("What is my locker code?"))
    pipeline = CompactionPipeline([RelevantRecallStrategy(token_budget=600)])
    explained = await pipeline.window(WindowRequest(messages=history, explain=True))
    by_id = {e.message_id: e for e in explained.manifest}
    assert by_id[history[1].id].status == "recalled"
    assert by_id[history[10].id].status == "dropped"
    assert by_id[history[10].id].strategy == "RelevantRecallStrategy"
    assert by_id[history[-1].id].status == "kept"


async def test_relevant_recall_by_embeddings_in_a_vector_store() -> None:
    from ravi.agents.context import RelevantRecallStrategy
    from ravi.agents.context.recall_index import EmbeddingIndex
    from ravi.agents.storage import HashingEmbeddingClient, InMemoryVectorStore

    store = InMemoryVectorStore()
    index = EmbeddingIndex(HashingEmbeddingClient(), store)
    strategy = RelevantRecallStrategy(token_budget=600, index=index)
    history = [ChatMessage.system("rules"), ChatMessage.user("The staging database lives on host db-staging-3.")]
    history += [ChatMessage.user(f"filler turn {i} " + "w" * 300) for i in range(20)]
    history.append(ChatMessage.user("Which host is the staging database on?"))
    session = SessionContext("agent", "s")
    window = await strategy.compact(history, session)
    assert history[1] in window and history[2] not in window
    assert strategy.recalled(session) == {history[1].id}
    [collection] = await store.list_collections()
    assert len(await store.get([m.id for m in history], collection=collection)) == len(history)
    # the session grows: only the new message is embedded and stored
    grown = [*history, ChatMessage.user("And the staging database host again?")]
    await strategy.compact(grown, session)
    assert len(await store.get([m.id for m in grown], collection=collection)) == len(grown)


async def test_an_owned_embedding_index_keeps_only_recent_sessions() -> None:
    from ravi.agents.context.recall_index import EmbeddingIndex
    from ravi.agents.storage import HashingEmbeddingClient
    from ravi.kernel.agent import SessionContext

    index = EmbeddingIndex(HashingEmbeddingClient(), sessions=2)
    for s in range(5):
        await index.scores([ChatMessage.user(f"session {s} fact")], "fact", session=SessionContext("agent", f"s{s}"))
    assert len(await index.store.list_collections()) == 2


@pytest.mark.parametrize(
    ("arguments", "error", "says"),
    [
        ({"cancel_token": 1}, InvalidArgument, "cancel_token"),
        ({"instructions": None}, InvalidArgument, "instructions"),
        ({"instructions": ""}, InvalidArgument, "instructions"),
        ({"store": 1}, ConfigurationError, "store"),
    ],
)
def test_a_summariser_refuses_what_it_would_fail_with_at_a_window(
    arguments: dict[str, object], error: type[Exception], says: str
) -> None:
    """Taken as given, a cancel token or a store of the wrong kind failed the window with a bare
    ``AttributeError``, and instructions that are not text made every summary fail, logged, with no summary."""
    with pytest.raises(error, match=says):
        SummarizationCompaction(**arguments)  # type: ignore[arg-type]


def test_relevant_recall_says_what_it_ranks_meaning_with() -> None:
    """``RelevantRecallStrategy(16_000)`` printed the same whether ``meaning="auto"`` had found the offline model
    or fell back to words alone, so there was no way to see which one a window would use; it now names the model
    (or ``None``: words only)."""
    from ravi.agents.context import RelevantRecallStrategy
    from ravi.agents.context.recall_index import BM25Index
    from ravi.agents.embeddings import offline_embeddings_installed
    from ravi.agents.storage.embeddings import HashingEmbeddingClient

    assert repr(RelevantRecallStrategy(100, meaning=None)).endswith(", meaning=None)")
    assert repr(RelevantRecallStrategy(100, meaning="none")).endswith(", meaning=None)")
    client = HashingEmbeddingClient()
    named = RelevantRecallStrategy(100, meaning=client)
    assert named.meaning is not None
    assert repr(named).endswith(f", meaning={named.meaning.model!r})")
    assert repr(RelevantRecallStrategy(100, meaning=BM25Index())).endswith(", meaning=BM25Index)")
    auto = repr(RelevantRecallStrategy(100))
    if offline_embeddings_installed():
        assert auto.endswith(", meaning='wordllama-l2_supercat-128')"), auto
    else:
        assert auto.endswith(", meaning=None)"), auto
