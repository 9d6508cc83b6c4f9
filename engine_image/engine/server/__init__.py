"""The engine server: launch, process supervision, TokenizerManager and the HTTP API."""
