"""The store's layout for tagged models: `<org>/<name>:<TAG>/` holding one GGUF file."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from manager.lifecycle.desired_state import load_desired_state
from manager.models.errors import InvalidRepoIdError
from manager.models.store import ModelMetadata, ModelStore, RepoId
from manager.runtimes.docker import _model_path


def _commit(store: ModelStore, repo: str, *, untagged_default: bool = False) -> None:
    repo_id = RepoId.parse(repo)
    with store.staging() as work:
        model_dir = store.ensure_dir(work / "model")
        (model_dir / "m.gguf").write_bytes(b"GGUF")
        metadata = ModelMetadata(
            repo=str(repo_id), source="hub", gguf_file="m.gguf",
            untagged_default=untagged_default, created=datetime.now(UTC),
        )  # fmt: skip
        store.commit(repo_id, model_dir, metadata)


def test_tags_parse_case_insensitively_and_repo_ids_stay_as_they_were() -> None:
    assert RepoId.parse("a/b:q4_k_m") == RepoId("a", "b", "Q4_K_M")
    assert str(RepoId.parse("a/b:q4_k_m")) == "a/b:Q4_K_M"
    assert RepoId.parse("a/b").repo == "a/b" and RepoId.parse("a/b").tag is None
    for bad in ("a/b:", "a/b:x:y", "a/b:-x", "a:b/c"):
        with pytest.raises(InvalidRepoIdError):
            RepoId.parse(bad)


def test_a_tagged_model_is_listed_got_and_removed_by_its_tag(tmp_path: Path) -> None:
    store = ModelStore(tmp_path)
    _commit(store, "org/Model-GGUF:Q8_0")
    [listed] = store.models()
    assert listed.repo == "org/Model-GGUF:Q8_0"
    assert listed.model_path == tmp_path / "org" / "Model-GGUF:Q8_0" / "m.gguf"
    stored = store.get(RepoId.parse("org/Model-GGUF:q8_0"))
    assert stored is not None and stored.path == listed.path
    assert store.get(RepoId.parse("org/Model-GGUF")) is None
    store.remove(RepoId.parse("org/Model-GGUF:q8_0"))
    assert store.models() == []


def test_a_bare_name_finds_only_the_tag_it_chose(tmp_path: Path) -> None:
    store = ModelStore(tmp_path)
    _commit(store, "org/Model-GGUF:Q8_0")
    assert store.get_or_default_tag(RepoId.parse("org/Model-GGUF")) is None
    _commit(store, "org/Model-GGUF:Q4_K_M", untagged_default=True)
    found = store.get_or_default_tag(RepoId.parse("org/Model-GGUF"))
    assert found is not None and found.repo == "org/Model-GGUF:Q4_K_M"


def test_a_container_found_by_its_labels_gets_its_gguf_file_back() -> None:
    args = ("--model-path", "/model/m.gguf", "--served-model-name", "x")
    assert _model_path("/store/org/M:Q8_0", args) == Path("/store/org/M:Q8_0/m.gguf")
    assert _model_path("/store/org/M", ("--model-path", "/model")) == Path("/store/org/M")


def test_a_desired_state_entry_spells_its_tag_as_the_store_does(tmp_path: Path) -> None:
    path = tmp_path / "engines.yaml"
    path.write_text("engines:\n  - repo: org/Model-GGUF:q4_k_m\n")
    [entry] = load_desired_state(path).engines
    assert (entry.repo, entry.key) == ("org/Model-GGUF:Q4_K_M", "org/Model-GGUF:Q4_K_M")
