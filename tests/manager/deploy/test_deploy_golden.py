"""`gomgr deploy render` of tests/manager/deploy/engines.yaml equals the golden files exactly.

Regenerate after an intended change (then review the diff):
    GOMGR_UPDATE_GOLDEN=1 pytest tests/manager/deploy/test_deploy_golden.py
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.manager.deploy.conftest import ENGINES_FILE, GOLDEN_DIR, RenderCli

UPDATE_ENV = "GOMGR_UPDATE_GOLDEN"
# NOTE: the two model sources, one per target, so both appear in a golden file.
CASES = {
    "kubernetes": ("--target", "kubernetes"),
    "kserve": ("--target", "kserve", "--model-source", "pvc", "--namespace", "llm"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_rendered_files_equal_the_golden_ones(case: str, render_cli: RenderCli, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = render_cli("-f", str(ENGINES_FILE), *CASES[case], "-o", str(out))
    assert result.exit_code == 0, result.output
    golden = GOLDEN_DIR / case
    if os.environ.get(UPDATE_ENV) == "1":
        shutil.rmtree(golden, ignore_errors=True)
        shutil.copytree(out, golden)
    rendered = {p.name: p.read_text() for p in sorted(out.iterdir())}
    expected = {p.name: p.read_text() for p in sorted(golden.iterdir())}
    assert sorted(rendered) == sorted(expected)
    for name, text in rendered.items():
        assert text == expected[name], f"{name} differs from {golden / name} ({UPDATE_ENV}=1 regenerates)"


def test_stdout_is_the_files_as_one_stream(render_cli: RenderCli) -> None:
    result = render_cli("-f", str(ENGINES_FILE))
    assert result.exit_code == 0, result.output
    golden = GOLDEN_DIR / "kubernetes"
    names = ["gomgr-smollm2.yaml", "gomgr-qwen-qwen2-5-7b-instruct.yaml", "gomgr-llama-8b.yaml",
             "gomgr-router.yaml"]
    assert result.stdout == "".join((golden / name).read_text() for name in names)
