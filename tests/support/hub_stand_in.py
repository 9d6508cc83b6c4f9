"""A stand-in for the Hugging Face hub (the real one is unreachable here): a real uvicorn
server on 127.0.0.1 serving only what gomgr's GGUF pulls ask of the hub, from local files.

- `GET /api/models/{org}/{name}` (`?blobs=true`): the repo's commit and its files with sizes;
- `HEAD` and `GET /{org}/{name}/resolve/{revision}/{path}`: a file, with the headers
  huggingface_hub's hf_hub_download checks (X-Repo-Commit, ETag, Content-Length) and
  `Range: bytes=a-b` answered 206 with just those bytes.

Every request is kept in `requests` (method, path, Range header), so a test can tell which
bytes of which file were read. Point the hub client at it with HF_ENDPOINT.
"""

from __future__ import annotations

import hashlib
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import uvicorn
from fastapi import FastAPI, Request, Response
from fastapi.responses import FileResponse, JSONResponse

from tests.support.engine_process import free_port

COMMIT = "0123456789abcdef0123456789abcdef01234567"
_RANGE = re.compile(r"^bytes=(\d+)-(\d*)$")


@dataclass(frozen=True)
class HubRequest:
    method: str
    path: str  # the file's path in its repo, or the API path
    range: str | None  # the Range header as sent


@dataclass
class HubStandIn:
    repos: dict[str, dict[str, Path]]  # repo → its files (path in repo → local file)
    url: str = ""
    requests: list[HubRequest] = field(default_factory=list)

    def file_requests(self, name: str) -> list[HubRequest]:
        return [r for r in self.requests if r.path == name]

    def app(self) -> FastAPI:
        app = FastAPI()

        @app.get("/api/models/{org}/{name}")
        def model_info(org: str, name: str) -> Response:
            repo = f"{org}/{name}"
            self.requests.append(HubRequest("GET", f"/api/models/{repo}", None))
            files = self.repos.get(repo)
            if files is None:
                return JSONResponse({"error": "Repository not found"}, 404,
                                    headers={"X-Error-Code": "RepoNotFound"})  # fmt: skip
            siblings = [{"rfilename": p, "size": f.stat().st_size} for p, f in files.items()]
            return JSONResponse({"id": repo, "sha": COMMIT, "siblings": siblings})

        @app.api_route("/{org}/{name}/resolve/{revision}/{path:path}", methods=["GET", "HEAD"])
        def resolve(org: str, name: str, revision: str, path: str, request: Request) -> Response:
            wanted = request.headers.get("range")
            self.requests.append(HubRequest(request.method, path, wanted))
            local = self.repos.get(f"{org}/{name}", {}).get(path)
            if local is None or revision not in (COMMIT, "main"):
                return JSONResponse({"error": "Entry not found"}, 404,
                                    headers={"X-Error-Code": "EntryNotFound"})  # fmt: skip
            size = local.stat().st_size
            headers = {
                "X-Repo-Commit": COMMIT,
                "ETag": f'"{_sha256(local)}"',
                "Accept-Ranges": "bytes",
            }
            if request.method == "HEAD":
                return Response(headers={**headers, "Content-Length": str(size)})
            if wanted and (match := _RANGE.match(wanted)):
                start = int(match.group(1))
                end = min(int(match.group(2)) if match.group(2) else size - 1, size - 1)
                with local.open("rb") as handle:
                    handle.seek(start)
                    body = handle.read(max(end - start + 1, 0))
                headers["Content-Range"] = f"bytes {start}-{end}/{size}"
                return Response(body, 206, headers=headers)
            return FileResponse(local, headers=headers)

        return app


@contextmanager
def running_hub(repos: dict[str, dict[str, Path]]) -> Iterator[HubStandIn]:
    """The stand-in, serving `repos` on a free port until the block ends."""
    hub = HubStandIn(repos)
    port = free_port()
    hub.url = f"http://127.0.0.1:{port}"
    server = uvicorn.Server(uvicorn.Config(hub.app(), "127.0.0.1", port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline, "the hub stand-in did not start"
        time.sleep(0.02)
    try:
        yield hub
    finally:
        server.should_exit = True
        thread.join(timeout=10)


_digests: dict[Path, str] = {}


def _sha256(path: Path) -> str:
    if path not in _digests:
        digest = hashlib.sha256()
        with path.open("rb") as handle:
            while chunk := handle.read(1 << 20):
                digest.update(chunk)
        _digests[path] = digest.hexdigest()
    return _digests[path]
