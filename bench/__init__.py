"""Benchmarks: each module compares one part of ours with a peer; see docs/benchmarks.md."""
