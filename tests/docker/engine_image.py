"""Build the CPU engine image once per machine state: the real `gomgr image build`.

NOTE: a lock file serialises builds, so CI's background provisioning (tests/support/
provision.py) and the session fixture never build at once; the later one finds Docker's
layer cache warm and takes seconds.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from pathlib import Path

import torch

GOMGR = Path(sys.executable).parent / "gomgr"
BASE_IMAGE = os.environ.get("GOMGR_BASE_IMAGE", "gomgr-base/python:3.11-bookworm")
# NOTE: where this machine kind keeps the CPU torch wheel pip installs from (pip's
# find-links); $GOMGR_TORCH_WHEEL names another.
WHEEL_DIR = Path("/opt/wheels")
LOCK = Path("/tmp/gomgr-engine-image-build.lock")
BUILD_TIMEOUT_S = 1800


def cpu_torch_wheel() -> Path | None:
    if explicit := os.environ.get("GOMGR_TORCH_WHEEL"):
        return Path(explicit)
    found = sorted(WHEEL_DIR.glob(f"torch-{torch.__version__}-cp3{sys.version_info.minor}-*.whl"))
    return found[0] if found else None


def build_cpu_engine_image() -> subprocess.CompletedProcess[str]:
    args = ["image", "build", "--cpu", "--quiet", "--base", BASE_IMAGE]
    if wheel := cpu_torch_wheel():
        args += ["--torch-wheel", str(wheel)]
    with open(LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return subprocess.run(
            [str(GOMGR), *args], capture_output=True, text=True, timeout=BUILD_TIMEOUT_S,
            check=False,
        )

