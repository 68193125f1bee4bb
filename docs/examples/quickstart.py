"""Quickstart: keep a conversation, send the model a window that fits."""

import asyncio

from ravi.agents.context import (
    AgentContext,
    ChatMessage,
    ContextConfig,
    InMemoryHistoryProvider,
    TokenBudgetComposedStrategy,
    ToolResultCompactionStrategy,
)


async def main() -> list[ChatMessage]:
    config = ContextConfig(
        InMemoryHistoryProvider(),  # swap for Postgres or Redis by configuration
        [ToolResultCompactionStrategy(max_chars=500), TokenBudgetComposedStrategy.from_model("gpt-4o")],
    )
    context = AgentContext(config, agent_id="support-bot")
    async with context.run("session-42") as run:
        await run.add(ChatMessage.system("You are a helpful support agent."))
        await run.add(ChatMessage.user("My invoice INV-2291 shows the wrong amount."))
        window = await run.window()  # what to send to the model now
        await run.add(ChatMessage.assistant("Let me look that up."))  # the model's reply joins the transcript
    return window


if __name__ == "__main__":
    for message in asyncio.run(main()):
        print(f"{message.role}: {message.text}")
