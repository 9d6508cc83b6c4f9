"""check_for_start and choose_runtime on this machine: no Docker daemon, no NVIDIA driver."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from manager.models.store import ModelStore
from manager.readiness.runtime import choose_runtime
from manager.readiness.start import check_for_start
from tests.manager.conftest import GOMGR


@pytest.fixture
def no_daemon(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    host = f"unix://{tmp_path}/no-dockerd.sock"
    monkeypatch.setenv("DOCKER_HOST", host)
    return host


def test_auto_chooses_process_with_a_reason(no_daemon: str, tmp_path: Path) -> None:
    report = check_for_start(None, None, "auto", None, None, store=ModelStore(tmp_path))
    runtime, reason = choose_runtime(report)
    assert runtime == "process"
    assert reason == f"no Docker daemon at {no_daemon}"
    assert report.runtime_hint == (runtime, reason)
    assert report.ready()  # blocked docker/gpu options do not block the process path


def test_explicit_docker_runtime_is_blocked(no_daemon: str, tmp_path: Path) -> None:
    report = check_for_start(None, None, "docker", None, None, store=ModelStore(tmp_path))
    assert not report.ready()
    blocking = {b.id for b in report.blocking("docker")}
    assert blocking & {"docker-daemon-unreachable", "docker-not-installed"}


def test_remote_repo_offline_warns_that_the_fit_is_unknown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    report = check_for_start(
        "meta-llama/Llama-3.1-8B", None, "process", None, 8192, store=ModelStore(tmp_path)
    )
    (unknown,) = [b for b in report.blockers if b.id == "vram-fit-unknown"]
    assert unknown.severity == "warns" and unknown.blocks == ()
    assert any("gated" in note for note in report.notes)
    assert report.ready()


def doctor(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # NOTE: wide enough that rich does not wrap the socket path inside a banner.
    env = {**os.environ, "GOMGR_MODELS_DIR": str(tmp_path / "store"), "COLUMNS": "200"}
    return subprocess.run(
        [str(GOMGR), "doctor", *args],
        capture_output=True, text=True, timeout=60, check=False, env=env,
    )


def test_doctor_json_shows_the_docker_blocker(no_daemon: str, tmp_path: Path) -> None:
    result = doctor(tmp_path, "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    (docker,) = [b for b in report["blockers"] if b["id"].startswith("docker-")]
    assert no_daemon in docker["title"] + docker["explanation"]
    assert report["runtime"] == "process"
    assert report["runtime_reason"] == f"no Docker daemon at {no_daemon}"


def test_doctor_exits_1_when_the_asked_runtime_is_blocked(no_daemon: str, tmp_path: Path) -> None:
    result = doctor(tmp_path, "--runtime", "docker")
    assert result.returncode == 1
    assert no_daemon in result.stdout
    assert "1. " in result.stdout  # the banner's numbered fix steps
