"""What every route of one server shares: args, tokenizer, the TokenizerManager, readiness."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.ipc.messages import WeightsUpdated
from engine.server.server_args import ServerArgs
from engine.server.tokenizer_manager import TokenizerManager
from engine.text.tokenizer import TextTokenizer


@dataclass
class ServerContext:
    args: ServerArgs
    tokenizer: TextTokenizer
    tokenizer_manager: TokenizerManager
    hf_config: dict[str, Any]  # the served model's config.json
    context_length: int
    max_total_tokens: int
    model_path: str
    is_embedding: bool = False  # an embedding model: /encode and /v1/embeddings, no generation
    weight_version: int = 1
    ready: bool = False  # set once every tokenizer worker's warm-up generate is done
    shutting_down: bool = False

    def weights_updated(self, update: WeightsUpdated) -> None:
        self.weight_version = update.weight_version
        self.model_path = update.model_path
