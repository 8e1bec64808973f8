"""The schedule providers and rules (SCHED-001/002, GPU-001/002, HOST-006) on real traces.

Expected numbers are worked out here from the raw JSON with the standard library, and where a
peer computes the same figure, checked against what that peer printed on the same file:
Holistic Trace Analysis 0.5.0 (`get_idle_time_breakdown`, `get_cuda_kernel_launch_stats`, on
timeline_analysis__sampled_rank-0.json.gz; HTA drops the events of the last ProfilerStep, so
its figures are those of step 551).
"""

from __future__ import annotations

import copy
import functools
import gzip
import json
import math
import shutil
import statistics
from collections import defaultdict
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import FIXTURE_DIR

from advisor.engine.evaluate import profile_time_us
from advisor.model import Profile, ProfileMeta
from advisor.session import Session
from advisor_plugins.schedule_metrics import _TENSOR_CORE, KERNEL_WAIT_US

KINETO = FIXTURE_DIR / "real" / "kineto"
SAMPLED = KINETO / "timeline_analysis__sampled_rank-0.json.gz"
ALEXNET = KINETO / "critical_path__alexnet__benchmark_result_2869224_1695835535_trace.json.gz"
NCCL = KINETO / "nccl_parser_config__nccl_data.json.gz"
ASCEND = FIXTURE_DIR / "real" / "ascend_pt" / "rank0_ascend_pt"
RULES = ("SCHED-001", "SCHED-002", "GPU-001", "GPU-002", "HOST-006", "HOST-007", "HOST-008")
DEVICE_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}


@functools.cache
def raw(path: Path) -> dict:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return json.load(fh)


@functools.cache
def session() -> Session:
    return Session.open()


def read(path: Path) -> Profile:
    (profile,) = session().read([path]).profiles
    return profile


def evaluate(profile: Profile, rule: str, **params: object):
    s = session()
    rules = [r for r in s.rules if r.id == rule]
    s.derive(profile)
    return s.evaluate(profile, rules, overrides={rule: params} if params else None)


def step_window(path: Path, number: int) -> tuple[float, float]:
    (step,) = [
        e
        for e in raw(path)["traceEvents"]
        if e.get("ph") == "X" and e.get("name") == f"ProfilerStep#{number}"
    ]
    return step["ts"], step["ts"] + step["dur"]


def launches(path: Path) -> dict[int, dict]:
    """Runtime calls by correlation id."""
    return {
        e["args"]["correlation"]: e
        for e in raw(path)["traceEvents"]
        if e.get("cat") == "cuda_runtime" and "correlation" in e.get("args", {})
    }


def device_events(path: Path) -> list[dict]:
    return [
        e
        for e in raw(path)["traceEvents"]
        if e.get("ph") == "X" and str(e.get("cat", "")).lower() in DEVICE_CATS
    ]


# -- reader: kernel launch configuration and launching calls ----------------------------------


def test_kernel_args_are_read_from_the_trace():
    ops = read(SAMPLED).tables["device_ops"]
    kernels = [e for e in device_events(SAMPLED) if e["cat"] == "kernel"]
    with_args = [e for e in kernels if "blocks per SM" in e["args"]]
    assert ops["blocks_per_sm"].notna().sum() == len(with_args) == 1154
    by_start = ops.set_index(ops["start_us"].round(3))
    origin = min(e["ts"] for e in device_events(SAMPLED)) - ops["start_us"].min()
    for event in with_args[:50]:
        row = by_start.loc[round(event["ts"] - origin, 3)]
        row = row[row["name"] == event["name"]].iloc[0] if isinstance(row, pd.DataFrame) else row
        args = event["args"]
        assert row["blocks_per_sm"] == pytest.approx(args["blocks per SM"])
        assert row["warps_per_sm"] == pytest.approx(args["warps per SM"])
        assert row["est_occupancy"] == pytest.approx(args["est. achieved occupancy %"] / 100)
        assert row["registers_per_thread"] == args["registers per thread"]
        assert row["shared_memory_bytes"] == args["shared memory"]
        assert row["grid_blocks"] == int(np.prod(args["grid"]))
        assert row["block_threads"] == int(np.prod(args["block"]))


def test_launch_call_duration_and_name_come_from_the_correlated_runtime_call():
    ops = read(SAMPLED).tables["device_ops"]
    calls = launches(SAMPLED)
    expected = defaultdict(int)
    durations = []
    for event in device_events(SAMPLED):
        call = calls.get(event["args"].get("correlation"))
        if call is not None:
            expected[call["name"]] += 1
            durations.append(call["dur"])
    assert ops["launch_name"].value_counts().to_dict() == dict(expected)
    assert sorted(ops["launch_dur_us"].dropna()) == sorted(durations)


def test_broken_kernel_args_leave_the_columns_empty(tmp_path):
    trace = copy.deepcopy(raw(SAMPLED))
    kernels = [e for e in trace["traceEvents"] if e.get("cat") == "kernel"]
    kernels[0]["args"].update(
        {"blocks per SM": "many", "grid": ["a", 1, 1], "block": {"x": 1}, "shared memory": None}
    )
    kernels[1]["args"]["est. achieved occupancy %"] = [50]
    path = tmp_path / "broken.pt.trace.json"
    path.write_text(json.dumps(trace))
    ops = read(path).tables["device_ops"]
    assert ops["blocks_per_sm"].notna().sum() == 1153  # the one unreadable value only
    assert ops["grid_blocks"].notna().sum() == 1153
    assert ops["est_occupancy"].notna().sum() == 1153


# -- SCHED-001: idle time breakdown, against HTA --------------------------------------------


def hta_breakdown(path: Path, lo: float, hi: float) -> dict[int, dict[str, float]]:
    """HTA's per-stream rules, recomputed from the raw events whose start lies in [lo, hi)."""
    calls = launches(path)
    streams: dict[int, list[dict]] = defaultdict(list)
    for event in device_events(path):
        streams[event["args"]["stream"]].append(event)
    out: dict[int, dict[str, float]] = {}
    for stream, events in streams.items():
        events.sort(key=lambda e: e["ts"])
        sums = {"host_wait": 0.0, "kernel_wait": 0.0, "other": 0.0}
        for prev, event in zip(events, events[1:]):
            if not lo <= event["ts"] < hi:
                continue
            prev_end = prev["ts"] + prev["dur"]
            idle = event["ts"] - prev_end
            if idle <= 0:
                continue
            call = calls.get(event["args"].get("correlation"))
            if call is not None and call["ts"] > prev_end:
                sums["host_wait"] += idle
            elif idle < KERNEL_WAIT_US:
                sums["kernel_wait"] += idle
            else:
                sums["other"] += idle
        out[stream] = sums
    return out


def test_stream_idle_breakdown_matches_hta_on_the_same_trace():
    profile = read(SAMPLED)
    session().derive(profile, ["idle_breakdown"])
    table = profile.tables["idle_breakdown"]
    rows = table[(table["level"] == "stream") & (table["step"] == 551)].set_index("stream")
    expected = hta_breakdown(SAMPLED, *step_window(SAMPLED, 551))
    # HTA 0.5.0 printed these per-stream figures for the same file (step 551)
    hta = {
        7: (213825.0, 1985.0, 261740.0),
        23: (596037.0, 70.0, 34.0),
        25: (0.0, 9.0, 47865.0),
        84: (148934.0, 6.0, 0.0),
    }
    for stream, (host, kernel, other) in hta.items():
        row = rows.loc[stream]
        raw_sums = expected[stream]
        assert (row["host_wait_us"], row["kernel_wait_us"], row["other_us"]) == (
            host,
            kernel,
            other,
        )
        assert raw_sums == {"host_wait": host, "kernel_wait": kernel, "other": other}


def test_device_idle_counts_no_time_when_another_stream_runs():
    profile = read(SAMPLED)
    session().derive(profile, ["idle_breakdown", "steps.free_us"])
    table = profile.tables["idle_breakdown"]
    steps = profile.tables["steps"].set_index("step")
    for step, rows in table.groupby("step"):
        device = rows[rows["level"] == "device"].iloc[0]
        streams = rows[rows["level"] == "stream"]
        parts = (
            device["host_wait_us"]
            + device["kernel_wait_us"]
            + device["other_us"]
            + device["startup_us"]
        )
        assert parts == pytest.approx(device["idle_us"])
        # idle between tasks of the step never exceeds the step's free time, which also
        # counts its edges; one stream's idle time is far larger than the device's
        assert device["idle_us"] <= steps.loc[step, "free_us"] + 1e-6
        assert streams["host_wait_us"].sum() > 5 * device["host_wait_us"]


SGLANG = FIXTURE_DIR / "real" / "kineto_2025_mi300x_sglang_decode"
SGLANG_TRACE = SGLANG / "sglang_Qwen3-8B_decode.json.gz"


def raw_device_idle(path: Path) -> dict[str, float]:
    """The device's idle intervals (no stream runs) from the raw events, each classed by the
    task ending it: host wait while its launching call had started after the device went idle
    and had not yet returned, or up to the task's start where it started within 30 µs of the
    call's return; what it then waited on the device after the call returned, and every
    interval ended by a task launched before, is kernel wait (under 30 µs) or other."""
    calls = launches(path)
    events = sorted(device_events(path), key=lambda e: e["ts"])
    sums = {"host_wait": 0.0, "kernel_wait": 0.0, "other": 0.0}
    busy_until = events[0]["ts"] + events[0]["dur"]
    for event in events[1:]:
        idle = event["ts"] - busy_until
        if idle > 0:
            call = calls.get(event["args"].get("correlation"))
            if call is not None and call["ts"] > busy_until:
                queued = event["ts"] - (call["ts"] + call["dur"])
                held = queued if queued > KERNEL_WAIT_US else 0.0
                sums["host_wait"] += idle - held
                sums["other"] += held
            elif idle < KERNEL_WAIT_US:
                sums["kernel_wait"] += idle
            else:
                sums["other"] += idle
        busy_until = max(busy_until, event["ts"] + event["dur"])
    return sums


def test_a_task_held_back_after_its_late_launch_waited_for_no_host():
    """SGLang's decode step on an MI300X: the device idles 463 ms before
    resolve_future_token_ids_kernel, whose hipLaunchKernel ran at the start and returned 463
    ms before the kernel did (its stream waited on an event). HTA's rule calls the whole gap
    host wait, since the call began after the device went idle; SCHED-001 said 99.9% of the
    idle time was host wait. Only the time until the call returned is; the rest is other."""
    profile = read(SGLANG_TRACE)
    session().derive(profile, ["idle_breakdown", "step_bounds"])
    table = profile.tables["idle_breakdown"]
    device = table[table["level"] == "device"]
    expected = raw_device_idle(SGLANG_TRACE)
    # the raw ts (4.9e12 µs, in 1 ns steps) are read on the profile's own origin
    assert device["host_wait_us"].sum() == pytest.approx(expected["host_wait"], abs=0.01)
    assert device["kernel_wait_us"].sum() == pytest.approx(expected["kernel_wait"], abs=0.01)
    assert device["other_us"].sum() == pytest.approx(expected["other"], abs=0.01)
    assert expected["other"] > 463_000 and expected["host_wait"] < 1000
    assert evaluate(profile, "SCHED-001").findings == []
    # the critical path's late-launch intervals end where the call returned, too, and the
    # blocking 256-byte copy the host sat in meanwhile waited for the device: the gap is idle
    # time no recorded host work explains
    bounds = profile.tables["step_bounds"].iloc[0]
    assert bounds["idle_us"] > 463_000 and bounds["host_us"] < 1000
    # so STEP-003 does not tell this graph-replaying run that its device waits for the host
    (idle,) = evaluate(profile, "STEP-003").findings
    assert profile.meta.extra["execution"] == "graphs"
    advice = " ".join(idle.suggestions)
    assert "the device still waits for the host" not in advice
    assert "the host holds the device up for only 0.2% of its idle time (STEP-004)" in advice


def test_host_007_names_the_blocking_copy_the_host_waited_in_while_the_device_idled():
    """SGLang's decode step on an MI300X: the host sits 463 ms in a 256-byte blocking copy
    (hipMemcpyWithStream) while the device runs nothing; STEP-003 gives the idle time, HOST-007
    the call. Its figures are those of the raw events: the copy call's part of the device's
    longest idle interval."""
    events = sorted(device_events(SGLANG_TRACE), key=lambda e: e["ts"])
    busy_until, gaps = events[0]["ts"] + events[0]["dur"], []
    for event in events[1:]:
        if event["ts"] - busy_until >= 1000:
            gaps.append((busy_until, event["ts"]))
        busy_until = max(busy_until, event["ts"] + event["dur"])
    ((lo, hi),) = gaps
    (copy,) = [
        e
        for e in raw(SGLANG_TRACE)["traceEvents"]
        if e.get("cat") == "cuda_runtime" and e.get("name") == "hipMemcpyWithStream"
    ]
    blocked = min(copy["ts"] + copy["dur"], hi) - max(copy["ts"], lo)
    assert blocked > 463_000
    profile = read(SGLANG_TRACE)
    (finding,) = evaluate(profile, "HOST-007").findings
    assert finding.impact_us == pytest.approx(blocked, abs=0.01)
    assert finding.values["longest_call"] == "hipMemcpyWithStream"
    assert finding.values["mostly_first"] is True  # the stand-in window is its only step
    assert "in hipMemcpyWithStream (step 1)" in finding.message
    assert any("leave the first out" in s for s in finding.suggestions)


def test_host_008_gives_the_device_idle_time_inside_an_operators_calls_as_the_raw_file_has_it():
    """The A100 DDP trace: DistributedDataParallel's forward unflattens the broadcast buffers
    (aten::unflatten_dense_tensors) with the device idle, 67 ms over 6 calls. The raw events
    give the same time: each call's part of the intervals no device task runs in."""
    events = raw(NCCL)["traceEvents"]
    device = sorted(device_events(NCCL), key=lambda e: e["ts"])
    idle, busy_until = [], device[0]["ts"] + device[0]["dur"]
    for event in device[1:]:
        if event["ts"] > busy_until:
            idle.append((busy_until, event["ts"]))
        busy_until = max(busy_until, event["ts"] + event["dur"])
    calls = [
        e
        for e in events
        if e.get("cat") == "cpu_op" and e.get("name") == "aten::unflatten_dense_tensors"
    ]
    inside = sum(
        max(0.0, min(c["ts"] + c["dur"], hi) - max(c["ts"], lo)) for c in calls for lo, hi in idle
    )
    profile = read(NCCL)
    (finding,) = evaluate(profile, "HOST-008").findings
    table = profile.tables["idle_host_ops"].set_index("name")
    assert table.loc["aten::unflatten_dense_tensors", "calls"] == len(calls) == 6
    assert table.loc["aten::unflatten_dense_tensors", "idle_us"] == pytest.approx(inside, abs=0.01)
    assert inside > 60_000
    # the optimizer step has its rule (HOST-004): neither it nor what runs inside it is a row
    assert not table.index.str.startswith("Optimizer.step").any()
    assert "aten::_foreach_add_" not in table.index
    assert finding.values["top"] == "aten::batch_norm"
    held = table["idle_us"] > 0.05 * profile_time_us(profile)
    assert held.sum() == finding.values["operators"] == 5
    assert finding.impact_us == pytest.approx(table["idle_us"][held].sum())


def test_sched_001_fires_on_the_sampled_trace_with_the_device_figures():
    """HTA's sample: its device idles 675 ms over two steps; 283 ms of it is host wait (42%),
    under the rule's half. The other 80 ms HTA's rule would call host wait are kernels the
    host had launched (a 56 ms gap before one launched 387 µs into it and held back 56 ms
    after its call returned, the host running ahead in Shampoo's optimizer step)."""
    profile = read(SAMPLED)
    assert evaluate(profile, "SCHED-001").findings == []
    result = evaluate(profile, "SCHED-001", min_host_wait_share=0.4)
    (finding,) = result.findings
    table = profile.tables["idle_breakdown"]
    device = table[table["level"] == "device"]
    assert device["host_wait_us"].sum() == pytest.approx(raw_device_idle(SAMPLED)["host_wait"])
    assert finding.impact_us == pytest.approx(device["host_wait_us"].sum())
    assert finding.values["stream_host_wait_us"] == pytest.approx(
        table.loc[table["level"] == "stream", "host_wait_us"].sum()
    )
    level = finding.evidence["columns"].index("level")
    assert finding.evidence["rows"][0][level] == "device"


# -- SCHED-002: kernel launch statistics, against HTA ----------------------------------------


def test_launch_statistics_match_hta_on_the_same_trace():
    profile = read(SAMPLED)
    session().derive(profile, ["device_ops.launch_delay_us"])
    ops = profile.tables["device_ops"]
    lo, hi = step_window(SAMPLED, 551)
    origin = min(e["ts"] for e in device_events(SAMPLED)) - ops["start_us"].min()
    step = ops[(ops["start_us"] >= lo - origin) & (ops["start_us"] < hi - origin)]
    step = step[step["launch_dur_us"].notna()]
    short = step[(step["launch_dur_us"] <= 50) & (step["duration_us"] < step["launch_dur_us"])]
    # HTA 0.5.0 on the same file: 602 launches, 140 short kernels, 0 runtime outliers,
    # 469 launch-delay outliers, launch delay quantiles 10246 / 61982.3 / 100860.83 µs
    assert len(step) == 602
    assert len(short) == 140
    assert int((step["launch_dur_us"] > 50).sum()) == 0
    assert int((step["launch_delay_us"] > 100).sum()) == 469
    q = step["launch_delay_us"].quantile([0.5, 0.9, 0.99]).to_numpy()
    assert q == pytest.approx([10246.0, 61982.3, 100860.83])
    # and from the raw events: kernel start minus the end of its runtime call, at least 0
    calls = launches(SAMPLED)
    delays = [
        max(e["ts"] - calls[c]["ts"] - calls[c]["dur"], 0)
        for e in device_events(SAMPLED)
        if lo <= e["ts"] < hi and (c := e["args"].get("correlation")) in calls
    ]
    assert statistics.median(delays) == pytest.approx(10246.0)


def test_sched_002_charges_only_launch_time_the_device_waited_for():
    profile = read(ALEXNET)
    (finding,) = evaluate(profile, "SCHED-002", min_exposed_ratio=0).findings
    ops = profile.tables["device_ops"]
    startup = ops["launch_dur_us"] >= 500000  # cuDNN's kernels loaded at their first launch
    exposed = (ops["launch_dur_us"] > 50) | (ops["duration_us"] < ops["launch_dur_us"])
    charged = np.minimum(ops["gap_us"].fillna(0), ops["launch_dur_us"])[exposed & ~startup].sum()
    assert finding.impact_us == pytest.approx(charged)
    assert finding.impact_us <= ops.loc[exposed & ~startup, "launch_dur_us"].sum()
    assert finding.values["slow_calls"] == int((ops["launch_dur_us"] > 50).sum()) > 0
    assert finding.values["startup_launches"] == int(startup.sum()) == 1
    assert evaluate(profile, "SCHED-002").findings == []  # 10 ms of 12.9 s: under 3%


def raw_startup_calls(path: Path) -> list[tuple[float, float]]:
    """(duration, device time during it) of each runtime call of 0.5 s or more inside the
    device's span during which the device worked at most 1% of the call, from the raw JSON."""
    device = sorted((e["ts"], e["ts"] + e["dur"]) for e in device_events(path))
    lo, hi = device[0][0], max(end for _, end in device)

    def device_busy(start: float, end: float) -> float:
        return sum(max(0.0, min(end, e) - max(start, s)) for s, e in device)

    calls = [
        (e["dur"], device_busy(e["ts"], e["ts"] + e["dur"]))
        for e in raw(path)["traceEvents"]
        if e.get("cat") == "cuda_runtime"
        and e.get("ph") == "X"
        and e["dur"] >= 500000
        and lo <= e["ts"] < hi
    ]
    return [(duration, busy) for duration, busy in calls if busy <= 0.01 * duration]


def test_startup_calls_are_the_long_runtime_calls_of_the_raw_trace_with_no_kernel_running():
    """STEP-006 on the AlexNet benchmark, which profiles its first iteration: every runtime
    call of 0.5 s or more inside the device's span during which no kernel, copy or memset ran,
    found here in the raw JSON."""
    expected = sorted(duration for duration, _ in raw_startup_calls(ALEXNET))
    assert len(expected) == 6 and max(expected) > 6e6  # the 6-second cudaFree among them
    profile = read(ALEXNET)
    (finding,) = evaluate(profile, "STEP-006").findings
    assert finding.values["startup_calls"] == len(expected)
    assert finding.impact_us == pytest.approx(sum(expected))
    host = profile.tables["host_ops"]
    assert sorted(host.loc[host["startup"], "duration_us"]) == pytest.approx(
        sorted([*expected, 29927377.0])  # with the context's creation, before the first kernel
    )
    # MEM-003 leaves the step that started the run out: its calls, the start-up frees and
    # allocations (cudaFree 6,009 and 525 ms, cudaMalloc 764, 561) among them, are warm-up
    assert evaluate(profile, "MEM-003").findings == []


def test_idle_breakdown_takes_the_startup_calls_out_of_the_host_wait_on_alexnet():
    """The device's idle time of the AlexNet trace is mostly its start-up calls: the part of
    the gaps they cover (each call's time less the device's work during it, from the raw
    JSON) is their own class, and SCHED-001 and STEP-003 judge the rest."""
    in_gaps = sum(duration - busy for duration, busy in raw_startup_calls(ALEXNET))
    profile = read(ALEXNET)
    session().derive(profile, ["idle_breakdown"])
    table = profile.tables["idle_breakdown"]
    (row,) = table[table["level"] == "device"].itertuples()
    assert row.startup_us == pytest.approx(in_gaps)
    classes = row.host_wait_us + row.kernel_wait_us + row.other_us
    assert classes + row.startup_us == pytest.approx(row.idle_us)
    (wait,) = evaluate(profile, "SCHED-001").findings
    assert wait.impact_us == pytest.approx(row.host_wait_us)
    # the evidence shows the start-up beside the classes, so its rows add up
    shown = dict(zip(wait.evidence["columns"], wait.evidence["rows"][0]))
    assert shown["level"] == "device"
    parts = ("host_wait_us", "kernel_wait_us", "other_us", "startup_us")
    assert sum(shown[p] for p in parts) == pytest.approx(shown["idle_us"])
    assert wait.values["idle_us"] == pytest.approx(row.idle_us - in_gaps)
    (idle,) = evaluate(profile, "STEP-003").findings
    (startup,) = evaluate(profile, "STEP-006").findings
    assert idle.impact_us == pytest.approx(idle.values["free_us"] - startup.impact_us)
    assert idle.rule.time_pool != startup.rule.time_pool  # different time: both count


# -- GPU-001: SM efficiency and occupancy ----------------------------------------------------


def _shared_sm_time(kernels: list[dict]) -> tuple[list[float], list[float]]:
    """Each kernel's share, by blocks per SM, of every stretch of time it runs with others,
    and of the part of it the SMs were filled, min(1, their blocks per SM summed): a plain
    sweep over the trace's kernels with the set of those running."""
    weight = [min(max(e["args"]["blocks per SM"], 0), 1) for e in kernels]
    edges = sorted(
        [(e["ts"], 1, i) for i, e in enumerate(kernels)]
        + [(e["ts"] + e["dur"], 0, i) for i, e in enumerate(kernels)]
    )
    time, filled = [0.0] * len(kernels), [0.0] * len(kernels)
    running: set[int] = set()
    for (at, starts, i), (until, _, _) in zip(edges, edges[1:] + edges[-1:]):
        (running.add if starts else running.discard)(i)
        load = sum(weight[k] for k in running)
        for k in running if load > 0 else ():
            time[k] += (until - at) * weight[k] / load
            filled[k] += (until - at) * weight[k] / load * min(load, 1)
    return time, filled


def test_sm_efficiency_and_occupancy_follow_the_tensorboard_plugin_weights():
    """The real multi-stream NCCL trace: its compute kernels overlap NCCL's, which hold SMs
    too; each instant is shared by blocks per SM (kernels alone: their duration)."""
    profile = read(NCCL)
    result = evaluate(profile, "GPU-001", min_sm_efficiency=1.0, min_lost_ratio=0)
    (finding,) = result.findings
    kernels = [
        e for e in device_events(NCCL) if e["cat"] == "kernel" and "blocks per SM" in e["args"]
    ]
    time, filled = _shared_sm_time(kernels)
    compute = [i for i, e in enumerate(kernels) if not e["name"].startswith("ncclKernel")]
    total = sum(time[i] for i in compute)
    full = sum(filled[i] for i in compute)
    assert sum(time) < sum(e["dur"] for e in kernels)  # the trace's kernels do overlap
    occupancy = sum(
        kernels[i]["dur"] * kernels[i]["args"]["est. achieved occupancy %"] / 100 for i in compute
    ) / sum(kernels[i]["dur"] for i in compute)
    assert finding.values["kernel_us"] == pytest.approx(total)
    assert finding.values["sm_efficiency"] == pytest.approx(full / total)
    assert finding.values["occupancy_ratio"] == pytest.approx(occupancy)
    assert finding.impact_us == pytest.approx(total - full)
    # with the default thresholds the trace's kernels fill the GPU well enough
    assert evaluate(read(NCCL), "GPU-001").findings == []


def test_kernels_on_several_streams_share_the_gpus_time_and_fill():
    """Kernels overlapping on three streams: A (0-100 µs, 0.5 blocks per SM), B (50-150 µs,
    0.8) and a communication kernel N (0-150 µs, 0.1). The SMs are filled to min(1, the
    weights summed): 0.6, then 1, then 0.9 of each 50 µs, 125 µs of the 150 the GPU had
    (summed per kernel: 160 of 350), each instant shared by blocks per SM."""
    ops = pd.DataFrame(
        {
            "name": ["a", "b", "nccl"],
            "core_type": "GPU",
            "category": ["compute", "compute", "communication"],
            "start_us": [0.0, 50.0, 0.0],
            "duration_us": [100.0, 100.0, 150.0],
            "stream": [7, 8, 9],
            "blocks_per_sm": [0.5, 0.8, 0.1],
        }
    )
    profile = Profile(ProfileMeta("kineto", "t", device_kind="GPU"), {"device_ops": ops})
    session().derive(profile, ["device_ops.sm_filled_us"])
    out = profile.tables["device_ops"]
    assert out["sm_time_us"].sum() == pytest.approx(150.0)
    assert out["sm_filled_us"].sum() == pytest.approx(0.6 * 50 + 50 + 0.9 * 50)
    a_time = 0.5 / 0.6 * 50 + 0.5 / 1.4 * 50  # alone with N, then beside B and N
    assert out["sm_time_us"].iloc[0] == pytest.approx(a_time)
    assert out["sm_filled_us"].iloc[0] == pytest.approx(0.5 * 50 + 0.5 / 1.4 * 50)
    # apart, each accounts for its own duration, filled to min(1, blocks per SM)
    profile.tables = {"device_ops": ops.assign(start_us=[0.0, 200.0, 400.0])}
    profile.providers_run.clear()
    session().derive(profile, ["device_ops.sm_filled_us"])
    apart = profile.tables["device_ops"]
    assert apart["sm_time_us"].tolist() == [100.0, 100.0, 150.0]
    assert apart["sm_filled_us"].tolist() == [50.0, 80.0, 15.0]


# -- GPU-002: Tensor Cores -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        # the TensorBoard plugin's patterns miss these Tensor Core kernels of the real traces
        (
            "sm80_xmma_fprop_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nchw_"
            "tilesize128x128x16_stage4_warpsize2x2x1_g1_tensor16x8x8_alignc4_execute_kernel",
            True,
        ),
        (
            "void cutlass::Kernel<cutlass_70_wmma_tensorop_f16_s161616gemm_f16_32x32_64x2_tn_"
            "align8>(cutlass_70_wmma_tensorop_f16_s161616gemm_f16_32x32_64x2_tn_align8::Params)",
            True,
        ),
        ("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x64_16x4_nn_align4>", True),
        ("Cijk_Alik_Bljk_SB_Bias_AS_SAV_UserArgs_MT64x16x32_MI16x16x1_SN_LDSB0", True),
        # GEMMs in formats only Tensor Cores compute in, and AMD's xdlops convolutions, of
        # public traces (DeepSeek's profile-data train.json, TraceLens' B200, MI300 and vLLM
        # samples)
        (
            "void cutlass::device_kernel<dpsk::grouped_gemm::cuda::fp8_ptp128c::GemmKernel>"
            "(dpsk::grouped_gemm::cuda::fp8_ptp128c::GemmKernel::Params)",
            True,
        ),
        (
            "bmm_MxE4m3_MxE2m1MxE4m3_Fp32_t128x16x256u2_s3_et128x16_m128x16x32_cga1x1x1_16dp256b_"
            "rM_TN_transOut_schedP2x1x2x3_biasM_bN_tma_tmaOpt_clmp_swiGlu_dynBatch_sm100f",
            True,
        ),
        ("_matmul_ogs_NNT_bf16xbf16xmxfp4_16x256x128x1_swiglu", True),
        (
            "igemm_fwd_gtcx3_nhwc_bf16_bx0_ex1_bt128x256x32_wt32x32x8_ws1x2_wr2x2_ta1x8x2x1_"
            "1x4x1x64_tb1x8x2x1_1x4x1x64",
            True,
        ),
        # cuDNN's Hopper convolutions of a bf16 ResNet-18 (our H200 run, channels_last)
        (
            "sm90_xmma_wgrad_indexed_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_"
            "tilesize64x64x64_warpgroupsize1x1x1_g1_execute_segment_k_on_kernel__5x_cudnn",
            True,
        ),
        (
            "sm90_xmma_dgrad_implicit_gemm_indexed_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_"
            "tilesize256x64x64_warpgroupsize1x1x1_g1_strided_execute_kernel__5x_cudnn",
            True,
        ),
        (
            "sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize128x64x64_"
            "warpgroupsize1x1x1_g1_execute_segment_k_off_kernel__5x_cudnn",
            True,
        ),
        # the float32 GEMM of our H200 run: an xmma kernel on the CUDA cores (FFMA)
        (
            "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x8_stage3_warpsize2x2x1_ffma_"
            "aligna4_alignc4_execute_kernel__5x_cublas",
            False,
        ),
        ("ampere_sgemm_32x32_sliced1x4_tn", False),
        ("ampere_gcgemm_64x64_nt", False),
        ("volta_sgemm_128x32_nt", False),
    ],
)
def test_tensor_core_names(name, expected):
    profile = read(ALEXNET)
    ops = profile.tables["device_ops"].head(1).assign(name=name)
    profile.tables["device_ops"] = ops
    session().derive(profile, ["device_ops.tensor_core"])
    assert bool(profile.tables["device_ops"]["tensor_core"].iloc[0]) is expected
    assert bool(_TENSOR_CORE.search(name)) or not expected


def test_gpu_002_on_alexnet_counts_the_fp32_gemm_and_convolution_time():
    """FP32 matrix kernels of the raw trace: cuBLAS's sgemm, cuDNN's SIMT implicit-GEMM
    convolution (scudnn) and its FFT convolution (the transforms and the complex GEMM)."""
    result = evaluate(read(ALEXNET), "GPU-002", min_ratio=0)
    (finding,) = result.findings
    events = [e for e in device_events(ALEXNET) if e["cat"] == "kernel"]
    fp32 = ("ampere_sgemm", "ampere_gcgemm", "cudnn_ampere_scudnn", "void fft2d_")
    fp32_us = sum(e["dur"] for e in events if e["name"].startswith(fp32))
    assert finding.values["fp32_us"] == pytest.approx(fp32_us)
    assert finding.impact_us == pytest.approx(fp32_us / 2)
    # measured against its 12.9 s benchmark window the FP32 time is too small to report
    assert evaluate(read(ALEXNET), "GPU-002").findings == []


# -- HOST-006: garbage collection ------------------------------------------------------------


def test_recorded_gc_of_torch_npu_is_read_and_charged_inside_device_gaps(tmp_path):
    folder = tmp_path / "rank0_ascend_pt"
    shutil.copytree(ASCEND, folder)
    # its kernel_details.csv comes from another run (the reader leaves its times out): the
    # device tasks of trace_view.json place the gaps
    (folder / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv").unlink()
    path = folder / "ASCEND_PROFILER_OUTPUT" / "trace_view.json"
    events = json.loads(path.read_text())
    names = {e["pid"]: e["args"]["name"] for e in events if e.get("name") == "process_name"}
    hardware = sorted(
        (e for e in events if e.get("ph") == "X" and names.get(e["pid"]) == "Ascend Hardware"),
        key=lambda e: float(e["ts"]),
    )
    reach, gap, gap_start = None, 0.0, 0.0
    for event in hardware:
        ts = float(event["ts"])
        if reach is not None and ts - reach > gap:
            gap, gap_start = ts - reach, reach
        reach = max(reach or ts, ts + float(event["dur"]))
    assert gap > 1040  # the trace's longest device gap: 1,093.5 µs
    gc_pid = 999
    events += [
        {"ph": "M", "name": "process_name", "pid": gc_pid, "tid": 0, "args": {"name": "GC"}},
        {"ph": "M", "name": "process_labels", "pid": gc_pid, "tid": 0, "args": {"labels": "CPU"}},
        {
            "ph": "X",
            "name": "GC",
            "cat": "GC",
            "pid": gc_pid,
            "tid": 437675,
            "ts": f"{gap_start + 40:.3f}",
            "dur": 1000,
            "args": {},
        },
    ]
    path.write_text(json.dumps(events))
    profile = read(folder)
    gc_rows = profile.tables["host_ops"].query("kind == 'gc'")
    assert len(gc_rows) == 1 and gc_rows["duration_us"].iloc[0] == 1000
    (finding,) = evaluate(profile, "HOST-006").findings
    assert finding.values["recorded"] is True
    assert finding.values["gc_count"] == 1
    assert finding.impact_us == pytest.approx(1000, abs=0.01)


def test_no_gc_suspected_on_real_traces_whose_gaps_are_full_of_host_work():
    for path in (SAMPLED, ALEXNET, NCCL):
        profile = read(path)
        result = evaluate(profile, "HOST-006")
        assert result.findings == [], path.name
        gaps = profile.tables["quiet_gaps"]
        long = gaps[gaps["duration_us"] > 200000]
        assert (long["host_busy_us"] > 0.01 * long["duration_us"]).all()


def test_quiet_gaps_count_the_host_work_calls_overlapping_each_gap():
    """host_calls comes from the calls' starts and ends sorted once; counted here call by
    call over the host work (no Python frames or annotations) on real traces, whose calls'
    starts and ends are not in order."""
    for path in (SAMPLED, ALEXNET, NCCL):
        profile = read(path)
        evaluate(profile, "HOST-006")
        host = profile.tables["host_ops"]
        kind = host["kind"].astype(str)
        start = host["start_us"].to_numpy("float64", na_value=np.nan)
        end = start + host["duration_us"].to_numpy("float64", na_value=0.0)
        work = ~kind.isin(["python", "annotation"]).to_numpy() & ~np.isnan(start)
        start, end = start[work], end[work]
        assert (np.diff(end) < 0).any(), path.name  # the ends out of order
        gaps = profile.tables["quiet_gaps"]
        assert len(gaps) > 0, path.name
        for lo, length, calls in zip(gaps["start_us"], gaps["duration_us"], gaps["host_calls"]):
            hi = lo + length
            assert calls == int(((start < hi) & (end > lo)).sum()), (path.name, lo)


def test_every_rule_evaluates_on_every_real_gpu_trace():
    for path in sorted(KINETO.glob("*.json.gz")):
        profile = read(path)
        for rule in RULES:
            result = evaluate(profile, rule)
            assert result.errors == [], (path.name, rule, result.errors)


def test_gpu_002_judges_kernel_names_only_where_the_trace_has_them():
    """MegEngine names operators (ConvolutionForward), not the kernels cuDNN picked for them:
    nothing there says whether Tensor Cores ran."""
    for profile in session().read([FIXTURE_DIR / "megengine"]).profiles:
        result = evaluate(profile, "GPU-002")
        assert result.findings == []
        assert result.not_applicable[0][1] == ["device_ops.tensor_core"]


def _raw_step_contents(path: Path, step_name: str) -> list[list[str]]:
    """The cpu_op names inside each `step_name` annotation of a raw Kineto trace, on its
    thread: what advisor's optimizer_impl is read from, counted here without advisor."""
    events = [e for e in raw(path)["traceEvents"] if e.get("ph") == "X"]
    steps = [e for e in events if e.get("name") == step_name and e.get("cat") == "user_annotation"]
    return [
        [
            e["name"]
            for e in events
            if e.get("cat") == "cpu_op"
            and e["tid"] == s["tid"]
            and s["ts"] <= e["ts"] < s["ts"] + s["dur"]
        ]
        for s in steps
    ]


def test_optimizer_steps_are_told_apart_by_the_operators_inside_them():
    """The A100 trace's SGD steps ran the multi-tensor (foreach) path, the torch_npu LeNet's
    Adam step a loop over the parameters; the counts are the raw trace's."""
    nccl = read(NCCL)
    session().derive(nccl, ["host_ops.optimizer_impl"])
    host = nccl.tables["host_ops"]
    steps = host[host["name"] == "Optimizer.step#SGD.step"]
    contents = _raw_step_contents(NCCL, "Optimizer.step#SGD.step")
    assert len(contents) == len(steps) == 3
    assert all(any(n.startswith("aten::_foreach_") for n in names) for names in contents)
    assert not any(n.startswith("aten::_fused_") for names in contents for n in names)
    assert steps["optimizer_impl"].tolist() == ["foreach"] * 3
    assert steps["optimizer_ops"].tolist() == [len(names) for names in contents] == [486] * 3
    # every other row has neither
    others = host.drop(steps.index)
    assert others["optimizer_impl"].isna().all() and others["optimizer_ops"].isna().all()

    ascend = read(ASCEND)
    session().derive(ascend, ["host_ops.optimizer_impl"])
    host = ascend.tables["host_ops"]
    (adam,) = host[host["name"] == "Optimizer.step#Adam.step"].itertuples()
    assert adam.optimizer_impl == "for-loop" and adam.optimizer_ops == 241


def test_host004_tells_the_a100_trace_its_sgd_already_runs_foreach():
    (finding,) = evaluate(read(NCCL), "HOST-004").findings
    assert finding.values["foreach_calls"] == finding.values["calls"] == 3
    assert "they run the multi-tensor (foreach) path, 486 framework operators a step" in (
        finding.message
    )
    assert not any("foreach=True" in s for s in finding.suggestions)
    assert [row[3:] for row in finding.evidence["rows"]] == [["foreach", 486]] * 3


def test_own_fused_adamw_run_is_read_as_fused_and_host004_stays_quiet():
    """The own torch 2.13 CPU run of AdamW(fused=True): each step holds one
    aten::_fused_adamw_ (the raw trace's count), so no step is counted as unfused."""
    path = FIXTURE_DIR / "kineto_own" / "fused_optimizer.pt.trace.json.gz"
    contents = _raw_step_contents(path, "Optimizer.step#AdamW.step")
    assert len(contents) == 6
    assert all(names.count("aten::_fused_adamw_") == 1 for names in contents)
    profile = read(path)
    result = evaluate(profile, "HOST-004")
    host = profile.tables["host_ops"]
    steps = host[host["name"] == "Optimizer.step#AdamW.step"]
    assert steps["optimizer_impl"].tolist() == ["fused"] * 6
    assert steps["optimizer_ops"].tolist() == [len(names) for names in contents]
    assert result.findings == [] and result.outcomes["HOST-004"] == "passed"


def test_optimizer_steps_count_only_the_time_the_device_sat_idle_in_them():
    """host_ops.device_idle_us of the A100 trace's three SGD steps is each step's window
    less the union of the kernels, copies and sets overlapping it in the raw trace (the last
    step runs past the trace's last kernel: that time is idle too); HOST-004 charges their
    sum, not the steps' whole host time. The CPU-only run records no device task, so its
    steps get no figure, and HOST-004 charges the step time, which is the work there (the
    rule cases check that)."""
    nccl = read(NCCL)
    session().derive(nccl, ["host_ops.device_idle_us"])
    host = nccl.tables["host_ops"]
    steps = host[host["name"] == "Optimizer.step#SGD.step"]
    events = device_events(NCCL)
    expected = []
    for step in raw(NCCL)["traceEvents"]:
        if step.get("name") != "Optimizer.step#SGD.step" or step.get("cat") != "user_annotation":
            continue
        lo, hi = step["ts"], step["ts"] + step["dur"]
        spans = sorted(
            (max(e["ts"], lo), min(e["ts"] + e["dur"], hi))
            for e in events
            if e["ts"] < hi and e["ts"] + e["dur"] > lo
        )
        busy, reach = 0.0, lo
        for start, end in spans:
            busy += max(0.0, end - max(start, reach))
            reach = max(reach, end)
        expected.append(step["dur"] - busy)
    assert len(expected) == 3 and min(expected) < 0.96 * min(steps["duration_us"])
    assert steps["device_idle_us"].to_numpy() == pytest.approx(expected, abs=0.01)
    (finding,) = evaluate(nccl, "HOST-004").findings
    assert finding.impact_us == pytest.approx(sum(expected), abs=0.05)
    assert finding.values["step_us"] == pytest.approx(steps["duration_us"].sum())

    cpu = read(FIXTURE_DIR / "kineto_own" / "fused_optimizer.pt.trace.json.gz")
    session().derive(cpu, ["host_ops.device_idle_us"])
    assert "device_ops" not in cpu.tables and "device_idle_us" not in cpu.tables["host_ops"]


def _raw_sync_idle(path: Path) -> list[float]:
    """Each synchronising runtime call's device_idle_us, call by call from the raw events:
    the device's idle gap the call returned in, from the later of its start and the gap's
    start to the next device task (to its return after the last task), at most the time it
    blocked, less what calls returning earlier in that gap took."""
    events = raw(path)["traceEvents"]
    busy = sorted((e["ts"], e["ts"] + e["dur"]) for e in device_events(path))
    merged: list[list[float]] = []
    for start, end in busy:
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    syncs = [
        e
        for e in events
        if e.get("ph") == "X"
        and e.get("cat") == "cuda_runtime"
        and e["name"] in ("cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaMemcpy")
    ]
    charged = []
    for call in syncs:
        back = call["ts"] + call["dur"]
        before = [m for m in merged if m[1] <= back]
        after = [m for m in merged if m[0] > back]
        if any(m[0] <= back < m[1] for m in merged):
            charged.append((back, back))  # the device still ran
            continue
        lo = max(call["ts"], before[-1][1] if before else call["ts"])
        next_task = after[0][0] if after else back  # none: charged until it returned
        charged.append((lo, min(next_task, lo + call["dur"])))
    order = sorted(range(len(charged)), key=lambda i: charged[i][0])
    costs, reach = [0.0] * len(charged), -math.inf
    for i in order:
        lo, hi = charged[i]
        costs[i] = max(0.0, hi - max(lo, reach))
        reach = max(reach, hi)
    return sorted(costs)


def test_synchronising_calls_are_charged_the_device_idle_time_they_leave():
    """HTA's simple-add benchmark on an A100 synchronises after its kernels: each sync's
    device_idle_us is the raw trace's figure, computed call by call; HOST-002 charges their
    sum over the profiled step, not the step's whole idle time."""
    path = FIXTURE_DIR / "real" / "kineto_2023_a100_simple_add_syncs"
    (trace,) = path.glob("*.json.gz")
    profile = read(trace)
    session().derive(profile, ["host_ops.device_idle_us"])
    host = profile.tables["host_ops"]
    syncs = host[host["kind"] == "sync"]
    expected = _raw_sync_idle(trace)
    assert len(expected) == len(syncs) == 21
    assert sorted(syncs["device_idle_us"]) == pytest.approx(expected, abs=0.01)
    assert 0 < sum(expected) < sum(syncs["duration_us"]) + 1
