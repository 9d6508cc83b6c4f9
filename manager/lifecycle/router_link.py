"""The manager's side of the router: keep one running, register and deregister engines."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from manager.lifecycle.errors import RouterUnavailable
from manager.state.paths import DEFAULT_ROUTER_HOST, StatePaths, router_port
from router.daemon import START_POLL_S, RouterDaemon, RouterDaemonError

ADMIN_TIMEOUT_S = 10.0
CONNECT_TIMEOUT_S = 5.0
# NOTE: the router speaks plain HTTP on 127.0.0.1, so there is no certificate to verify, and
# httpx's default (verify=True) loads certifi's CA bundle into a new SSL context on every call:
# ~40 ms, a tenth of `gomgr ps`.
VERIFY_TLS = False
# NOTE (issue 30): httpx (~0.05 CPU-s) is imported where a router answers: a cold `gomgr
# start` starts its supervisor without it (it finds nothing listening, then spawns).
if TYPE_CHECKING:
    import http.client
    import subprocess
    from concurrent.futures import Future

    import httpx

    from manager.state.records import EngineRecord

# NOTE: the background router is the supervised one (issue #23): the router plus the loader
# that starts a store model's engine on its first request.
SUPERVISOR_MODULE = "manager.supervisor"
# NOTE (issue 30): the start `gomgr start` hands a supervisor it boots (a StartBody's JSON).
BOOT_START_ENV = "GOMGR_BOOT_START"


@dataclass(frozen=True)
class RouterLink:
    daemon: RouterDaemon

    @classmethod
    def from_paths(cls, paths: StatePaths) -> RouterLink:
        return cls(RouterDaemon(
            run_dir=paths.router_dir, host=DEFAULT_ROUTER_HOST, port=router_port(),
            token_file=paths.router_token_file, module=SUPERVISOR_MODULE,
        ))

    @property
    def url(self) -> str:
        return f"http://{self.daemon.host}:{self.daemon.port}"

    def is_up(self) -> bool:
        """Whether a router answers on the port: ours (router.json) or one started by hand."""
        # NOTE: a bare TCP connect first: with nothing listening (`gomgr ps` without a router)
        # it answers in microseconds, where httpx's first request loads its transport stack
        # (~50 ms).
        try:
            socket.create_connection((self.daemon.host, self.daemon.port), timeout=2).close()
        except OSError:
            return False
        import httpx

        try:
            reply = httpx.get(f"{self.url}/health", timeout=2, verify=VERIFY_TLS)
            return reply.status_code == 200
        except httpx.TransportError:
            return False

    def ensure(self, hand_over: str | None = None) -> bool:
        """Start the background router unless one answers; True if this call started it.

        `hand_over`: a start (a StartBody's JSON) the supervisor begins as it boots, before
        its router imports (manager/supervisor/boot_start.py), where this call starts one.
        """
        if self.is_up():
            return False
        env = {} if hand_over is None else {BOOT_START_ENV: hand_over}
        try:
            return self.daemon.start(env=env)
        except RouterDaemonError as exc:
            raise RouterUnavailable(f"could not start the router on {self.url}", str(exc)) from exc

    def ensure_in_background(self, hand_over: str | None = None) -> Future[bool]:
        """``ensure`` on a thread of its own; its result, or its RouterUnavailable, from the future.

        NOTE: not a daemon thread, so a command that exits early still lets a router it began
        finish starting (and write its record) rather than leave one nobody can find.
        """
        return _on_thread(lambda: self.ensure(hand_over), "router-start")

    def started_in_background(self, process: subprocess.Popen[bytes]) -> Future[bool]:
        """As ``ensure_in_background``, for a router this command already launched
        (``RouterDaemon.launch``): True from the future once it answers and is recorded."""

        def wait() -> bool:
            try:
                return self.daemon.wait_started(process)
            except RouterDaemonError as exc:
                raise RouterUnavailable(f"could not start the router on {self.url}", str(exc)) from exc

        return _on_thread(wait, "router-start")

    def wait_in_background(self, timeout_s: float) -> Future[bool]:
        """Wait on a thread for the router to answer (one booting, which no one may start
        again); False from the future once it does, RouterUnavailable after `timeout_s`."""

        def wait() -> bool:
            deadline = time.monotonic() + timeout_s
            while not self.is_up():
                if time.monotonic() > deadline:
                    raise RouterUnavailable(f"the router at {self.url} did not answer within {timeout_s:.0f} s")
                time.sleep(START_POLL_S)
            return False

        return _on_thread(wait, "router-wait")

    def register(self, record: EngineRecord) -> None:
        spec = record.handle.spec
        body = {
            "id": spec.id, "model": spec.served_name, "base_url": spec.base_url, "kind": "engine",
            "aliases": list(spec.aliases),
        }
        if spec.api_key:
            body["api_key"] = spec.api_key
        reply = self._admin("POST", "/backends", json=body)
        if reply.status_code != 201:
            raise RouterUnavailable(f"the router at {self.url} refused to register {spec.id}: {error_message(reply)}")

    def deregister(self, engine_id: str) -> None:
        """Remove the route; a router that is down or no longer lists it is fine."""
        if not self.is_up():
            return
        reply = self._admin("DELETE", f"/backends/{engine_id}")
        if reply.status_code not in (200, 404):
            raise RouterUnavailable(f"the router at {self.url} refused to deregister {engine_id}: {error_message(reply)}")

    def backend_ids(self) -> set[str]:
        reply = self._admin("GET", "/backends")
        if reply.status_code != 200:
            raise RouterUnavailable(f"the router at {self.url} refused to list backends: {error_message(reply)}")
        return {str(b["id"]) for b in reply.json()["backends"]}

    def admin_headers(self) -> dict[str, str]:
        """The admin API's authorization, from the router's token file."""
        try:
            token = self.daemon.token_file.read_text().strip()
        except FileNotFoundError as exc:
            raise RouterUnavailable(
                f"a router answers on {self.url} but its admin token file {self.daemon.token_file} "
                "is missing; stop that router or set GOMGR_ROUTER_TOKEN_FILE to its token file"
            ) from exc
        return {"authorization": f"Bearer {token}"}

    def _admin(self, method: str, path: str, **kwargs: object) -> httpx.Response:
        import httpx

        headers = self.admin_headers()
        try:
            return httpx.request(
                method, f"{self.url}/admin{path}", headers=headers,
                timeout=ADMIN_TIMEOUT_S, verify=VERIFY_TLS, **kwargs,  # type: ignore[arg-type]
            )
        except httpx.TransportError as exc:
            raise RouterUnavailable(f"the router at {self.url} did not answer: {exc}") from exc

    def send_admin(self, path: str, body: str) -> http.client.HTTPConnection:
        """POST the JSON `body` to the admin API's `path`; the connection, its reply not yet
        read (no read timeout: a start streams nothing while its engine loads). OSError when
        nothing listens (ConnectionRefusedError); RouterUnavailable without the token file.

        NOTE (issue 30): http.client, not httpx: `gomgr start` sends its request before it
        imports anything else (manager/cli/early_start.py).
        """
        sock = socket.create_connection((self.daemon.host, self.daemon.port), timeout=CONNECT_TIMEOUT_S)
        # NOTE: imported once something listens (~0.02 CPU-s): a cold start launches first.
        import http.client

        connection = http.client.HTTPConnection(self.daemon.host, self.daemon.port)
        connection.sock = sock
        try:
            sock.settimeout(None)
            headers = {**self.admin_headers(), "content-type": "application/json"}
            connection.request("POST", f"/admin{path}", body=body.encode(), headers=headers)
        except BaseException:
            connection.close()
            raise
        return connection


def _on_thread(work: Callable[[], bool], name: str) -> Future[bool]:
    from concurrent.futures import Future

    done: Future[bool] = Future()

    def run() -> None:
        try:
            done.set_result(work())
        except Exception as exc:  # noqa: BLE001 - handed to whoever waits on the future
            done.set_exception(exc)

    threading.Thread(target=run, name=name).start()
    return done


def error_message(reply: httpx.Response) -> str:
    """The message of a reply in the router's error shape, else its HTTP status."""
    return error_text(reply.status_code, reply.content)


def error_text(status: int, content: bytes) -> str:
    """`error_message` of a reply's status and body."""
    try:
        return str(json.loads(content)["error"]["message"])
    except (ValueError, KeyError, TypeError):
        return f"HTTP {status}"
