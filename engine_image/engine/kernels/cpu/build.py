"""Compiles the CPU kernels with torch's C++ extension builder and caches the library.

The library is named after the vector ISA it is built for and a hash of its source and
flags, and lives in ``$TORCH_EXTENSIONS_DIR`` (default ``~/.cache/torch_extensions``), so a
machine compiles it once (~30 s on two cores) and every later engine start loads it in
milliseconds.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import Any

import torch

logger = logging.getLogger(__name__)

_HERE = Path(__file__).parent
SOURCES = tuple(
    _HERE / name
    for name in (
        "decode_attention.cpp", "linear.cpp", "rmsnorm.cpp", "rotary.cpp", "activation.cpp",
        "quantized_linear.cpp", "int8_activations.cpp", "quantized_avx2.cpp", "quantized_avx_vnni.cpp", "quantized_avx512.cpp",
        "quantized_amx.cpp", "decode_stack.cpp",
    )
)
# NOTE: hashed with the sources (a change rebuilds) but not compiled on their own.
HEADERS = (
    _HERE / "vec8.h", _HERE / "panel_kernels.h", _HERE / "group_quants_avx512.h", _HERE / "int_panel_avx2.h", _HERE / "quantized.h", _HERE / "cpu_ops.h",
)
# NOTE: compiled each on its own; the other sources, which include torch's headers, compile as
# one unit (a file of #includes written into the build directory). Those headers are ~5 CPU-s
# of every unit that includes them: eight units took ~70 CPU-s, one takes ~20. The ISA files
# include none (panel_kernels.h) and compile beside it (the two that compile int_panel_avx2.h
# for different targets must be units of their own).
_OWN_UNITS = frozenset({"quantized_avx2.cpp", "quantized_avx_vnni.cpp", "quantized_avx512.cpp", "quantized_amx.cpp"})
# NOTE: the head sizes decode_attention.cpp instantiates; other sizes use the torch path.
CPU_HEAD_DIMS = frozenset({16, 32, 64, 128, 256})
# NOTE: -fopenmp at compile time only: at::parallel_for's GOMP_parallel then resolves to the
# OpenMP runtime torch already loaded, so the kernel runs on torch's threads (one pool).
_OPTIMIZE = ["-O3", "-ffast-math", "-fopenmp"]
# NOTE: keyed by torch's own view of the CPU; a library built for AVX2 never loads on a
# machine without it (another name, so another build).
_ISA_FLAGS = {"AVX2": ["-mavx2", "-mfma"], "AVX512": ["-mavx2", "-mfma"]}


@cache
def load_cpu_kernels() -> Any | None:
    """The ``torch.ops.gomgr_cpu`` namespace, building the library first if needed; None
    (logged once, with the reason) when it cannot be built or loaded."""
    try:
        library = _library_path()
        if library.exists():
            torch.ops.load_library(str(library))
        else:
            _build_and_load(library)
    except Exception as err:  # noqa: BLE001 - any build failure means "use the torch path"
        logger.warning(
            "CPU kernels unavailable (%s: %s); decode attention, RMSNorm, SiLU and GGUF weights fall back to "
            "torch ops (slower). Install a C++ compiler (g++) to enable them.",
            type(err).__name__, str(err).splitlines()[0] if str(err) else "",
        )
        return None
    return torch.ops.gomgr_cpu


def _flags() -> list[str]:
    return _OPTIMIZE + _ISA_FLAGS.get(torch.backends.cpu.get_cpu_capability(), [])


def _library_path() -> Path:
    digest = hashlib.sha256()
    for source in SOURCES + HEADERS:
        digest.update(source.read_bytes())
    digest.update(" ".join(_flags()).encode())
    digest.update(torch.__version__.encode())
    isa = torch.backends.cpu.get_cpu_capability().lower()
    root = Path(os.environ.get("TORCH_EXTENSIONS_DIR") or Path.home() / ".cache" / "torch_extensions")
    return root / "gomgr" / f"gomgr_cpu_{isa}_{digest.hexdigest()[:16]}.so"


def _build_and_load(library: Path) -> None:
    """Compiles into a private directory, loads the result and moves it into place atomically.

    NOTE: torch's builder guards its build directory with a lock file that a killed process
    leaves behind, after which every later build waits forever; a private directory per
    build has no such file to inherit, and the flock here (released by the kernel when its
    holder dies) keeps concurrent engine starts from compiling twice.
    """
    from torch.utils.cpp_extension import load

    _put_ninja_on_path()
    library.parent.mkdir(parents=True, exist_ok=True)
    with _exclusive(library.with_suffix(".lock")):
        if library.exists():  # another engine built it while this one waited
            torch.ops.load_library(str(library))
            return
        logger.info("building the CPU kernels for this machine (once; about 30 s on two cores)")
        with tempfile.TemporaryDirectory(dir=library.parent) as build_dir:
            name = library.stem
            # NOTE: is_python_module=False makes torch load the built library (by path) into
            # this process, which is what registers torch.ops.gomgr_cpu.
            load(
                name=name, sources=[str(s) for s in _compile_units(Path(build_dir))], extra_cflags=_flags(),
                build_directory=build_dir, is_python_module=False,
            )
            tmp = Path(build_dir) / f"{name}.so"
            shutil.copy2(tmp, library.with_suffix(".tmp"))
            os.replace(library.with_suffix(".tmp"), library)


def _compile_units(build_dir: Path) -> list[Path]:
    """The sources that include torch's headers as one unity file in ``build_dir``, then the rest."""
    unity = build_dir / "gomgr_cpu_ops.cpp"
    unity.write_text("".join(f'#include "{s}"\n' for s in SOURCES if s.name not in _OWN_UNITS))
    return [unity, *(s for s in SOURCES if s.name in _OWN_UNITS)]


def _put_ninja_on_path() -> None:
    """torch's builder runs ``ninja`` from PATH; the ninja wheel's binary sits in the venv,
    which is not on PATH when the engine runs as ``.venv/bin/python -m ...``."""
    if shutil.which("ninja") is not None:
        return
    try:
        import ninja
    except ImportError:
        return
    os.environ["PATH"] = f"{ninja.BIN_DIR}{os.pathsep}{os.environ.get('PATH', '')}"


@contextmanager
def _exclusive(lock_path: Path) -> Iterator[None]:
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
