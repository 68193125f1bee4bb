"""Model clients: an offline extractive summariser (the default), an OpenAI-compatible HTTP client, and any model
function (plain, async or streaming) as a client."""

from ravi.agents.llm.extractive import ExtractiveSummarizer
from ravi.agents.llm.function import CallableLLMClient
from ravi.agents.llm.openai import OpenAICompatibleClient

__all__ = ["CallableLLMClient", "ExtractiveSummarizer", "OpenAICompatibleClient"]
