"""Bad input to `gomgr deploy render`: one `error:` line on stderr, exit 2, nothing written."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.manager.deploy.conftest import ENGINES_FILE, RenderCli


def one_error_line(result_stderr: str) -> str:
    lines = result_stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result_stderr
    return lines[0]


def write(tmp_path: Path, engines: str) -> Path:
    path = tmp_path / "engines.yaml"
    path.write_text(engines)
    return path


@pytest.mark.parametrize(
    ("engines", "said"),
    [
        ("engines:\n  - path: ./my-model\n", "a local directory"),
        ("engines:\n  - repo: org/model-GGUF:Q4_K_M\n", "a GGUF tag"),
        ("engines:\n  - repo: org/model\n    variant: vllm-upstream\n    gpus: 0\n",
         "the vllm image runs on GPUs only"),
        ("engines:\n  - repo: a/b.c\n  - repo: a/b-c\n", "would both be named gomgr-a-b-c"),
        ("engines:\n  - repo: org/model\n    gpus: -1\n", "greater than or equal to 0"),
    ],
    ids=["local-path", "gguf-tag", "vllm-on-cpu", "name-clash", "negative-gpus"],
)
def test_an_engine_the_target_cannot_express(
    render_cli: RenderCli, tmp_path: Path, engines: str, said: str
) -> None:
    out = tmp_path / "out"
    result = render_cli("-f", str(write(tmp_path, engines)), "-o", str(out))
    assert result.exit_code == 2
    assert said in one_error_line(result.stderr)
    assert not out.exists()


def test_unknown_target(render_cli: RenderCli) -> None:
    result = render_cli("-f", str(ENGINES_FILE), "--target", "nomad")
    assert result.exit_code == 2
    assert one_error_line(result.stderr) == (
        "error: --target 'nomad': choose one of kubernetes, kserve"
    )


def test_unknown_model_source(render_cli: RenderCli) -> None:
    result = render_cli("-f", str(ENGINES_FILE), "--model-source", "s3")
    assert result.exit_code == 2
    assert "--model-source 's3'" in one_error_line(result.stderr)


def test_missing_file(render_cli: RenderCli, tmp_path: Path) -> None:
    result = render_cli("-f", str(tmp_path / "nope.yaml"))
    assert result.exit_code == 2
    assert "nope.yaml: cannot read it" in one_error_line(result.stderr)


def test_apply_without_kubectl_is_one_line(
    render_cli: RenderCli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a PATH that has no kubectl (none is installed here anyway) it stops before
    rendering, so nothing is written either."""
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    out = tmp_path / "out"
    result = render_cli("-f", str(ENGINES_FILE), "--apply", "-o", str(out))
    assert result.exit_code == 2
    assert one_error_line(result.stderr).startswith("error: kubectl is not on PATH")
    assert result.stdout == ""
    assert not out.exists()


def test_gpus_that_disagree_with_the_manifests_tp_size(render_cli: RenderCli, tmp_path: Path) -> None:
    overrides = tmp_path / "config" / "manifests"
    overrides.mkdir(parents=True)
    (overrides / "tp4.yaml").write_text('repo: "org/*"\nengine_args: ["--tp-size", "4"]\n')
    result = render_cli("-f", str(write(tmp_path, "engines:\n  - repo: org/model\n    gpus: 2\n")))
    assert result.exit_code == 2
    assert "gpus: 2, but its manifest sets --tp-size 4" in one_error_line(result.stderr)
