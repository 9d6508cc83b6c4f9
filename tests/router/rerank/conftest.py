"""The engine tests' tiny random-weight BERT cross-encoder and its real engine server, reused."""

# NOTE: imported so pytest registers these session fixtures here as well; one definition.
from tests.engine.rerank.conftest import (  # noqa: F401
    bert_rerank_server,
    bert_reranker_dir,
    wordpiece_dir,
)
