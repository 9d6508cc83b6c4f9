"""Where the docker runtime runs an engine: a local daemon (a unix socket) publishes it on
loopback without a key; a remote one (tcp://, ssh://, or a docker context naming one)
publishes it on its host's interfaces with a key, and mounts the model from that host's
store. No daemon is needed: these are the run spec and the address rules alone; the real
remote daemon is tests/docker/test_docker_remote_daemon.py."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from manager.readiness.memory import MemoryEstimate
from manager.readiness.remote_daemon import remote_daemon_facts
from manager.runtimes.base import ContainerSpec, EngineSpec, RuntimeStartError
from manager.runtimes.docker import DockerRuntime
from manager.runtimes.docker_host import docker_host, remote_engine_host
from manager.state.paths import StatePaths

GIB = 1024**3


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("DOCKER_HOST", "DOCKER_CONTEXT", "GOMGR_ENGINE_HOST", "GOMGR_REMOTE_MODELS_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path / "docker-config"))
    monkeypatch.setenv("GOMGR_MODELS_DIR", str(tmp_path / "store"))
    (tmp_path / "store" / "org" / "Tiny").mkdir(parents=True)
    return tmp_path / "store"


def _spec(store: Path) -> EngineSpec:
    return EngineSpec(
        id="tiny-1", repo="org/Tiny", model_dir=store / "org" / "Tiny", served_name="Tiny",
        port=31000, engine_args=("--model-path", "/model"), container=ContainerSpec("engine:cpu"),
    )


@pytest.mark.parametrize(
    ("address", "engine_host"),
    [
        ("unix:///var/run/docker.sock", None),
        ("tcp://10.1.2.3:2376", "10.1.2.3"),
        ("ssh://ops@gpu-box", "gpu-box"),
    ],
)
def test_the_daemon_address_says_where_engines_are_reached(
    store: Path, monkeypatch: pytest.MonkeyPatch, address: str, engine_host: str | None
) -> None:
    monkeypatch.setenv("DOCKER_HOST", address)
    assert remote_engine_host() == engine_host
    monkeypatch.setenv("GOMGR_ENGINE_HOST", "gpu-box.example.net")  # NOTE: behind NAT
    assert remote_engine_host() == (None if engine_host is None else "gpu-box.example.net")


def test_a_docker_context_names_the_daemon_where_docker_host_is_unset(
    store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "docker-config"
    meta = config / "contexts" / "meta" / hashlib.sha256(b"gpu-box").hexdigest()
    meta.mkdir(parents=True)
    (meta / "meta.json").write_text(json.dumps(
        {"Name": "gpu-box", "Endpoints": {"docker": {"Host": "ssh://ops@gpu-box"}}}
    ))  # fmt: skip
    (config / "config.json").write_text(json.dumps({"currentContext": "gpu-box"}))
    assert (docker_host(), remote_engine_host()) == ("ssh://ops@gpu-box", "gpu-box")
    monkeypatch.setenv("DOCKER_CONTEXT", "default")
    assert remote_engine_host() is None
    monkeypatch.delenv("DOCKER_CONTEXT")
    monkeypatch.setenv("DOCKER_HOST", "unix:///run/docker.sock")  # NOTE: as the CLI: it wins
    assert remote_engine_host() is None


def test_a_local_daemon_publishes_on_loopback_without_a_key(store: Path, tmp_path: Path) -> None:
    runtime = DockerRuntime(StatePaths(tmp_path / "state"))
    spec = runtime.place(_spec(store))
    assert spec == _spec(store)
    kwargs = runtime.create_kwargs(spec)
    assert kwargs["ports"] == {"30000/tcp": ("127.0.0.1", 31000)}
    assert "--api-key" not in kwargs["command"]  # type: ignore[operator]
    assert kwargs["mounts"][0]["Source"] == str(store / "org" / "Tiny")  # type: ignore[index]


def test_a_remote_daemon_publishes_beyond_loopback_with_a_key_and_the_remote_store(
    store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOCKER_HOST", "tcp://10.1.2.3:2376")
    monkeypatch.setenv("GOMGR_REMOTE_MODELS_DIR", "/srv/gomgr/models")
    runtime = DockerRuntime(StatePaths(tmp_path / "state"))
    spec = runtime.place(_spec(store))
    assert spec.base_url == "http://10.1.2.3:31000" and spec.api_key and len(spec.api_key) >= 32
    assert spec.auth_headers == {"authorization": f"Bearer {spec.api_key}"}
    assert runtime.place(_spec(store)).api_key != spec.api_key  # NOTE: one per engine
    kwargs = runtime.create_kwargs(spec)
    assert kwargs["ports"] == {"30000/tcp": ("0.0.0.0", 31000)}
    assert kwargs["command"][-6:] == [  # type: ignore[index]
        "--api-key", spec.api_key, "--host", "0.0.0.0", "--port", "30000",
    ]  # fmt: skip
    assert kwargs["mounts"][0]["Source"] == "/srv/gomgr/models/org/Tiny"  # type: ignore[index]
    outside = EngineSpec(**{**spec.__dict__, "model_dir": tmp_path / "elsewhere"})
    with pytest.raises(RuntimeStartError, match=r"is not in the model store .* no place on the Docker host tcp://10\.1\.2\.3:2376"):
        runtime.create_kwargs(outside)


def test_readiness_of_a_remote_daemon_is_its_docker_info() -> None:
    info = {"NCPU": 16, "MemTotal": 8 * GIB, "Runtimes": {"runc": {}}}
    memory = MemoryEstimate(weights=9 * GIB, kv_cache=GIB, overhead=GIB, total=11 * GIB)
    facts = remote_daemon_facts(info, "tcp://gpu-box:2376", memory)
    assert facts.note.startswith(
        "the Docker daemon at tcp://gpu-box:2376 is remote: asked it (docker info) instead of "
        "this machine: 16 CPUs, 8.0 GiB memory, no GPU runtime"
    )
    assert [b.id for b in facts.blockers] == ["remote-memory-too-small"]
    with_gpus = {**info, "Runtimes": {"runc": {}, "nvidia": {}}}
    assert remote_daemon_facts(with_gpus, "tcp://gpu-box:2376", memory).blockers == ()
