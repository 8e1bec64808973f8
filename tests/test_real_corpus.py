"""The real-profile corpus (tests/fixtures/real/<case>/, see PROVENANCE.md): each case is
read end to end, gives no warning that the raw file does not bear out, and its step time
(or, without steps, its span) and its top operator match numbers computed here from the raw
file with plain json/csv parsing, never with the readers' code.

Why: the readers were written against documentation and a handful of samples; profiles
from other versions, devices and workloads are where misreads hide.
"""

from __future__ import annotations

import csv
import functools
import gzip
import json
import re
import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pytest
from conftest import REAL

import advisor
from advisor.engine.evaluate import MIN_JUDGED_US
from advisor.engine.savings import MIN_RECORDED_SHARE
from advisor.model import Profile

TICK_US = 0.01
"""MindSpore's step_trace_raw counts 10 ns ticks."""


@dataclass(frozen=True)
class Expected:
    """What the raw file says, in µs: step number -> step time (None: no steps, then `span`
    is the one window the reader stands in for them), the top operator and its total time,
    and the warnings the raw file bears out (by their first words)."""

    steps: dict[int, float] | None
    span: float | None
    top: tuple[str, float] | None
    warnings: frozenset[str] = frozenset()


# ---------------------------------------------------------------------------------------------
# Kineto / PyTorch profiler traces

_DEVICE_CATS = {"kernel", "gpu_memcpy", "gpu_memset", "memcpy", "memset"}
_HOST_WORK_CATS = {"cpu_op", "operator", "cuda_runtime", "runtime", "cuda_driver"}
_STEP_CATS = {"cpu_op", "user_annotation", "operator"}


def _load_json(path: Path) -> Any:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as fh:
        return json.load(fh)


def _sum_by(items: list[tuple[str, float]]) -> tuple[str, float] | None:
    totals: dict[str, float] = defaultdict(float)
    for name, dur in items:
        totals[name] += dur
    return max(totals.items(), key=lambda kv: kv[1]) if totals else None


def _cut_off(steps: dict[int, float], starts: dict[int, float], device: list[dict]) -> bool:
    """Whether the last ProfilerStep (by start) holds no device event while an earlier one
    does, and is shorter than half the median of the earlier ones."""
    if len(steps) < 2 or not device:
        return False
    order = sorted(starts, key=starts.__getitem__)
    last, earlier = order[-1], order[:-1]

    def busy(step: int) -> bool:
        a, b = starts[step], starts[step] + steps[step]
        return any(e["ts"] < b and e["ts"] + e["dur"] > a for e in device)

    median = statistics.median(steps[s] for s in earlier)
    return steps[last] < 0.5 * median and not busy(last) and any(busy(s) for s in earlier)


def kineto_expected(path: Path) -> Expected:
    """Steps are the ProfilerStep#N host events (the longest per N); without them the span of
    the device events. The top operator is the device event name with the largest summed
    duration; without device events the top `gloo:` collective, else the top `cpu_op`."""
    doc = _load_json(path)
    events = [e for e in doc["traceEvents"] if isinstance(e, dict) and e.get("ph") == "X"]
    steps: dict[int, float] = {}
    starts: dict[int, float] = {}
    for e in events:
        match = re.match(r"ProfilerStep#(\d+)", str(e.get("name", "")))
        if match and str(e.get("cat", "")).lower() in _STEP_CATS:
            number = int(match.group(1))
            if float(e["dur"]) >= steps.get(number, 0.0):
                steps[number], starts[number] = float(e["dur"]), float(e["ts"])
    device = [e for e in events if str(e.get("cat", "")).lower() in _DEVICE_CATS]
    warnings = set()
    if _cut_off(steps, starts, device):  # the profiler stopped in the last step
        del steps[max(starts, key=starts.__getitem__)]
        warnings.add("the last step")
    if "distributedInfo" not in doc:
        warnings.add("no distributedInfo")
    span = None
    if not steps and device:
        span = max(e["ts"] + e["dur"] for e in device) - min(e["ts"] for e in device)
        warnings.add("no ProfilerStep")
    if span is not None and span < MIN_JUDGED_US:
        warnings.add("the profile spans")  # too short to hold a training step
    if steps and _recorded_share(events, steps, starts) < MIN_RECORDED_SHARE:
        warnings.add("recorded work")  # no step time if fixed: the steps' time is not in it
    # a CPU trace's collectives are `gloo:<op>` annotations: its communication comes first
    comm = [(e["name"], float(e["dur"])) for e in events if str(e["name"]).startswith("gloo:")]
    if device:
        top = _sum_by([(e["name"], float(e["dur"])) for e in device])
    elif comm:
        top = _sum_by(comm)
    else:
        top = _sum_by([(e["name"], float(e["dur"])) for e in events if e.get("cat") == "cpu_op"])
    return Expected(steps or None, span, top, frozenset(warnings))


def _recorded_share(events: list[dict], steps: dict[int, float], starts: dict[int, float]) -> float:
    """The share of the steps' span that device events, host operators and runtime calls
    (old traces name them `operator` and `runtime`) and gloo collectives cover: the work a
    critical path can attribute."""
    lo = min(starts.values())
    hi = max(starts[n] + steps[n] for n in steps)
    spans = sorted(
        (max(float(e["ts"]), lo), min(float(e["ts"]) + float(e["dur"]), hi))
        for e in events
        if str(e.get("cat", "")).lower() in _DEVICE_CATS | _HOST_WORK_CATS
        or str(e.get("name", "")).startswith("gloo:")
    )
    covered, reach = 0.0, lo
    for start, end in spans:
        if end > max(start, reach):
            covered += end - max(start, reach)
            reach = end
    return covered / (hi - lo)


# ---------------------------------------------------------------------------------------------
# MindSpore old layout (profiler/)


def _csv_rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def ms_steps(path: Path) -> dict[int, float]:
    """step_trace_raw rows (not the trailing "-" average): the step runs from the forward
    pass's start to the iteration's end; the gap before it (iteration_interval) is the data
    wait, so `total` = that gap + the step."""
    steps = {}
    for row in _csv_rows(path):
        # "-" is MindSpore's average row; an older MindSpore wrote it as an all-zero row
        if not row["step_num"].isdigit() or int(row["start_point"]) == 0:
            continue
        fp, end, total = (int(row[k]) for k in ("fp_point", "end_point", "total"))
        assert (end - fp) + int(row["iteration_interval"]) == total
        steps[int(row["step_num"])] = (end - fp) * TICK_US
    return steps


def ms_timeline_top(path: Path) -> tuple[str, float] | None:
    """output_timeline_data: op_name, stream_id, start_time(ms), duration(ms)."""
    with open(path, encoding="utf-8") as fh:
        rows = [line.split(",") for line in fh.read().splitlines()[1:] if line.strip()]
    return _sum_by([(r[0], float(r[3]) * 1e3) for r in rows])


def ms_hccl_top(path: Path) -> tuple[str, float] | None:
    """hccl_raw: per step a JSON map collective -> [step, transit ms, wait ms, links]."""
    items = []
    for row in _csv_rows(path):
        if row["step_num"].isdigit():
            for name, cost in json.loads(row["communication_operator_cost"]).items():
                items.append((name, (float(cost[1]) + float(cost[2])) * 1e3))
    return _sum_by(items)


def mindspore_expected(folder: Path, rank: int) -> Expected:
    timeline = folder / f"output_timeline_data_{rank}.txt"
    hccl = folder / f"hccl_raw_{rank}.csv"
    top = (
        ms_timeline_top(timeline)
        if timeline.exists()
        else ms_hccl_top(hccl)
        if hccl.exists()
        else None  # a step trace alone: steps, no operators
    )
    return Expected(ms_steps(folder / f"step_trace_raw_{rank}_detail_time.csv"), None, top)


# ---------------------------------------------------------------------------------------------
# CANN msprof raw-export timelines (device_N/timeline/*.json)


def cann_timeline_expected(device: Path) -> Expected:
    """Steps: the `Iteration N` events of step_trace_*.json (each file repeats every
    iteration). Operators: the task_time tasks outside the streams HCCL's planes use, and
    HCCL's op-level events (those without a transport), which stand for the plane tasks."""
    timeline = device / "timeline"
    steps = {}
    for path in sorted(timeline.glob("step_trace_*.json")):
        for e in _load_json(path):
            if e.get("ph") == "X" and e.get("cat") == "Iteration Time":
                steps[int(e["args"]["Iteration ID"])] = float(e["dur"])
    hccl = [e for p in timeline.glob("hccl_*.json") for e in _load_json(p) if e.get("ph") == "X"]
    hccl_streams = {e["args"]["stream id"] for e in hccl if "transport type" in e.get("args", {})}
    items = [(e["name"], float(e["dur"])) for e in hccl if "args" not in e]
    for path in timeline.glob("task_time_*.json"):
        for e in _load_json(path):
            if e.get("ph") == "X" and e["args"]["Stream Id"] not in hccl_streams:
                items.append((e["name"], float(e["dur"])))
    return Expected(steps, None, _sum_by(items))


# ---------------------------------------------------------------------------------------------
# torch_npu text exports (rank folders, ASCEND_PROFILER_OUTPUT/)


_ANOTHER_RUN_US = 60e6
"""Files whose times lie a minute or more outside kernel_details.csv's come from another run."""


def _time_problem(path: Path, column: str, lo: float, hi: float) -> str | None:
    """What the raw file says of a CSV's times (`column`): rounded by a spreadsheet
    (`1.69512E+15`: its cells in scientific notation), or all a minute or more outside
    [lo, hi] (another run); None when neither."""
    cells = [r[column].strip() for r in _csv_rows(path) if r[column].strip()]
    rounded = [c for c in cells if re.fullmatch(r"\d\.\d{1,9}E\+\d+", c)]
    if rounded:
        return f"{len(rounded)} times are rounded"
    times = [float(c) for c in cells]
    far = times and (max(times) < lo - _ANOTHER_RUN_US or min(times) > hi + _ANOTHER_RUN_US)
    return "times are" if far else None


def ascend_pt_expected(rank: Path) -> Expected:
    """Steps: step_trace_time.csv, each step the sum of its Computing, Communication(Not
    Overlapped) and Free columns (the device time the step covers). Operators:
    kernel_details.csv's Duration(us) by Name, collectives included. Warnings: rows of
    kernel_details.csv with another number of cells than its header; memory files whose times
    a spreadsheet rounded, or that lie outside kernel_details.csv's (without a trace, the file
    the others must match)."""
    output = rank / "ASCEND_PROFILER_OUTPUT"
    steps = {
        int(row["Step"]): sum(
            float(row[k]) for k in ("Computing", "Communication(Not Overlapped)", "Free")
        )
        for row in _csv_rows(output / "step_trace_time.csv")
    }
    with open(output / "kernel_details.csv", newline="", encoding="utf-8") as fh:
        header, *cells = list(csv.reader(fh))
    warnings = (
        {"rows with more or fewer cells"} if {len(c) for c in cells} != {len(header)} else set()
    )
    kernels = _csv_rows(output / "kernel_details.csv")
    starts = [float(r["Start Time(us)"]) for r in kernels]
    span = (min(starts), max(starts))
    for name, column in (
        ("memory_record.csv", "Timestamp(us)"),
        ("operator_memory.csv", "Allocation Time(us)"),
    ):
        told = (output / name).exists() and _time_problem(output / name, column, *span)
        if told:
            warnings.add(told)
    top = _sum_by([(r["Name"], float(r["Duration(us)"])) for r in kernels])
    return Expected(steps, None, top, frozenset(warnings))


def _ascend_pt_ranks(folder: Path) -> list[Expected]:
    """The rank folders (any folder holding ASCEND_PROFILER_OUTPUT), in rank order."""
    return [
        ascend_pt_expected(rank)
        for rank in sorted(folder.iterdir())
        if (rank / "ASCEND_PROFILER_OUTPUT").is_dir()
    ]


# ---------------------------------------------------------------------------------------------
# The cases


@dataclass(frozen=True)
class Case:
    folder: str
    expected: Callable[[Path], list[Expected]]
    """One Expected per profile the folder holds (per rank), in rank order."""


def _one_file(folder: Path) -> list[Expected]:
    (path,) = [p for p in folder.iterdir() if p.name.endswith((".json", ".json.gz"))]
    return [kineto_expected(path)]


def _the_file(path: Path) -> list[Expected]:
    return [kineto_expected(path)]


def _mindspore(folder: Path) -> list[Expected]:
    ranks = sorted(
        int(m.group(1))
        for p in folder.glob("step_trace_raw_*_detail_time.csv")
        if (m := re.match(r"step_trace_raw_(\d+)_detail_time", p.name))
    )
    return [mindspore_expected(folder, rank) for rank in ranks]


def _aicore_detail(folder: Path) -> list[Expected]:
    """aicore_intermediate_{N}_detail.csv alone: per operator its total time (ms), no steps."""
    (path,) = folder.glob("aicore_intermediate_*_detail.csv")
    rows = _csv_rows(path)
    top = _sum_by([(r["full_kernel_time"], float(r["execution_time"]) * 1e3) for r in rows])
    return [Expected(None, None, top)]


def _cann_timeline(folder: Path) -> list[Expected]:
    return [cann_timeline_expected(d) for d in sorted(folder.glob("PROF_*/device_*"))]


KINETO = [
    "kineto_2021_v100_computeproperties",
    "kineto_backward_thread",
    "kineto_2026_h100_cuda_sync_before",
    "kineto_2026_h100_cuda_sync_after",
    "kineto_2023_a100_simple_add_syncs",
    "kineto_2023_event_sync",
    "kineto_2025_mi300x_sglang_decode",
    "kineto_2025_h100_qwen_inference",
]
CASES = [
    *(Case(name, _one_file) for name in KINETO),
    Case("mindspore_run1_widedeep", _mindspore),
    Case("mindspore_cluster_4rank", _mindspore),
    Case("mindspore_ut_device6_hccl", _mindspore),
    Case("mindspore_run3_model_parallel", _mindspore),
    Case("mindspore_mindinsight_rank0_parallel_streams", _mindspore),
    Case("mindspore_ut_rank0_parallel_streams", _mindspore),
    Case("mindspore_ut_rank10_40steps", _mindspore),
    Case("mindspore_lenet_aicore_detail", _aicore_detail),
    Case("cann_timeline_device1", _cann_timeline),
    Case("msinsight_pytorch_level1", _ascend_pt_ranks),
    Case("msinsight_pp16_ranks01", _ascend_pt_ranks),
    # the real fixtures the other tests use (kineto/, cann_timeline/, mindspore_legacy/)
    *(Case(f"kineto/{path.name}", _the_file) for path in sorted((REAL / "kineto").iterdir())),
    Case("cann_timeline", _cann_timeline),
    Case("mindspore_legacy/run_2_profiler", _mindspore),
]


@functools.cache
def analysed(folder: str) -> advisor.AnalysisResult:
    return advisor.analyze(REAL / folder)


def _top(profile: Profile) -> tuple[str, float] | None:
    """The reader's top operator: device ops, else communication ops, else aten host ops,
    summed by name."""
    for table, rows in (
        ("device_ops", lambda f: f),
        ("comm_ops", lambda f: f[f["kind"] == "op"] if "kind" in f else f),
        ("host_ops", lambda f: f[f["kind"] == "aten"]),
    ):
        frame = profile.tables.get(table)
        if frame is not None and len(rows(frame)):
            totals = rows(frame).groupby("name")["duration_us"].sum()
            return str(totals.idxmax()), float(totals.max())
    return None


def test_the_corpus_has_twenty_cases_each_with_provenance():
    provenance = (REAL / "PROVENANCE.md").read_text(encoding="utf-8")
    assert len(CASES) >= 20
    for case in CASES:
        assert (REAL / case.folder).exists(), case.folder
        top = case.folder.split("/")[0]
        assert f"| {top}/" in provenance, case.folder


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.folder)
def test_case_matches_its_raw_file(case: Case) -> None:
    result = analysed(case.folder)
    assert result.input_errors == [] and result.plugin_problems == []
    profiles = [a.profile for a in result.analyses if a.profile.meta.source_format != "cluster"]
    wants = case.expected(REAL / case.folder)
    assert len(profiles) == len(wants)
    for profile, want in zip(profiles, wants):
        problems = [w.problem for w in profile.warnings]
        assert {p for p in problems if not p.startswith(tuple(want.warnings))} == set()
        assert {w for w in want.warnings if not any(p.startswith(w) for p in problems)} == set()

        steps = profile.tables.get("steps")
        if want.steps is not None:
            got = dict(zip(steps["step"].tolist(), steps["duration_us"].tolist()))
            assert got == pytest.approx(want.steps, rel=1e-9, abs=1e-3)
        elif want.span is not None:
            assert steps["duration_us"].tolist() == pytest.approx([want.span], abs=1e-3)
        else:
            assert steps is None

        if want.top is None:
            assert _top(profile) is None
            continue
        name, total = _top(profile)
        assert (name, total) == (want.top[0], pytest.approx(want.top[1], rel=1e-9, abs=1e-3))


def test_cluster_case_compares_its_four_ranks():
    """The 4-rank MindSpore run is read as four ranks and one cluster view over them."""
    result = analysed("mindspore_cluster_4rank")
    ranks = [a.profile.meta.rank for a in result.analyses]
    assert ranks == [0, 1, 2, 3, None]
    assert len(result.analyses[-1].profile.tables["ranks"]) == 4


def test_mindspore_ops_missing_from_framework_raw_are_typed_by_name():
    """run_1's framework_raw lists none of the timeline's operators: each is typed by its
    name (`.../GatherV2-op55` -> GatherV2), so op_stats counts types, not single ops."""
    folder = REAL / "mindspore_run1_widedeep"
    with open(folder / "output_timeline_data_1.txt", encoding="utf-8") as fh:
        names = [line.split(",")[0] for line in fh.read().splitlines()[1:] if line.strip()]
    framework = {row["full_kernel_name"] for row in _csv_rows(folder / "framework_raw_1.csv")}
    assert not framework & set(names)
    want = Counter(re.sub(r"-op\d+$", "", name.rsplit("/", 1)[-1]) for name in names)
    stats = analysed("mindspore_run1_widedeep").analyses[0].profile.tables["op_stats"]
    assert dict(zip(stats["op_type"], stats["count"])) == want


def test_mindspore_timeline_of_the_first_steps_leaves_out_the_step_it_stops_in() -> None:
    """run_1 records 322 steps and a device timeline of the first ones, which stops about
    1 ms into step 15: steps 1-14 get a breakdown, 15 on none (its other 200 ms are not
    idle, they were not recorded)."""
    profile = analysed("mindspore_run1_widedeep").analyses[0].profile
    steps = profile.tables["steps"].set_index("step")
    ops = profile.tables["device_ops"]
    last = float((ops["start_us"] + ops["duration_us"]).max())
    (step,) = steps.index[(steps["start_us"] < last) & (steps["end_us"] > last)]
    assert step == 15 and len(steps) == 322
    assert last - steps.loc[15, "start_us"] < steps.loc[15, "duration_us"] / 2
    assert steps.loc[:14, "free_us"].notna().all() and steps.loc[15:, "free_us"].isna().all()


def test_mindspore_idle_share_of_the_covered_steps_ranks_by_its_time_over_all_steps() -> None:
    """run_1: the device idles 40% of steps 1-14 (1.2 s of them) and the gradient refresh
    takes 12% of all 322 steps (8.2 s): the idle time stands for 40% of every step, more
    than the refresh, so STEP-003 ranks first, as "fix these first" orders them."""
    evaluation = analysed("mindspore_run1_widedeep").analyses[0].evaluation
    found = {f.rule.id: f for f in evaluation.findings}
    idle, refresh = found["STEP-003"], found["STEP-002"]
    assert (idle.impact_us or 0) < (refresh.impact_us or 0)
    assert (idle.impact_us or 0) / (idle.measured_us or 1) > (refresh.impact_us or 0) / (
        refresh.measured_us or 1
    )
    assert idle.rank < refresh.rank
    assert evaluation.fix_first is not None and evaluation.fix_first.rules[0] == "STEP-003"


@pytest.mark.parametrize(
    "folder", ["kineto_2026_h100_cuda_sync_before", "kineto_2026_h100_cuda_sync_after"]
)
def test_kineto_stream_wait_event_does_not_hold_the_host(folder: str) -> None:
    """CUPTI's `cuda_sync` records: Event/Stream/Context Sync block the host, a Stream Wait
    Event (cudaStreamWaitEvent) does not; only the former are host syncs."""
    (path,) = (REAL / folder).iterdir()
    events = [e for e in _load_json(path)["traceEvents"] if e.get("cat") == "cuda_sync"]
    want = sorted(e["name"] for e in events if e["name"] != "Stream Wait Event")
    assert len(want) < len(events)
    host = analysed(folder).analyses[0].profile.tables["host_ops"]
    assert sorted(host[host["kind"] == "sync"]["name"]) == want


def test_kineto_sync_records_of_recorded_calls_are_not_counted_again() -> None:
    """PyTorch 2.2+ traces hold, for each cudaStreamSynchronize or cudaDeviceSynchronize, the
    call on the host thread and CUPTI's Stream/Context Sync record with the same correlation
    on the device's timeline: one synchronisation, counted once (HOST-002 said 42 times).
    Without ProfilerStep the device's span stands for the step, and HOST-002 counts the 19
    calls in it: the last two cudaDeviceSynchronize come after the last kernel ended."""
    folder = "kineto_2023_a100_simple_add_syncs"
    (path,) = (REAL / folder).iterdir()
    events = _load_json(path)["traceEvents"]
    calls = [
        e for e in events if e.get("cat") == "cuda_runtime" and e["name"].endswith("Synchronize")
    ]
    records = [
        e for e in events if e.get("cat") == "cuda_sync" and e["name"] != "Stream Wait Event"
    ]
    assert sorted(e["args"]["correlation"] for e in records) == sorted(
        e["args"]["correlation"] for e in calls
    )
    (analysis,) = analysed(folder).analyses
    host = analysis.profile.tables["host_ops"]
    assert sorted(host[host["kind"] == "sync"]["name"]) == sorted(e["name"] for e in calls)
    (finding,) = [f for f in analysis.findings if f.rule.id == "HOST-002"]
    tasks = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    first = min(e["ts"] for e in tasks)
    last = max(e["ts"] + e["dur"] for e in tasks)
    in_span = [e for e in calls if first <= e["ts"] < last]
    assert (len(calls), len(in_span)) == (21, 19)
    blocking = sum(e["dur"] for e in in_span)
    assert f"synchronised with the device {len(in_span)} times" in finding.message
    assert f"blocking for {blocking} µs" in finding.message
    # the evidence lists the calls counted, not the two after the last kernel
    assert finding.evidence["total_rows"] == len(in_span)
    shown = dict(zip(finding.evidence["columns"], zip(*finding.evidence["rows"])))
    assert set(shown["duration_us"]) <= {e["dur"] for e in in_span}


def test_msprof_control_tasks_are_not_device_work() -> None:
    """task_time's PROFILING_ENABLE / PROFILING_DISABLE (when the profiler was switched on and
    off) and TASK_TIMEOUT_SET are no work of the model: the profile spans its kernels, 14.5
    ms, not the 917 ms the profiler was on, and no kernel waited 749 ms for the switch-off."""
    folder = "msprof_2026_vllm_ascend_task_time"
    (path,) = (REAL / folder).rglob("task_time_*.csv")
    with path.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    kernels = [r for r in rows if r["kernel_name"] != "N/A"]
    assert {r["kernel_type"] for r in rows if r["kernel_name"] == "N/A"} == {
        "PROFILING_ENABLE",
        "PROFILING_DISABLE",
        "TASK_TIMEOUT_SET",
    }
    (analysis,) = analysed(folder).analyses
    device = analysis.profile.tables["device_ops"]
    assert sorted(device["name"]) == sorted(r["kernel_name"] for r in kernels)
    start = min(float(r["task_start(us)"]) for r in kernels)
    end = max(float(r["task_stop(us)"]) for r in kernels)
    assert analysis.evaluation.total_us == pytest.approx(end - start, abs=0.1)  # float64 at 1.8e15
    assert end - start < 15_000


def test_kineto_sync_records_follow_their_calls() -> None:
    """CUPTI records an Event Sync for a cudaEventQuery too, which returns at once: the host
    syncs are the blocking calls (stream, event and device synchronise, 48 µs, and the
    cudaMemcpyAsync of a copy to pageable memory, which returns once the copy is done), not
    the query's record (HOST-002 counted four syncs where there are three)."""
    folder = "kineto_2023_event_sync"
    (path,) = (REAL / folder).iterdir()
    events = _load_json(path)["traceEvents"]
    pageable = {
        e["args"]["correlation"]
        for e in events
        if e.get("cat") == "gpu_memcpy" and e["name"] == "Memcpy DtoH (Device -> Pageable)"
    }
    calls = [
        e
        for e in events
        if e.get("cat") == "cuda_runtime"
        and (e["name"].endswith("Synchronize") or e["args"].get("correlation") in pageable)
    ]
    query = [e for e in events if e.get("name") == "cudaEventQuery"]
    records = {e["args"]["correlation"] for e in events if e.get("cat") == "cuda_sync"}
    assert len(calls) == 4 and query[0]["args"]["correlation"] in records
    (analysis,) = analysed(folder).analyses
    host = analysis.profile.tables["host_ops"]
    syncs = host[host["kind"] == "sync"]
    assert sorted(syncs["name"]) == sorted(e["name"] for e in calls)
    assert syncs["duration_us"].sum() == pytest.approx(sum(e["dur"] for e in calls))
