"""What the chat-UI tests need outside the project's venv, installed on first use.

Open WebUI goes into its own venv (2.9 GB; it pins its own FastAPI, pydantic, ...), cached
across runs and sessions; Debian's chromium comes from apt. Each is a plain
`Unavailable` with the reason when it cannot be had here.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from collections import deque
from pathlib import Path
from typing import BinaryIO

OPEN_WEBUI = "open-webui==0.12.4"  # NOTE: the version whose page selectors chat_page.py uses
# NOTE: this exact pin resolves to the local CPU wheel; open-webui alone pulls a CUDA build.
TORCH = "torch==2.13.0"
VENV_ENV = "GOMGR_WEBUI_VENV"
DEFAULT_VENV = Path.home() / ".cache" / "gomgr-test" / "open-webui-venv"
CHROMIUM = Path("/usr/bin/chromium")
INSTALL_TIMEOUT_S = 1800


class Unavailable(Exception):
    """A requirement that cannot be installed on this machine; the message says why."""


def open_webui_venv() -> Path:
    """The cached venv with OPEN_WEBUI, created on first use; its `open-webui` executable.

    NOTE: a stamp marks a finished install, so an interrupted one is redone, not trusted;
    the lock makes concurrent sessions wait for one install instead of racing.
    """
    venv = Path(os.environ.get(VENV_ENV) or DEFAULT_VENV)
    stamp = venv / f".installed-{OPEN_WEBUI}"
    executable = venv / "bin" / "open-webui"
    if stamp.exists():
        return executable
    venv.parent.mkdir(parents=True, exist_ok=True)
    log_path = venv.parent / f"{venv.name}.install.log"
    with open(venv.parent / f"{venv.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if stamp.exists():
            return executable
        shutil.rmtree(venv, ignore_errors=True)
        pip = str(venv / "bin" / "pip")
        with open(log_path, "wb") as log:
            for command in (
                [sys.executable, "-m", "venv", str(venv)],
                [pip, "install", "--upgrade", "pip"],
                [pip, "install", TORCH],
                [pip, "install", OPEN_WEBUI],
            ):
                _run(command, log, log_path)
        stamp.touch()
    return executable


def chromium() -> Path:
    """Debian's chromium, installed with apt when missing and this process is root."""
    if CHROMIUM.exists():
        return CHROMIUM
    if os.geteuid() != 0:
        raise Unavailable(f"{CHROMIUM} is missing; install it with `sudo apt-get install -y chromium`")
    log_path = Path("/tmp") / "gomgr-test-chromium-install.log"
    # NOTE: the lock makes a second caller (CI's background provisioning) wait for the
    # install instead of failing on dpkg's own lock.
    with open(Path("/tmp") / "gomgr-test-chromium-install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if CHROMIUM.exists():
            return CHROMIUM
        with open(log_path, "wb") as log:
            env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
            _run(["apt-get", "update", "-q"], log, log_path, env)
            _run(["apt-get", "install", "-y", "-q", "chromium"], log, log_path, env)
    return CHROMIUM


def _run(
    command: list[str], log: BinaryIO, log_path: Path, env: dict[str, str] | None = None
) -> None:
    try:
        result = subprocess.run(
            command, stdout=log, stderr=subprocess.STDOUT, env=env, timeout=INSTALL_TIMEOUT_S,
            check=False,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise Unavailable(f"`{' '.join(command)}` failed: {exc}") from exc
    if result.returncode != 0:
        with open(log_path, errors="replace") as f:
            tail = "".join(deque(f, maxlen=15))
        raise Unavailable(f"`{' '.join(command)}` exited with {result.returncode}:\n{tail}")
