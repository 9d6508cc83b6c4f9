"""GGUF files as the manager sees them: the header's metadata (local or over HTTP range reads),
the model facts readiness sizes a model by, and the quantization tags of a repo's files."""
