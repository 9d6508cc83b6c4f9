"""The image's requirements stay in step with the package's own dependencies."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _names(requirements: list[str]) -> set[str]:
    return {re.split(r"[<>=!~\[; ]", r.strip(), maxsplit=1)[0].lower() for r in requirements}


def test_every_image_requirement_is_a_package_dependency() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = _names(project["dependencies"] + project["optional-dependencies"]["engine"])
    lines = (ROOT / "engine_image" / "requirements.txt").read_text().splitlines()
    image = _names([line for line in lines if line.strip() and not line.startswith("#")])
    assert image, "requirements.txt lists nothing"
    assert image <= declared, f"in the image but not in pyproject.toml: {sorted(image - declared)}"

