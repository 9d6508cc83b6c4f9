"""`gomgr models pull` through the real console script."""

from __future__ import annotations

from pathlib import Path

from manager.models.store import METADATA_FILE
from tests.support.cli_checks import assert_one_error_line, store_leftovers

SMOLLM2 = "HuggingFaceTB/SmolLM2-135M-Instruct"


def _mtimes(directory: Path) -> dict[str, int]:
    stamps = {p.name: p.stat().st_mtime_ns for p in directory.iterdir()}
    stamps["."] = directory.stat().st_mtime_ns
    return stamps


def test_fixture_dir_is_a_complete_hf_model(smollm2_dir: Path) -> None:
    for name in ("config.json", "model.safetensors", "generation_config.json",
                 "tokenizer.json", "tokenizer_config.json", METADATA_FILE):  # fmt: skip
        assert (smollm2_dir / name).is_file(), name
    assert smollm2_dir.parent.name == "HuggingFaceTB"


def test_second_pull_is_a_no_op(run_gomgr, smollm2_dir: Path, smollm2_store: Path) -> None:
    before = _mtimes(smollm2_dir)
    result = run_gomgr("models", "pull", SMOLLM2, GOMGR_MODELS_DIR=str(smollm2_store))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"{SMOLLM2} already present at {smollm2_dir}"
    assert _mtimes(smollm2_dir) == before


def test_unknown_repo_with_hub_offline_fails_cleanly(run_gomgr, tmp_path: Path) -> None:
    store = tmp_path / "store"
    result = run_gomgr(
        "models", "pull", "acme/no-such-model", GOMGR_MODELS_DIR=str(store), HF_HUB_OFFLINE="1"
    )
    assert result.returncode == 1
    line = assert_one_error_line(result.stdout, result.stderr)
    assert "acme/no-such-model" in line and "HF_HUB_OFFLINE" in line
    assert store_leftovers(store) == []


def test_unknown_repo_with_hub_unreachable_fails_cleanly(run_gomgr, tmp_path: Path) -> None:
    # NOTE: the hub is not reachable on the machines this runs on; where it is, the repo
    # does not exist there either, so the pull fails either way, with one line.
    store = tmp_path / "store"
    env = {"GOMGR_MODELS_DIR": str(store), "HF_HUB_OFFLINE": "0"}
    result = run_gomgr("models", "pull", "acme/no-such-model-7f3a", **env)
    assert result.returncode == 1
    assert_one_error_line(result.stdout, result.stderr)
    assert store_leftovers(store) == []


def test_unwritable_store_fails_cleanly(run_gomgr, tmp_path: Path) -> None:
    # NOTE: a path below a regular file cannot be created even by root (CI runs as root,
    # where chmod 0o500 would not stop it).
    blocker = tmp_path / "afile"
    blocker.write_text("not a directory\n")
    result = run_gomgr("models", "pull", SMOLLM2, GOMGR_MODELS_DIR=str(blocker / "models"))
    assert result.returncode == 1
    line = assert_one_error_line(result.stdout, result.stderr)
    assert "cannot write to the model store" in line
    assert blocker.read_text() == "not a directory\n"


def test_invalid_repo_id_is_one_error_line(run_gomgr, tmp_path: Path) -> None:
    store = tmp_path / "store"
    # NOTE: not "../etc": a path prefix names a directory to import (a usage error without
    # --name, tests/manager/test_models_import_cli.py); this one is a repo id that escapes.
    result = run_gomgr("models", "pull", "acme/../etc", GOMGR_MODELS_DIR=str(store))
    assert result.returncode == 1
    assert_one_error_line(result.stdout, result.stderr)
    assert not store.exists()
