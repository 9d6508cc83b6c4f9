"""`gomgr start` on a model only vLLM serves: the vLLM manifest runs (said in one line), in a
container on the real daemon, with vLLM's flags.

The vLLM image itself cannot run here (a multi-GB CUDA image, no registry); an override
replaces it with a test image (named so) that records the arguments it was started with and
answers /health, so what the manager launched is checked, not what vLLM would do with it.
"""

from __future__ import annotations

import io
import json
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from docker import DockerClient
from safetensors.torch import save_file

from tests.docker.conftest import DockerEnv
from tests.docker.engine_image import BASE_IMAGE

pytestmark = [pytest.mark.slow, pytest.mark.docker]

RECORDER_IMAGE = "gomgr-test/args-recorder-standing-in-for-vllm:latest"
# NOTE: prints its argv as one JSON line, then answers every GET with 200 on --port.
RECORDER = """\
import http.server, json, sys
print("ARGS " + json.dumps(sys.argv[1:]), flush=True)
port = int(sys.argv[sys.argv.index("--port") + 1])
class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.send_header("Content-Length", "2"); self.end_headers()
        self.wfile.write(b"{}")
http.server.ThreadingHTTPServer(("0.0.0.0", port), Health).serve_forever()
"""
DOCKERFILE = f"""\
FROM {BASE_IMAGE}
COPY recorder.py /recorder.py
ENTRYPOINT ["python3", "/recorder.py"]
"""


@pytest.fixture(scope="module")
def recorder_image(docker_client: DockerClient) -> Iterator[str]:
    context = io.BytesIO()
    with tarfile.open(fileobj=context, mode="w") as tar:
        for name, text in (("Dockerfile", DOCKERFILE), ("recorder.py", RECORDER)):
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    context.seek(0)
    docker_client.images.build(fileobj=context, custom_context=True, tag=RECORDER_IMAGE, rm=True)
    yield RECORDER_IMAGE
    docker_client.images.remove(RECORDER_IMAGE, force=True)


def static_fp8_model(root: Path) -> Path:
    """An FP8 checkpoint with static activation scales: gomgr's engine serves dynamic ones only."""
    root.mkdir(parents=True)
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "quantization_config": {"quant_method": "fp8", "activation_scheme": "static"},
    }
    (root / "config.json").write_text(json.dumps(config))
    save_file({"lm_head.weight_scale": torch.ones(1)}, root / "model.safetensors")
    return root


def test_start_picks_vllm_for_a_static_fp8_model_and_says_why(
    docker_env: DockerEnv, recorder_image: str, tmp_path: Path
) -> None:
    overrides = Path(docker_env.vars["GOMGR_CONFIG_DIR"]) / "manifests"
    overrides.mkdir(parents=True, exist_ok=True)
    (overrides / "vllm-image.yaml").write_text(f"overrides: vllm-upstream\nimage: {recorder_image}\n")
    model = static_fp8_model(tmp_path / "Tiny-FP8")
    try:
        started = docker_env.start(str(model), "--timeout", "120")
        assert "engine: vllm (gomgr's engine does not serve fp8 with activation_scheme 'static')" in (
            started["stderr"]
        )
        assert f"runtime: docker (the engine runs only in a container; image {recorder_image}" in (
            started["stderr"]
        )
        [container] = docker_env.containers()
        recorded = [line for line in container.logs().decode().splitlines() if line.startswith("ARGS ")]
        args = json.loads(recorded[0].removeprefix("ARGS "))
        assert args[:4] == ["--model", "/model", "--served-model-name", "Tiny-FP8"]
        assert "--trust-remote-code" in args and "--model-path" not in args
        assert args[-4:] == ["--host", "0.0.0.0", "--port", "30000"]
    finally:
        docker_env.gomgr("stop", "--all")
    assert not docker_env.containers()
