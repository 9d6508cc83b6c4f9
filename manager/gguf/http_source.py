"""A file of a Hugging Face repo read by HTTP range requests: its GGUF header, never the rest."""

from __future__ import annotations

from typing import TYPE_CHECKING

from huggingface_hub import constants

from manager.gguf.byte_source import HeaderReadError

if TYPE_CHECKING:
    import httpx

_TIMEOUT_S = 30.0


class HubRangeSource:
    """Byte ranges of `filename` in `repo` at `revision` (a commit, so every read sees one file)."""

    def __init__(self, repo: str, filename: str, revision: str, token: str | None) -> None:
        # NOTE (issue 30): the hub client's download module (and tqdm), and httpx, load here,
        # where the hub is asked: the readiness checks of a store model's start never do, and a
        # cold `gomgr start` waits on those imports before its engine starts.
        import httpx
        from huggingface_hub import hf_hub_url
        from huggingface_hub.utils import build_hf_headers

        self.repo = repo
        self.filename = filename
        self.url = hf_hub_url(repo, filename, revision=revision)
        # NOTE: the hub client's own headers (user agent, token); identity encoding, as a byte
        # range of a compressed body would not be the file's bytes.
        self._headers = {**build_hf_headers(token=token or None), "Accept-Encoding": "identity"}
        self._client = httpx.Client(follow_redirects=True, timeout=_TIMEOUT_S)

    @property
    def name(self) -> str:
        return f"{self.repo}/{self.filename}"

    def close(self) -> None:
        self._client.close()

    def read_at(self, offset: int, length: int) -> bytes:
        if constants.is_offline_mode():
            raise HeaderReadError("the Hugging Face hub is disabled (HF_HUB_OFFLINE=1)")
        import httpx

        headers = {**self._headers, "Range": f"bytes={offset}-{offset + length - 1}"}
        try:
            with self._client.stream("GET", self.url, headers=headers) as response:
                if response.status_code == httpx.codes.REQUESTED_RANGE_NOT_SATISFIABLE:
                    return b""
                if response.status_code not in (httpx.codes.OK, httpx.codes.PARTIAL_CONTENT):
                    raise HeaderReadError(
                        f"{self.name}: the hub answered HTTP {response.status_code}"
                    )
                return _take(
                    response,
                    skip=offset if response.status_code == httpx.codes.OK else 0,
                    length=length,
                )
        except httpx.HTTPError as exc:
            raise HeaderReadError(f"cannot read {self.name} from the hub: {exc}") from exc


def _take(response: httpx.Response, skip: int, length: int) -> bytes:
    """`length` bytes after the first `skip` of the body, leaving the rest of it unread.

    NOTE: a server that ignores Range answers 200 with the whole file; the stream is closed as
    soon as the wanted bytes have arrived, so that costs the header's offset, not the file.
    """
    wanted = bytearray()
    for chunk in response.iter_bytes():
        if skip >= len(chunk):
            skip -= len(chunk)
            continue
        wanted += chunk[skip:]
        skip = 0
        if len(wanted) >= length:
            break
    return bytes(wanted[:length])
