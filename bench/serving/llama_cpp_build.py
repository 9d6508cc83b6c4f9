"""llama.cpp's own server and quantizer, built once from the llama.cpp source that the
llama-cpp-python sdist on PyPI vendors, into bench/.cache (no third-party code in git).

    python -m bench.serving.llama_cpp_build      (prints the two binaries; builds on first use)

`llama-server` is the fair peer for concurrent serving (continuous batching over `--parallel`
slots), which llama-cpp-python's Python server is not (one request at a time); `llama-quantize`
makes the GGUF files users download. `-march=native` (GGML_NATIVE), so the kernels match this CPU.
"""

from __future__ import annotations

import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path

from bench.serving.cpu_features import cpu_flags
from bench.serving.peer_venv import BENCH, PeerUnavailable

LLAMA_CPP_PYTHON_VERSION = "0.3.36"
CACHE = BENCH / ".cache"
SDIST_ROOT = CACHE / f"llama_cpp_python-{LLAMA_CPP_PYTHON_VERSION}"
BUILD = SDIST_ROOT / "build"
TARGETS = ("llama-server", "llama-quantize")
CONFIGURE_FLAGS = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DGGML_NATIVE=ON",
    "-DBUILD_SHARED_LIBS=OFF",
    "-DLLAMA_BUILD_SERVER=ON",
    "-DLLAMA_BUILD_TOOLS=ON",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_APP=OFF",
    # NOTE: no HTTPS client (the bench serves local files) and no web UI: with the prebuilt UI
    # on, the build downloads its assets from a Hugging Face bucket.
    "-DLLAMA_OPENSSL=OFF",
    "-DLLAMA_BUILD_UI=OFF",
    "-DLLAMA_USE_PREBUILT_UI=OFF",
)
# NOTE: llama.cpp's AMX matrix multiplication (ggml_backend_amx_mul_mat) dies of SIGSEGV while
# llama-server starts on SmolLM2's GGUFs (this version, a Xeon with AMX, 2026-12-03; gdb's
# backtrace): where the CPU has AMX it is compiled out, and llama.cpp runs its best path that
# works, the AVX-512 VNNI kernels with REPACK. GCC keeps an explicit -mno-* over -march=native.
NO_AMX = "-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
# NOTE: niced and 2 jobs: the build takes ~20 minutes on 2 shared cores and must not starve
# whatever else the machine runs.
NICE = ("nice", "-n", "10")
JOBS = "2"


@dataclass(frozen=True)
class LlamaCppTools:
    server: Path
    quantize: Path


def _run(command: list[str], what: str, log: Path) -> None:
    with log.open("ab") as out:
        done = subprocess.run(command, check=False, stdout=out, stderr=subprocess.STDOUT)
    if done.returncode != 0:
        tail = " | ".join(log.read_text(errors="replace").splitlines()[-6:])
        raise PeerUnavailable(f"{what} failed (exit {done.returncode}; log {log}): {tail}")


def _sdist_source() -> Path:
    """The vendored llama.cpp tree of the sdist, downloaded and extracted on first use."""
    source = SDIST_ROOT / "vendor" / "llama.cpp"
    if (source / "CMakeLists.txt").exists():
        return source
    CACHE.mkdir(exist_ok=True)
    (CACHE / ".gitignore").write_text("*\n")
    log = CACHE / "llama_cpp_build.log"
    spec = f"llama-cpp-python=={LLAMA_CPP_PYTHON_VERSION}"
    download = [sys.executable, "-m", "pip", "download", "--no-binary", ":all:", "--no-deps", spec]
    _run([*download, "-d", str(CACHE)], f"pip download {spec}", log)
    with tarfile.open(CACHE / f"{SDIST_ROOT.name}.tar.gz") as sdist:
        sdist.extractall(CACHE, filter="data")
    return source


def llama_cpp_tools() -> LlamaCppTools:
    """The built binaries; downloads and builds them on first use (raises PeerUnavailable)."""
    tools = LlamaCppTools(BUILD / "bin" / "llama-server", BUILD / "bin" / "llama-quantize")
    if tools.server.exists() and tools.quantize.exists():
        return tools
    source = _sdist_source()
    log = CACHE / "llama_cpp_build.log"
    print(
        f"  building {', '.join(TARGETS)} from {source} (first use; ~20 min; log {log})", flush=True
    )
    no_amx = (f"-DCMAKE_C_FLAGS={NO_AMX}", f"-DCMAKE_CXX_FLAGS={NO_AMX}") if "amx_int8" in cpu_flags() else ()
    _run(
        [*NICE, "cmake", "-S", str(source), "-B", str(BUILD), *CONFIGURE_FLAGS, *no_amx],
        "cmake configure",
        log,
    )
    build = ["cmake", "--build", str(BUILD), "-j", JOBS, "--target", *TARGETS]
    _run([*NICE, *build], "cmake build", log)
    return tools


if __name__ == "__main__":
    built = llama_cpp_tools()
    print(built.server, built.quantize, sep="\n")
