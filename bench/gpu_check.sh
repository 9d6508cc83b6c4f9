#!/usr/bin/env bash
# The GPU check: the one command to run on a CUDA machine, even one without network access,
# from a copy of the working tree that carries two ignored folders along:
#   .whl/                 wheels (cp312, manylinux x86_64) of what the engine, its HTTP server
#                         and the tests need beyond torch, triton, transformers and numpy;
#                         installed with --target into a scratch folder, never over the machine's
#   .gpucheck/tokenizer/  SmolLM2's tokenizer.json and tokenizer_config.json (no download)
# (bench/gpu_wheels.sh fetches both, on a machine with PyPI and the model store.)
# Steps, each under a time limit, each one's output in $OUT/<step>.log:
#   kernels    pytest tests/engine/kernels   (the Triton kernels, compiled on the GPU)
#   bench      python -m bench.gpu_bench     (Llama-3-8B and Qwen2.5-0.5B shapes: decode against
#                                            the roofline, time to ready with and without CUDA
#                                            graphs, kernel timings; JSON in $OUT/gpu.json)
#   gpu_tests  pytest tests/engine/gpu       (the CUDA path inside the engine)
# The bench runs before the engine-on-GPU tests so the measurement is taken even when the
# tests run long; the tests get what is left of the budget.
# It keeps going past a failed step and ends with one line per step (exit status, seconds) and
# the bench's compact summary (its `bench:` lines), also in $OUT/summary.txt; it exits 0 only
# when every step passed.
#   bash bench/gpu_check.sh
# Environment: OUT (default /tmp/gpu-check); GPU_CHECK_BUDGET, seconds for all steps together
# (default 330, so that two runs and two machine starts fit a 15-minute device lease; a step's
# limit shrinks to what is left); GPU_CHECK_SKIP_INSTALL=1 uses the environment as it is (no
# wheels); GPU_CHECK_SKIP_KERNELS=1 skips the kernel tests; GPU_CHECK_SHAPES, the bench's
# --shapes (default 8b,0.5b).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-/tmp/gpu-check}"
BUDGET="${GPU_CHECK_BUDGET:-330}"
SITE=/tmp/site
mkdir -p "$OUT"
PYTHON=python3
if [ -x .venv/bin/python ]; then PYTHON=.venv/bin/python; fi

SUMMARY=()
FAILED=0

# step NAME LIMIT CMD...: runs CMD under `timeout`, its output shown and kept in $OUT/NAME.log.
step() {
    local name=$1 limit=$2 left rc start=$SECONDS
    shift 2
    left=$((BUDGET - SECONDS - 10))
    if [ "$left" -lt 30 ]; then
        SUMMARY+=("$(printf '%-10s skipped: %ss of the %ss budget left' "$name" "$left" "$BUDGET")")
        FAILED=1
        return
    fi
    if [ "$left" -lt "$limit" ]; then limit=$left; fi
    echo "=== $name (limit ${limit}s): $*"
    timeout --kill-after=10 "$limit" "$@" 2>&1 | tee "$OUT/$name.log"
    rc=${PIPESTATUS[0]}
    SUMMARY+=("$(printf '%-10s rc=%-3s %4ss' "$name" "$rc" "$((SECONDS - start))")")
    if [ "$rc" != 0 ]; then FAILED=1; fi
}

if [ -d .whl ] && [ "${GPU_CHECK_SKIP_INSTALL:-0}" != 1 ]; then
    step install 60 "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
        --upgrade --target "$SITE" .whl/*.whl
    # NOTE: PYTHONPATH puts the wheels ahead of the machine's site-packages; its bin/ holds
    # ninja, which torch's C++ extension builder runs from PATH (the CPU kernel tests).
    export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
    export PATH="$SITE/bin:$PATH"
fi
# NOTE: the project is not installed here: `engine` lives in engine_image/, and manager,
# router, bench and tests at the root.
export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}$PWD/engine_image:$PWD"
# NOTE: nothing here needs the Hub (random-weight checkpoints, a local tokenizer); offline, a
# stray lookup fails at once instead of waiting on a network that is not there.
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
# NOTE: tvm-ffi (under xgrammar) otherwise JIT-builds an optional torch DLPack addon with the
# CUDA compiler on first import when torch lacks the exchange API: minutes, for a speed-up
# that structured output on a tiny model does not need.
export TVM_FFI_DISABLE_TORCH_C_DLPACK=1

ENV_REPORT=$(cat <<'EOF'
import shutil
import subprocess
import sys
from importlib import metadata

import torch

if shutil.which("nvidia-smi"):
    subprocess.run(["nvidia-smi", "-L"], check=False)
else:
    print("nvidia-smi: not found")
print("python", sys.version.split()[0], "CUDA", torch.version.cuda, flush=True)
if torch.cuda.is_available():
    print(torch.cuda.get_device_name(0), "capability", torch.cuda.get_device_capability(0))
else:
    print("torch sees no CUDA device")
for name in ("torch", "triton", "transformers", "xgrammar", "pydantic", "fastapi", "openai"):
    try:
        print(name, metadata.version(name))
    except metadata.PackageNotFoundError:
        print(name, "not installed")
import engine.engine, engine.launch_server, engine.server.http_server  # noqa: E401
import jsonschema, openai, xgrammar  # noqa: E401

print("the engine, its HTTP server, xgrammar, jsonschema and openai import")
EOF
)
step env 45 "$PYTHON" -c "$ENV_REPORT"

if [ "${GPU_CHECK_SKIP_KERNELS:-0}" != 1 ]; then
    # NOTE: per-test timeouts below the step's, so a hung kernel costs one test, not the step;
    # -v names every test as it finishes, which survives a step that runs out of time.
    # NOTE: -m "not slow" drops the CPU kernel's build-robustness test (a compile killed and
    # two concurrent ones): it says nothing about the GPU; its kernel tests still run here.
    step kernels 120 "$PYTHON" -m pytest tests/engine/kernels -v -p no:cacheprovider \
        --timeout=90 --durations=10 -m "not slow"
fi
# NOTE: estimated at 1.5-2 min (both shapes, kernel rows, Triton compiles on a fresh machine;
# not yet measured). It rewrites $OUT/gpu.json after each shape, so a run cut short keeps the
# shapes it finished.
step bench 180 "$PYTHON" -m bench.gpu_bench --out "$OUT/gpu.json" --shapes "${GPU_CHECK_SHAPES:-8b,0.5b}" \
    --batch-sizes 1,32,128 --prompt-len 256 --decode-steps 128
# NOTE: --maxfail=3, not -x: which of the engine's switches still agree after a first failure
# is what locates a bug, and one run of this script may be all a GPU allows.
step gpu_tests 180 env GOMGR_TEST_TOKENIZER_DIR="$PWD/.gpucheck/tokenizer" \
    "$PYTHON" -m pytest tests/engine/gpu -v -p no:cacheprovider --maxfail=3 --durations=10

echo "=== summary (${SECONDS}s in all)" | tee "$OUT/summary.txt"
printf '%s\n' "${SUMMARY[@]}" | tee -a "$OUT/summary.txt"
if [ -f "$OUT/bench.log" ]; then grep '^bench: ' "$OUT/bench.log" | awk '!seen[$0]++' | tee -a "$OUT/summary.txt"; fi
exit "$FAILED"
