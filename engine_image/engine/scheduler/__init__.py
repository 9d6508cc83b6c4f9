"""Continuous batching: requests, admission under a KV budget, and the scheduling loop."""
