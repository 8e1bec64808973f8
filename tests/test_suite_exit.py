"""The test process ends once the tests are over, or says why not (conftest.pytest_unconfigure).

A pytest run whose tests pass but whose process then hangs would keep CI waiting forever;
with this project's conftest, it prints every thread's stack after a grace period and ends
with status 1.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import EXIT_GRACE_ENV, ROOT

HANGING_TEST = """
import os
import threading


def read_forever(fd):
    os.read(fd, 1)  # nothing is ever written: this process holds the write end too


def test_leaves_a_thread_behind():
    reader, writer = os.pipe()
    threading.Thread(target=read_forever, args=(reader,)).start()  # not a daemon
"""


def test_a_process_that_hangs_after_the_tests_shows_its_threads_and_fails(tmp_path: Path) -> None:
    shutil.copy(ROOT / "tests" / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "test_hanging.py").write_text(HANGING_TEST, encoding="utf-8")
    env = {**os.environ, EXIT_GRACE_ENV: "2"}
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)]
    done = subprocess.run(
        command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert "1 passed" in done.stdout
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    assert "read_forever" in done.stderr  # the stack of the thread that kept it alive
