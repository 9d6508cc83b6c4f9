"""GGUF pulls from a stand-in for the Hugging Face hub (tests/support/hub_stand_in.py): which
requests reach it tells which bytes of which file gomgr read."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from huggingface_hub import constants

from manager.gguf.header import FIRST_READ_BYTES
from manager.lifecycle.errors import StartBlocked
from manager.lifecycle.planning import check_before_download
from manager.models.pull import pull_model
from manager.models.store import ModelStore
from tests.manager.conftest import RunGomgr
from tests.support.cli_checks import assert_one_error_line
from tests.support.gomgr_env import Env
from tests.support.hub_stand_in import COMMIT, HubStandIn, running_hub
from tests.support.tiny_gguf import write_tiny_gguf

REPO = "test-org/Tiny-GGUF"
TAGS = ("Q2_K", "Q4_K_M", "Q8_0")


@pytest.fixture(scope="module")
def repo_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Three quantizations of one tiny model, each bigger than the first header read, so a
    range read and a download differ; and a README, as real GGUF repos have."""
    root = tmp_path_factory.mktemp("hub")
    files = {
        f"Tiny-{tag}.gguf": write_tiny_gguf(
            root / f"Tiny-{tag}.gguf", padding_bytes=FIRST_READ_BYTES * (i + 2)
        )
        for i, tag in enumerate(TAGS)
    }
    (root / "README.md").write_text("# Tiny\n")
    split = {
        f"Tiny-Q6_K-0000{i}-of-00002.gguf": write_tiny_gguf(root / f"Tiny-Q6_K-{i}.gguf")
        for i in (1, 2)
    }
    return {**files, "README.md": root / "README.md", **split}


@pytest.fixture
def hub(repo_files: dict[str, Path]) -> Iterator[HubStandIn]:
    with running_hub({REPO: repo_files}) as stand_in:
        yield stand_in


@pytest.fixture
def hub_in_process(hub: HubStandIn, monkeypatch: pytest.MonkeyPatch) -> HubStandIn:
    """The stand-in as this process's hub client sees it (HF_ENDPOINT is read at import)."""
    monkeypatch.setattr(constants, "ENDPOINT", hub.url)
    template = hub.url + "/{repo_id}/resolve/{revision}/{filename}"
    monkeypatch.setattr(constants, "HUGGINGFACE_CO_URL_TEMPLATE", template)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    return hub


def pull(
    run_gomgr: RunGomgr, hub: HubStandIn, store: Path, *args: str
) -> subprocess.CompletedProcess[str]:
    return run_gomgr(
        "models", "pull", *args, GOMGR_MODELS_DIR=str(store), HF_ENDPOINT=hub.url,
        HF_HUB_OFFLINE="0",
    )  # fmt: skip


class RecordedProgress:
    def __init__(self) -> None:
        self.transfers: list[tuple[int, int]] = []

    def step(self, description: str) -> None:
        pass

    def transferred(self, done: int, total: int) -> None:
        self.transfers.append((done, total))


def leftovers(store: Path) -> list[str]:
    return sorted(p.name for p in store.glob(".tmp-*")) if store.exists() else []


def test_a_tag_downloads_that_one_file_from_the_hub_stand_in(
    run_gomgr: RunGomgr, hub: HubStandIn, repo_files: dict[str, Path], tmp_path: Path
) -> None:
    store = tmp_path / "store"
    result = pull(run_gomgr, hub, store, f"{REPO}:q8_0")
    assert result.returncode == 0, result.stderr
    stored = store / "test-org" / "Tiny-GGUF:Q8_0"
    assert sorted(p.name for p in stored.iterdir()) == [".gomgr.json", "Tiny-Q8_0.gguf"]
    assert (stored / "Tiny-Q8_0.gguf").read_bytes() == repo_files["Tiny-Q8_0.gguf"].read_bytes()
    files = {r.path for r in hub.requests if not r.path.startswith("/api/")}
    assert files == {"Tiny-Q8_0.gguf"}  # no other quantization, no README
    metadata = json.loads((stored / ".gomgr.json").read_text())
    assert (metadata["gguf_file"], metadata["hub_revision"]) == ("Tiny-Q8_0.gguf", COMMIT)

    listed = run_gomgr("models", "list", "--json", GOMGR_MODELS_DIR=str(store))
    [row] = json.loads(listed.stdout)
    assert (row["repo"], row["served_name"]) == (f"{REPO}:Q8_0", f"{REPO}:Q8_0")
    assert row["gguf_file"] == "Tiny-Q8_0.gguf"


def test_a_bare_gguf_repo_pulls_q4_k_m_and_finds_it_offline(
    run_gomgr: RunGomgr, hub: HubStandIn, tmp_path: Path
) -> None:
    store = tmp_path / "store"
    result = pull(run_gomgr, hub, store, REPO)
    assert result.returncode == 0, result.stderr
    assert (store / "test-org" / "Tiny-GGUF:Q4_K_M" / "Tiny-Q4_K_M.gguf").is_file()
    again = run_gomgr("models", "pull", REPO, GOMGR_MODELS_DIR=str(store), HF_HUB_OFFLINE="1")
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip().startswith(f"{REPO}:Q4_K_M already present")


def test_a_tag_the_repo_lacks_is_one_line_listing_its_tags(
    run_gomgr: RunGomgr, hub: HubStandIn, tmp_path: Path
) -> None:
    store = tmp_path / "store"
    result = pull(run_gomgr, hub, store, f"{REPO}:Q5_K_M")
    assert result.returncode == 1
    line = assert_one_error_line(result.stdout, result.stderr)
    assert line == f"error: {REPO} has no GGUF tagged Q5_K_M; its tags: Q2_K, Q4_K_M, Q6_K, Q8_0"
    assert [r for r in hub.requests if not r.path.startswith("/api/")] == []
    assert leftovers(store) == [] and not (store / "test-org").exists()


def test_a_split_gguf_is_refused_in_one_line(
    run_gomgr: RunGomgr, hub: HubStandIn, tmp_path: Path
) -> None:
    store = tmp_path / "store"
    result = pull(run_gomgr, hub, store, f"{REPO}:Q6_K")
    assert result.returncode == 1
    line = assert_one_error_line(result.stdout, result.stderr)
    assert "split into 2 files" in line and "single-file GGUFs only" in line
    assert leftovers(store) == [] and not (store / "test-org").exists()


def test_the_header_is_range_read_before_the_one_download(
    hub_in_process: HubStandIn, repo_files: dict[str, Path], tmp_path: Path
) -> None:
    """What `gomgr start` does for a model not yet local: readiness, then the pull."""
    store = ModelStore(tmp_path / "store")
    check_before_download(f"{REPO}:Q2_K", "process", None)
    progress = RecordedProgress()
    pull_model(f"{REPO}:Q2_K", store, progress=progress)
    size = repo_files["Tiny-Q2_K.gguf"].stat().st_size
    assert progress.transfers[-1] == (size, size)  # the download's bytes reach the CLI's bar

    hub = hub_in_process
    reads = [r for r in hub.file_requests("Tiny-Q2_K.gguf") if r.method == "GET"]
    assert [r.range for r in reads] == [f"bytes=0-{FIRST_READ_BYTES - 1}", None]
    assert repo_files["Tiny-Q2_K.gguf"].stat().st_size > FIRST_READ_BYTES
    assert {r.path for r in hub.requests if not r.path.startswith("/api/")} == {"Tiny-Q2_K.gguf"}


def test_a_start_blocked_by_readiness_reads_only_the_header(
    hub_in_process: HubStandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A start the readiness checks stop reads the header and downloads nothing."""
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-dockerd.sock")
    with pytest.raises(StartBlocked):
        check_before_download(f"{REPO}:Q8_0", "docker", None)
    reads = hub_in_process.file_requests("Tiny-Q8_0.gguf")
    assert reads and all(r.range is not None for r in reads)


def test_doctor_sizes_a_bare_gguf_repo_by_its_default_tags_header(
    run_gomgr: RunGomgr, hub: HubStandIn, repo_files: dict[str, Path], tmp_path: Path
) -> None:
    """No safetensors metadata to size it by: the Q4_K_M file's header is read instead."""
    result = run_gomgr(
        "doctor", REPO, "--runtime", "process", "--json", GOMGR_MODELS_DIR=str(tmp_path / "store"),
        HF_ENDPOINT=hub.url, HF_HUB_OFFLINE="0",
    )  # fmt: skip
    report = json.loads(result.stdout)
    size = repo_files["Tiny-Q4_K_M.gguf"].stat().st_size
    assert report["weights"]["total_bytes"] == size, result.stdout
    assert report["context_tokens"] == 2048  # the header's context length caps the default
    reads = [r for r in hub.file_requests("Tiny-Q4_K_M.gguf") if r.method == "GET"]
    assert [r.range for r in reads] == [f"bytes=0-{FIRST_READ_BYTES - 1}"]
    assert {r.path for r in hub.requests if r.path.endswith(".gguf")} == {"Tiny-Q4_K_M.gguf"}


def test_start_of_a_tag_the_repo_lacks_is_one_line_and_leaves_nothing(
    hub: HubStandIn, tmp_path: Path
) -> None:
    """Through the supervisor, as a user runs it: one line, exit 1, no engine, no files."""
    store = tmp_path / "store"
    env = Env.isolated(tmp_path / "gomgr", store)
    env.vars.update({"HF_ENDPOINT": hub.url, "HF_HUB_OFFLINE": "0"})
    try:
        result = env.gomgr("start", f"{REPO}:q5_k_m", "--runtime", "process")
        assert env.ps() == []
    finally:
        env.end_everything()
    assert result.returncode == 1, result.stderr
    assert assert_one_error_line(result.stdout, result.stderr) == (
        f"error: {REPO} has no GGUF tagged Q5_K_M; its tags: Q2_K, Q4_K_M, Q6_K, Q8_0"
    )
    assert [r for r in hub.requests if not r.path.startswith("/api/")] == []
    assert leftovers(store) == [] and not (store / "test-org").exists()
