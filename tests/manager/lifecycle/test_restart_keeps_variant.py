"""`gomgr restart` of an engine started with a manifest variant runs that variant again.

The variant reaches a start only through `gomgr apply`; its spec hash (in the record's labels)
names the variant, so a restart that dropped it would leave apply reporting "up to date" for
an engine that no longer runs what the file asks for.
"""

from __future__ import annotations

import itertools
import json

import pytest

from tests.conftest import SMOLLM2_REPO
from tests.support.gomgr_env import Env

pytestmark = pytest.mark.slow

# NOTE: qwen25 runs our engine (so the process runtime can), and layered over smollm2 it adds
# a flag the record shows: the variant's own tool-call parser.
VARIANT_FLAGS = ["--tool-call-parser", "qwen25"]


def _has_flags(engine_args: list[str]) -> bool:
    return tuple(VARIANT_FLAGS) in itertools.pairwise(engine_args)


def test_restart_runs_the_variant_the_engine_was_started_with(env: Env) -> None:
    engines_yaml = env.state.root.parent / "variant-engines.yaml"
    engines_yaml.write_text(
        f"engines:\n  - repo: {SMOLLM2_REPO}\n    name: smollm2-qwen25\n    variant: qwen25\n"
    )
    try:
        applied = env.gomgr("apply", "-f", str(engines_yaml))
        assert applied.returncode == 0, applied.stderr
        [first] = env.ps()
        assert _has_flags(first["engine_args"]), first["engine_args"]

        result = env.gomgr("restart", "smollm2-qwen25", "--json")
        assert result.returncode == 0, result.stderr
        second = json.loads(result.stdout)
        assert second["id"] != first["id"]
        assert _has_flags(second["engine_args"]), second["engine_args"]
        assert second["labels"] == first["labels"]
        assert first["variant"] == second["variant"] == "qwen25"

        again = env.gomgr("apply", "-f", str(engines_yaml))
        assert (again.returncode, again.stdout) == (0, "nothing to do (1 engine up to date)\n")
    finally:
        env.gomgr("stop", "--all")
