"""Model architectures the engine runs, looked up by Hugging Face architecture name."""

from engine.models.registry import SUPPORTED_ARCHITECTURES, model_class, supported_architecture

__all__ = ["SUPPORTED_ARCHITECTURES", "model_class", "supported_architecture"]
