"""Models: resolve a Hugging Face repo id to a local safetensors directory in the store."""
