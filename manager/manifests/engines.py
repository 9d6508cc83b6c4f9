"""The engine kinds a manifest can run, and the image each runs when a manifest names none."""

from __future__ import annotations

# NOTE: "gomgr" is the image built from engine_image/ (tagged locally, no registry needed);
# the upstream tags float on purpose: a user pins one with an override's `image`.
DEFAULT_IMAGES = {
    "gomgr": "gomgr-engine:latest",
    "sglang": "lmsysorg/sglang:latest",
    "vllm": "vllm/vllm-openai:latest",
}
