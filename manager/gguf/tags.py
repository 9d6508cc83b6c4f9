"""The quantization tag of a GGUF file name (`...-Q4_K_M.gguf` → Q4_K_M), as Ollama's tags.

llama.cpp's converters and the big uploaders (bartowski, unsloth, the model makers) end a
file's name with its quantization type: `Qwen2.5-7B-Instruct-Q4_K_M.gguf`,
`qwen2.5-0.5b-instruct-q8_0.gguf`, `SmolLM2-135M-Instruct.Q4_1.gguf`, `...-UD-Q4_K_XL.gguf`,
`...-f16.gguf`; a model split in parts adds `-00001-of-00003`. Tags compare case-insensitively
and are kept upper-case.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePosixPath

GGUF_SUFFIX = ".gguf"
_SPLIT = re.compile(r"-(\d{5})-of-(\d{5})$")
_TAG = re.compile(
    r"(?<![A-Za-z0-9])((?:UD-)?(?:I?Q\d(?:_[A-Z0-9]+)*|TQ\d_\d|MXFP4(?:_MOE)?|BF16|F16|F32))"
    r"(?![A-Za-z0-9])",
    re.IGNORECASE,
)
_BITS = re.compile(r"(?:^|-)(?:I|T)?Q(\d)")
_FLOAT_BITS = {"F32": 32, "F16": 16, "BF16": 16, "MXFP4": 4, "MXFP4_MOE": 4}
# NOTE: GGUF files in model repos that are not language models: multimodal projectors and
# llama.cpp's importance matrices.
_NOT_MODELS = ("mmproj", "imatrix")


@dataclass(frozen=True)
class GgufFileName:
    path: str  # as the repo lists it, maybe inside a folder
    tag: str  # upper-case
    part: int  # 1-based; 1 of 1 for a single file
    parts: int

    @property
    def is_split(self) -> bool:
        return self.parts > 1


def parse_file_name(path: str) -> GgufFileName | None:
    """The tag and split of a model GGUF in a repo; None for other files or untagged names."""
    name = PurePosixPath(path).name
    if not name.lower().endswith(GGUF_SUFFIX) or any(n in name.lower() for n in _NOT_MODELS):
        return None
    stem = name[: -len(GGUF_SUFFIX)]
    part, parts = 1, 1
    if split := _SPLIT.search(stem):
        part, parts = int(split.group(1)), int(split.group(2))
        stem = stem[: split.start()]
    tags = _TAG.findall(stem)
    if not tags:
        return None
    return GgufFileName(path, normalize_tag(tags[-1]), part, parts)


def normalize_tag(tag: str) -> str:
    return tag.upper()


def tag_bits(tag: str) -> int | None:
    """Nominal bits per weight (Q4_K_M → 4, IQ3_XXS → 3, BF16 → 16); None if unknown."""
    tag = normalize_tag(tag).removeprefix("UD-")
    if tag in _FLOAT_BITS:
        return _FLOAT_BITS[tag]
    found = _BITS.search(tag)
    return int(found.group(1)) if found else None
