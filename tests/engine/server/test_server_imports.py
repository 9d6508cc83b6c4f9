"""The HTTP server and the detokenizer start without torch, transformers or xgrammar.

Each of those takes ~1-3 s to import, in each process, at every start (issue 30); only the
scheduler runs the model. A fresh interpreter imports the two processes' entry modules,
loads SmolLM2's tokenizer and renders a chat prompt as the server does, then reports which
heavy libraries it loaded. Start-up time itself is measured by bench/engine_start.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

HEAVY = ("torch", "transformers", "xgrammar")
PROBE = (
    "import json, sys\n"
    "import engine.launch_server, engine.server.tokenizer_worker, engine.detokenizer.process\n"
    "from engine.text.tokenizer_files import load_tokenizer\n"
    "tokenizer = load_tokenizer(sys.argv[1])\n"
    "tokenizer.encode(tokenizer.render_chat([{'role': 'user', 'content': 'hi'}], add_generation_prompt=True))\n"
    f"print(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))\n"
)


def test_server_and_detokenizer_import_no_torch_transformers_or_xgrammar(smollm2_dir: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(smollm2_dir)], capture_output=True, text=True, timeout=120, check=True
    )
    assert json.loads(done.stdout.splitlines()[-1]) == []
