"""Runs every benchmark in bench/ and rewrites its results section in docs/benchmarks.md.

    python -m bench.run_all      (or `make bench`)

Each benchmark owns the text between `<!-- NAME:start -->` and `<!-- NAME:end -->` in the doc;
everything outside those markers is left as written.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from bench import engine_vs_transformers

DOC = Path(__file__).resolve().parents[1] / "docs" / "benchmarks.md"
# NOTE: N=32 keeps the whole run within a few minutes on a 2-core machine.
ENGINE_VS_TRANSFORMERS_ARGS = [
    "--batch-sizes", "1,8,32", "--prompt-len", "64", "--new-tokens", "32", "--repeats", "1",
]


def results_section(result: dict[str, Any], table: str) -> str:
    m = result["machine"]
    return "\n".join([
        f"Recorded {result['date']} on {m['cpu_count']} CPUs, {m['torch_threads']} torch threads, "
        f"torch {m['torch']}, transformers {m['transformers']}, Python {m['python']} "
        f"({m['platform']}).",
        "",
        "```",
        result["command"],
        "```",
        "",
        table,
    ])


def replace_section(doc: str, name: str, body: str) -> str:
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    pattern = re.compile(re.escape(start) + r".*?" + re.escape(end), re.DOTALL)
    if not pattern.search(doc):
        raise ValueError(f"{DOC} has no {start} ... {end} section")
    return pattern.sub(lambda _: f"{start}\n{body}\n{end}", doc, count=1)


def main() -> None:
    config = engine_vs_transformers.parse_args(ENGINE_VS_TRANSFORMERS_ARGS)
    result = engine_vs_transformers.run(config)
    table = engine_vs_transformers.markdown_table(result["summary"])
    print(table)
    doc = replace_section(DOC.read_text(), result["benchmark"], results_section(result, table))
    DOC.write_text(doc)
    print(f"updated {DOC}")


if __name__ == "__main__":
    main()
