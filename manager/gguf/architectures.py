"""GGUF `general.architecture` names as the Hugging Face class names manifests match on."""

from __future__ import annotations

# NOTE: llama.cpp's names (convert_hf_to_gguf.py) for the families the manifests and the
# engine know; a GGUF of another family gets no architecture, so only its repo name can
# choose its manifest, as for a repo without config.json.
HF_ARCHITECTURES: dict[str, str] = {
    "llama": "LlamaForCausalLM",
    "mistral3": "Mistral3ForConditionalGeneration",
    "qwen2": "Qwen2ForCausalLM",
    "qwen2moe": "Qwen2MoeForCausalLM",
    "qwen3": "Qwen3ForCausalLM",
    "qwen3moe": "Qwen3MoeForCausalLM",
    "gemma2": "Gemma2ForCausalLM",
    "gemma3": "Gemma3ForCausalLM",
    "phi3": "Phi3ForCausalLM",
}


def hf_architecture(gguf_architecture: str) -> str | None:
    return HF_ARCHITECTURES.get(gguf_architecture)
