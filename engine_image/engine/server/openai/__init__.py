"""The OpenAI-compatible surface: /v1/models, /v1/chat/completions, /v1/completions."""
