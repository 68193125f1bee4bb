"""Quickstart: keep a conversation, send the model a window that fits.

The code names no store: ``ContextConfig.from_settings()`` reads ``ravi.toml`` or ``RAVI_*`` variables, and with
neither keeps everything in memory. Moving to Postgres is configuration, never a change here.
"""

import asyncio

from ravi.agents.context import AgentContext, ChatMessage, ContextConfig


async def main() -> list[ChatMessage]:
    async with ContextConfig.from_settings() as config:  # closes the stores it opened
        context = AgentContext(config, agent_id="support-bot")
        async with context.run("session-42") as run:
            if await config.history.count_messages(context.agent_id, session_id="session-42") == 0:  # a new session
                await run.add(ChatMessage.system("You are a helpful support agent."))
            await run.add(ChatMessage.user("My invoice INV-2291 shows the wrong amount."))
            window = await run.window()  # what to send to the model now
            await run.add(ChatMessage.assistant("Let me look that up."))  # the reply joins the transcript
        print(f"history: {type(config.history).__name__}")
    return window


if __name__ == "__main__":
    for message in asyncio.run(main()):
        print(f"{message.role}: {message.text}")
