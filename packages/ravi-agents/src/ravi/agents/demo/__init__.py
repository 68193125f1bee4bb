"""Bundled, generated agent conversations for the demo, the benchmarks and the tests."""

from ravi.agents.demo.transcripts import agentic_transcript, model_calls

__all__ = ["agentic_transcript", "model_calls"]
