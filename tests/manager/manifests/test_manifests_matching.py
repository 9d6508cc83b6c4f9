"""Selection: repo glob first, then architecture, then the generic default; variants."""

from __future__ import annotations

from pathlib import Path

import pytest

from manager.manifests.effective import Origin
from manager.manifests.engine_support import ModelTraits
from manager.manifests.errors import ManifestError
from manager.manifests.locations import builtin_dir
from manager.manifests.resolve import resolve_manifest


def test_smollm2_repo_selects_smollm2() -> None:
    effective = resolve_manifest("HuggingFaceTB/SmolLM2-135M-Instruct", ModelTraits("LlamaForCausalLM"))
    assert effective.name == "smollm2"
    assert effective.tool_call_parser is None
    assert effective.served_name == "HuggingFaceTB/SmolLM2-135M-Instruct"
    assert effective.sources["context_length"].path == builtin_dir() / "smollm2.yaml"


def test_qwen25_repo_selects_qwen25_with_its_parser() -> None:
    effective = resolve_manifest("Qwen/Qwen2.5-7B-Instruct", None)
    assert (effective.name, effective.tool_call_parser) == ("qwen25", "qwen25")
    assert effective.selected_by == "repo pattern 'Qwen/Qwen2.5-*'"
    assert effective.sources["tool_call_parser"].origin is Origin.BUILTIN
    assert effective.sources["tool_call_parser"].path == builtin_dir() / "qwen25.yaml"
    assert effective.sources["engine"].origin is Origin.DEFAULT


def test_repo_glob_matching_ignores_case() -> None:
    assert resolve_manifest("qwen/qwen2.5-0.5b-instruct", None).name == "qwen25"


def test_unknown_repo_with_qwen3_architecture_selects_qwen3() -> None:
    effective = resolve_manifest("someone/finetune", ModelTraits("Qwen3ForCausalLM"))
    assert effective.name == "qwen3"
    assert effective.selected_by == "architecture 'Qwen3ForCausalLM'"
    assert (effective.tool_call_parser, effective.reasoning_parser) == ("qwen25", "qwen3")


def test_repo_match_beats_architecture_match() -> None:
    assert resolve_manifest("Qwen/Qwen2.5-7B-Instruct", ModelTraits("Qwen3ForCausalLM")).name == "qwen25"


def test_unknown_everything_is_the_default_without_parsers() -> None:
    effective = resolve_manifest("someone/something", None)
    assert effective.name == "default"
    assert (effective.engine, effective.image) == ("gomgr", "gomgr-engine:latest")
    assert (effective.tool_call_parser, effective.reasoning_parser) == (None, None)
    assert (effective.shm_size, effective.engine_args, dict(effective.env)) == ("32g", (), {})
    assert {s.origin for s in effective.sources.values()} == {Origin.DEFAULT}


def test_llama_architecture_alone_switches_no_tool_parser() -> None:
    effective = resolve_manifest("someone/llama-finetune", ModelTraits("LlamaForCausalLM"))
    assert (effective.name, effective.tool_call_parser) == ("default", None)


def test_llama3_0_gets_no_parser_but_3_1_does() -> None:
    assert resolve_manifest("meta-llama/Meta-Llama-3-8B-Instruct", None).tool_call_parser is None
    assert resolve_manifest("meta-llama/Llama-3.1-8B-Instruct", None).tool_call_parser == "llama3"


def test_local_directory_matches_by_its_org_and_name(tmp_path: Path) -> None:
    model_dir = tmp_path / "HuggingFaceTB" / "SmolLM2-360M-Instruct"
    effective = resolve_manifest(str(model_dir), None)
    assert effective.name == "smollm2"
    assert effective.served_name == "SmolLM2-360M-Instruct"


def test_variant_layers_the_upstream_engine_over_the_family() -> None:
    effective = resolve_manifest("Qwen/Qwen2.5-7B-Instruct", None, variant="sglang-upstream")
    assert (effective.name, effective.engine) == ("sglang-upstream", "sglang")
    assert effective.image == "lmsysorg/sglang:latest"
    assert effective.tool_call_parser == "qwen25"
    assert effective.sources["tool_call_parser"].path == builtin_dir() / "qwen25.yaml"
    assert effective.sources["engine"].path == builtin_dir() / "sglang-upstream.yaml"


def test_unknown_variant_fails_with_the_known_names() -> None:
    with pytest.raises(ManifestError, match="no manifest named 'nope' .*sglang-upstream"):
        resolve_manifest("Qwen/Qwen2.5-7B-Instruct", None, variant="nope")
