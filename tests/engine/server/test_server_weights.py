"""/update_weights_from_disk: a copy of the checkpoint loads; a wrong path fails cleanly."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

pytestmark = pytest.mark.slow


def test_update_weights_from_copy(
    client: httpx.Client,
    smollm2_dir: Path,
    tmp_path: Path,
    generate_france: Callable[[httpx.Client], dict[str, Any]],
    server_info: Callable[[httpx.Client], dict[str, Any]],
) -> None:
    copy = tmp_path / "smollm2-copy"
    shutil.copytree(smollm2_dir, copy)
    before = client.get("/get_model_info").json()
    reply = client.post("/update_weights_from_disk", json={"model_path": str(copy)})
    assert reply.status_code == 200, reply.text
    assert reply.json() == {"success": True, "message": "Succeeded to update model weights."}
    after = client.get("/get_model_info").json()
    assert after["weight_version"] > before["weight_version"]
    assert after["model_path"] == str(copy) != before["model_path"]
    assert server_info(client)["model_path"] == str(copy)
    generate_france(client)


def test_update_weights_wrong_path(
    client: httpx.Client,
    tmp_path: Path,
    generate_france: Callable[[httpx.Client], dict[str, Any]],
) -> None:
    missing = tmp_path / "no-such-model"
    before = client.get("/get_model_info").json()
    reply = client.post("/update_weights_from_disk", json={"model_path": str(missing)})
    assert reply.status_code == 400
    assert reply.json() == {
        "success": False,
        "message": (
            f"Failed to update weights: {missing} has no config.json: not a Hugging Face model "
            "directory. The old weights keep serving."
        ),
    }
    after = client.get("/get_model_info").json()
    assert after["weight_version"] == before["weight_version"]
    assert after["model_path"] == before["model_path"]
    generate_france(client)
