"""`gomgr deploy render --apply`: the rendered files handed to `kubectl apply -f`."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from manager.deploy.errors import DeployError


def kubectl_path() -> str:
    """kubectl's path, or DeployError: checked before anything is rendered or written."""
    found = shutil.which("kubectl")
    if found is None:
        raise DeployError(
            "kubectl is not on PATH: install it (https://kubernetes.io/docs/tasks/tools/), "
            "or render with -o DIR and apply the files yourself"
        )
    return found


def kubectl_apply(kubectl: str, directory: Path) -> None:
    """`kubectl apply -f DIR`, its output passed through; DeployError where it fails."""
    done = subprocess.run([kubectl, "apply", "-f", str(directory)], check=False)
    if done.returncode != 0:
        # NOTE: no path: without -o the files were in a temporary directory, gone by now.
        raise DeployError(
            f"kubectl apply failed (exit {done.returncode}); its own message is above"
        )
