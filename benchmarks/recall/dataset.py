"""The recall dataset: long agent sessions where facts are stated early and asked about at the end.

Generated deterministically by this script (``python benchmarks/recall/dataset.py`` prints a summary). Four
scenarios (customer support, a coding project, travel planning, a personal assistant), 30 facts each. Every
fact is stated once in a user turn near the start of its session; then come hundreds of turns of ordinary agent
work (tool loops with large outputs, from ``ravi.agents.demo``); each question is asked as the final user turn.
A question counts as answered when its answer (a number, a name, an identifier) is still somewhere in the
window. 120 questions in all.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from ravi.agents.demo import model_calls
from ravi.kernel.messages import ChatMessage, ToolCallBlock

# (statement, question, answer-generator) per scenario; {v} is the answer
SCENARIOS: dict[str, list[tuple[str, str]]] = {
    "support": [
        ("My order number is {v}, it arrived damaged.", "What is my order number?"),
        (
            "The refund should go to the card ending in {v}.",
            "Which card should the refund go to, the one ending in what?",
        ),
        ("My account email is {v}.", "What is my account email?"),
        ("The courier's tracking code was {v}.", "What was the courier tracking code?"),
        ("I called your hotline on ticket {v} last week.", "Which hotline ticket did I call on?"),
        ("The replacement part code is {v}.", "What is the replacement part code?"),
        ("My loyalty member id is {v}.", "What is my loyalty member id?"),
        ("The invoice I dispute is {v}.", "Which invoice do I dispute?"),
    ],
    "coding": [
        ("The staging database host is {v}.", "Which host is the staging database on?"),
        ("Our feature flag for the new checkout is {v}.", "What is the feature flag for the new checkout?"),
        ("The flaky test lives in {v}.", "Where does the flaky test live?"),
        ("CI runs on the runner pool {v}.", "Which runner pool does CI run on?"),
        ("The API rate limit is {v} requests per minute.", "What is the API rate limit per minute?"),
        ("The release branch is called {v}.", "What is the release branch called?"),
        ("Sentry project slug is {v}.", "What is the Sentry project slug?"),
        ("The on-call engineer this week is {v}.", "Who is the on-call engineer this week?"),
    ],
    "travel": [
        ("My flight to Lisbon is {v}.", "What is my flight number to Lisbon?"),
        ("The hotel confirmation code is {v}.", "What is the hotel confirmation code?"),
        ("My passport number is {v}.", "What is my passport number?"),
        ("The rental car pickup is at desk {v}.", "At which desk is the rental car pickup?"),
        ("Our dinner reservation is under the name {v}.", "Under which name is our dinner reservation?"),
        ("The museum tickets are for the {v} slot.", "Which slot are the museum tickets for?"),
        ("My seat on the train is {v}.", "What is my seat on the train?"),
        ("The travel insurance policy is {v}.", "What is the travel insurance policy number?"),
    ],
    "assistant": [
        ("My sister's birthday is on {v}.", "When is my sister's birthday?"),
        ("I am allergic to {v}.", "What am I allergic to?"),
        ("My dentist is Dr. {v}.", "What is my dentist's name?"),
        ("The gym locker combination is {v}.", "What is the gym locker combination?"),
        ("My favourite tea is {v}.", "What is my favourite tea?"),
        ("The wifi password at the cabin is {v}.", "What is the wifi password at the cabin?"),
        ("My manager's name is {v}.", "What is my manager's name?"),
        ("The plumber comes on {v}.", "When does the plumber come?"),
    ],
}
WORDS = (
    "amber cobalt juniper saffron quartz willow falcon lumen orchid basalt cedar marlin nimbus ochre "
    "pebble raven sable tundra umber vesper"
).split()


def value(rng: random.Random, kind: int) -> str:
    """An answer that cannot be guessed and appears nowhere else."""
    if kind % 3 == 0:
        return f"{rng.choice(WORDS).upper()}-{rng.randint(1000, 99999)}"
    if kind % 3 == 1:
        return f"{rng.choice(WORDS)}-{rng.choice(WORDS)}-{rng.randint(10, 99)}"
    return f"{rng.randint(100000, 9999999)}"


@dataclass(frozen=True)
class Question:
    scenario: str
    text: str
    answer: str
    fact_id: str


@dataclass(frozen=True)
class Session:
    scenario: str
    messages: list[ChatMessage]
    questions: list[Question]


def build(seed: int = 11, facts_per_scenario: int = 30, filler_requests: int = 48, buried: int = 0) -> list[Session]:
    """Four sessions of 300+ messages and their 120 questions; with ``buried``, the facts are followed by about
    that many tokens of tool output (large results of a log search) before the ordinary agent work."""
    sessions = []
    for s_index, (scenario, templates) in enumerate(SCENARIOS.items()):
        rng = random.Random(seed * 100 + s_index)
        messages: list[ChatMessage] = [
            ChatMessage.system(f"You are a helpful {scenario} agent.", id=f"{scenario}-system")
        ]
        questions = []
        for k in range(facts_per_scenario):
            statement, question = templates[k % len(templates)]
            answer = value(rng, k)
            suffix = f" (note {k + 1})" if k >= len(templates) else ""
            fact = ChatMessage.user(statement.format(v=answer) + suffix, id=f"{scenario}-fact-{k}")
            messages += [fact, ChatMessage.assistant("Noted, thank you.", id=f"{scenario}-ack-{k}")]
            questions.append(Question(scenario, question + suffix, answer, fact.id))
        messages += _buried(rng, scenario, buried)
        for batch in model_calls(seed + s_index, requests=filler_requests):
            messages.extend(m.model_copy(update={"id": f"{scenario}-{m.id}"}) for m in batch if m.role != "system")
        sessions.append(Session(scenario, messages, questions))
    return sessions


def _buried(rng: random.Random, scenario: str, tokens: int) -> list[ChatMessage]:
    """About ``tokens`` tokens of tool output: log searches whose results are long runs of log lines."""
    out: list[ChatMessage] = []
    spent, k = 0, 0
    while spent < tokens:
        lines = [
            f"2024-03-{rng.randint(1, 28):02d}T{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d} "
            f"{rng.choice(['INFO', 'WARN', 'DEBUG'])} worker-{rng.randint(1, 64)} "
            f"{rng.choice(WORDS)} {rng.choice(['retry', 'flush', 'sync', 'poll', 'ack'])} "
            f"id={rng.randint(10**6, 10**7)} took {rng.randint(1, 900)}ms"
            for _ in range(160)
        ]
        result = "\n".join(lines)
        call = ToolCallBlock(id=f"{scenario}-logs-{k}", name="search_logs", arguments={"query": f"batch {k}"})
        out += [
            ChatMessage.assistant(None, tool_calls=[call], id=f"{scenario}-logs-call-{k}"),
            ChatMessage.tool(call.id, result, id=f"{scenario}-logs-result-{k}"),
        ]
        spent += len(result) // 4
        k += 1
    return out


if __name__ == "__main__":
    data = build()
    for session in data:
        print(f"{session.scenario}: {len(session.messages)} messages, {len(session.questions)} questions")
    print(f"{sum(len(s.questions) for s in data)} questions in all")
