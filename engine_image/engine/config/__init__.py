"""Typed views of a model directory's Hugging Face configuration."""

from engine.config.model_config import ModelConfig, RopeConfig, UnsupportedModelError

__all__ = ["ModelConfig", "RopeConfig", "UnsupportedModelError"]
