"""The shipped manifests load, validate and agree with the engine's parser names."""

from __future__ import annotations

from typing import get_args

from engine.function_call.registry import TOOL_CALL_DETECTORS
from engine.reasoning.registry import REASONING_FORMATS
from manager.manifests.catalog import load_catalog
from manager.manifests.loading import load_yaml_model
from manager.manifests.locations import builtin_dir
from manager.manifests.schema import ManifestFile, ReasoningParser, ToolCallParser

EXPECTED = {"smollm2", "llama3", "qwen25", "qwen3", "mistral", "sglang-upstream", "vllm-upstream"}


def test_every_builtin_file_validates_and_is_named_after_its_file() -> None:
    paths = sorted(builtin_dir().glob("*.yaml"))
    assert {p.stem for p in paths} == EXPECTED
    for path in paths:
        assert load_yaml_model(path, ManifestFile).name == path.stem


def test_catalog_holds_every_builtin() -> None:
    assert set(load_catalog().names()) == EXPECTED


def test_parser_names_equal_the_engines() -> None:
    assert set(get_args(ToolCallParser)) == set(TOOL_CALL_DETECTORS)
    assert set(get_args(ReasoningParser)) == set(REASONING_FORMATS)


def test_builtin_parsers_are_the_documented_ones() -> None:
    catalog = load_catalog()
    parsers = {m.name: (m.tool_call_parser, m.reasoning_parser) for m in catalog.manifests}
    assert parsers == {
        "smollm2": (None, None),
        "llama3": ("llama3", None),
        "qwen25": ("qwen25", None),
        "qwen3": ("qwen25", "qwen3"),
        "mistral": ("mistral", None),
        "sglang-upstream": (None, None),
        "vllm-upstream": (None, None),
    }


def test_upstream_manifests_match_nothing_by_themselves() -> None:
    catalog = load_catalog()
    for name, engine in (("sglang-upstream", "sglang"), ("vllm-upstream", "vllm")):
        manifest = catalog.get(name)
        assert manifest is not None
        assert (manifest.repos, manifest.architectures, manifest.engine) == ((), (), engine)
