"""The store on its own: layout, list, rm, work directories (CLI driven in-process)."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from manager.cli.commands import app
from manager.models.errors import InvalidRepoIdError
from manager.models.store import (
    METADATA_FILE,
    ModelMetadata,
    ModelStore,
    RepoId,
    default_store_root,
)

runner = CliRunner()


def _add_model(store: ModelStore, repo: str, payload: bytes) -> Path:
    """Put a small model into the store the way a pull does: staged, then committed."""
    with store.staging() as work:
        model_dir = work / "model"
        model_dir.mkdir()
        (model_dir / "config.json").write_text("{}\n")
        (model_dir / "model.safetensors").write_bytes(payload)
        metadata = ModelMetadata(repo=repo, source="hub", created=datetime.now(UTC))
        return store.commit(RepoId.parse(repo), model_dir, metadata).path


def test_default_root_follows_xdg(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("GOMGR_MODELS_DIR", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert default_store_root() == tmp_path / "xdg" / "gomgr" / "models"
    monkeypatch.delenv("XDG_DATA_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_store_root() == tmp_path / "home" / ".local" / "share" / "gomgr" / "models"
    monkeypatch.setenv("GOMGR_MODELS_DIR", str(tmp_path / "elsewhere"))
    assert default_store_root() == tmp_path / "elsewhere"


@pytest.mark.parametrize("text", ["noslash", "a/b/c", "../x", "a/..", ".hidden/x", "a/ b", ""])
def test_repo_id_rejects_what_is_not_org_slash_name(text: str) -> None:
    with pytest.raises(InvalidRepoIdError):
        RepoId.parse(text)


def test_list_shows_models_with_sizes(tmp_store: Path) -> None:
    path = _add_model(ModelStore(tmp_store), "acme/tiny", b"x" * 1234)
    result = runner.invoke(app, ["models", "list", "--json"])
    assert result.exit_code == 0, result.output
    [row] = json.loads(result.stdout)
    assert row["repo"] == "acme/tiny"
    assert row["path"] == str(path)
    assert row["size_bytes"] == sum(p.stat().st_size for p in path.iterdir())
    assert row["source"] == "hub"
    table = runner.invoke(app, ["models", "list"])
    assert "acme/tiny" in table.stdout and "KB" in table.stdout


def test_list_of_an_empty_store(tmp_store: Path) -> None:
    result = runner.invoke(app, ["models", "list"])
    assert result.exit_code == 0
    assert result.stdout.strip() == f"no models in {tmp_store}"


def test_rm_removes_and_a_second_rm_is_one_error_line(tmp_store: Path) -> None:
    path = _add_model(ModelStore(tmp_store), "acme/tiny", b"weights")
    first = runner.invoke(app, ["models", "rm", "acme/tiny"])
    assert first.exit_code == 0, first.output
    assert not path.exists() and not path.parent.exists()
    second = runner.invoke(app, ["models", "rm", "acme/tiny"])
    assert second.exit_code == 1
    assert second.stdout == ""
    assert second.stderr.strip().splitlines() == [
        f"error: acme/tiny is not in the model store at {tmp_store}"
    ]


def test_commit_writes_metadata_and_appears_at_once(tmp_path: Path) -> None:
    store = ModelStore(tmp_path / "store")
    path = _add_model(store, "acme/tiny", b"w")
    assert path == tmp_path / "store" / "acme" / "tiny"
    metadata = ModelMetadata.model_validate_json((path / METADATA_FILE).read_text())
    assert metadata.repo == "acme/tiny"
    assert [p.name for p in (tmp_path / "store").iterdir() if p.name.startswith(".tmp-")] == []


def test_staging_dir_is_removed_when_the_pull_fails(tmp_path: Path) -> None:
    store = ModelStore(tmp_path / "store")
    with pytest.raises(RuntimeError), store.staging() as work:
        (work / "model").mkdir()
        (work / "model" / "half-written.safetensors").write_bytes(b"\0" * 100)
        raise RuntimeError("conversion died")
    assert not work.exists()
    assert store.get(RepoId.parse("acme/tiny")) is None


def test_work_dirs_of_dead_pulls_are_swept(tmp_path: Path) -> None:
    store = ModelStore(tmp_path / "store")
    dead = tmp_path / "store" / ".tmp-999999999-deadbeef"  # above any pid_max
    alive = tmp_path / "store" / f".tmp-{os.getpid()}-cafecafe"
    for work_dir in (dead, alive):
        (work_dir / "model").mkdir(parents=True)
    with store.staging():
        pass
    assert not dead.exists()
    assert alive.exists()
