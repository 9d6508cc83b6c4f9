#!/usr/bin/env bash
# Fetches into .whl/ (git-ignored) the wheels bench/gpu_check.sh installs on a CUDA machine
# that has no network: what the engine, its HTTP server and the tests need beyond the torch,
# triton, transformers and numpy such a machine already has (Python 3.12, manylinux x86_64).
# The versions are the ones the check passed with on an H200 (2026-11-30).
#   bash bench/gpu_wheels.sh          # then carry .whl/ and .gpucheck/ with the tree
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=python3
if [ -x .venv/bin/python ]; then PYTHON=.venv/bin/python; fi
WHEELS=(
    annotated_doc==0.0.7 annotated_types==0.8.0 anyio==4.16.0 apache_tvm_ffi==0.1.15.post2
    attrs==26.1.0 fastapi==0.165.0 h11==0.16.0 httpcore2==2.16.2 httptools==0.9.0
    httpx2==2.16.2 idna==3.20 jiter==0.19.0 jsonschema==4.26.0
    jsonschema_specifications==2025.9.1 msgspec==0.23.0 ninja==1.13.2 openai==3.57.0
    opentelemetry_api==1.45.2 orjson==3.13.0 pydantic==2.14.4 pydantic_core==2.50.5
    pyzmq==27.3.0 referencing==0.37.0 rpds_py==2026.9.1 sniffio==1.3.1 starlette==1.10.0
    truststore==0.10.5 typing_extensions==4.16.0 typing_inspection==0.4.5 uvicorn==0.54.0
    xgrammar==0.2.9
)
PLATFORMS=()
for tag in manylinux_2_35 manylinux_2_34 manylinux_2_31 manylinux_2_28 manylinux_2_27 \
           manylinux_2_24 manylinux_2_17 manylinux2014 manylinux1; do
    PLATFORMS+=(--platform "${tag}_x86_64")
done
mkdir -p .whl
"$PYTHON" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp "${PLATFORMS[@]}" -d .whl "${WHEELS[@]}"
# NOTE: the tokenizer the GPU tests give their random-weight checkpoints (no Hub there).
STORE="${GOMGR_MODELS_DIR:-$HOME/.local/share/gomgr/models}/HuggingFaceTB/SmolLM2-135M-Instruct"
mkdir -p .gpucheck/tokenizer
cp "$STORE/tokenizer.json" "$STORE/tokenizer_config.json" .gpucheck/tokenizer/
echo "wheels in .whl/ ($(du -sh .whl | cut -f1)), tokenizer in .gpucheck/tokenizer/"
