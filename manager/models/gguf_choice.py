"""Which GGUF file of a repo `org/name:TAG` means, and which one a bare `org/name` means.

A tag picks the file whose name carries it (case-insensitive). Without one the default is
Q4_K_M, the quantization Ollama and llama.cpp users reach for first; a repo without it gets
its smallest file of at least 4 bits per weight (below 4 bits quality drops steeply).
"""

from __future__ import annotations

from dataclasses import dataclass

from manager.gguf.tags import GgufFileName, normalize_tag, parse_file_name, tag_bits
from manager.models.errors import NoSuchTagError, UnsupportedGgufError

DEFAULT_TAG = "Q4_K_M"
MIN_DEFAULT_BITS = 4


@dataclass(frozen=True)
class RepoFile:
    path: str
    size: int


@dataclass(frozen=True)
class GgufChoice:
    file: RepoFile
    tag: str  # upper-case, as the store and the served name spell it


def gguf_tags(files: list[RepoFile]) -> dict[str, list[tuple[GgufFileName, RepoFile]]]:
    """The repo's model GGUFs by tag (a split model's parts under one tag), tags sorted."""
    by_tag: dict[str, list[tuple[GgufFileName, RepoFile]]] = {}
    for file in files:
        if (name := parse_file_name(file.path)) is not None:
            by_tag.setdefault(name.tag, []).append((name, file))
    return dict(sorted(by_tag.items()))


def choose_gguf(repo: str, files: list[RepoFile], tag: str | None) -> GgufChoice:
    """The one file to download for `repo` (`tag` None: the default); a ModelError otherwise."""
    by_tag = gguf_tags(files)
    if not by_tag:
        raise NoSuchTagError(f"{repo} has no GGUF files named with a quantization tag")
    chosen = normalize_tag(tag) if tag is not None else _default_tag(repo, by_tag)
    entries = by_tag.get(chosen)
    if entries is None:
        raise NoSuchTagError(f"{repo} has no GGUF tagged {tag}; its tags: {', '.join(by_tag)}")
    name, file = entries[0]
    if name.is_split:
        raise UnsupportedGgufError(
            f"{repo}:{chosen} is split into {name.parts} files ({file.path}); gomgr serves "
            f"single-file GGUFs only, pick another tag: {', '.join(_single_file_tags(by_tag))}"
        )
    if len(entries) > 1:
        names = ", ".join(f.path for _, f in entries)
        raise UnsupportedGgufError(f"{repo} has several GGUFs tagged {chosen}: {names}")
    return GgufChoice(file, chosen)


def _default_tag(repo: str, by_tag: dict[str, list[tuple[GgufFileName, RepoFile]]]) -> str:
    if DEFAULT_TAG in by_tag:
        return DEFAULT_TAG
    sized = [
        (sum(f.size for _, f in entries), tag)
        for tag, entries in by_tag.items()
        if (bits := tag_bits(tag)) is not None and bits >= MIN_DEFAULT_BITS
    ]
    if not sized:
        raise UnsupportedGgufError(
            f"{repo} has no GGUF of {MIN_DEFAULT_BITS} bits or more to choose by default; "
            f"give a tag ({repo}:TAG), one of: {', '.join(by_tag)}"
        )
    return min(sized)[1]


def _single_file_tags(by_tag: dict[str, list[tuple[GgufFileName, RepoFile]]]) -> list[str]:
    return [tag for tag, entries in by_tag.items() if not entries[0][0].is_split] or ["none"]
