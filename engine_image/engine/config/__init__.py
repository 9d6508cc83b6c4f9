"""Typed views of a model directory's Hugging Face configuration, and the architectures table."""
