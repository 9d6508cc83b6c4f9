"""Optional client API keys: `Authorization: Bearer <key>` or `x-api-key: <key>`."""

from __future__ import annotations

import secrets

from router.errors import unauthorized


class ApiKeys:
    def __init__(self, keys: tuple[str, ...]) -> None:
        self._keys = keys

    def check(self, authorization: str, x_api_key: str) -> None:
        """Raise 401 unless a key is configured-off or one of the given credentials matches."""
        if not self._keys:
            return
        scheme, _, bearer = authorization.partition(" ")
        given = bearer.strip() if scheme.lower() == "bearer" else x_api_key
        if not any(secrets.compare_digest(given, key) for key in self._keys):
            raise unauthorized("Incorrect API key provided")
