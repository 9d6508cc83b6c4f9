"""Session fixtures shared by every test package."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
import torch

from tests.support.background_mypy import MYPY_TEST, MypyRun

# NOTE: Triton reads TRITON_INTERPRET once, when it is first imported, and any module may
# import it first (xgrammar, transformers), so it is set here, before any test module loads.
# Without a CUDA device no Triton kernel can run compiled anyway, so the interpreter is the
# only mode a test could use (tests/engine/kernels); the engine imports triton only on CUDA,
# so engine subprocesses that inherit the variable never read it.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

# NOTE: a suite started in the background of a non-interactive shell (`make test &`, CI) has
# SIGINT ignored, and every process it starts inherits that: the tests that press Ctrl-C on a
# `gomgr` command would find it deaf. A handler (unlike SIG_IGN) is reset to the default on
# exec, so the commands the tests start answer SIGINT as in a terminal.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

SMOLLM2_REPO = "HuggingFaceTB/SmolLM2-135M-Instruct"
# NOTE: marks of tests whose one-time installs (the engine image, Open WebUI) CI runs in the
# background (tests/support/provision.py); they run last so those installs overlap the rest.
PROVISIONED_LAST = ("docker", "chat_ui")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # NOTE: the whole directory of such a test moves with it: pytest ends a package's fixtures
    # when the run leaves the package, so a package split in two would start them twice
    # (tests/e2e_chat_ui's router and two engines, for its unmarked Ollama-client tests).
    marked = [item for item in items if any(item.get_closest_marker(m) for m in PROVISIONED_LAST)]
    last = {item.path.parent for item in marked}
    items.sort(key=lambda item: item.path.parent in last)


MYPY_RUN = pytest.StashKey[MypyRun]()


def pytest_collection_finish(session: pytest.Session) -> None:
    if any(item.nodeid == MYPY_TEST for item in session.items):
        session.config.stash[MYPY_RUN] = MypyRun.start(Path(__file__).resolve().parents[1])


def pytest_sessionfinish(session: pytest.Session) -> None:
    run = session.config.stash.get(MYPY_RUN, None)
    if run is not None:
        run.stop()


@pytest.fixture(scope="session")
def mypy_run(request: pytest.FixtureRequest) -> MypyRun:
    """The mypy run started at the end of collection (tests/support/background_mypy.py)."""
    return request.config.stash[MYPY_RUN]


@pytest.fixture(scope="session")
def smollm2_dir() -> Path:
    """The converted SmolLM2-135M-Instruct safetensors directory.

    Pulled with the real `pull_model` into the store named by $GOMGR_MODELS_DIR, else the
    user's default store (~/.local/share/gomgr/models), so only the first run anywhere pays
    the download and the ~20 s conversion; later runs find it in milliseconds. Concurrent
    sessions wait on the store's per-repo lock instead of converting twice.
    """
    from manager.models.pull import pull_model

    return pull_model(SMOLLM2_REPO).model.path
