"""All tests for this package."""
