"""User overrides ("engine variants") from the config dir, and how invalid ones fail."""

from __future__ import annotations

from pathlib import Path

import pytest

from manager.manifests.catalog import load_catalog
from manager.manifests.effective import VALUE_FIELDS, EffectiveManifest, Origin
from manager.manifests.errors import ManifestError
from manager.manifests.resolve import resolve_manifest as resolve

MODELS = [
    ("HuggingFaceTB/SmolLM2-135M-Instruct", None),
    ("Qwen/Qwen2.5-7B-Instruct", None),
    ("Qwen/Qwen3-8B", None),
    ("meta-llama/Llama-3.2-1B-Instruct", None),
    ("mistralai/Mistral-7B-Instruct-v0.3", None),
    ("someone/unknown", None),
]


def _values(effective: EffectiveManifest) -> dict[str, object]:
    return {field: getattr(effective, field) for field in ("name", *VALUE_FIELDS)}


def test_override_changes_one_models_parser_and_nothing_else(overrides_dir: Path) -> None:
    before = {repo: resolve(repo, arch) for repo, arch in MODELS}
    catalog_before = load_catalog()
    override = overrides_dir / "qwen25-hermes.yaml"
    override.write_text("overrides: qwen25\ntool_call_parser: hermes\n")

    after = {repo: resolve(repo, arch) for repo, arch in MODELS}
    changed = after["Qwen/Qwen2.5-7B-Instruct"]
    assert changed.tool_call_parser == "hermes"
    assert changed.sources["tool_call_parser"].origin is Origin.OVERRIDE
    assert changed.sources["tool_call_parser"].path == override
    original = before["Qwen/Qwen2.5-7B-Instruct"]
    assert {**_values(changed), "tool_call_parser": "qwen25"} == _values(original)
    assert {k: v for k, v in changed.sources.items() if k != "tool_call_parser"} == {
        k: v for k, v in original.sources.items() if k != "tool_call_parser"
    }
    for repo, _ in MODELS:
        if repo != "Qwen/Qwen2.5-7B-Instruct":
            assert after[repo] == before[repo], repo
    catalog_after = load_catalog()
    for manifest in catalog_before.manifests:
        if manifest.name != "qwen25":
            assert catalog_after.get(manifest.name) == manifest


def test_repo_override_applies_to_matching_repos_only(overrides_dir: Path) -> None:
    override = overrides_dir / "big-qwen.yaml"
    override.write_text('repo: "Qwen/Qwen2.5-72B-*"\ncontext_length: 16384\nshm_size: 64g\n')
    big = resolve("Qwen/Qwen2.5-72B-Instruct", None)
    assert (big.name, big.context_length, big.shm_size) == ("qwen25", 16384, "64g")
    assert big.sources["shm_size"].path == override
    small = resolve("Qwen/Qwen2.5-7B-Instruct", None)
    assert (small.context_length, small.shm_size) == (None, "32g")


def test_override_null_switches_a_parser_off(overrides_dir: Path) -> None:
    (overrides_dir / "no-tools.yaml").write_text("overrides: qwen3\ntool_call_parser: null\n")
    effective = resolve("Qwen/Qwen3-8B", None)
    assert (effective.tool_call_parser, effective.reasoning_parser) == (None, "qwen3")
    assert effective.sources["tool_call_parser"].origin is Origin.OVERRIDE


def test_override_can_send_repos_to_an_upstream_image(overrides_dir: Path) -> None:
    (overrides_dir / "vllm.yaml").write_text(
        "overrides: vllm-upstream\n"
        'match: {repos: ["meta-llama/Llama-3.*"]}\n'
        "priority: 10\n"
        "tool_call_parser: llama3\n"
    )
    effective = resolve("meta-llama/Llama-3.2-1B-Instruct", None)
    assert (effective.name, effective.engine, effective.tool_call_parser) == (
        "vllm-upstream", "vllm", "llama3",
    )
    assert resolve("Qwen/Qwen2.5-7B-Instruct", None).engine == "gomgr"


@pytest.mark.parametrize(
    ("text", "field", "reason"),
    [
        ("overrides: qwen25\ntool_parser: hermes\n", "tool_parser", "unknown field"),
        ("overrides: qwen25\ntool_call_parser: qwen\n", "tool_call_parser", "Input should be"),
        ("overrides: qwen25\nshm_size: lots\n", "shm_size", "not a size"),
        ("overrides: qwen25\nengine: null\n", "engine", "may not be null"),
        ("overrides: qwen25\nengine_args: [--port, '1']\n", "engine_args", "--port may not"),
        ("overrides: qwen25\nserved_name: '{org}'\n", "served_name", "unknown placeholder"),
        ("overrides: nope\n", "overrides", "no manifest named 'nope'"),
    ],
)
def test_invalid_override_fails_in_one_line_naming_file_field_reason(
    overrides_dir: Path, text: str, field: str, reason: str
) -> None:
    path = overrides_dir / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ManifestError) as info:
        resolve("Qwen/Qwen2.5-7B-Instruct", None)
    message = info.value.message
    assert "\n" not in message
    assert message.startswith(f"{path}: field '{field}': ")
    assert reason in message


def test_bad_yaml_fails_in_one_line_with_its_position(overrides_dir: Path) -> None:
    path = overrides_dir / "bad.yaml"
    path.write_text("overrides: qwen25\ntool_call_parser: [hermes\n")
    with pytest.raises(ManifestError) as info:
        resolve("someone/unknown", None)
    message = info.value.message
    assert "\n" not in message
    assert message.startswith(f"{path}: invalid YAML: line ")


def test_override_without_a_target_fails(overrides_dir: Path) -> None:
    path = overrides_dir / "bad.yaml"
    path.write_text("tool_call_parser: hermes\n")
    with pytest.raises(ManifestError, match="exactly one of 'overrides'"):
        resolve("someone/unknown", None)
