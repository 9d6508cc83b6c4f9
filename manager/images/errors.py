"""Image errors: one readable line, and the steps that fix it."""

from __future__ import annotations

import re

# NOTE: how the daemon words a registry it cannot reach (DNS, refused, timeouts, no route),
# as against a registry that answers "no such image" or "access denied".
_UNREACHABLE = re.compile(
    r"no such host|dial tcp|i/o timeout|connection refused|network is unreachable|"
    r"TLS handshake timeout|Client\.Timeout|context deadline exceeded|server misbehaving",
    re.IGNORECASE,
)


class ImageError(Exception):
    def __init__(self, message: str, fix: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.fix = fix


class PullError(ImageError):
    """A pull the daemon could not do; `reason` is the daemon's own words."""

    def __init__(self, image: str, reason: str, fix: str) -> None:
        super().__init__(f"cannot pull {image}: {reason}", fix)
        self.image = image
        self.reason = reason

    @property
    def registry_unreachable(self) -> bool:
        return bool(_UNREACHABLE.search(self.reason))

    @property
    def short_reason(self) -> str:
        """The last clause of the daemon's message, e.g. 'no such host'."""
        return self.reason.rsplit(": ", 1)[-1].strip()
