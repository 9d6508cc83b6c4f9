"""`gomgr start` against a remote Docker daemon (DOCKER_HOST=tcp://…, DOCKER_TLS_VERIFY,
DOCKER_CERT_PATH): a second real dockerd on 127.0.0.1 reached only over TCP with mutual TLS
(tests/support/remote_dockerd.py).

The engine image is a test image (named so) that records its arguments and the
Authorization header of each request, so what the manager ran and what the router sends are
checked, not what an engine does with them.
"""

from __future__ import annotations

import io
import json
import os
import tarfile
import tempfile
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import httpx
import pytest
from docker import DockerClient

from tests.docker.conftest import REQUIRE_ENV
from tests.docker.engine_image import BASE_IMAGE
from tests.support.gomgr_env import Env
from tests.support.remote_dockerd import RemoteDockerd, missing_prerequisite

pytestmark = [pytest.mark.slow, pytest.mark.docker]

RECORDER_IMAGE = "gomgr-test/args-and-auth-recorder-standing-in-for-an-engine:latest"
# NOTE: prints its argv as one JSON line, then answers every GET with 200 on --port, printing
# the Authorization header each request came with.
RECORDER = """\
import http.server, json, sys
print("ARGS " + json.dumps(sys.argv[1:]), flush=True)
port = int(sys.argv[sys.argv.index("--port") + 1])
class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        print("AUTH " + str(self.headers.get("Authorization")), flush=True)
        self.send_response(200); self.send_header("Content-Length", "2"); self.end_headers()
        self.wfile.write(b"{}")
http.server.ThreadingHTTPServer(("0.0.0.0", port), Health).serve_forever()
"""
# NOTE: python, its standard library and `test` (the remote-model check runs it) copied out of
# the base image into an image of their own: a tenth of the base's size to send to the
# second daemon, where loading the base took most of this module's time.
DOCKERFILE = f"""\
FROM {BASE_IMAGE} AS full
RUN mkdir -p /slim/lib64 /slim/usr/lib/x86_64-linux-gnu /slim/usr/bin \\
 && cp -rL /usr/lib/python3.11 /slim/usr/lib/ \\
 && rm -rf /slim/usr/lib/python3.11/test /slim/usr/lib/python3.11/ensurepip \\
    /slim/usr/lib/python3.11/idlelib /slim/usr/lib/python3.11/lib2to3 \\
    /slim/usr/lib/python3.11/pydoc_data /slim/usr/lib/python3.11/config-3.11-x86_64-linux-gnu \\
 && cp -L /usr/bin/python3.11 /usr/bin/test /slim/usr/bin/ \\
 && cd /lib/x86_64-linux-gnu && cp -L libc.so.6 libm.so.6 libz.so.1 libexpat.so.1 \\
    /slim/usr/lib/x86_64-linux-gnu/ \\
 && cp -L /lib64/ld-linux-x86-64.so.2 /slim/lib64/ \\
 && ln -s usr/lib /slim/lib && ln -s usr/bin /slim/bin
FROM scratch
COPY --from=full /slim/ /
COPY recorder.py /recorder.py
ENV PATH=/usr/bin
ENTRYPOINT ["python3.11", "/recorder.py"]
"""


@pytest.fixture(scope="module")
def remote(docker_client: DockerClient) -> Iterator[RemoteDockerd]:
    """The second daemon, with the recorder image (built on the suite's daemon, sent over)."""
    if why := missing_prerequisite():
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail(why)
        pytest.skip(why)
    daemon = RemoteDockerd.start(Path(tempfile.mkdtemp(prefix="grd-", dir="/tmp")))
    try:
        image, _ = docker_client.images.build(
            fileobj=_context(), custom_context=True, tag=RECORDER_IMAGE, rm=True
        )
        client = daemon.client()
        client.images.load(image.save(named=True))
        client.close()
        yield daemon
    finally:
        daemon.stop()
        docker_client.images.remove(RECORDER_IMAGE, force=True)


def _context() -> io.BytesIO:
    context = io.BytesIO()
    with tarfile.open(fileobj=context, mode="w") as tar:
        for name, text in (("Dockerfile", DOCKERFILE), ("recorder.py", RECORDER)):
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    context.seek(0)
    return context


def remote_manager(root: Path, remote: RemoteDockerd, store: Path, remote_store: Path) -> Env:
    """A manager under `root` whose DOCKER_HOST is the remote daemon and whose remote store
    (the store "on that host", a directory the remote daemon's host has) is `remote_store`."""
    base = Env.isolated(root, store)
    overrides = root / "config" / "manifests"
    overrides.mkdir(parents=True)
    (overrides / "recorder.yaml").write_text(f"overrides: smollm2\nimage: {RECORDER_IMAGE}\n")
    variables = {
        **base.vars, **remote.client_env, "GOMGR_REMOTE_MODELS_DIR": str(remote_store),
        "GOMGR_ENGINE_HOST": "", "DOCKER_CONTEXT": "",
    }
    return replace(base, vars=variables)


@pytest.fixture
def remote_env(remote: RemoteDockerd, smollm2_dir: Path, tmp_path: Path) -> Iterator[Env]:
    """The model is in the remote store."""
    store = smollm2_dir.parents[1]
    remote_store = tmp_path / "remote-store"
    (remote_store / smollm2_dir.relative_to(store)).mkdir(parents=True)
    env = remote_manager(tmp_path, remote, store, remote_store)
    yield env
    env.gomgr("stop", "--all")
    env.end_everything()


def test_an_engine_on_a_remote_daemon_is_published_beyond_loopback_with_a_key_the_router_sends(
    remote_env: Env, remote: RemoteDockerd, smollm2_dir: Path
) -> None:
    started = remote_env.start(str(smollm2_dir), "--timeout", "60")
    assert f"runtime: docker (Docker at {remote.address} is remote: engines run on its host; image {RECORDER_IMAGE}" in started["stderr"]
    assert started["base_url"] == f"http://127.0.0.1:{started['port']}"
    assert started["api_key"] == "***"  # NOTE: masked in output; the record file holds it
    record = json.loads((remote_env.state.engines_dir / f"{started['id']}.json").read_text())
    key = record["api_key"]
    assert len(key) >= 32

    client = remote.client()
    [container] = client.containers.list()
    bindings = container.attrs["HostConfig"]["PortBindings"]["30000/tcp"]
    assert bindings == [{"HostIp": "0.0.0.0", "HostPort": str(started["port"])}]
    [mount] = container.attrs["Mounts"]
    remote_store = Path(remote_env.vars["GOMGR_REMOTE_MODELS_DIR"])
    assert mount["Source"] == str(remote_store / smollm2_dir.relative_to(smollm2_dir.parents[1]))
    logs = container.logs().decode().splitlines()
    args = json.loads(next(line for line in logs if line.startswith("ARGS ")).removeprefix("ARGS "))
    assert args[-6:] == ["--api-key", key, "--host", "0.0.0.0", "--port", "30000"]

    token = Path(remote_env.vars["GOMGR_ROUTER_TOKEN_FILE"]).read_text().strip()
    reply = httpx.get(
        f"{remote_env.router_url}/admin/backends", headers={"authorization": f"Bearer {token}"},
        timeout=5,
    )
    [backend] = [b for b in reply.json()["backends"] if b["id"] == started["id"]]
    assert backend["base_url"] == started["base_url"] and backend["has_api_key"] is True
    # NOTE: the router's registration probe reached the engine with its key.
    assert f"AUTH Bearer {key}" in container.logs().decode()

    doctor = remote_env.gomgr("doctor", "--json")
    report = json.loads(doctor.stdout)
    assert report["docker"]["remote"] is True and "gpus" not in report["checks"]
    assert any(f"the Docker daemon at {remote.address} is remote: asked it" in n for n in report["notes"])

    stopped = remote_env.gomgr("stop", "--all")
    assert stopped.returncode == 0, stopped.stderr
    assert client.containers.list(all=True) == []
    client.close()


def test_a_model_missing_on_the_remote_host_is_refused_in_one_line(
    remote: RemoteDockerd, smollm2_dir: Path, tmp_path: Path
) -> None:
    empty = tmp_path / "empty-store"
    empty.mkdir()
    env = remote_manager(tmp_path, remote, smollm2_dir.parents[1], empty)
    try:
        result = env.gomgr("start", str(smollm2_dir), "--timeout", "60")
    finally:
        env.end_everything()
    assert result.returncode != 0
    where = empty / smollm2_dir.relative_to(smollm2_dir.parents[1])
    errors = [line for line in result.stderr.splitlines() if line.startswith("error")]
    assert errors == [f"error: the model is not on the Docker host {remote.address}: no {where} there"], result.stderr
    client = remote.client()
    assert client.containers.list(all=True) == []
    client.close()
