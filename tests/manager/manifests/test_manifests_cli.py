"""`gomgr manifests show` through the installed console script."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

GOMGR = Path("/work/main/.venv/bin/gomgr")


def _show(config_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GOMGR_CONFIG_DIR": str(config_dir)}
    return subprocess.run(
        [str(GOMGR), "manifests", "show", *args],
        capture_output=True, text=True, env=env, check=False, timeout=60,
    )


def test_show_prints_values_and_provenance(overrides_dir: Path, config_dir: Path) -> None:
    override = overrides_dir / "hermes.yaml"
    override.write_text("overrides: qwen25\ntool_call_parser: hermes\n")
    result = _show(config_dir, "Qwen/Qwen2.5-7B-Instruct")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "Qwen/Qwen2.5-7B-Instruct: manifest qwen25 (repo pattern 'Qwen/Qwen2.5-*')"
    rows = {line.split()[0]: line.split()[1:] for line in lines[2:]}
    assert rows["tool_call_parser"] == ["hermes", "override", str(override)]
    assert rows["name"][:2] == ["qwen25", "built-in"]
    assert rows["name"][2].endswith("manifests/qwen25.yaml")
    assert rows["engine"] == ["gomgr", "default"]


def test_show_json_parses(config_dir: Path) -> None:
    result = _show(config_dir, "someone/x", "--architecture", "Qwen3ForCausalLM", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["name"] == "qwen3"
    assert data["values"]["reasoning_parser"] == "qwen3"
    assert data["sources"]["reasoning_parser"]["origin"] == "built-in"
    assert data["sources"]["engine"] == {"origin": "default", "path": None}


def test_show_invalid_override_is_one_error_line(overrides_dir: Path, config_dir: Path) -> None:
    (overrides_dir / "bad.yaml").write_text("overrides: qwen25\nbogus: 1\n")
    result = _show(config_dir, "Qwen/Qwen2.5-7B-Instruct")
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith(f"error: {overrides_dir / 'bad.yaml'}: field 'bogus': ")
