"""Tensor parallelism (``--tp-size N``): one scheduler (rank 0) driving N-1 worker processes."""
