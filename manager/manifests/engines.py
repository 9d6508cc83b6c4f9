"""The engine kinds a manifest can run, and the image each runs when a manifest names none."""

from __future__ import annotations

# NOTE: "gomgr" is the image built from engine_image/ (tagged locally, no registry needed);
# the upstream tags float on purpose: a user pins one with an override's `image`.
DEFAULT_IMAGES = {
    "gomgr": "gomgr-engine:latest",
    "sglang": "lmsysorg/sglang:latest",
    "vllm": "vllm/vllm-openai:latest",
}

# NOTE: the command a container of each engine runs before the flags, where the image's own
# entrypoint is not the server: ours and vLLM's are; the SGLang image's is a shell.
CONTAINER_ENTRYPOINTS: dict[str, tuple[str, ...]] = {
    "sglang": ("python3", "-m", "sglang.launch_server"),
}

# NOTE: the engines a local process can run; the sglang and vllm images need the docker
# runtime, so `--runtime auto` means docker for them.
PROCESS_ENGINES = frozenset({"gomgr"})
