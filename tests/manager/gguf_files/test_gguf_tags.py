"""Which file `org/name:TAG` (or a bare `org/name`) picks among a repo's GGUF files."""

from __future__ import annotations

import pytest

from manager.gguf.tags import parse_file_name, tag_bits
from manager.models.errors import NoSuchTagError, UnsupportedGgufError
from manager.models.gguf_choice import RepoFile, choose_gguf

REPO = "bartowski/Qwen2.5-7B-Instruct-GGUF"


@pytest.mark.parametrize(
    ("name", "tag"),
    [
        ("Qwen2.5-7B-Instruct-Q4_K_M.gguf", "Q4_K_M"),
        ("qwen2.5-0.5b-instruct-q8_0.gguf", "Q8_0"),
        ("SmolLM2-135M-Instruct.Q4_1.gguf", "Q4_1"),
        ("Llama-3.2-1B-Instruct-UD-Q4_K_XL.gguf", "UD-Q4_K_XL"),
        ("Qwen2.5-7B-Instruct-IQ4_XS.gguf", "IQ4_XS"),
        ("model-f16.gguf", "F16"),
        ("Qwen3-8B-BF16.gguf", "BF16"),
        ("Q4_K_M/Qwen3-235B-Q4_K_M-00001-of-00003.gguf", "Q4_K_M"),
    ],
)
def test_tag_from_file_name(name: str, tag: str) -> None:
    parsed = parse_file_name(name)
    assert parsed is not None and parsed.tag == tag


@pytest.mark.parametrize(
    "name", ["mmproj-model-f16.gguf", "README.md", "model.safetensors", "imatrix-Q4_K_M.gguf"]
)
def test_files_that_are_not_tagged_models(name: str) -> None:
    assert parse_file_name(name) is None


def test_split_parts_are_counted() -> None:
    parsed = parse_file_name("Qwen3-8B-Q8_0-00002-of-00003.gguf")
    assert parsed is not None and (parsed.part, parsed.parts, parsed.is_split) == (2, 3, True)


@pytest.mark.parametrize(
    ("tag", "bits"), [("Q4_K_M", 4), ("IQ3_XXS", 3), ("Q8_0", 8), ("BF16", 16), ("UD-Q2_K_XL", 2)]
)
def test_tag_bits(tag: str, bits: int) -> None:
    assert tag_bits(tag) == bits


FILES = [
    RepoFile("README.md", 5_000),
    RepoFile("Qwen2.5-7B-Instruct-Q2_K.gguf", 3_000),
    RepoFile("Qwen2.5-7B-Instruct-IQ4_XS.gguf", 4_200),
    RepoFile("Qwen2.5-7B-Instruct-Q4_K_M.gguf", 4_700),
    RepoFile("Qwen2.5-7B-Instruct-Q8_0.gguf", 8_100),
    RepoFile("Qwen2.5-7B-Instruct-f16.gguf", 15_000),
]


def test_default_is_q4_k_m() -> None:
    assert choose_gguf(REPO, FILES, None).file.path == "Qwen2.5-7B-Instruct-Q4_K_M.gguf"


def test_default_without_q4_k_m_is_the_smallest_of_at_least_4_bits() -> None:
    files = [f for f in FILES if "Q4_K_M" not in f.path]
    choice = choose_gguf(REPO, files, None)
    assert (choice.tag, choice.file.size) == ("IQ4_XS", 4_200)  # not Q2_K, the smallest


def test_tags_match_case_insensitively() -> None:
    choice = choose_gguf(REPO, FILES, "q8_0")
    assert (choice.tag, choice.file.path) == ("Q8_0", "Qwen2.5-7B-Instruct-Q8_0.gguf")
    assert choose_gguf(REPO, FILES, "F16").file.path == "Qwen2.5-7B-Instruct-f16.gguf"


def test_a_tag_the_repo_lacks_lists_the_tags_it_has() -> None:
    with pytest.raises(NoSuchTagError) as caught:
        choose_gguf(REPO, FILES, "Q5_K_M")
    assert caught.value.message == (
        f"{REPO} has no GGUF tagged Q5_K_M; its tags: F16, IQ4_XS, Q2_K, Q4_K_M, Q8_0"
    )


def test_a_repo_without_ggufs_says_so() -> None:
    with pytest.raises(NoSuchTagError, match="has no GGUF files"):
        choose_gguf(REPO, [RepoFile("model.safetensors", 10)], "Q4_K_M")


def test_a_split_gguf_is_refused_in_one_line() -> None:
    files = [
        *FILES,
        RepoFile("Qwen2.5-7B-Instruct-Q6_K-00001-of-00002.gguf", 3_000),
        RepoFile("Qwen2.5-7B-Instruct-Q6_K-00002-of-00002.gguf", 3_000),
    ]
    with pytest.raises(UnsupportedGgufError, match="split into 2 files") as caught:
        choose_gguf(REPO, files, "q6_k")
    assert "\n" not in caught.value.message and "Q4_K_M" in caught.value.message


def test_only_low_bit_files_need_a_tag() -> None:
    files = [RepoFile("m-Q2_K.gguf", 1), RepoFile("m-IQ3_XXS.gguf", 2)]
    with pytest.raises(UnsupportedGgufError, match="give a tag .*IQ3_XXS, Q2_K"):
        choose_gguf("a/m-GGUF", files, None)
