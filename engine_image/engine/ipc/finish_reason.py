"""How a generation request ended, as the scheduler decides it and every API surface reads it."""

from __future__ import annotations

from typing import Literal

import msgspec

FinishKind = Literal["stop", "length", "abort"]


class FinishReason(msgspec.Struct, frozen=True):
    """SGLang's ``meta_info.finish_reason``; ``to_dict`` gives its wire shape
    (``{"type": "stop", "matched": 2}`` and friends).

    ``matched`` is the stop token id (an int) or the stop string (a str) that ended a "stop";
    ``length`` the completion tokens of a "length"; ``message`` why an "abort" happened.
    """

    kind: FinishKind
    matched: int | str | None = None
    length: int | None = None
    message: str | None = None

    def to_dict(self) -> dict[str, int | str | None]:
        out: dict[str, int | str | None] = {"type": self.kind}
        if self.kind == "stop":
            out["matched"] = self.matched
        elif self.kind == "length":
            out["length"] = self.length
        elif self.message is not None:
            out["message"] = self.message
        return out
