"""A second Docker daemon beside the suite's, reached only over TCP with mutual TLS: the
"remote" daemon of tests/docker/test_docker_remote_daemon.py, on 127.0.0.1.

It runs as the suite's does (.ci/dockerd.sh: root, its own data and exec roots and pid file),
with a bridge of its own (docker0 is the first daemon's) and without iptables rules (the
first daemon's chains are left alone; its userland proxy publishes ports). Certificates are
made with openssl for the test: a CA, the daemon's (IP 127.0.0.1) and the client's.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import docker
from docker import DockerClient
from docker.errors import DockerException
from docker.tls import TLSConfig
from requests import RequestException

from tests.support.engine_process import free_port

START_TIMEOUT_S = 30
API_VERSION = "1.41"  # NOTE: Debian bookworm's docker.io (20.10), the daemon CI installs


def missing_prerequisite() -> str | None:
    """Why a second daemon cannot run here, or None."""
    if os.geteuid() != 0:
        return "a second dockerd needs root"
    for tool in ("dockerd", "openssl", "ip"):
        if shutil.which(tool) is None:
            return f"no `{tool}` on PATH"
    return None


def make_certificates(folder: Path) -> None:
    """ca.pem, cert.pem and key.pem (the client's, DOCKER_CERT_PATH's names) and the daemon's
    server-cert.pem and server-key.pem, all under `folder`."""
    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=folder, check=True, capture_output=True)

    ec = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
    openssl("req", "-x509", *ec, "-days", "1", "-subj", "/CN=gomgr-test-ca", "-keyout", "ca-key.pem", "-out", "ca.pem")
    for name, subject, usage in (
        ("server", "/CN=127.0.0.1", "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n"),
        ("client", "/CN=gomgr-test-client", "extendedKeyUsage=clientAuth\n"),
    ):
        (folder / f"{name}.ext").write_text(usage)
        key, cert = ("server-key.pem", "server-cert.pem") if name == "server" else ("key.pem", "cert.pem")
        openssl("req", *ec, "-subj", subject, "-keyout", key, "-out", f"{name}.csr")
        openssl(
            "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca-key.pem",
            "-CAcreateserial", "-days", "1", "-extfile", f"{name}.ext", "-out", cert,
        )


@dataclass(frozen=True)
class RemoteDockerd:
    root: Path
    port: int
    bridge: str
    process: subprocess.Popen[bytes]

    @property
    def address(self) -> str:
        return f"tcp://127.0.0.1:{self.port}"

    @property
    def client_env(self) -> dict[str, str]:
        """What a user sets to reach it, as the docker CLI reads it."""
        return {
            "DOCKER_HOST": self.address, "DOCKER_TLS_VERIFY": "1",
            "DOCKER_CERT_PATH": str(self.root / "tls"),
        }

    def client(self) -> DockerClient:
        tls = self.root / "tls"
        config = TLSConfig(
            client_cert=(str(tls / "cert.pem"), str(tls / "key.pem")), ca_cert=str(tls / "ca.pem"),
            verify=True,
        )
        # NOTE: version given, so the constructor asks nothing before trust_env is off (the
        # environment's REQUESTS_CA_BUNDLE would replace this CA; see docker_host.py).
        client = docker.DockerClient(base_url=self.address, tls=config, timeout=60, version=API_VERSION)
        client.api.trust_env = False
        return client

    @classmethod
    def start(cls, root: Path) -> RemoteDockerd:
        """`root` should be short: the daemon's exec root holds unix sockets (108 bytes)."""
        tls = root / "tls"
        tls.mkdir(parents=True)
        make_certificates(tls)
        # NOTE: name and subnet per test process, so two sessions on one machine do not meet.
        bridge = f"gomgr-rd{os.getpid() % 10000}"
        subnet = f"10.213.{os.getpid() % 250}.1/24"
        subprocess.run(["ip", "link", "add", bridge, "type", "bridge"], check=True)
        try:
            subprocess.run(["ip", "addr", "add", subnet, "dev", bridge], check=True)
            subprocess.run(["ip", "link", "set", bridge, "up"], check=True)
        except subprocess.CalledProcessError:
            subprocess.run(["ip", "link", "del", bridge], check=False)
            raise
        port = free_port()
        command = [
            "dockerd", "--data-root", str(root / "data"), "--exec-root", str(root / "x"),
            "--pidfile", str(root / "dockerd.pid"), "-H", f"tcp://127.0.0.1:{port}",
            "--tlsverify", "--tlscacert", str(tls / "ca.pem"),
            "--tlscert", str(tls / "server-cert.pem"), "--tlskey", str(tls / "server-key.pem"),
            "--bridge", bridge, "--iptables=false", "--ip6tables=false",
            "--storage-driver", "overlay2",
        ]
        with (root / "dockerd.log").open("wb") as log:
            process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        daemon = cls(root, port, bridge, process)
        try:
            daemon._wait_until_it_answers()
        except BaseException:
            daemon.stop()
            raise
        return daemon

    def _wait_until_it_answers(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            try:
                self.client().ping()
                return
            except (DockerException, RequestException):
                if self.process.poll() is not None:
                    break
                time.sleep(0.3)
        log = (self.root / "dockerd.log").read_text(errors="replace")[-3000:]
        raise RuntimeError(f"the second dockerd did not answer on {self.address}:\n{log}")

    def stop(self) -> None:
        """Its containers removed, the daemon ended by its pid, its mounts and bridge undone."""
        if self.process.poll() is None:
            try:
                client = self.client()
                for container in client.containers.list(all=True):
                    container.remove(force=True)
                client.close()
            except (DockerException, RequestException):
                pass
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        # NOTE: as .ci/dockerd.sh: dockerd leaves netns bind mounts under its exec root.
        mounts = [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines()]
        for mount in sorted((m for m in mounts if m.startswith(f"{self.root}/")), reverse=True):
            subprocess.run(["umount", "-l", mount], check=False)
        subprocess.run(["ip", "link", "del", self.bridge], check=False, capture_output=True)
        shutil.rmtree(self.root, ignore_errors=True)
