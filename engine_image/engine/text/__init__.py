"""Text ↔ token ids: the engine's own tokenizer (chat templates included), and finding and
trimming stop strings.

Shared by the offline ``Engine``, the scheduler, the detokenizer and the server.
"""
