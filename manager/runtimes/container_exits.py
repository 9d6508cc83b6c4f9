"""Docker's `die` events of our containers, as the engines' exits the supervisor reaps."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from docker.errors import DockerException
from docker.types import CancellableStream
from requests import RequestException

from manager.runtimes.base import EngineExit


class ContainerExits:
    """`events`: the daemon's decoded `die` events; `id_label`: the label naming the engine."""

    def __init__(self, events: CancellableStream, id_label: str) -> None:
        self._events = events
        self._id_label = id_label

    def __iter__(self) -> Iterator[EngineExit]:
        """Ends when the daemon goes away (CancellableStream turns a dropped socket into the
        end) or the stream is closed."""
        try:
            for event in self._events:
                attributes = event.get("Actor", {}).get("Attributes", {})
                if engine_id := attributes.get(self._id_label):
                    yield EngineExit(engine_id, exit_code_of(attributes.get("exitCode")))
        except (DockerException, RequestException, ValueError):
            return

    def close(self) -> None:
        with contextlib.suppress(OSError, DockerException):
            self._events.close()


def exit_code_of(value: object) -> int | None:
    """Docker's exit code (a number or its string), None where it is neither."""
    try:
        return int(str(value))
    except ValueError:
        return None
