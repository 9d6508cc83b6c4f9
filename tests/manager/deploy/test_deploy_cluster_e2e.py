"""`gomgr deploy render --apply` on a real cluster: SmolLM2 on the CPU behind the router,
answering a chat through the router's Service.

Runs where a cluster is reachable: `kubectl` on PATH and a current context whose API server
answers. The cluster must be able to run the images: GOMGR_E2E_ENGINE_IMAGE (gomgr's engine,
CPU build; default gomgr-engine:latest) and GOMGR_E2E_GOMGR_IMAGE (gomgr itself, for the
router and the model pull; default gomgr:latest), e.g. loaded with `kind load docker-image`
(docs/scale-out.md), and the pull needs the Hugging Face hub.
Everything lives in a namespace of its own, deleted at the end.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.engine_process import free_port

GOMGR = Path(sys.executable).parent / "gomgr"
ROLLOUT_TIMEOUT = "900s"


def _no_cluster_reason() -> str | None:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        return "no cluster: kubectl is not on PATH"
    context = subprocess.run(
        [kubectl, "config", "current-context"], capture_output=True, text=True, check=False
    )
    if context.returncode != 0:
        return "no cluster: kubectl has no current context"
    answer = subprocess.run(
        [kubectl, "version", "--request-timeout=5s"], capture_output=True, text=True, check=False
    )
    if answer.returncode != 0:
        return f"no cluster: context {context.stdout.strip()!r} does not answer"
    return None


NO_CLUSTER = _no_cluster_reason()
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(NO_CLUSTER is not None, reason=NO_CLUSTER or ""),
]


def kubectl(*args: str, timeout_s: float = 60) -> str:
    done = subprocess.run(
        ["kubectl", *args], capture_output=True, text=True, timeout=timeout_s, check=False
    )
    assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stderr}"
    return done.stdout


@pytest.fixture
def namespace() -> Iterator[str]:
    name = f"gomgr-e2e-{os.getpid()}"
    kubectl("create", "namespace", name)
    yield name
    kubectl("delete", "namespace", name, "--wait=false")


def test_smollm2_answers_through_the_router_service(namespace: str, tmp_path: Path) -> None:
    engines = tmp_path / "engines.yaml"
    engines.write_text(
        "engines:\n  - repo: HuggingFaceTB/SmolLM2-135M-Instruct\n    name: smollm2\n    gpus: 0\n"
    )
    env = {**os.environ, "GOMGR_CONFIG_DIR": str(tmp_path / "config")}
    done = subprocess.run(
        [str(GOMGR), "deploy", "render", "-f", str(engines), "-n", namespace, "--apply",
         "--engine-image", os.environ.get("GOMGR_E2E_ENGINE_IMAGE", "gomgr-engine:latest"),
         "--gomgr-image", os.environ.get("GOMGR_E2E_GOMGR_IMAGE", "gomgr:latest")],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )
    assert done.returncode == 0, done.stderr
    for deployment in ("gomgr-smollm2", "gomgr-router"):
        kubectl("-n", namespace, "rollout", "status", f"deployment/{deployment}",
                f"--timeout={ROLLOUT_TIMEOUT}", timeout_s=960)
    port = free_port()
    forward = subprocess.Popen(
        ["kubectl", "-n", namespace, "port-forward", "service/gomgr-router", f"{port}:8000"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                models = httpx.get(f"{url}/v1/models", timeout=5).json()
                if [m["id"] for m in models["data"]] == ["smollm2"]:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "the router's Service did not list smollm2"
            time.sleep(1)
        reply = httpx.post(
            f"{url}/v1/chat/completions", timeout=120,
            json={"model": "smollm2", "max_tokens": 8, "temperature": 0,
                  "messages": [{"role": "user", "content": "Say hi."}]},
        )
        assert reply.status_code == 200, reply.text
        assert reply.json()["choices"][0]["message"]["content"]
    finally:
        forward.terminate()
        forward.wait(10)
