"""How a GGUF model is started: its manifest, its served name, the path each runtime passes."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from docker.types import Mount

from manager.lifecycle.planning import plan_start
from manager.manifests.architecture import traits_of
from manager.manifests.resolve import resolve_manifest
from manager.models.errors import ModelError
from manager.models.model_path import path_inside
from manager.models.pull import resolve_model
from manager.runtimes.base import ContainerSpec, EngineSpec
from manager.runtimes.docker import CONTAINER_MODEL_DIR, DockerRuntime
from manager.state.paths import StatePaths
from tests.manager.conftest import SMOLLM2_Q4_1, RunGomgr
from tests.support.cli_checks import assert_one_error_line
from tests.support.gomgr_env import GOMGR, Env
from tests.support.tiny_gguf import write_tiny_gguf


def _flag(args: tuple[str, ...], name: str) -> str:
    return args[args.index(name) + 1]


def test_a_tagged_model_runs_its_gguf_file_under_its_tagged_name(smollm2_gguf: Path) -> None:
    plan = plan_start(SMOLLM2_Q4_1, smollm2_gguf, "process", None, None)
    assert _flag(plan.engine_args, "--model-path") == str(smollm2_gguf)
    assert _flag(plan.engine_args, "--served-model-name") == SMOLLM2_Q4_1
    assert plan.served_name == SMOLLM2_Q4_1


def test_a_tagged_repo_gets_its_familys_manifest_by_repo_name() -> None:
    effective = resolve_manifest("Qwen/Qwen2.5-7B-Instruct-GGUF:Q4_K_M", None)
    assert (effective.name, effective.tool_call_parser) == ("qwen25", "qwen25")
    assert effective.served_name == "Qwen/Qwen2.5-7B-Instruct-GGUF:Q4_K_M"
    assert resolve_manifest(SMOLLM2_Q4_1, None).name == "smollm2"


def test_a_local_gguf_file_gets_its_manifest_by_general_architecture(tmp_path: Path) -> None:
    path = write_tiny_gguf(tmp_path / "my-finetune-q8_0.gguf", arch="qwen2")
    assert traits_of(path).architecture == "Qwen2ForCausalLM"
    effective = resolve_manifest(str(path), traits_of(path))
    assert effective.name == "qwen25" and effective.selected_by == "architecture 'Qwen2ForCausalLM'"
    assert effective.served_name == "my-finetune-q8_0"


def test_a_local_gguf_path_resolves_to_the_file(tmp_path: Path) -> None:
    path = write_tiny_gguf(tmp_path / "m.gguf")
    assert resolve_model(str(path)).model_path == path
    assert resolve_model(str(tmp_path)).model_path == path  # a directory of one GGUF
    with pytest.raises(ModelError, match="there is no GGUF file"):
        resolve_model(str(tmp_path / "missing.gguf"))


def test_a_container_mounts_the_files_directory_and_is_given_the_path_inside(
    tmp_path: Path,
) -> None:
    gguf = tmp_path / "Tiny-GGUF:Q8_0" / "Tiny-Q8_0.gguf"
    assert path_inside(gguf, CONTAINER_MODEL_DIR) == "/model/Tiny-Q8_0.gguf"
    assert path_inside(tmp_path, CONTAINER_MODEL_DIR) == "/model"
    spec = EngineSpec(
        id="e-1", repo="test-org/Tiny-GGUF:Q8_0", model_dir=gguf, served_name="m", port=1,
        engine_args=("--model-path", "/model/Tiny-Q8_0.gguf"), container=ContainerSpec("engine:cpu"),
    )  # fmt: skip
    kwargs = DockerRuntime(StatePaths(tmp_path)).create_kwargs(spec)
    assert kwargs["mounts"] == [Mount("/model", str(gguf.parent), type="bind", read_only=True)]


def test_pulling_a_gguf_file_says_to_start_it(run_gomgr: RunGomgr, tmp_path: Path) -> None:
    result = run_gomgr("models", "pull", "./m.gguf", GOMGR_MODELS_DIR=str(tmp_path / "store"))
    assert result.returncode == 2
    line = assert_one_error_line(result.stdout, result.stderr)
    assert (
        line == "error: a GGUF file needs no pull: `gomgr start ./m.gguf` serves it where it lies"
    )


def test_a_relative_gguf_path_is_resolved_where_it_was_typed(tmp_path: Path) -> None:
    """The supervisor runs the start in its own working directory (here: another one, where
    its router was started); the CLI makes the path absolute where it was typed."""
    env = Env.isolated(tmp_path / "gomgr", tmp_path / "store")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    try:
        for command, cwd in (
            (["router", "start"], elsewhere),
            (["start", "./missing.gguf"], tmp_path),
        ):
            result = subprocess.run(
                [str(GOMGR), *command], cwd=cwd, env=env.vars, capture_output=True, text=True,
                timeout=120, check=False,
            )  # fmt: skip
    finally:
        env.end_everything()
    assert result.returncode == 1
    line = assert_one_error_line(result.stdout, result.stderr)
    assert line == f"error: there is no GGUF file {tmp_path / 'missing.gguf'}"
