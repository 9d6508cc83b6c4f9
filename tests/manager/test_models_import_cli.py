"""`gomgr models pull DIR --name org/name`: a local model directory copied into the store,
through the real console script."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from manager.models.store import METADATA_FILE
from tests.manager.conftest import RunGomgr
from tests.support.cli_checks import assert_one_error_line, store_leftovers

COPY = "test/smollm2-copy"


def _small_model(directory: Path, weights: str = "model.safetensors") -> Path:
    """A directory that passes the import's checks (no engine loads it here)."""
    directory.mkdir(parents=True)
    (directory / "config.json").write_text('{"architectures": ["LlamaForCausalLM"]}\n')
    (directory / weights).write_bytes(b"weights")
    return directory


def _import(
    run_gomgr: RunGomgr, source: Path, store: Path
) -> subprocess.CompletedProcess[str]:
    env = {"GOMGR_MODELS_DIR": str(store)}
    return run_gomgr("models", "pull", str(source), "--name", "acme/tiny", **env)


def _listed(run_gomgr: RunGomgr, store: Path) -> list[dict[str, Any]]:
    result = run_gomgr("models", "list", "--json", GOMGR_MODELS_DIR=str(store))
    assert result.returncode == 0, result.stderr
    return list(json.loads(result.stdout))


def _files(directory: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(directory)): p.read_bytes()
        for p in sorted(directory.rglob("*"))
        if p.is_file() and p.name != METADATA_FILE
    }


def test_import_copies_smollm2_lists_it_and_rm_removes_it(
    run_gomgr: RunGomgr, smollm2_dir: Path, tmp_path: Path
) -> None:
    store = tmp_path / "store"
    result = run_gomgr(
        "models", "pull", str(smollm2_dir), "--name", COPY, GOMGR_MODELS_DIR=str(store)
    )
    assert result.returncode == 0, result.stderr
    stored = store / COPY
    assert result.stdout.startswith(f"imported {smollm2_dir} as {COPY} to {stored} (")
    assert _files(stored) == _files(smollm2_dir)
    # A copy, not hard links: editing the source later must not change the stored model.
    weights = "model.safetensors"
    assert (stored / weights).stat().st_ino != (smollm2_dir / weights).stat().st_ino
    [row] = _listed(run_gomgr, store)
    assert (row["repo"], row["path"], row["source"]) == (COPY, str(stored), "local")
    assert row["imported_from"] == str(smollm2_dir.resolve())
    assert store_leftovers(store) == ["test"]

    removed = run_gomgr("models", "rm", COPY, GOMGR_MODELS_DIR=str(store))
    assert removed.returncode == 0, removed.stderr
    assert _listed(run_gomgr, store) == []
    assert (smollm2_dir / weights).is_file()


def test_an_existing_name_is_refused_unless_force(run_gomgr: RunGomgr, tmp_path: Path) -> None:
    store = tmp_path / "store"
    first = _small_model(tmp_path / "first")
    second = _small_model(tmp_path / "second", weights="model.gguf")
    env = {"GOMGR_MODELS_DIR": str(store)}
    assert run_gomgr("models", "pull", str(first), "--name", "acme/tiny", **env).returncode == 0

    refused = run_gomgr("models", "pull", str(second), "--name", "acme/tiny", **env)
    assert refused.returncode == 1
    line = assert_one_error_line(refused.stdout, refused.stderr)
    assert "acme/tiny is already in the model store" in line and "--force" in line
    assert sorted(p.name for p in (store / "acme/tiny").iterdir()) == [
        METADATA_FILE, "config.json", "model.safetensors"
    ]  # fmt: skip

    forced = run_gomgr("models", "pull", str(second), "--name", "acme/tiny", "--force", **env)
    assert forced.returncode == 0, forced.stderr
    assert sorted(p.name for p in (store / "acme/tiny").iterdir()) == [
        METADATA_FILE, "config.json", "model.gguf"
    ]  # fmt: skip
    [row] = _listed(run_gomgr, store)
    assert row["imported_from"] == str(second)
    assert store_leftovers(store) == ["acme"]


def test_hidden_entries_are_not_copied(run_gomgr: RunGomgr, tmp_path: Path) -> None:
    source = _small_model(tmp_path / "model")
    (source / ".git" / "lfs").mkdir(parents=True)
    (source / ".git" / "lfs" / "object").write_bytes(b"weights again")
    (source / METADATA_FILE).write_text("{}")
    (source / "nested").mkdir()
    (source / "nested" / "tokenizer.model").write_bytes(b"tok")
    store = tmp_path / "store"
    result = _import(run_gomgr, source, store)
    assert result.returncode == 0, result.stderr
    assert _files(store / "acme/tiny") == {
        "config.json": b'{"architectures": ["LlamaForCausalLM"]}\n',
        "model.safetensors": b"weights",
        "nested/tokenizer.model": b"tok",
    }


def _bad_dirs(root: Path) -> dict[str, tuple[Path, str]]:
    no_config = root / "no-config"
    no_config.mkdir()
    (no_config / "model.safetensors").write_bytes(b"w")
    bad_json = _small_model(root / "bad-json")
    (bad_json / "config.json").write_text("{not json")
    not_object = _small_model(root / "not-object")
    (not_object / "config.json").write_text("[1, 2]")
    no_weights = _small_model(root / "no-weights")
    (no_weights / "model.safetensors").unlink()
    (no_weights / "pytorch_model.bin").write_bytes(b"w")
    # NOTE: a named pipe sorts after the weights, so the copy fails half-way, inside staging.
    half_copied = _small_model(root / "half-copied")
    os.mkfifo(half_copied / "zz-pipe")
    return {
        "missing": (root / "missing", "is not a directory"),
        "no-config": (no_config, "has no config.json"),
        "bad-json": (bad_json, "is not valid JSON"),
        "not-object": (not_object, "is not a JSON object"),
        "no-weights": (no_weights, "has no weights (*.safetensors or *.gguf)"),
        "half-copied": (half_copied, "cannot copy"),
    }


@pytest.mark.parametrize(
    "case", ["missing", "no-config", "bad-json", "not-object", "no-weights", "half-copied"]
)
def test_a_bad_directory_is_one_error_line_and_leaves_nothing(
    run_gomgr: RunGomgr, tmp_path: Path, case: str
) -> None:
    source, why = _bad_dirs(tmp_path)[case]
    store = tmp_path / "store"
    result = _import(run_gomgr, source, store)
    assert result.returncode == 1
    line = assert_one_error_line(result.stdout, result.stderr)
    assert why in line and str(source) in line
    assert store_leftovers(store) == []


@pytest.mark.parametrize(
    ("args", "why"),
    [
        (["DIR"], "give --name org/name"),
        (["./relative/dir"], "give --name org/name"),
        (["DIR", "--name", "no-slash"], "--name: 'no-slash' is not a Hugging Face repo id"),
        (["DIR", "--name", "a/b/c"], "--name: 'a/b/c' is not a Hugging Face repo id"),
        (["DIR", "--name", "../x"], "--name: '../x' is not a Hugging Face repo id"),
        (["DIR", "--name", "acme/x", "--source", "hub"], "--source does not apply"),
        (["acme/x", "--force"], "--force applies only to importing a directory"),
    ],
)
def test_usage_errors_exit_2_with_one_line(
    run_gomgr: RunGomgr, tmp_path: Path, args: list[str], why: str
) -> None:
    source = str(_small_model(tmp_path / "model"))
    store = tmp_path / "store"
    argv = [source if arg == "DIR" else arg for arg in args]
    result = run_gomgr("models", "pull", *argv, GOMGR_MODELS_DIR=str(store))
    assert result.returncode == 2
    assert why in assert_one_error_line(result.stdout, result.stderr)
    assert not store.exists()


def test_a_store_inside_the_directory_is_refused(run_gomgr: RunGomgr, tmp_path: Path) -> None:
    source = _small_model(tmp_path / "model")
    store = source / "store"
    result = _import(run_gomgr, source, store)
    assert result.returncode == 1
    assert "lies inside" in assert_one_error_line(result.stdout, result.stderr)
    assert store_leftovers(store) == []
