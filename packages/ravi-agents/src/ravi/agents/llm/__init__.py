"""Model clients: an offline extractive summariser (the default) and an OpenAI-compatible HTTP client."""

from ravi.agents.llm.extractive import ExtractiveSummarizer
from ravi.agents.llm.openai import OpenAICompatibleClient

__all__ = ["ExtractiveSummarizer", "OpenAICompatibleClient"]
