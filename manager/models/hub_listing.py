"""A hub repo's files with their sizes, at one commit: `GET /api/models/{repo}?blobs=true`.

NOTE: asked with httpx directly rather than through HfApi.model_info: the hub client's
transport errors are those of its own HTTP library (which differs across huggingface_hub
releases), and an unreachable hub must read as one line like every other model error.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from huggingface_hub import constants

from manager.models.errors import DownloadError, HubUnavailableError, ModelNotFoundError
from manager.models.gguf_choice import RepoFile

if TYPE_CHECKING:
    import httpx

_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class RepoListing:
    repo: str
    revision: str  # the commit the listing is of; downloads and range reads use it too
    files: tuple[RepoFile, ...]

    def has_safetensors(self) -> bool:
        return any(f.path.endswith(".safetensors") for f in self.files)


def repo_listing(repo: str, token: str | None = None) -> RepoListing:
    """Every file of `repo` with its size, at the default branch's current commit."""
    if constants.is_offline_mode():
        raise HubUnavailableError(
            f"{repo} is not in the store and the Hugging Face hub is disabled (HF_HUB_OFFLINE=1)"
        )
    url = f"{constants.ENDPOINT}/api/models/{repo}"
    # NOTE (issue 30): imported where the hub is asked (the hub's loads tqdm): see
    # gguf/http_source.py.
    import httpx
    from huggingface_hub.utils import build_hf_headers

    try:
        response = httpx.get(
            url, params={"blobs": "true"}, headers=build_hf_headers(token=token or None),
            timeout=_TIMEOUT_S, follow_redirects=True,
        )  # fmt: skip
    except httpx.HTTPError as exc:
        raise HubUnavailableError(
            f"{repo} is not in the store and the Hugging Face hub cannot be reached ({exc})"
        ) from exc
    _raise_for_status(repo, response)
    try:
        body = response.json()
        files = tuple(RepoFile(s["rfilename"], int(s.get("size") or 0)) for s in body["siblings"])
        revision = str(body["sha"])
    except (ValueError, KeyError, TypeError) as exc:
        raise DownloadError(f"the hub's listing of {repo} is not what it should be: {exc}") from exc
    return RepoListing(repo, revision, files)


def _raise_for_status(repo: str, response: httpx.Response) -> None:
    if response.is_success:
        return
    code = response.headers.get("X-Error-Code", "")
    if code == "GatedRepo":
        raise ModelNotFoundError(
            f"{repo} is gated: accept its license on huggingface.co and set HF_TOKEN"
        )
    if response.status_code in (401, 403, 404):
        raise ModelNotFoundError(
            f"{repo} was not found on the Hugging Face hub (private? set HF_TOKEN)"
        )
    raise DownloadError(f"the hub answered HTTP {response.status_code} listing {repo}")
