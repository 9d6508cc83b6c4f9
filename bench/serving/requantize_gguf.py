"""Rewrites a GGUF with every tensor in F32, through llama.cpp's own quantizer.

    <llama.cpp venv>/bin/python bench/serving/requantize_gguf.py IN.gguf OUT.gguf

Runs in the llama-cpp-python venv (it imports only llama_cpp). Dequantizing the Q4_1 file
gives exactly the weights of the converted safetensors model, so llama.cpp then runs at the
precision of the other systems (fp32).
"""

from __future__ import annotations

import ctypes
import sys

import llama_cpp


def requantize_f32(source: str, target: str) -> None:
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = llama_cpp.LLAMA_FTYPE_ALL_F32
    params.allow_requantize = True
    status = llama_cpp.llama_model_quantize(source.encode(), target.encode(), ctypes.byref(params))
    if status != 0:
        raise SystemExit(f"llama_model_quantize returned {status}")


if __name__ == "__main__":
    requantize_f32(sys.argv[1], sys.argv[2])
