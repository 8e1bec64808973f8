"""benchmarks/run.py's `measure`, behind every wall time, CPU time and peak memory that
run.py, many_ranks.py and the other side-by-side benchmarks report."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from conftest import load_benchmark

measure = load_benchmark("run").measure


def test_the_wall_time_ends_when_the_command_does_not_at_the_next_sample(tmp_path):
    """A sampling period far longer than the command: the wall time is still the command's
    (a loop that slept a period between asking whether it had ended took a whole period)."""
    run = measure(
        [sys.executable, "-c", "import time; time.sleep(0.3)"], cwd=tmp_path, timeout=60, poll=5.0
    )
    assert run["rc"] == 0 and not run["timed_out"]
    assert 0.3 <= run["wall_s"] < 2.0


def test_a_command_past_its_timeout_is_killed_with_its_children(tmp_path):
    script = "import subprocess, sys, time; subprocess.Popen(['sleep', '30']); time.sleep(30)"
    started = time.perf_counter()
    run = measure([sys.executable, "-c", script], cwd=tmp_path, timeout=0.5, poll=0.05)
    assert run["timed_out"] and run["rc"] != 0
    assert time.perf_counter() - started < 10


def test_the_peak_memory_of_a_child_process_is_sampled(tmp_path):
    """80 MB held by a grandchild for a second: the tree's PSS sampled every 0.05 s sees it,
    which the largest single process' high-water mark alone would too, the parent's not."""
    child = "b = b'x' * 80_000_000; import time; time.sleep(1.0)"
    parent = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {child!r}])"
    run = measure([sys.executable, "-c", parent], cwd=tmp_path, timeout=60, poll=0.05)
    assert run["rc"] == 0
    assert run["peak_pss_tree_mb"] >= 80 and run["peak_mb"] >= 80


def test_an_exported_advisor_loads_its_own_rules(tmp_path):
    """many_ranks.export_tree, behind every --before REF: an exported commit imports its own
    rule pack, not the installed one's (which made the rules of a change run on both sides,
    so that a new rule's cost was never measured)."""
    commit, tree = load_benchmark("many_ranks").export_tree(tmp_path, "HEAD")
    found = subprocess.run(
        [sys.executable, "-c", "import advisor_rules; print(advisor_rules.__file__)"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(tree)},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert Path(found).resolve().parent == (tree / "rules").resolve()
    assert (tree / "rules" / "schedule.yaml").is_file() and len(commit) == 40
