"""Check 7: a gated hub repository needs a Hugging Face token that was granted access."""

from __future__ import annotations

import os
from dataclasses import dataclass

from manager.readiness.blocker import EVERY_RUNTIME, Blocker


@dataclass(frozen=True)
class TokenStatus:
    gated: bool | None  # None: the hub could not be asked
    note: str | None  # why the check was skipped
    blockers: tuple[Blocker, ...]


def hf_token() -> str | None:
    """$HF_TOKEN, else the token `huggingface-cli login` saved."""
    from huggingface_hub import get_token

    return os.environ.get("HF_TOKEN") or get_token()


def check_hf_token(repo: str) -> TokenStatus:
    # NOTE (issue 30): imported here: the hub's API client is a tenth of the supervisor's
    # boot, and a start of a model already in the store never asks the hub.
    from huggingface_hub import auth_check, model_info
    from huggingface_hub.errors import GatedRepoError

    token = hf_token()
    try:
        # NOTE: the hub describes gated repos to anyone (`gated` is "auto"/"manual"/False);
        # only file downloads are refused, which `auth_check` tries for a given token.
        gated = bool(model_info(repo, token=token or False, timeout=10).gated)
        if gated and token:
            auth_check(repo, token=token)
    except GatedRepoError:
        return TokenStatus(True, None, (_blocker(repo, token),))
    # NOTE: any other failure (offline mode, no network, an unknown repo) leaves the question
    # open; the download itself reports such errors precisely, so this is only a note.
    except Exception as exc:  # noqa: BLE001
        return TokenStatus(None, f"could not ask the hub whether {repo} is gated: {exc}", ())
    if gated and not token:
        return TokenStatus(True, None, (_blocker(repo, None),))
    return TokenStatus(gated, None, ())


def _blocker(repo: str, token: str | None) -> Blocker:
    if token is None:
        return Blocker(
            id="hf-token-missing",
            title=f"{repo} is gated and no Hugging Face token is set",
            explanation=(
                f"The hub serves {repo}'s files only to accounts that accepted its license, "
                "and gomgr has no token to prove which account is asking."
            ),
            fix_steps=(
                f"Open https://huggingface.co/{repo} and accept the license.",
                "Create a read token at https://huggingface.co/settings/tokens.",
                "Set it: `export HF_TOKEN=hf_...` (or run `hf auth login`).",
                f"Run `gomgr doctor {repo}` again.",
            ),
            severity="blocks",
            blocks=EVERY_RUNTIME,
        )
    return Blocker(
        id="hf-access-not-granted",
        title=f"Your Hugging Face token has no access to {repo}",
        explanation=(
            f"{repo} is gated and the hub refused the token in use: its account has not "
            "accepted the license yet, or the request is still pending."
        ),
        fix_steps=(
            f"Open https://huggingface.co/{repo} while logged in and accept the license.",
            "Wait for the approval e-mail if the authors review requests by hand.",
            f"Run `gomgr doctor {repo}` again.",
        ),
        severity="blocks",
        blocks=EVERY_RUNTIME,
    )
