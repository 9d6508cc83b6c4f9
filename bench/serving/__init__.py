"""Serving benchmark: a load generator against OpenAI-compatible servers, ours and peers."""
