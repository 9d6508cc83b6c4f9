"""The manager's work that waits on a starting engine runs niced (manager/lifecycle/start_priority.py).

That a cold `gomgr start` leaves the supervisor and its engine at their own priority is
checked in tests/manager/lifecycle/test_lifecycle_engine.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from manager.lifecycle.start_priority import WAITING_WORK_NICENESS, import_niced

MAX_NICENESS = 19


def _niced(base: int) -> int:
    return min(base + WAITING_WORK_NICENESS, MAX_NICENESS)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a nice value per thread is Linux's")
def test_a_module_imports_on_a_niced_thread_and_the_caller_keeps_its_priority(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "priority_probe.py").write_text(
        "import os, threading\n"
        "NICENESS = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())\n"
        "THREAD = threading.current_thread().name\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    caller = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    import_niced("priority_probe")
    probe = sys.modules.pop("priority_probe")
    assert probe.NICENESS == _niced(caller)
    assert probe.THREAD != threading.current_thread().name
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == caller


def test_an_import_that_fails_raises_on_the_callers_thread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "broken_probe.py").write_text("raise RuntimeError('broken on purpose')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(RuntimeError, match="broken on purpose"):
        import_niced("broken_probe")
    with pytest.raises(ModuleNotFoundError):
        import_niced("no_such_module_here")


def test_a_lowered_process_and_its_later_children_run_niced() -> None:
    script = (
        "import os, subprocess, sys\n"
        "from manager.lifecycle.start_priority import lower_this_process\n"
        "before = os.nice(0)\n"
        "lower_this_process()\n"
        "child = subprocess.run([sys.executable, '-c', 'import os; print(os.nice(0))'], capture_output=True, text=True)\n"
        "print(before, os.nice(0), child.stdout.strip())\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60)
    before, after, child = (int(word) for word in done.stdout.split())
    assert after == child == _niced(before)
