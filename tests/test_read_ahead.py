"""The command line's read-ahead: a forked child folds a trace from the back while the run
prepares, this process folds from the front when its reader gets there; the reports are the
same as those of one process reading alone.

The runs are `advisor run` in fresh processes (a child is forked only from a process with one
thread, which a test process that has imported pandas is not), through a small driver that
counts the parts each process folded. The parts are forced small, so every trace is cut into
many.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from conftest import DEMO, FIXTURE_DIR, REAL

from advisor.formats import read_ahead, shared_folds
from advisor.formats.read_ahead import TraceFold, can_fork, folding
from advisor.formats.shared_folds import Board
from advisor.locate import Claim
from advisor.reading import trace_folds
from advisor_plugins.ascend_pt import AscendPtReader
from advisor_plugins.kineto import KinetoReader

NCCL = REAL / "kineto" / "nccl_parser_config__nccl_data.json.gz"  # 9.8 MB inflated
DDP = [FIXTURE_DIR / "kineto_own" / f"ddp_rank{r}.pt.trace.json.gz" for r in (0, 1)]
ASCEND = REAL / "ascend_pt" / "rank0_ascend_pt"

DRIVER = """
import atexit, os, sys
from advisor.cli import entry
from advisor.formats import read_ahead, shared_folds

read_ahead.MIN_BYTES = 0
read_ahead.MAX_BYTES = int(os.environ.get("MAX_BYTES", read_ahead.MAX_BYTES))
shared_folds.PART_BYTES = int(os.environ["PART_BYTES"])
if os.environ.get("CHILD_DIES"):  # the child's folds only: this process folds with its own
    shared_folds.fold_part = lambda *args: os._exit(3)
counts = {"files": 0, "parts": 0, "here": 0, "held": 0}
folded = shared_folds.AheadFile.fold_with

def fold_with(self, here):
    counts["files"] += 1
    counts["parts"] += len(self.parts)
    def counted(part):
        counts["here"] += 1
        return here(part)
    results = folded(self, counted)
    counts["held"] += not self.ahead.closed  # the child still held after a file's results
    return results

shared_folds.AheadFile.fold_with = fold_with
atexit.register(lambda: print("COUNTS", *counts.values(), file=sys.stderr))
sys.argv = ["advisor", *sys.argv[1:]]
entry()
"""


Counts = tuple[int, int, int, int]


def run_advisor(
    path: Path,
    out: Path,
    *,
    ahead: bool,
    part_bytes: int = 64 * 1024,
    workers: int = 2,
    **env: str,
) -> tuple[dict[str, Any], Counts | None]:
    """The JSON report of `advisor run path` (its generation time left out), and (files
    shared with the child, their parts, parts folded here, files after whose results the
    child was still held); `workers` CPUs are idle when `ahead`."""
    environ = {**os.environ, "PART_BYTES": str(part_bytes), **env}
    environ["ADVISOR_DECODE_WORKERS"] = str(workers) if ahead else "1"
    argv = [str(path), "-o", str(out), "--format", "json"]
    command = [sys.executable, "-c", DRIVER, "run", *argv]
    proc = subprocess.run(command, env=environ, capture_output=True, text=True, timeout=300)
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    counts = None
    for line in proc.stderr.splitlines():
        if line.startswith("COUNTS "):
            files, parts, here, held = map(int, line.split()[1:])
            counts = (files, parts, here, held)
    reports = {}
    for report in sorted(out.glob("prof_rule*.json")):
        doc = json.loads(report.read_text())
        doc["advisor"].pop("generated_at")
        reports[report.name] = doc
    assert reports, f"no report in {out}: {proc.stderr[-2000:]}"
    return reports, counts


def plain(source: Path, folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / source.name.removesuffix(".gz")
    target.write_bytes(gzip.decompress(source.read_bytes()))
    return target


def assert_shared(counts: Counts | None, files: int) -> None:
    """Each file was shared with the child, which folded at least its last part; the child
    and its results were let go once the last file's results were gathered."""
    assert counts is not None
    shared, parts, here, held = counts
    assert shared == files
    assert parts >= 2 * files
    assert here < parts
    assert held == files - 1


@pytest.mark.slow
def test_kineto_report_is_the_same_with_the_child(tmp_path):
    trace = plain(NCCL, tmp_path / "in")
    alone, _ = run_advisor(trace, tmp_path / "alone", ahead=False)
    # the default part size: 9.8 MB is cut into three parts
    shared, counts = run_advisor(
        trace, tmp_path / "shared", ahead=True, part_bytes=shared_folds.PART_BYTES
    )
    assert_shared(counts, 1)
    assert shared == alone


@pytest.mark.slow
def test_a_file_over_the_budget_goes_to_the_child_only_where_two_cpus_are_idle(tmp_path):
    """With two, the parallel path would spawn one more process for it: the forked child is
    that process, started sooner; with more, the parallel path decodes it on all of them."""
    trace = plain(NCCL, tmp_path / "in")
    alone, _ = run_advisor(trace, tmp_path / "alone", ahead=False)
    shared, counts = run_advisor(
        trace, tmp_path / "two", ahead=True, part_bytes=shared_folds.PART_BYTES, MAX_BYTES="1"
    )
    assert_shared(counts, 1)
    assert shared == alone
    _, counts = run_advisor(trace, tmp_path / "three", ahead=True, workers=3, MAX_BYTES="1")
    assert counts is not None and counts[0] == 0  # no file shared


@pytest.mark.slow
def test_ascend_report_is_the_same_with_the_child(tmp_path):
    folder = tmp_path / "in" / ASCEND.name
    shutil.copytree(ASCEND, folder)
    alone, _ = run_advisor(folder, tmp_path / "alone", ahead=False)
    shared, counts = run_advisor(folder, tmp_path / "shared", ahead=True)
    assert_shared(counts, 1)
    assert shared == alone


@pytest.mark.slow
def test_two_ranks_are_folded_ahead_one_after_the_other(tmp_path):
    for source in DDP:
        plain(source, tmp_path / "in")
    alone, _ = run_advisor(tmp_path / "in", tmp_path / "alone", ahead=False)
    shared, counts = run_advisor(tmp_path / "in", tmp_path / "shared", ahead=True)
    assert_shared(counts, 2)
    assert len(shared) == 3  # two ranks and the cluster
    assert shared == alone


@pytest.mark.slow
def test_parts_of_a_child_that_died_are_folded_here(tmp_path):
    trace = plain(DDP[0], tmp_path / "in")
    alone, _ = run_advisor(trace, tmp_path / "alone", ahead=False)
    shared, counts = run_advisor(trace, tmp_path / "shared", ahead=True, CHILD_DIES="1")
    assert counts is not None
    files, parts, here, _ = counts
    assert files == 1 and here == parts  # every part, the child's share too
    assert shared == alone


@pytest.mark.slow
def test_a_trace_with_nan_is_read_by_its_reader(tmp_path):
    """NaN makes a part unclean: the reader reads the file itself and says so, as alone."""
    trace = plain(DDP[0], tmp_path / "in")
    text = trace.read_text()
    at = text.index('"dur": ', len(text) // 2)
    end = text.index(",", at)
    trace.write_text(text[:at] + '"dur": NaN' + text[end:])
    alone, _ = run_advisor(trace, tmp_path / "alone", ahead=False)
    shared, counts = run_advisor(trace, tmp_path / "shared", ahead=True)
    assert counts is not None and counts[0] == 1
    assert shared == alone
    (report,) = shared.values()
    assert any("NaN" in w["problem"] for w in report["warnings"])


# ---------------------------------------------------------------------------------------------
# When a child is forked, and what the readers name


def test_a_run_without_a_trace_to_share_loads_none_of_it(tmp_path):
    """The bundled demo (msprof CSVs) names no trace: the fork and the decoding it would
    need are not even imported."""
    script = (
        "import sys\n"
        "from advisor.cli import main\n"
        f"main(['run', {str(DEMO)!r}, '-o', {str(tmp_path / 'out')!r}, '-q'],"
        " standalone_mode=False)\n"
        "assert 'advisor.formats.read_ahead' in sys.modules\n"
        "assert 'advisor.formats.shared_folds' not in sys.modules\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_no_child_from_a_process_with_threads():
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        assert not can_fork()
    finally:
        stop.set()
        thread.join()


def test_no_child_outside_the_command_line(tmp_path):
    trace = plain(NCCL, tmp_path)
    with folding([TraceFold(trace, len, list)]):
        assert read_ahead._current is None
        assert read_ahead.shared(trace, len, list, 1) is None


def test_files_are_folded_ahead_within_the_budget(tmp_path):
    """16 MiB or more each, uncompressed, 128 MiB together: the child never runs far ahead
    (on two CPUs too, once a first file is chosen)."""
    mib = 1024 * 1024
    sizes = {"a.json": 17, "b.json": 5, "c.json.gz": 20, "d.json": 100, "e.json": 30, "f.json": 17}
    jobs = []
    for name, size in sizes.items():
        with open(tmp_path / name, "wb") as fh:
            fh.truncate(size * mib)
        jobs.append(TraceFold(tmp_path / name, len, list))
    jobs.append(TraceFold(tmp_path / "missing.json", len, list))
    for two_cpus in (False, True):
        chosen = read_ahead._worth_it(jobs, two_cpus=two_cpus)
        assert [j.path.name for j in chosen] == ["a.json", "d.json"]


def test_the_first_file_goes_ahead_whatever_its_size_where_two_cpus_are_idle(tmp_path):
    mib = 1024 * 1024
    jobs = []
    for name, size in {"a.json": 5, "b.json": 200, "c.json": 17}.items():
        with open(tmp_path / name, "wb") as fh:
            fh.truncate(size * mib)
        jobs.append(TraceFold(tmp_path / name, len, list))
    assert [j.path.name for j in read_ahead._worth_it(jobs, two_cpus=True)] == ["b.json"]
    assert read_ahead._worth_it(jobs, two_cpus=False) == []


def test_the_child_makes_arrow_arrays_without_pandas():
    """pyarrow would import pandas on its first array; in the child it cannot."""
    script = (
        "import sys\n"
        "from advisor.formats.shared_folds import _without_pandas\n"
        "_without_pandas()\n"
        "import pyarrow as pa\n"
        "texts = pa.array(['a', None])\n"
        "numbers = pa.array([1.5, None])\n"
        "assert texts.null_count == numbers.null_count == 1\n"
        "assert 'pandas' not in sys.modules\n"
        "try:\n"
        "    import pandas\n"
        "except ImportError:\n"
        "    sys.exit(0)\n"
        "sys.exit(5)\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_board_holds_both_claims():
    board = Board([3, 5])
    assert (board.child(0), board.parent(0), board.child(1), board.parent(1)) == (3, 0, 5, 0)
    board.set_child(1, 2)
    board.set_parent(0, 1)
    assert (board.child(0), board.parent(0), board.child(1), board.parent(1)) == (3, 1, 2, 0)


def test_kineto_reader_names_its_trace_but_not_a_bare_list(tmp_path):
    trace = plain(DDP[0], tmp_path)
    (fold,) = KinetoReader().trace_folds(trace)
    assert fold.path == trace
    bare = tmp_path / "bare.pt.trace.json"
    bare.write_text('[{"ph": "X", "ts": 1, "dur": 1, "name": "a"}]')
    assert KinetoReader().trace_folds(bare) == []


def test_ascend_reader_names_trace_view_unless_a_database_stands_in(tmp_path):
    folder = tmp_path / ASCEND.name
    shutil.copytree(ASCEND, folder)
    (fold,) = AscendPtReader().trace_folds(folder)
    assert fold.path == folder / "ASCEND_PROFILER_OUTPUT" / "trace_view.json"
    (folder / "ASCEND_PROFILER_OUTPUT" / "ascend_pytorch_profiler_0.db").write_bytes(b"")
    assert AscendPtReader().trace_folds(folder) == []


def test_a_reader_that_fails_to_name_its_traces_is_read_as_usual(tmp_path):
    class Failing:
        name, formats = "failing", ("x",)

        def trace_folds(self, path: Path) -> list[TraceFold]:
            raise RuntimeError("broken")

    trace = plain(DDP[0], tmp_path)
    claims = [Claim(trace, Failing(), "x"), Claim(trace, KinetoReader(), "kineto")]
    assert [f.path for f in trace_folds(claims)] == [trace]
