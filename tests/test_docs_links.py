"""The docs point at things that exist: every relative link and path in README.md and docs/*.md
names a file or directory in the repository, and nothing cites the design notes the project
was started from, which live outside it (docs/architecture.md holds the design)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
# NOTE: a code span naming a path: no spaces or placeholders, at least one "/" and a file
# extension or a trailing "/". Paths are written relative to the repository root, or, inside
# a part's section, to that part's package (`scheduler/forward_only.py` in the engine's).
CODE_PATH = re.compile(r"`([A-Za-z0-9_.][A-Za-z0-9_./-]*/[A-Za-z0-9_.-]*)`")
PATH_END = re.compile(r"(\.[a-z]{1,5}|/)$")
BASES = (ROOT, ROOT / "engine_image", ROOT / "engine_image" / "engine", ROOT / "manager")
# NOTE: made at run time, git-ignored: benchmarks' venvs and caches, the GPU check's wheels,
# a pull's work directories.
RUNTIME_ONLY = ("bench/.venv-", "bench/.cache/", ".whl/", ".tmp-")
CITED_NAME = "DESIGN" + ".md"  # NOTE: spelled apart so this file does not cite it itself


def _links(doc: Path) -> list[str]:
    targets = [m.group(1) for m in LINK.finditer(doc.read_text())]
    return [t for t in targets if not re.match(r"^[a-z]+:|^#", t)]


def _code_paths(doc: Path) -> list[str]:
    found = [m.group(1) for m in CODE_PATH.finditer(doc.read_text())]
    return [p for p in found if PATH_END.search(p) and not p.startswith(RUNTIME_ONLY)]


@pytest.mark.parametrize("doc", DOCS, ids=lambda d: str(d.relative_to(ROOT)))
def test_relative_links_resolve(doc: Path) -> None:
    missing = [t for t in _links(doc) if not (doc.parent / t.split("#")[0]).exists()]
    assert missing == [], f"{doc.name} links to files that do not exist: {missing}"


@pytest.mark.parametrize("doc", DOCS, ids=lambda d: str(d.relative_to(ROOT)))
def test_paths_in_code_spans_exist(doc: Path) -> None:
    missing = [
        p for p in _code_paths(doc)
        if not any((base / p).exists() for base in (doc.parent, *BASES))
    ]
    assert missing == [], f"{doc.name} names paths that do not exist: {missing}"


def test_no_file_cites_the_design_notes_outside_the_repository() -> None:
    tracked = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, check=True, capture_output=True
    ).stdout.decode().split("\0")
    files = [ROOT / name for name in tracked if name and (ROOT / name).is_file()]
    citing = [str(f.relative_to(ROOT)) for f in files if CITED_NAME in f.read_text(errors="ignore")]
    assert citing == [], f"{citing} cite {CITED_NAME}, which is not in the repository"
