"""mypy, started beside the suite when the run includes its test.

mypy on a cold cache takes about a minute of one core, and the suite spends much of its time
waiting on servers it started; run in the background at a low priority from the end of
collection, it overlaps that waiting instead of adding a minute at the end.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

MYPY_TEST = "tests/test_static_checks.py::test_mypy_is_clean"


@dataclass(frozen=True)
class MypyRun:
    process: subprocess.Popen[bytes]
    output: Path

    @classmethod
    def start(cls, root: Path) -> MypyRun:
        fd, name = tempfile.mkstemp(prefix="gomgr-mypy-", suffix=".log")
        # NOTE: the child keeps its own copy of the file descriptor.
        with os.fdopen(fd, "wb") as output:
            # NOTE: niced, so the tests (and their servers' timeouts) keep the cores first.
            process = subprocess.Popen(
                ["nice", "-n", "10", sys.executable, "-m", "mypy"],
                cwd=root,
                stdout=output,
                stderr=subprocess.STDOUT,
            )
        return cls(process, Path(name))

    def result(self, timeout: float) -> tuple[int, str]:
        """Wait for mypy; its exit status and everything it printed."""
        returncode = self.process.wait(timeout=timeout)
        return returncode, self.output.read_text(errors="replace")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self.output.unlink(missing_ok=True)
