"""GGUF files as a model format: where the file is, its hyperparameters as a ModelConfig, its
weights as BlockTensors (kept in their block formats), and a Hugging Face view of its
metadata (config.json, tokenizer, chat template) for the processes that need one.

NOTE: imports nothing here, so ``engine.gguf.location`` stays cheap for the flag parser.
"""
