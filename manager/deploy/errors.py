"""The one error of rendering and applying manifests: one line, exit status 2."""

from __future__ import annotations

from manager.lifecycle.errors import LifecycleError


class DeployError(LifecycleError):
    """A file, an engine or a target that cannot be rendered, or kubectl that is missing or
    failed; `message` is the line the CLI prints."""

    exit_code = 2
