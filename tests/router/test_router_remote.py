"""Remote engines and the TLS front door (issue 27): an engine registered with its URL and key
gets that key from the router, and the router listens beyond loopback only with client keys
and TLS. TLS is tested on 127.0.0.1 with a certificate made here by the openssl CLI."""

from __future__ import annotations

import shutil
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import openai
import pytest

from tests.router.conftest import REPO_ROOT, Proc, start_echo, stop
from tests.support.engine_process import free_port

CLIENT_KEY = "client-key"
UPSTREAM_KEY = "remote-engine-key"


@dataclass(frozen=True)
class TlsRouter:
    proc: Proc
    token: str
    cert: Path

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.proc.port}"

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, verify=ssl.create_default_context(cafile=self.cert), timeout=10)


def _self_signed(directory: Path) -> tuple[Path, Path]:
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    return cert, key


def _router_command(port: int, token_file: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "router", "--port", str(port), "--admin-token-file",
            str(token_file), "--health-interval", "0.2", "--log-level", "warning", *args]  # fmt: skip


@pytest.fixture(scope="module")
def tls_router(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TlsRouter, Proc]]:
    if shutil.which("openssl") is None:
        pytest.skip("no openssl CLI to make a test certificate with")
    log_dir = tmp_path_factory.mktemp("tls")
    cert, key = _self_signed(log_dir)
    echo = start_echo(log_dir, "remote-model")
    port, token_file = free_port(), log_dir / "router.token"
    command = _router_command(
        port, token_file, "--api-key", CLIENT_KEY, "--tls-certfile", str(cert), "--tls-keyfile", str(key)
    )
    with open(log_dir / "router.log", "wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=REPO_ROOT)
    proc = Proc(process, port, log_dir / "router.log")
    try:
        router = TlsRouter(proc, "", cert)
        _wait_listening(router)
        yield TlsRouter(proc, token_file.read_text().strip(), cert), echo
    finally:
        stop(proc)
        stop(echo)


def _wait_listening(router: TlsRouter) -> None:
    deadline = time.monotonic() + 30
    with router.client() as client:
        while time.monotonic() < deadline:
            assert router.proc.process.poll() is None, router.proc.log_tail()
            try:
                client.get("/health")
                return
            except httpx.TransportError:
                time.sleep(0.1)
    raise RuntimeError(f"the TLS router did not listen:\n{router.proc.log_tail()}")


def test_a_remote_engine_gets_its_key_through_the_tls_front_door(
    tls_router: tuple[TlsRouter, Proc],
) -> None:
    router, echo = tls_router
    with router.client() as client:
        registered = client.post(
            "/admin/backends",
            headers={"authorization": f"Bearer {router.token}"},
            json={"model": "remote-model", "base_url": echo.url, "kind": "openai", "api_key": UPSTREAM_KEY},
        )
        assert registered.status_code == 201, registered.text
        assert registered.json()["has_api_key"] is True and "api_key" not in registered.json()
        deadline = time.monotonic() + 10
        while client.get("/v1/models", headers={"authorization": f"Bearer {CLIENT_KEY}"}).json()["data"] == []:
            assert time.monotonic() < deadline, "the remote engine never became ready"
            time.sleep(0.1)
        refused = client.post("/v1/chat/completions", json={"model": "remote-model", "messages": []})
        assert refused.status_code == 401 and refused.json()["error"]["code"] == "invalid_api_key"
    verify = ssl.create_default_context(cafile=router.cert)
    with httpx.Client(verify=verify, timeout=10) as http:
        sdk = openai.OpenAI(base_url=f"{router.url}/v1", api_key=CLIENT_KEY, max_retries=0, http_client=http)
        reply = sdk.chat.completions.create(
            model="remote-model", messages=[{"role": "user", "content": "over tls"}]
        )
    assert reply.choices[0].message.content == "over tls"
    credentials = httpx.get(f"{echo.url}/stats", timeout=10).json()["credentials"]
    assert credentials["authorization"] == [f"Bearer {UPSTREAM_KEY}"]  # the engine's, not the client's
    with pytest.raises(httpx.TransportError):
        httpx.get(f"http://127.0.0.1:{router.proc.port}/health", timeout=5)  # NOTE: HTTPS only


UNPROTECTED = (
    "error: refusing to listen on 0.0.0.0 without an API key and TLS: add --api-key and "
    "--tls-certfile/--tls-keyfile, or listen on 127.0.0.1"
)


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--host", "0.0.0.0"], UNPROTECTED),
        (["--host", "0.0.0.0", "--api-key", "k"], UNPROTECTED),
        (["--tls-certfile", "/nonexistent.pem"], "error: give both --tls-certfile and --tls-keyfile, or neither"),
    ],
)
def test_the_front_door_refuses_to_listen_unprotected(tmp_path: Path, args: list[str], said: str) -> None:
    done = subprocess.run(
        _router_command(free_port(), tmp_path / "t", *args),
        capture_output=True, text=True, timeout=60, cwd=REPO_ROOT, check=False,
    )  # fmt: skip
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [said], done.stderr
