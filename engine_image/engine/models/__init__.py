"""The model classes; ``registry.model_class`` picks one by Hugging Face architecture name."""
