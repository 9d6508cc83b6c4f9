#!/usr/bin/env bash
# The GPU path benchmark (bench/gpu_bench.py): decode tok/s at batch 1, 32 and 128 against
# the HBM roofline, prefill tok/s, time to ready with and without CUDA graphs, and the Triton
# attention kernels against torch SDPA, on random-weight models with Llama-3-8B's and
# Qwen2.5-0.5B's shapes. Needs a CUDA device; exits 2 without one.
#   bash bench/gpu.sh [--shapes 8b,0.5b] [--batch-sizes 1,32,128] [--prompt-len 256] [--decode-steps 128]
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=python3
if [ -x .venv/bin/python ]; then PYTHON=.venv/bin/python; fi
exec "$PYTHON" -m bench.gpu_bench --out bench/results/gpu.json "$@"
