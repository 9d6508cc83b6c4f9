"""A failed image build in one line: what went wrong and what to do, for the offline cases.

NOTE: where no registry and no package index answers, the daemon's own words (a DNS error,
"returned a non-zero code: 1") say neither what happened nor what to do; these do.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from manager.images.errors import PullError

PYPI_INDEX = "https://pypi.org/simple"
# NOTE: pip's words (through urllib3) for an index it cannot reach; a reachable index without
# the version asked for gives "No matching distribution" without any of these.
_PIP_UNREACHABLE = re.compile(
    r"Failed to establish a new connection|Temporary failure in name resolution|"
    r"Name or service not known|Network is unreachable|Connection refused|ConnectTimeoutError|"
    r"ReadTimeoutError|ProxyError|connection broken by|Max retries exceeded",
    re.IGNORECASE,
)
_PIP_NO_DISTRIBUTION = re.compile(r"No matching distribution found for ([^\s\x1b]+)")
_TORCH = re.compile(r"^torch\b")


def base_image_missing(error: PullError) -> str:
    """The base image is not on this machine and could not be pulled."""
    base = error.image
    if error.registry_unreachable:
        return (
            f"the base image {base} is not on this machine and no registry answers "
            f"({error.short_reason}): build from a local image with --base <image> "
            "(see `docker images`), and give torch as a file with --torch-wheel <torch .whl>"
        )
    return (
        f"the base image {base} is not on this machine and could not be pulled "
        f"({error.reason}): check its name, or build from a local image with --base <image>"
    )


def pip_index_unreachable(lines: Sequence[str], torch_index_url: str | None) -> str | None:
    """One line for a pip step that failed because it reached no package index, else None.

    `lines`: the last lines of the build's output, the failed step's pip messages among them.
    """
    if not any(_PIP_UNREACHABLE.search(line) for line in lines):
        return None
    found = next((m for line in lines if (m := _PIP_NO_DISTRIBUTION.search(line))), None)
    if found is None:
        return None
    requirement = found.group(1)
    if _TORCH.match(requirement):
        return (
            f"pip inside the image build could not reach {torch_index_url or PYPI_INDEX} for "
            f"{requirement}: give torch as a file with --torch-wheel <torch .whl>, or let the "
            "Docker daemon's builds reach that index (network, proxy)"
        )
    return (
        f"pip inside the image build could not reach {PYPI_INDEX} for {requirement}: the "
        "engine's Python packages come from PyPI; let the Docker daemon's builds reach it "
        "(network, proxy)"
    )
