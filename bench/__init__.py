"""Benchmarks: each module runs one comparison and returns its raw numbers; see docs/benchmarks.md."""
