"""One trace decoded in parts on several cores gives exactly what one sequential pass gives,
uncompressed (parts planned from the file) or gzipped (parts cut as the inflated bytes arrive).

The parts are forced small here (a few KB), so every fixture is cut into many of them, and run
in this process (two tests start real worker processes). The comparison covers the readers'
whole output: every table, the warnings and the metadata.
"""

from __future__ import annotations

import bisect
import gzip
import json
import os
import re
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from conftest import FIXTURE_DIR

from advisor import cpu_idle
from advisor.formats import parallel
from advisor.formats.parallel import read_in_parts, run_parts
from advisor.formats.parts import Part, plan_parts
from advisor.formats.stream import EventStream, array_start
from advisor_plugins.ascend_pt import AscendPtReader
from advisor_plugins.kineto import KinetoReader
from advisor_plugins.kineto.parts import merge_walks, walk_events
from advisor_plugins.kineto.walk import DECODER
from advisor_plugins.msprof import MsprofReader

REAL = FIXTURE_DIR / "real"
OWN = FIXTURE_DIR / "kineto_own"
KINETO = sorted((REAL / "kineto").glob("*.json.gz")) + sorted(OWN.glob("*.pt.trace.json.gz"))
ASCEND = REAL / "ascend_pt" / "rank0_ascend_pt"
CANN_TIMELINE = REAL / "cann_timeline" / "PROF_000001_20230818142704322_COJGGGCANRMICFBC"


@contextmanager
def no_pool(processes: int) -> Iterator[None]:
    """Every part folded in this process (quick; one test starts real workers)."""
    yield None


@pytest.fixture
def parts_seen(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Parts of a few KB whatever the file's size, folded in this process; the number of
    parts each read merged."""
    seen: list[int] = []

    def counting(*args: Any, **kwargs: Any) -> parallel.Parts[Any] | None:
        result = read_in_parts(*args, **kwargs)
        seen.append(0 if result is None else result.parts)
        return result

    monkeypatch.setattr(parallel, "MIN_BYTES", 0)
    monkeypatch.setattr(parallel, "PART_BYTES", 24 * 1024)
    monkeypatch.setattr(parallel, "decode_workers", lambda: 4)
    monkeypatch.setattr(parallel, "_pool", no_pool)
    monkeypatch.setattr("advisor_plugins.kineto.reader.read_in_parts", counting)
    monkeypatch.setattr("advisor.formats.trace_columns.read_in_parts", counting)
    monkeypatch.setattr("advisor_plugins.kineto.reader.CHUNK_BYTES", 8 * 1024)
    return seen


def sequential(monkeypatch: pytest.MonkeyPatch, read: Any) -> Any:
    with monkeypatch.context() as m:
        m.setattr(parallel, "decode_workers", lambda: 1)
        return read()


def assert_same_profile(got: Any, want: Any) -> None:
    assert sorted(got.tables) == sorted(want.tables)
    for name, frame in want.tables.items():
        pd.testing.assert_frame_equal(got.tables[name], frame, check_exact=True, obj=name)
    assert got.warnings == want.warnings
    assert got.meta == want.meta


def plain_copy(source: Path, folder: Path) -> Path:
    """The trace uncompressed."""
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / source.name.removesuffix(".gz")
    target.write_bytes(gzip.decompress(source.read_bytes()))
    return target


def packed_copy(source: Path, folder: Path) -> Path:
    """The .gz trace as it is."""
    folder.mkdir(parents=True, exist_ok=True)
    return Path(shutil.copy(source, folder / source.name))


@pytest.mark.parametrize("copy", [plain_copy, packed_copy], ids=["plain", "gz"])
@pytest.mark.parametrize("source", KINETO, ids=lambda p: p.name.split(".")[0])
def test_kineto_tables_are_the_same_in_parts(tmp_path, monkeypatch, parts_seen, source, copy):
    trace = copy(source, tmp_path)
    whole = sequential(monkeypatch, lambda: KinetoReader().read(trace)[0])
    in_parts = KinetoReader().read(trace)[0]
    assert parts_seen[-1] > 1
    assert_same_profile(in_parts, whole)


def test_ascend_tables_are_the_same_in_parts(tmp_path, monkeypatch, parts_seen):
    folder = tmp_path / ASCEND.name
    shutil.copytree(ASCEND, folder)
    whole = sequential(monkeypatch, lambda: AscendPtReader().read(folder))
    in_parts = AscendPtReader().read(folder)
    assert parts_seen[-1] > 1
    assert len(in_parts) == len(whole)
    for got, want in zip(in_parts, whole):
        assert_same_profile(got, want)


def test_msprof_timeline_tables_are_the_same_in_parts(tmp_path, monkeypatch, parts_seen):
    """A raw export's timelines (the real device_0 files, the msprof json one of 274 KB) read
    in parts of a few KB: the same tables and warnings as read whole."""
    folder = tmp_path / CANN_TIMELINE.name
    shutil.copytree(CANN_TIMELINE, folder)
    whole = sequential(monkeypatch, lambda: MsprofReader().read(folder))
    in_parts = MsprofReader().read(folder)
    assert parts_seen and max(parts_seen) > 1
    assert len(in_parts) == len(whole) == 1
    assert_same_profile(in_parts[0], whole[0])


# ---------------------------------------------------------------------------------------------
# Strings that look like event boundaries


def adversarial(doc: dict) -> dict:
    """A real trace whose strings hold braces, `},{` and, in args keys that no reader reads,
    the text the part planner looks for (`}, {"` followed by `...":`): a cut proposed there
    falls inside a string and must be found out."""
    for k, event in enumerate(doc["traceEvents"]):
        if k % 5 == 0 and isinstance(event.get("name"), str):
            event["name"] += ' },{"ph": "X"}, {\n} {'
        if k % 3 == 0:
            args = event.setdefault("args", {})
            if isinstance(args, dict):
                args["x}, {"] = 1
                args[":y"] = '}, {"name": "fake", "ph": "X"}'
    return doc


@pytest.mark.parametrize(
    "source",
    [
        REAL / "kineto/timeline_analysis__sampled_rank-0.json.gz",
        OWN / "with_stack.pt.trace.json.gz",
    ],
    ids=lambda p: p.name.split(".")[0],
)
def test_boundaries_inside_strings_give_the_same_tables(tmp_path, monkeypatch, parts_seen, source):
    trace = tmp_path / "adversarial.pt.trace.json"
    trace.write_text(json.dumps(adversarial(json.loads(gzip.decompress(source.read_bytes())))))
    whole = sequential(monkeypatch, lambda: KinetoReader().read(trace)[0])
    in_parts = KinetoReader().read(trace)[0]
    assert parts_seen[-1] > 1
    assert_same_profile(in_parts, whole)
    # the planner did propose cuts inside strings, which the check in file order undid
    _, parts = plan_parts(trace, 64)
    assert any(inside_a_string(trace, [p.end - 1 for p in parts if p.end is not None]))


def inside_a_string(path: Path, offsets: list[int]) -> list[bool]:
    """Whether each byte offset of a JSON file lies inside a string (outside strings a JSON
    text holds no `"`, so the strings are the successive matches)."""
    spans = [m.span() for m in re.finditer(rb'"(?:[^"\\]|\\.)*"', path.read_bytes())]
    starts = [start for start, _ in spans]
    found = []
    for offset in offsets:
        k = bisect.bisect_right(starts, offset) - 1
        found.append(k >= 0 and offset < spans[k][1] - 1)
    return found


def walk_state(walk: Any) -> dict[str, Any]:
    """A walk's attributes, its array columns as their bytes (NaN equals NaN); not the times
    of each batch (tests/test_trace_index.py), which follow where the file was cut."""
    return {
        k: (v.typecode, v.tobytes()) if hasattr(v, "typecode") else v
        for k, v in vars(walk).items()
        if k != "batch_times"
    }


def test_a_cut_inside_a_string_is_decoded_again_with_the_next_part(tmp_path):
    """Parts given by hand, one ending inside a string: the walk is still the sequential one."""
    trace = tmp_path / "t.json"
    events = [
        {"ph": "X", "cat": "kernel", "name": f"k{i}", "pid": 1, "tid": 7, "ts": i, "dur": 1}
        for i in range(40)
    ]
    events[20]["name"] = 'a}, {"ph": "X", "name": "b"}, {"c": 1'
    trace.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events, "tail": "}, {"}))
    data = trace.read_bytes()
    prefix, first = array_start(data) or (b"", 0)
    bad = data.index(b"a}, {") + 1  # the `}` inside the name
    good = data.rindex(b"}, {", 0, data.index(b'"k21"'))  # the end of that event
    parts = [Part(first, bad + 1), Part(bad + 3, good + 1), Part(good + 3, None)]
    assert inside_a_string(trace, [bad]) == [True]
    got = run_parts(trace, prefix, parts, DECODER.decode, walk_events, merge_walks, None)
    want_stream = EventStream(trace, decode=DECODER.decode)
    want = walk_events(want_stream)
    assert got is not None and got.parts == 2  # the first part took the second in
    assert got.header == want_stream.header == {"schemaVersion": 1, "tail": "}, {"}
    assert got.events == 40
    assert walk_state(got.state) == walk_state(want)


# ---------------------------------------------------------------------------------------------
# What is not cut, and what goes back to the sequential path


def test_the_walks_of_the_parts_merge_into_the_whole_walk(tmp_path):
    """Every attribute of the merged walk equals the sequential walk's, in the same order."""
    trace = plain_copy(REAL / "kineto/nccl_parser_config__nccl_data.json.gz", tmp_path)
    prefix, parts = plan_parts(trace, 23)
    got = run_parts(
        trace, prefix, parts, DECODER.decode, walk_events, merge_walks, None, None, 4096
    )
    want = walk_events(EventStream(trace, decode=DECODER.decode))
    assert got is not None and got.parts == len(parts) > 20
    state, expected = walk_state(got.state), walk_state(want)
    assert list(state) == list(expected)
    for key, value in expected.items():
        assert state[key] == value, key
        if isinstance(value, dict):
            assert list(state[key]) == list(value), key  # same order of first sight


KERNELS = [
    {"ph": "X", "cat": "kernel", "name": f"k{i}", "pid": 1, "tid": 1, "ts": i, "dur": 1}
    for i in range(400)
]


@pytest.fixture
def small_parts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Parts of 2 KB, folded in this process."""
    monkeypatch.setattr(parallel, "MIN_BYTES", 0)
    monkeypatch.setattr(parallel, "PART_BYTES", 2048)
    monkeypatch.setattr(parallel, "decode_workers", lambda: 2)
    monkeypatch.setattr(parallel, "_pool", no_pool)


def test_nan_truncation_and_invalid_bytes_go_back_to_the_sequential_path(tmp_path, small_parts):
    text = json.dumps({"traceEvents": KERNELS})

    def parts_of(name: str, content: str) -> Any:
        path = tmp_path / name
        path.write_text(content)
        return read_in_parts(path, DECODER.decode, walk_events, merge_walks)

    assert parts_of("ok.json", text) is not None
    assert parts_of("nan.json", text.replace('"dur": 1}', '"dur": NaN}', 1)) is None
    assert parts_of("cut.json", text[: len(text) * 2 // 3]) is None
    assert parts_of("bad.json", text.replace('"ts": 200', '"ts": 2 00')) is None
    assert parts_of("list.json", "[1, 2, 3]" + " " * 4096) is None  # no event start to cut at


def test_a_gz_file_that_cannot_be_read_in_parts_goes_back_to_the_sequential_path(
    tmp_path, monkeypatch, small_parts
):
    """A .gz file cut short, one not gzip, NaN, and a part that ends inside a string (its
    bytes are gone once it fails, so the file is read again in one pass): None, and the
    reader gives what one pass gives."""
    text = json.dumps({"traceEvents": KERNELS}).encode()

    def parts_of(name: str, content: bytes) -> Any:
        path = tmp_path / name
        path.write_bytes(content)
        return read_in_parts(path, DECODER.decode, walk_events, merge_walks)

    assert parts_of("ok.json.gz", gzip.compress(text)) is not None
    packed = gzip.compress(text)
    assert parts_of("cut.json.gz", packed[: len(packed) // 2] + packed[-8:]) is None
    assert parts_of("not.json.gz", text) is None
    assert (
        parts_of("nan.json.gz", gzip.compress(text.replace(b'"dur": 1}', b'"dur": NaN}', 1)))
        is None
    )
    # keys that the planner takes for an event's start (`}, {"...":`), in every event
    doc = {"traceEvents": [{**e, "args": {"x}, {": 1, ":y": 2}} for e in KERNELS]}
    tricky = tmp_path / "tricky.pt.trace.json.gz"
    tricky.write_bytes(gzip.compress(json.dumps(doc).encode()))
    assert read_in_parts(tricky, DECODER.decode, walk_events, merge_walks) is None
    cut = tmp_path / "cut.pt.trace.json.gz"
    cut.write_bytes(tricky.read_bytes()[: tricky.stat().st_size * 2 // 3])
    monkeypatch.setattr("advisor_plugins.kineto.reader.CHUNK_BYTES", 4096)  # batches before the cut
    for trace in (tricky, cut):
        whole = sequential(monkeypatch, lambda trace=trace: KinetoReader().read(trace)[0])
        assert_same_profile(KinetoReader().read(trace)[0], whole)
    assert any("truncated gzip" in w.problem for w in whole.warnings)  # the cut file's


def test_not_cut_when_small_or_in_a_worker(tmp_path, monkeypatch):
    trace = plain_copy(REAL / "kineto/nccl_parser_config__nccl_data.json.gz", tmp_path)
    packed = REAL / "kineto/nccl_parser_config__nccl_data.json.gz"
    monkeypatch.setattr(parallel, "_pool", no_pool)
    monkeypatch.setattr(parallel, "PART_BYTES", 1 << 20)
    monkeypatch.setenv(parallel.WORKERS_ENV, "4")
    assert parallel.decode_workers() == 4
    for small in (trace, packed):  # < MIN_BYTES, the .gz file by the size gzip notes
        assert read_in_parts(small, DECODER.decode, walk_events, merge_walks) is None
    assert parallel._inflated_size(packed) == trace.stat().st_size
    monkeypatch.setattr(parallel, "MIN_BYTES", 0)
    for path in (trace, packed):
        cut = read_in_parts(path, DECODER.decode, walk_events, merge_walks)
        assert cut is not None and cut.parts == 10  # 9.8 MB in parts of 1 MiB
    monkeypatch.setenv(parallel.WORKERS_ENV, "1")
    assert read_in_parts(trace, DECODER.decode, walk_events, merge_walks) is None
    monkeypatch.setenv(parallel.WORKERS_ENV, "many")
    assert parallel.decode_workers() == 1
    monkeypatch.delenv(parallel.WORKERS_ENV)
    # by default, the CPUs this process may use that are idle now: measured from the CPU
    # times where the kernel gives them, else the CPUs less the 1-minute load average
    monkeypatch.setattr(cpu_idle, "SAMPLE_S", 0.0)
    monkeypatch.setattr(cpu_idle, "_mark", None)  # no command line marked its start
    for cpus, machine, idle_share, workers in (
        (16, 16, 0.99, 16),
        (16, 16, 0.80, 13),
        (2, 2, 0.85, 2),
        (2, 2, 0.50, 1),
        (2, 2, 0.0, 1),
        (4, 64, 0.5, 4),  # a share of a large machine: its affinity bounds it
    ):
        times = iter([(1000, 0, machine), (2000, int(1000 * idle_share), machine)])
        monkeypatch.setattr(cpu_idle, "_cpu_times", lambda times=times: next(times))
        monkeypatch.setattr(parallel.os, "sched_getaffinity", lambda _, n=cpus: set(range(n)))
        assert parallel.decode_workers() == workers, (cpus, idle_share)
    monkeypatch.setattr(cpu_idle, "_cpu_times", lambda: None)
    for cpus, load, workers in ((16, 0.2, 16), (16, 3.2, 13), (2, 1.0, 1), (2, 4.5, 1)):
        monkeypatch.setattr(cpu_idle.os, "cpu_count", lambda n=cpus: n)
        monkeypatch.setattr(parallel.os, "sched_getaffinity", lambda _, n=cpus: set(range(n)))
        monkeypatch.setattr(cpu_idle.os, "getloadavg", lambda load=load: (load, load, load))
        assert parallel.decode_workers() == workers, (cpus, load)
    monkeypatch.setattr(parallel.multiprocessing, "parent_process", lambda: object())
    assert parallel.decode_workers() == 1


def test_a_file_too_small_to_cut_does_not_wait_for_the_cpus(tmp_path, monkeypatch):
    """Watching the CPUs takes SAMPLE_S: only a file worth cutting pays it, not every trace."""
    trace = plain_copy(REAL / "kineto/nccl_parser_config__nccl_data.json.gz", tmp_path)
    watched: list[int] = []
    monkeypatch.delenv(parallel.WORKERS_ENV, raising=False)
    monkeypatch.setattr(cpu_idle, "_cpu_times", lambda: watched.append(1))
    assert read_in_parts(trace, DECODER.decode, walk_events, merge_walks) is None  # < MIN_BYTES
    packed = REAL / "kineto/nccl_parser_config__nccl_data.json.gz"  # inflates to < MIN_BYTES
    assert read_in_parts(packed, DECODER.decode, walk_events, merge_walks) is None
    assert watched == []
    monkeypatch.setattr(cpu_idle.os, "getloadavg", lambda: (64.0, 64.0, 64.0))  # all busy
    assert read_in_parts(trace, DECODER.decode, walk_events, merge_walks, min_bytes=0) is None
    assert watched, "a file worth cutting asks which CPUs are idle"


@pytest.mark.parametrize(
    ("elapsed", "idle_share", "own_s", "expected"),
    [
        (0.4, 0.5, 0.4, 2.0),  # 2 CPUs, one idle, the other this process's: both
        (0.4, 0.0, 0.4, 1.0),  # another process holds a CPU the whole time: one
        (0.4, 0.9, 0.4, 2.0),  # never more than the machine has
    ],
)
def test_a_marked_start_tells_the_idle_cpus_without_waiting(
    monkeypatch, elapsed, idle_share, own_s, expected
) -> None:
    """The command line marks its start: a large trace read later is measured over that
    stretch, its own CPU time counted as idle, and nothing sleeps."""
    clock = iter([100.0, 100.0 + elapsed])
    monkeypatch.setattr(cpu_idle.time, "monotonic", lambda: next(clock))
    times = iter([(1000, 0, 2), (1000 + 80, int(80 * idle_share), 2)])
    monkeypatch.setattr(cpu_idle, "_cpu_times", lambda: next(times))
    own = iter([1.0, 1.0 + own_s])
    monkeypatch.setattr(cpu_idle, "_own_cpu_s", lambda: next(own))
    monkeypatch.setattr(cpu_idle.time, "sleep", lambda _: pytest.fail("slept"))
    monkeypatch.setattr(cpu_idle, "_mark", None)  # restored after the test
    cpu_idle.mark()
    assert cpu_idle.idle_cpus() == pytest.approx(expected)


@pytest.mark.parametrize("elapsed", [0.01, 60.0])
def test_a_mark_too_recent_or_too_old_is_not_used(monkeypatch, elapsed) -> None:
    """Under SAMPLE_S a few jiffies tell nothing; after half a minute the machine may do
    something else: the CPUs are watched for SAMPLE_S instead."""
    clock = iter([100.0, 100.0 + elapsed])
    monkeypatch.setattr(cpu_idle.time, "monotonic", lambda: next(clock))
    times = iter([(0, 0, 2), (2000, 1000, 2), (2100, 1050, 2)])
    monkeypatch.setattr(cpu_idle, "_cpu_times", lambda: next(times))
    monkeypatch.setattr(cpu_idle, "_own_cpu_s", lambda: 0.0)
    slept: list[float] = []
    monkeypatch.setattr(cpu_idle.time, "sleep", slept.append)
    monkeypatch.setattr(cpu_idle, "_mark", None)  # restored after the test
    cpu_idle.mark()
    assert cpu_idle.idle_cpus() == pytest.approx(1.0)  # the sample's 50 of 100 jiffies
    assert slept == [cpu_idle.SAMPLE_S]


def test_idle_cpus_are_read_from_the_kernel_where_it_tells_them() -> None:
    """On Linux /proc/stat gives the CPU times: the idle CPUs are a number between 0 and the
    CPUs of the machine, and its parse gives all jiffies >= idle ones."""
    times = cpu_idle._cpu_times()
    if not Path("/proc/stat").exists():
        assert times is None
        return
    assert times is not None
    total, idle, count = times
    assert total >= idle >= 0 and count == (os.cpu_count() or count)
    assert 0.0 <= cpu_idle.idle_cpus() <= count


@pytest.mark.integration
@pytest.mark.parametrize("copy", [plain_copy, packed_copy], ids=["plain", "gz"])
def test_worker_processes_give_the_same_tables(tmp_path, monkeypatch, copy):
    """Real worker processes (spawned), three parts each."""
    source = REAL / "kineto/nccl_parser_config__nccl_data.json.gz"
    trace = copy(source, tmp_path)
    whole = sequential(monkeypatch, lambda: KinetoReader().read(trace)[0])
    monkeypatch.setattr(parallel, "MIN_BYTES", 0)
    monkeypatch.setattr(parallel, "PART_BYTES", len(gzip.decompress(source.read_bytes())) // 6)
    monkeypatch.setenv(parallel.WORKERS_ENV, "3")
    seen: list[int] = []

    def counting(*args: Any, **kwargs: Any) -> Any:
        result = read_in_parts(*args, **kwargs)
        seen.append(0 if result is None else result.parts)
        return result

    interval = sys.getswitchinterval()
    intervals: list[float] = []

    def watching(run: Any) -> Any:
        def watched(*args: Any, **kwargs: Any) -> Any:
            intervals.append(sys.getswitchinterval())
            return run(*args, **kwargs)

        return watched

    monkeypatch.setattr("advisor_plugins.kineto.reader.read_in_parts", counting)
    monkeypatch.setattr(parallel, "run_parts", watching(run_parts))
    monkeypatch.setattr(parallel, "run_inflated_parts", watching(parallel.run_inflated_parts))
    in_parts = KinetoReader().read(trace)[0]
    assert seen and seen[0] > 1
    assert_same_profile(in_parts, whole)
    # results are read from the workers' pipes promptly while this process folds its parts,
    # and the interpreter's setting is given back
    assert intervals == [parallel.SWITCH_S] and sys.getswitchinterval() == interval
