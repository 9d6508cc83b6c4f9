"""C++ kernels for the CPU path, compiled once per machine on first use.

NOTE: a C++ compiler is optional. ``load_cpu_kernels`` returns None when the kernels cannot
be built or loaded (no compiler, an unwritable cache), and callers fall back to torch ops.
"""

from engine.kernels.cpu.build import CPU_HEAD_DIMS, load_cpu_kernels

__all__ = ["CPU_HEAD_DIMS", "load_cpu_kernels"]
