"""The PyTorch profiler (Kineto) trace reader against real traces and broken copies of them.

Expected numbers are computed here from the raw JSON with the standard library only, never by
the code under test.
"""

from __future__ import annotations

import functools
import gzip
import json
import math
import re
from collections import Counter
from pathlib import Path

import pandas.testing as pd_testing
import pytest
from click.testing import CliRunner
from conftest import FIXTURE_DIR

import advisor
from advisor.cli import main
from advisor.compat import zip_strict
from advisor.errors import UnreadableInput
from advisor.kernel_names import kernel_op_type
from advisor.model import TABLES
from advisor.render.json_report import validate_report
from advisor_plugins.kineto import KinetoReader
from advisor_plugins.kineto.categories import KERNEL, NCCL_OP, device_op_facts

SHARED = FIXTURE_DIR / "real" / "kineto"
OWN = FIXTURE_DIR / "kineto_own"
SHARED_TRACES = sorted(SHARED.glob("*.json*"))
OWN_TRACES = sorted(OWN.glob("*.pt.trace.json.gz"))
ALL_TRACES = SHARED_TRACES + OWN_TRACES
NCCL = SHARED / "nccl_parser_config__nccl_data.json.gz"
ROCM = SHARED / "amd_trace__mi250_minitoy_train_ROCm6_2_kineto.json.gz"
LEGACY = SHARED / "trace_file_list__inference_rank_1.json.gz"
CPU_ONLY = SHARED / "cpu_only__rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz"
SAMPLED = SHARED / "timeline_analysis__sampled_rank-0.json.gz"

READER = KinetoReader()


# ---------------------------------------------------------------------------------------------
# Independent expectations


@functools.cache
def raw(path: Path) -> dict:
    with (
        gzip.open(path, "rt", encoding="utf-8")
        if path.suffix == ".gz"
        else open(path, encoding="utf-8") as fh
    ):
        return json.load(fh)


def cat(event: dict) -> str:
    return str(event.get("cat", "")).lower()


def complete(events: list[dict]) -> list[dict]:
    return [
        e
        for e in events
        if e.get("ph") == "X" and isinstance(e.get("dur"), (int, float)) and math.isfinite(e["dur"])
    ]


def expected(doc: dict) -> dict:
    events = [e for e in doc["traceEvents"] if isinstance(e, dict)]
    timed = complete(events) + [e for e in events if e.get("ph") == "i"]
    origin = min(e["ts"] for e in timed)
    steps: dict[int, tuple[float, float]] = {}
    for e in complete(events):
        match = re.match(r"ProfilerStep#(\d+)", e.get("name", ""))
        if match and cat(e) in ("cpu_op", "user_annotation", "operator"):
            n = int(match.group(1))
            if n not in steps or e["dur"] > steps[n][1]:
                steps[n] = (e["ts"] - origin, e["dur"])
    kernels = [e for e in complete(events) if cat(e) == "kernel"]
    copies = [e for e in complete(events) if cat(e) in ("gpu_memcpy", "memcpy")]
    nccl = [e for e in kernels if "nccl" in e["name"].lower() or "rccl" in e["name"].lower()]
    memory = [e for e in events if e.get("ph") == "i" and e.get("name") == "[memory]"]
    allocated = [e["args"]["Total Allocated"] for e in memory if "Total Allocated" in e["args"]]
    info = doc.get("distributedInfo", {})
    return {
        "steps": dict(sorted(steps.items())),
        "kernels": len(kernels),
        "kernel_us": sum(e["dur"] for e in kernels),
        "memcpy": len(copies),
        "pageable": sum("Pageable" in e["name"] for e in copies),
        "nccl": len(nccl),
        "nccl_us": sum(e["dur"] for e in nccl),
        "memory": len(memory),
        "max_allocated": max(allocated, default=None),
        "rank": info.get("rank"),
        "world_size": info.get("world_size"),
    }


def read_one(path: Path):
    profiles = READER.read(path)
    assert len(profiles) == 1
    return profiles[0]


def rows(profile, table: str) -> int:
    return len(profile.tables[table]) if table in profile.tables else 0


def warnings_of(profile) -> list[str]:
    return [w.problem for w in profile.warnings]


# ---------------------------------------------------------------------------------------------
# Every real trace


def test_fixtures_are_there():
    assert len(SHARED_TRACES) >= 6, SHARED
    assert [p.name for p in OWN_TRACES] == [
        "compare_base.pt.trace.json.gz",
        "compare_slow.pt.trace.json.gz",
        "data_parallel.pt.trace.json.gz",
        "dataloader_bound.pt.trace.json.gz",
        *(f"ddp4_rank{r}.pt.trace.json.gz" for r in range(4)),
        "ddp_rank0.pt.trace.json.gz",
        "ddp_rank1.pt.trace.json.gz",
        "dynamic_batch.pt.trace.json.gz",
        "fused_optimizer.pt.trace.json.gz",
        "healthy.pt.trace.json.gz",
        "out_of_memory.pt.trace.json.gz",
        "with_stack.pt.trace.json.gz",
    ]


@pytest.mark.parametrize("path", ALL_TRACES, ids=lambda p: p.name[:40])
def test_trace_matches_raw_json(path):
    assert READER.detect(path)
    profile = read_one(path)
    want = expected(raw(path))
    meta = profile.meta
    assert meta.source_format == "kineto" and meta.framework == "PyTorch"
    assert meta.files_read == [path.name]

    steps = profile.tables.get("steps")
    if want["steps"]:
        assert steps["step"].tolist() == list(want["steps"])
        assert steps["duration_us"].tolist() == pytest.approx(
            [d for _, d in want["steps"].values()]
        )
        assert steps["start_us"].tolist() == pytest.approx(
            [s for s, _ in want["steps"].values()], abs=1e-3
        )
        assert (steps["end_us"] - steps["start_us"]).tolist() == pytest.approx(
            steps["duration_us"].tolist()
        )
    elif want["kernels"] or want["memcpy"]:
        # no ProfilerStep: one step over the device's span, first task to last, said so
        device = profile.tables["device_ops"]
        (window,) = steps.to_dict("records")
        assert window["start_us"] == pytest.approx(device["start_us"].min())
        assert window["end_us"] == pytest.approx((device["start_us"] + device["duration_us"]).max())
        assert any(w.startswith("no ProfilerStep") for w in warnings_of(profile))
    else:
        assert steps is None

    ops = profile.tables.get("device_ops")
    if want["kernels"] or want["memcpy"]:
        kernels = ops[ops["category"].isin(["compute", "communication"])]
        assert len(kernels) == want["kernels"]
        assert kernels["duration_us"].sum() == pytest.approx(want["kernel_us"])
        copies = ops[ops["category"] == "memcpy"]
        assert len(copies) == want["memcpy"]
        assert (copies["host_memory"] == "pageable").sum() == want["pageable"]
        assert (ops["core_type"] == "GPU").all()
        assert "compute_class" not in ops
        assert meta.device_kind == "GPU"
    else:
        assert ops is None

    comm = profile.tables.get("comm_ops")
    nccl = comm[~comm["name"].str.startswith("gloo:")] if comm is not None else []
    assert len(nccl) == want["nccl"]
    if want["nccl"]:
        assert nccl["duration_us"].sum() == pytest.approx(want["nccl_us"])
        assert (ops["category"] == "communication").sum() == want["nccl"]

    memory = profile.tables.get("memory")
    assert rows(profile, "memory") == want["memory"]
    if want["max_allocated"] is not None:
        assert memory["allocated_bytes"].max() == want["max_allocated"]

    if want["rank"] is not None:
        assert meta.rank == want["rank"]
    assert meta.world_size == want["world_size"]

    for name, frame in profile.tables.items():
        spec = TABLES[name]
        assert set(frame.columns) <= set(spec.column_names)
        for column in ("start_us", "time_us"):
            if column in frame and len(frame):  # oom_events is empty without an error
                assert frame[column].min() >= 0
    earliest = min(
        frame[c].min()
        for frame in profile.tables.values()
        for c in ("start_us", "time_us")
        if c in frame and len(frame)
    )
    assert earliest >= 0 and "time_origin_us" in meta.extra


def test_nccl_trace_comm_ops_have_op_group_bytes_and_bandwidth():
    profile = read_one(NCCL)
    comm = profile.tables["comm_ops"]
    kernels = [
        e
        for e in complete(raw(NCCL)["traceEvents"])
        if cat(e) == "kernel" and "nccl" in e["name"].lower()
    ]
    sizes = {"Float": 4, "Half": 2, "BFloat16": 2, "Double": 8, "Long": 8, "Int": 4, "Byte": 1}
    want = [e["args"]["In msg nelems"] * sizes[e["args"]["dtype"]] for e in kernels]
    assert comm["bytes"].tolist() == want
    assert comm["bandwidth_gbps"].tolist() == pytest.approx(
        [b / e["dur"] / 1000 for b, e in zip_strict(want, kernels)]
    )
    assert sorted(set(comm["op"])) == ["allreduce", "broadcast"]
    assert set(comm["group"]) == {"0 (default_pg)"}
    assert comm["transport"].isna().all() if "transport" in comm else True
    assert profile.meta.versions["nccl_version"] == "2.17.1"
    assert profile.meta.device_name == "NVIDIA A100-PG509-200"
    kinds = {kind: set(names) for kind, names in profile.tables["host_ops"].groupby("kind")["name"]}
    assert {"cudaLaunchKernel", "cudaLaunchKernelExC"} <= kinds["launch"]
    assert {"cudaDeviceSynchronize", "cudaEventSynchronize"} <= kinds["sync"]
    assert "cudaMemcpyAsync" in kinds["runtime"]
    assert "Optimizer.step#SGD.step" in kinds["optimizer"]
    assert not profile.tables["host_ops"]["name"].str.startswith("ProfilerStep#").any()


def test_sendrecv_kernels_get_their_collective_from_the_annotation_around_their_launch():
    """HTA's sampled TorchRec trace runs every collective as `ncclKernel_SendRecv` kernels
    with no "Collective name": each kernel's op is the `nccl:*` annotation around the runtime
    call that launched it (same thread), found here from the raw events alone; without one
    it stays sendrecv."""
    events = complete(raw(SAMPLED)["traceEvents"])
    calls = {e["args"]["correlation"]: e for e in events if cat(e) == "cuda_runtime"}
    marks = [e for e in events if cat(e) == "user_annotation" and e["name"].startswith("nccl:")]
    flat = {"all_to_all": "alltoall", "all_reduce": "allreduce", "_all_gather_base": "allgather"}
    expected = []
    for kernel in (e for e in events if cat(e) == "kernel" and "nccl" in e["name"]):
        call = calls[kernel["args"]["correlation"]]
        around = [
            m["name"].split(":", 1)[1]
            for m in marks
            if m["tid"] == call["tid"] and m["ts"] <= call["ts"] < m["ts"] + m["dur"]
        ]
        expected.append((kernel["ts"], flat[around[-1]] if around else "sendrecv"))
    comm = read_one(SAMPLED).tables["comm_ops"]
    # the reader's times start elsewhere: compare each from the first kernel's
    got = sorted(zip_strict(comm["start_us"] - comm["start_us"].min(), comm["op"]))
    first = min(ts for ts, _ in expected)
    assert got == sorted((ts - first, op) for ts, op in expected)
    assert Counter(op for _, op in got) == {"alltoall": 4, "allreduce": 4, "allgather": 2}
    assert comm["bytes"].isna().all()


def test_copies_to_pageable_memory_block_the_host_as_a_sync_does():
    """CUDA returns from a copy to pageable host memory only once it is done, so the
    cudaMemcpyAsync calls that launched the sampled trace's eight DtoH copies to pageable
    memory (found by correlation id in the raw events) are synchronising calls; the other
    cudaMemcpyAsync calls stay runtime calls."""
    events = complete(raw(SAMPLED)["traceEvents"])
    pageable = {
        e["args"]["correlation"]
        for e in events
        if cat(e) == "gpu_memcpy" and e["name"] == "Memcpy DtoH (Device -> Pageable)"
    }
    calls = [e for e in events if cat(e) == "cuda_runtime" and e["name"] == "cudaMemcpyAsync"]
    blocking = sorted(e["dur"] for e in calls if e["args"]["correlation"] in pageable)
    others = sorted(e["dur"] for e in calls if e["args"]["correlation"] not in pageable)
    assert len(blocking) == 8 and others
    host = read_one(SAMPLED).tables["host_ops"]
    copies = host[host["name"] == "cudaMemcpyAsync"]
    assert sorted(copies.loc[copies["kind"] == "sync", "duration_us"]) == blocking
    assert sorted(copies.loc[copies["kind"] == "runtime", "duration_us"]) == others


def test_copies_kinds_and_bytes():
    profile = read_one(SAMPLED)
    copies = profile.tables["device_ops"].query("category == 'memcpy'")
    assert set(copies["memcpy_kind"]) == {"HtoD", "DtoH", "DtoD"}
    pinned = copies[copies["name"] == "Memcpy HtoD (Pinned -> Device)"]
    assert len(pinned) == 8 and set(pinned["host_memory"]) == {"pinned"}
    assert copies[copies["memcpy_kind"] == "DtoD"]["host_memory"].isna().all()
    raw_bytes = [
        e["args"]["bytes"] for e in complete(raw(SAMPLED)["traceEvents"]) if cat(e) == "gpu_memcpy"
    ]
    assert copies["bytes"].tolist() == raw_bytes
    assert set(profile.tables["device_ops"]["stream"].dropna()) >= {23}


def test_rocm_trace():
    profile = read_one(ROCM)
    meta = profile.meta
    assert meta.device_kind == "GPU" and meta.device_id == "2"
    assert meta.device_name == "AMD Radeon Graphics"
    assert meta.extra["gpu_runtime"] == "ROCm"
    assert meta.rank is None and "no distributedInfo: rank and world size unknown" in warnings_of(
        profile
    )
    host = profile.tables["host_ops"]
    kinds = dict(zip_strict(host["name"], host["kind"]))
    assert kinds["hipLaunchKernel"] == "launch" and kinds["hipExtModuleLaunchKernel"] == "launch"
    assert kinds["hipDeviceSynchronize"] == "sync"
    assert kinds["hipGetDevicePropertiesR0600"] == "runtime"
    # the GPU mirror of ProfilerStep#1 (gpu_user_annotation) is not a second step 1
    assert profile.tables["steps"]["step"].tolist() == [1, 2]


def test_legacy_categories_from_hta():
    profile = read_one(LEGACY)
    assert profile.meta.rank == 1 and profile.meta.world_size is None
    assert rows(profile, "device_ops") == 4
    host = profile.tables["host_ops"]
    assert sorted(set(host["kind"])) == ["launch", "runtime"]
    assert set(host["thread"]) == {1010370}


def test_cpu_only_trace_has_gloo_comm_and_no_device_tables():
    profile = read_one(CPU_ONLY)
    assert profile.meta.device_kind == "CPU" and profile.meta.device_name == ""
    assert profile.meta.rank == 34 and profile.meta.world_size == 300
    comm = profile.tables["comm_ops"]
    gloo = [e for e in complete(raw(CPU_ONLY)["traceEvents"]) if e["name"] == "gloo:all_reduce"]
    assert len(comm) == len(gloo) == 10
    assert set(comm["op"]) == {"allreduce"}
    assert comm["bytes"].tolist() == [math.prod(e["args"]["Input Dims"][0]) * 4 for e in gloo]


def test_own_dataloader_trace():
    profile = read_one(OWN / "dataloader_bound.pt.trace.json.gz")
    host = profile.tables["host_ops"]
    loads = host[host["kind"] == "dataloader"]
    steps = profile.tables["steps"]
    assert len(loads) == len(steps) == 6
    assert loads["name"].str.startswith("enumerate(DataLoader)").all()
    # the Dataset sleeps 3 ms per sample, 8 samples per batch
    assert (loads["duration_us"] > 20_000).all()
    assert loads["duration_us"].sum() > 0.7 * steps["duration_us"].sum()
    assert set(profile.tables["memory"]["device"]) == {"cpu"}
    assert profile.tables["memory"]["capacity_bytes"].isna().all()


def test_own_healthy_trace_has_short_steps_and_no_dataloader():
    profile = read_one(OWN / "healthy.pt.trace.json.gz")
    assert "dataloader" not in set(profile.tables["host_ops"]["kind"])
    assert profile.tables["steps"]["duration_us"].max() < 20_000


def test_own_ddp_traces_name_their_ranks_and_the_slow_one():
    rank0 = read_one(OWN / "ddp_rank0.pt.trace.json.gz")
    rank1 = read_one(OWN / "ddp_rank1.pt.trace.json.gz")
    assert (rank0.meta.rank, rank0.meta.world_size) == (0, 2)
    assert (rank1.meta.rank, rank1.meta.world_size) == (1, 2)
    assert rank0.meta.extra["backend"] == "gloo"
    assert not any("distributedInfo" in w for w in warnings_of(rank0))
    # rank 0 waits in the gradient all-reduce for rank 1, which sleeps 20 ms per step
    wait0 = rank0.tables["comm_ops"]["duration_us"].sum()
    wait1 = rank1.tables["comm_ops"]["duration_us"].sum()
    assert wait0 > wait1
    # duplicate thread_name metadata: the last one wins (the gloo thread is renamed)
    doc = raw(OWN / "ddp_rank0.pt.trace.json.gz")
    last = {}
    for e in doc["traceEvents"]:
        if e.get("ph") == "M" and e.get("name") == "thread_name":
            last[str(e["tid"])] = e["args"]["name"]
    assert rank0.meta.extra["threads"] == last
    assert "pt_gloo_runloop" in " ".join(last.values())


# ---------------------------------------------------------------------------------------------
# Detection


def test_detect(tmp_path):
    bare = tmp_path / "trace_view.json"
    bare.write_text('[{"ph": "X", "name": "a", "ts": "1.0", "dur": 1}]')
    chrome = tmp_path / "other.json"
    chrome.write_text('{"traceEvents": [{"ph": "X", "cat": "foo", "name": "a"}]}')
    kineto = tmp_path / "mine.json"
    kineto.write_text('{"schemaVersion": 1, "traceEvents": []}')
    zipped = tmp_path / "mine.json.gz"
    zipped.write_bytes(gzip.compress(kineto.read_bytes()))
    not_gzip = tmp_path / "plain.json.gz"
    not_gzip.write_bytes(kineto.read_bytes())
    assert not READER.detect(bare)
    assert not READER.detect(chrome)
    assert READER.detect(kineto) and READER.detect(zipped)
    assert not READER.detect(not_gzip)
    assert not READER.detect(tmp_path)
    assert not READER.detect(SHARED)
    assert not READER.detect(tmp_path / "missing.pt.trace.json")


# ---------------------------------------------------------------------------------------------
# Bad input (broken copies in tmp_path)


def text_of(path: Path) -> str:
    return json.dumps(raw(path), indent=1)


def write(tmp_path: Path, name: str, doc_or_text) -> Path:
    path = tmp_path / name
    text = doc_or_text if isinstance(doc_or_text, str) else json.dumps(doc_or_text)
    if name.endswith(".gz"):
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text, encoding="utf-8")
    return path


def kineto_text(doc: dict) -> tuple[str, list[int]]:
    """The trace written the way Kineto writes it (header keys, then events one by one), and
    the offset just past each event."""
    head = "".join(
        f"{json.dumps(k)}: {json.dumps(v)}, " for k, v in doc.items() if k != "traceEvents"
    )
    text = "{" + head + '"traceEvents": [\n'
    ends = []
    for index, event in enumerate(doc["traceEvents"]):
        text += ("" if index == 0 else ",\n") + json.dumps(event, indent=2)
        ends.append(len(text))
    return text + "\n]}", ends


@pytest.mark.parametrize("where", [0.3, 0.9])
def test_truncated_mid_event(tmp_path, where):
    source = OWN / "healthy.pt.trace.json.gz"
    full = read_one(source)
    text, ends = kineto_text(raw(source))
    kept = int(len(ends) * where)
    while ends[kept] - ends[kept - 1] < 80:  # cut inside an event long enough to cut into
        kept += 1
    path = write(tmp_path, "cut.pt.trace.json", text[: ends[kept - 1] + 60])
    profile = read_one(path)
    assert f"truncated trace: {kept} events recovered" in warnings_of(profile)
    assert 0 < rows(profile, "host_ops") <= rows(full, "host_ops")
    assert 0 < rows(profile, "steps") <= rows(full, "steps")
    assert sum(map(len, profile.tables.values())) < sum(map(len, full.tables.values()))
    # what was recovered is what the complete file says about those events
    assert (
        profile.tables["host_ops"]["name"].tolist()
        == full.tables["host_ops"]["name"].tolist()[: rows(profile, "host_ops")]
    )


def test_unclosed_event_list_of_a_crashed_run(tmp_path):
    text, ends = kineto_text(raw(SAMPLED))
    kept = len(ends) // 2
    path = write(tmp_path, "crashed.pt.trace.json", text[: ends[kept - 1]] + ",\n")
    profile = read_one(path)
    assert f"truncated trace: {kept} events recovered" in warnings_of(profile)
    assert profile.meta.rank == 0 and profile.meta.device_kind == "GPU"
    assert rows(profile, "device_ops") > 0


def test_cut_gzip_file(tmp_path, monkeypatch):
    # The batches decoded before the cut are kept; small batches, so this small file has some.
    monkeypatch.setattr("advisor_plugins.kineto.reader.CHUNK_BYTES", 16 * 1024)
    source = OWN / "ddp_rank1.pt.trace.json.gz"
    data = source.read_bytes()
    path = tmp_path / "cut.pt.trace.json.gz"
    path.write_bytes(data[: len(data) // 2])
    profile = read_one(path)
    problems = warnings_of(profile)
    assert any(p.startswith("truncated gzip data") for p in problems)
    counts = [re.fullmatch(r"truncated trace: (\d+) events recovered", p) for p in problems]
    recovered = next(int(m.group(1)) for m in counts if m)
    assert 0 < recovered < len(raw(source)["traceEvents"])
    assert profile.meta.rank == 1  # distributedInfo comes before the events in torch 2.x
    full = read_one(source)
    assert 0 < rows(profile, "host_ops") < rows(full, "host_ops")
    assert (
        profile.tables["host_ops"]["name"].tolist()
        == full.tables["host_ops"]["name"].tolist()[: rows(profile, "host_ops")]
    )


def test_cut_gzip_file_before_the_first_batch(tmp_path):
    data = (OWN / "ddp_rank1.pt.trace.json.gz").read_bytes()
    path = tmp_path / "cut.pt.trace.json.gz"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(UnreadableInput, match="cut.pt.trace.json.gz: truncated or corrupt gzip"):
        READER.read(path)


def test_cut_before_any_event_is_unreadable(tmp_path):
    text, ends = kineto_text(raw(LEGACY))
    path = write(tmp_path, "early.pt.trace.json", text[: ends[0] - 5])
    with pytest.raises(UnreadableInput, match="early.pt.trace.json"):
        READER.read(path)


def test_trace_without_steps(tmp_path):
    doc = json.loads(text_of(SAMPLED))
    doc["traceEvents"] = [
        e for e in doc["traceEvents"] if not str(e.get("name", "")).startswith("ProfilerStep#")
    ]
    profile = read_one(write(tmp_path, "nosteps.pt.trace.json", doc))
    full = read_one(SAMPLED)
    assert rows(full, "steps") == 2
    assert rows(profile, "steps") == 1  # the device span stands in for the step
    for table in ("device_ops", "host_ops", "comm_ops"):
        assert rows(profile, table) == rows(full, table)
    assert profile.tables["device_ops"]["duration_us"].sum() == pytest.approx(
        full.tables["device_ops"]["duration_us"].sum()
    )


def test_nan_and_infinity(tmp_path):
    doc = json.loads(text_of(LEGACY))
    kernels = [e for e in doc["traceEvents"] if e.get("cat") == "Kernel"]
    kernels[0]["dur"] = float("nan")
    kernels[1]["args"]["bytes"] = float("inf")
    doc["traceEvents"].append(
        {
            "ph": "i",
            "s": "t",
            "name": "[memory]",
            "pid": 1,
            "tid": 1,
            "ts": kernels[2]["ts"],
            "args": {
                "Total Allocated": float("inf"),
                "Total Reserved": 1024,
                "Device Type": 1,
                "Device Id": 0,
            },
        }
    )
    text = json.dumps(doc)  # writes NaN and Infinity, as Python's json does
    assert "NaN" in text and "Infinity" in text
    profile = read_one(write(tmp_path, "nan.pt.trace.json", text))
    problems = warnings_of(profile)
    assert sum("NaN or Infinity" in p for p in problems) == 1
    assert "1 complete events without a valid duration (dur) skipped" in problems
    assert rows(profile, "device_ops") == 3
    memory = profile.tables["memory"]
    assert memory["allocated_bytes"].isna().all() and memory["reserved_bytes"].tolist() == [1024]
    assert memory["device"].tolist() == ["cuda:0"]


def test_events_without_dur(tmp_path):
    doc = json.loads(text_of(OWN / "healthy.pt.trace.json.gz"))
    ops = [e for e in doc["traceEvents"] if e.get("cat") == "cpu_op"]
    for event in ops[:3]:
        del event["dur"]
    profile = read_one(write(tmp_path, "nodur.pt.trace.json", doc))
    full = read_one(OWN / "healthy.pt.trace.json.gz")
    assert "3 complete events without a valid duration (dur) skipped" in warnings_of(profile)
    assert rows(profile, "host_ops") == rows(full, "host_ops") - 3


def test_gz_that_is_not_gzip(tmp_path):
    path = tmp_path / "plain.pt.trace.json.gz"
    path.write_text(text_of(LEGACY), encoding="utf-8")
    with pytest.raises(UnreadableInput) as info:
        READER.read(path)
    assert info.value.path == str(path) and "gzip" in info.value.problem


def test_not_json_at_all(tmp_path):
    path = write(tmp_path, "junk.pt.trace.json", '{"traceEvents": [{"ph": "X"} oops ]}')
    with pytest.raises(UnreadableInput, match="invalid JSON"):
        READER.read(path)


def test_duplicate_metadata_last_wins(tmp_path):
    doc = json.loads(text_of(LEGACY))
    events = json.dumps(doc["traceEvents"])
    text = (
        '{"distributedInfo": {"rank": 5, "world_size": 8}, "schemaVersion": 1, '
        f'"traceEvents": {events}, '
        '"distributedInfo": {"rank": 3, "world_size": 4}}'
    )
    doc["traceEvents"] += [
        {"ph": "M", "name": "thread_name", "pid": 7, "tid": 42, "args": {"name": "first"}},
        {"ph": "M", "name": "thread_name", "pid": 7, "tid": 42, "args": {"name": "second"}},
        {"ph": "M", "name": "process_name", "pid": 1010370, "tid": 0, "args": {"name": "renamed"}},
    ]
    assert any(
        e.get("name") == "process_name" and e["pid"] == 1010370 and e["args"]["name"] == "python"
        for e in doc["traceEvents"]
    )
    profile = read_one(write(tmp_path, "dup.pt.trace.json", text))
    assert (profile.meta.rank, profile.meta.world_size) == (3, 4)
    named = read_one(write(tmp_path, "dupthreads.pt.trace.json", doc))
    assert named.meta.extra["threads"]["42"] == "second"
    assert named.meta.extra["process_name"] == "renamed"


def test_legacy_2021_trace_with_string_tids(tmp_path):
    """Categories and spellings of PyTorch 1.8-1.9 traces (formats.md 1.4-1.10)."""
    t0 = 1623143089861000
    events = [
        {
            "ph": "X",
            "cat": "Operator",
            "name": "ProfilerStep#3",
            "pid": 25738,
            "tid": "25738",
            "ts": t0,
            "dur": 1000,
        },
        {
            "ph": "X",
            "cat": "Operator",
            "name": "aten::conv2d",
            "pid": 25738,
            "tid": "25738",
            "ts": t0 + 10,
            "dur": 100,
            "args": {"Input dims": [[8, 3, 224, 224]]},
        },
        {
            "ph": "X",
            "cat": "Runtime",
            "name": "cudaLaunchKernel",
            "pid": 25738,
            "tid": "25738",
            "ts": t0 + 20,
            "dur": 5,
            "args": {"correlation": 1},
        },
        {
            "ph": "X",
            "cat": "Runtime",
            "name": "cudaMemcpy",
            "pid": 25738,
            "tid": "25738",
            "ts": t0 + 30,
            "dur": 50,
        },
        {
            "ph": "X",
            "cat": "Kernel",
            "name": "implicit_convolve_sgemm",
            "pid": 0,
            "tid": "stream 7",
            "ts": t0 + 40,
            "dur": 300,
        },
        {
            "ph": "X",
            "cat": "Memcpy",
            "name": "Memcpy HtoD (Pageable -> Device)",
            "pid": 0,
            "tid": "stream 7",
            "ts": t0 + 400,
            "dur": 20,
            "args": {"bytes": 4096},
        },
        {
            "ph": "X",
            "cat": "Memset",
            "name": "Memset (Device)",
            "pid": 0,
            "tid": "stream 7",
            "ts": t0 + 430,
            "dur": 2,
        },
        {
            "ph": "X",
            "cat": "Python",
            "name": "train.py(10): step",
            "pid": 25738,
            "tid": "25738",
            "ts": t0 + 1,
            "dur": 900,
        },
        {
            "ph": "i",
            "s": "t",
            "name": "[memory]",
            "pid": 25738,
            "tid": "25738",
            "ts": t0 + 15,
            "args": {"Device Type": 0, "Device Id": -1, "Bytes": 4},
        },
        {
            "ph": "s",
            "cat": "async",
            "name": "launch",
            "id": 1,
            "pid": 25738,
            "tid": "25738",
            "ts": t0 + 20,
        },
    ]
    doc = {
        "schemaVersion": 1,
        "computeProperties": [{"id": 0, "name": "Tesla V100"}],
        "traceEvents": events,
    }
    profile = read_one(write(tmp_path, "worker0.1623143089861.pt.trace.json", doc))
    assert profile.meta.device_kind == "GPU" and profile.meta.device_name == "Tesla V100"
    steps = profile.tables["steps"]
    assert steps[["step", "start_us", "duration_us"]].values.tolist() == [[3, 0.0, 1000.0]]
    ops = profile.tables["device_ops"]
    assert ops["stream"].tolist() == [7, 7, 7]
    assert ops["category"].tolist() == ["compute", "memcpy", "memset"]
    assert ops["start_us"].tolist() == [40.0, 400.0, 430.0]
    assert ops["memcpy_kind"].tolist()[1] == "HtoD"
    assert ops["host_memory"].tolist()[1] == "pageable" and ops["bytes"].tolist()[1] == 4096
    host = profile.tables["host_ops"]
    assert dict(zip_strict(host["name"], host["kind"])) == {
        "aten::conv2d": "aten",
        "cudaLaunchKernel": "launch",
        "cudaMemcpy": "sync",
        "train.py(10): step": "python",
    }
    assert set(host["thread"]) == {25738}
    memory = profile.tables["memory"]
    assert memory["device"].tolist() == ["cpu"] and memory["allocated_bytes"].isna().all()
    assert profile.meta.extra["time_origin_us"] == t0
    assert "no distributedInfo: rank and world size unknown" in warnings_of(profile)


def test_rank_from_file_name_when_distributed_info_is_missing(tmp_path):
    doc = json.loads(text_of(LEGACY))
    del doc["distributedInfo"]
    profile = read_one(write(tmp_path, "job_rank_3.pt.trace.json", doc))
    assert profile.meta.rank == 3 and profile.meta.world_size is None
    assert "no distributedInfo: rank and world size unknown" in warnings_of(profile)


def test_memory_capacity_from_device_properties(tmp_path):
    doc = {
        "schemaVersion": 1,
        "deviceProperties": [
            {"id": 0, "name": "GPU-A", "totalGlobalMem": 1000},
            {"id": 1, "name": "GPU-B", "totalGlobalMem": 2000},
        ],
        "distributedInfo": {"rank": 0, "world_size": 1},
        "traceEvents": [
            {
                "ph": "i",
                "s": "t",
                "cat": "cpu_instant_event",
                "name": "[memory]",
                "pid": 1,
                "tid": 1,
                "ts": 5.0,
                "args": {
                    "Total Allocated": 10,
                    "Total Reserved": 20,
                    "Device Type": 1,
                    "Device Id": device,
                },
            }
            for device in (1, 0, -1)
        ],
    }
    doc["traceEvents"][2]["args"]["Device Type"] = 0
    memory = read_one(write(tmp_path, "mem.pt.trace.json", doc)).tables["memory"]
    assert memory["device"].tolist() == ["cuda:1", "cuda:0", "cpu"]
    assert memory["capacity_bytes"].tolist()[:2] == [2000.0, 1000.0]
    assert math.isnan(memory["capacity_bytes"].tolist()[2])


@pytest.mark.parametrize(
    ("name", "op_type"),
    [
        (
            "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<int>, "
            "at::detail::Array<char*, 1> >(int, at::native::FillFunctor<int>, "
            "at::detail::Array<char*, 1>)",
            "vectorized_elementwise_kernel<FillFunctor>",
        ),
        # one template runs every element-wise op: its functor says which (add, mul, copy ...)
        (
            "void at::native::vectorized_elementwise_kernel<4, at::native::AUnaryFunctor<float, "
            "float, float, at::native::binary_internal::MulFunctor<float> >, "
            "at::detail::Array<char*,"
            " 2> >(int, at::native::AUnaryFunctor<float, float, float, "
            "at::native::binary_internal::"
            "MulFunctor<float> >, at::detail::Array<char*, 2>)",
            "vectorized_elementwise_kernel<MulFunctor>",
        ),
        (
            "void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::"
            "TensorIteratorBase&)::{lambda()#2}::operator()() const::{lambda()#4}::operator()() "
            "const"
            "::{lambda(long)#1}, at::detail::Array<char*, 2>, TrivialOffsetCalculator<1, unsigned "
            "int>"
            " >(int)",
            "unrolled_elementwise_kernel<direct_copy_kernel_cuda>",
        ),
        (
            "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, "
            "at::native::MeanOps<"
            "float, float, float, float>, unsigned int, float, 4> >(at::native::ReduceOp<float, "
            "at::"
            "native::MeanOps<float, float, float, float>, unsigned int, float, 4>)",
            "reduce_kernel<MeanOps>",
        ),
        (  # the manually unrolled template (TraceLens' MI300X SGLang trace, ROCm)
            "void at::native::elementwise_kernel_manual_unroll<128, 4, at::native::gpu_kernel_impl<"
            "at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()"
            "() const::{lambda()#3}::operator()() const::{lambda(int)#1}>(at::TensorIteratorBase&, "
            "at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()"
            "() const::{lambda()#3}::operator()() const::{lambda(int)#1} const&)::{lambda(int, bool"
            ")#1}>(int, at::native::gpu_kernel_impl<at::native::direct_copy_kernel_cuda(at::TensorI"
            "teratorBase&)::{lambda()#3}::operator()() const::{lambda()#3}::operator()() const::{la"
            "mbda(int)#1}>(at::TensorIteratorBase&, at::native::direct_copy_kernel_cuda(at::TensorI"
            "teratorBase&)::{lambda()#3}::operator()() const::{lambda()#3}::operator()() const::{la"
            "mbda(int)#1} const&)::{lambda(int, bool)#1})",
            "elementwise_kernel_manual_unroll<direct_copy_kernel_cuda>",
        ),
        (
            "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_13BinaryFunctorIfffNS0_15binary_"
            "internal10MulFunctorIfEEEENS_6detail5ArrayIPcLi3EEEEEviT0_T1_",
            "vectorized_elementwise_kernel<MulFunctor>",
        ),
        (
            "void at::native::(anonymous namespace)::distribution_elementwise_grid_stride_kernel"
            "<float, 4>(int)",
            "distribution_elementwise_grid_stride_kernel",
        ),
        (
            "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x64_16x4_nt_align4>"
            "(cutlass_80_tensorop_s1688gemm_256x64_16x4_nt_align4::Params)",
            "cutlass_80_tensorop_s1688gemm_256x64_16x4_nt_align4",
        ),
        (
            "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)",
            "ncclKernel_AllReduce_RING_LL_Sum_float",
        ),
        ("ampere_sgemm_32x32_sliced1x4_tn", "ampere_sgemm_32x32_sliced1x4_tn"),
        (  # vLLM on B200 (TraceLens tests/traces/b200): a SFINAE return type, not the kernel
            "std::enable_if<(((8)>(0)))&&vllm::_typeConvert<c10::BFloat16>::exists, void>::type "
            "vllm::fused_add_rms_norm_kernel<c10::BFloat16, 8>(c10::BFloat16*, long, "
            "c10::BFloat16*, c10::BFloat16 const*, float, int, int)",
            "fused_add_rms_norm_kernel",
        ),
        (
            "_ZN19cutlass_cudnn_train6KernelINS_4conv6kernel23ImplicitGemmConvolutionINS1_11"
            "threadblockEEEEEvNT_6ParamsE",
            "ImplicitGemmConvolution",
        ),
    ],
)
def test_kernel_op_type(name, op_type):
    assert kernel_op_type(name) == op_type


@pytest.mark.parametrize(
    ("name", "op"),
    [
        ("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "AllGather"),
        (  # vLLM's tensor-parallel all-reduce on B200 (TraceLens tests/traces/b200)
            "void (anonymous namespace)::multimem_all_reduce_kernel<c10::BFloat16, 16>"
            "(c10::BFloat16*, unsigned long, unsigned int**, unsigned long, unsigned long)",
            "all_reduce",
        ),
        ("void c10d::symmetric_memory::one_shot_all_reduce_kernel<float, 8>(float*)", "all_reduce"),
    ],
)
def test_symmetric_memory_collectives_are_communication(name, op):
    """torch SymmetricMemory collectives are communication, not compute."""
    _, category, _, _ = device_op_facts(name, KERNEL)
    assert category == "communication"
    match = NCCL_OP.search(name)
    assert (match.group(1) or match.group(2)) == op


@pytest.mark.parametrize(
    "name",
    [  # DeepSeek's profile-data train.json (H800, expert parallelism over 64 ranks)
        "void dpsk::ep::internode::combine<false, 8, __nv_bfloat16, 8, 2, 16, 24>(int4*, float*)",
        "void dpsk::ep::internode::notify_dispatch<false, 8>(int const*, int*, int)",
        "void dpsk::ep::internode::cached_notify<false>(int, int, int*)",
        # DeepEP's public kernels
        "void deep_ep::intranode::dispatch<8, 768, 6144>(int4*, float*, int*)",
        "void deep_ep::internode_ll::combine<false, 7168>(void*, int*)",
    ],
)
def test_expert_parallel_all_to_all_kernels_are_communication(name):
    """DeepEP's dispatch and combine send each token to its experts' ranks and back: an
    all-to-all that keeps SMs of its own, counted as compute before."""
    assert device_op_facts(name, KERNEL)[1] == "communication"
    assert NCCL_OP.search(name).group(3)  # an all-to-all (walk.EventWalk._comm)
    layout = "void dpsk::ep::cuda::get_dispatch_layout<256, 32, 8>(long const*, int*)"
    assert device_op_facts(layout, KERNEL)[1] == "compute"  # counts tokens per expert, locally


def test_generic_nccl_kernels_name_no_collective():
    """NCCL >= 2.19 and RCCL run every collective in `ncclDevKernel_Generic`: its name says
    nothing about which, so no collective is read from it (it was "Generic")."""
    assert NCCL_OP.search("ncclDevKernel_Generic(ncclDevKernelArgsStorage<4096ul>)") is None
    assert NCCL_OP.search("ncclDevKernel_AllReduce_Sum_f32_RING_LL(x)").group(1) == "AllReduce"


def test_nccl_generic_kernel_names_no_collective():
    """`ncclDevKernel_Generic` (NCCL >= 2.19, RCCL) runs whichever collective it is given: it is
    communication, but its name says nothing of which (it is not a collective "generic")."""
    name = "ncclDevKernel_Generic(ncclDevKernelArgsStorage<4096ul>)"
    assert device_op_facts(name, KERNEL)[1] == "communication"
    assert NCCL_OP.search(name) is None


# ---------------------------------------------------------------------------------------------
# End to end


def test_advisor_run_on_a_gpu_trace_writes_a_valid_report(tmp_path):
    result = CliRunner().invoke(
        main, ["run", str(NCCL), "-o", str(tmp_path / "out"), "--format", "json", "-q"]
    )
    assert result.exit_code == 0, result.output
    reports = sorted((tmp_path / "out").glob("prof_rule_*.json"))
    assert len(reports) == 1
    validate_report(json.loads(reports[0].read_text(encoding="utf-8")))


def test_rules_on_own_traces_fire_where_the_data_says():
    """Data loading dominates dataloader_bound (Dataset.__getitem__ sleeps); the same model
    with data in memory has no data, sync or idle problem. Its plain SGD step is a real 10%+
    of a sub-millisecond step, so the fused-optimizer advice is expected there."""
    own = FIXTURE_DIR / "kineto_own"
    bound = {
        f.rule.id: f for f in advisor.analyze(own / "dataloader_bound.pt.trace.json.gz").findings
    }
    assert bound["HOST-001"].values["ratio"] > 0.8
    healthy = {f.rule.id for f in advisor.analyze(own / "healthy.pt.trace.json.gz").findings}
    assert healthy <= {"HOST-004"}


# ---------------------------------------------------------------------------------------------
# Typed batches (msgspec structs) and the dicts of the last batch and the fallbacks read alike


def same_profiles(a, b) -> None:
    assert warnings_of(a) == warnings_of(b)
    assert a.meta == b.meta
    assert sorted(a.tables) == sorted(b.tables)
    for name, frame in a.tables.items():
        pd_testing.assert_frame_equal(frame, b.tables[name])


@pytest.mark.parametrize("path", ALL_TRACES, ids=lambda p: p.name[:40])
def test_small_typed_batches_read_like_one_dict_batch(path, monkeypatch):
    # all in the last batch
    monkeypatch.setattr("advisor_plugins.kineto.reader.CHUNK_BYTES", 64 << 20)
    whole = read_one(path)
    monkeypatch.setattr("advisor_plugins.kineto.reader.CHUNK_BYTES", 16 * 1024)
    same_profiles(read_one(path), whole)


def test_odd_events_in_typed_batches(tmp_path, monkeypatch):
    # Entries that are no objects, args that are no object, NaN and an out-of-range number
    # make the typed decoder give up on their batch: those batches are read from dicts.
    source = OWN / "ddp_rank0.pt.trace.json.gz"
    doc = json.loads(text_of(source))
    events = doc["traceEvents"]
    ops = [e for e in events if e.get("cat") == "cpu_op"]
    ops[len(ops) // 4]["args"] = ["not", "an", "object"]
    ops[len(ops) // 3]["dur"] = float("nan")
    ops[len(ops) // 2]["ts"] = float("inf")
    events.insert(len(events) // 5, 42)
    events.insert(len(events) // 2, "event")
    text = json.dumps(doc).replace("Infinity", "1e999")  # out of range, not a literal
    path = write(tmp_path, "odd.pt.trace.json", text)
    monkeypatch.setattr("advisor_plugins.kineto.reader.CHUNK_BYTES", 64 << 20)
    whole = read_one(path)
    assert "2 entries of traceEvents are not event objects; skipped" in warnings_of(whole)
    monkeypatch.setattr("advisor_plugins.kineto.reader.CHUNK_BYTES", 8 * 1024)
    same_profiles(read_one(path), whole)
    # the gloo shapes, kept as raw JSON in typed batches, give the bytes of the collectives
    comm = read_one(source).tables["comm_ops"]
    assert len(comm) == 6 and comm["bytes"].notna().all()
    pd_testing.assert_frame_equal(whole.tables["comm_ops"], comm)


# ---------------------------------------------------------------------------------------------
# Launches (device_ops.launch_us / launch_thread) and operator shapes (host_ops.input_shapes)

ALEXNET = SHARED / "critical_path__alexnet__benchmark_result_2869224_1695835535_trace.json.gz"
DEVICE_CATS = ("kernel", "gpu_memcpy", "memcpy", "gpu_memset", "memset")
RUNTIME_CATS = ("cuda_runtime", "cuda_driver", "runtime")


def raw_launches(path: Path) -> list[tuple[dict, dict | None]]:
    """Each device event (in file order, as device_ops rows are) with the runtime event that
    has the same `correlation` arg, or None."""
    events = complete(raw(path)["traceEvents"])
    calls: dict[int, dict] = {}
    for e in events:
        if cat(e) in RUNTIME_CATS and isinstance(e.get("args", {}).get("correlation"), int):
            calls.setdefault(e["args"]["correlation"], e)
    return [
        (e, calls.get(e.get("args", {}).get("correlation")))
        for e in events
        if cat(e) in DEVICE_CATS
    ]


def innermost_aten_found(profile) -> tuple[int, int]:
    """(device rows with a launch, those whose launch lies in an aten op of the same thread)."""
    ops, host = profile.tables["device_ops"], profile.tables["host_ops"]
    aten = host[host["kind"] == "aten"]
    launched = ops.dropna(subset=["launch_us"])
    found = 0
    for time, thread in zip_strict(launched["launch_us"], launched["launch_thread"]):
        inside = aten[
            (aten["thread"] == thread)
            & (aten["start_us"] <= time)
            & (time < aten["start_us"] + aten["duration_us"])
        ]
        found += not inside.empty
    return len(launched), found


@pytest.mark.parametrize("path", [ALEXNET, ROCM, SAMPLED, NCCL, LEGACY], ids=lambda p: p.name[:40])
def test_device_ops_launch_time_and_thread_from_the_runtime_call(path):
    pairs = raw_launches(path)
    ops = read_one(path).tables["device_ops"]
    assert len(ops) == len(pairs)
    matched = [call is not None for _, call in pairs]
    assert ops["launch_us"].notna().tolist() == matched
    assert ops["launch_thread"].notna().tolist() == matched
    assert sum(matched) >= 0.95 * len(pairs)
    for (device, call), start, launch, thread in zip_strict(
        pairs, ops["start_us"], ops["launch_us"], ops["launch_thread"]
    ):
        if call is None:
            continue
        # the same clock as start_us (and host_ops.start_us): the offsets agree
        assert launch - start == pytest.approx(call["ts"] - device["ts"], abs=1e-3)
        assert thread == abs(int(re.search(r"-?\d+", str(call["tid"])).group()))


@pytest.mark.parametrize("path", [ALEXNET, ROCM, SAMPLED, NCCL], ids=lambda p: p.name[:40])
def test_launches_lie_in_an_aten_op_of_their_thread(path):
    profile = read_one(path)
    host = profile.tables["host_ops"]
    ops = profile.tables["device_ops"]
    assert set(ops["launch_thread"].dropna()) <= set(host["thread"].dropna())
    launched, found = innermost_aten_found(profile)
    assert launched == len(ops)
    assert found >= 0.95 * launched


def test_launch_is_the_runtime_host_op_itself():
    """launch_us and launch_thread are the start and thread of a host_ops row (the runtime
    call, kind launch for kernels)."""
    profile = read_one(ALEXNET)
    ops, host = profile.tables["device_ops"], profile.tables["host_ops"]
    calls = {(round(s, 6), t) for s, t in zip_strict(host["start_us"], host["thread"])}
    kernels = ops[ops["category"] == "compute"]
    assert all(
        (round(s, 6), t) in calls
        for s, t in zip_strict(kernels["launch_us"], kernels["launch_thread"])
    )
    names = host.set_index(["start_us", "thread"])["name"]
    keys = list(zip_strict(kernels["launch_us"], kernels["launch_thread"]))
    found = names.loc[keys]  # a list of keys: a Series on every pandas (one key: 2 and 3 differ)
    assert len(found) == len(keys)  # each kernel launched by exactly one host call
    launched = set(found)
    assert launched <= {
        "cudaLaunchKernel",
        "cudaLaunchKernelExC",
        "cuLaunchKernel",
        "cudaMemcpyAsync",
        "cudaMemsetAsync",
    }
    assert "cudaLaunchKernel" in launched


def test_unmatched_correlations_are_missing(tmp_path):
    doc = json.loads(text_of(ALEXNET))
    for event in doc["traceEvents"]:
        if cat(event) == "cuda_runtime" and isinstance(event.get("args"), dict):
            event["args"].pop("correlation", None)
    ops = read_one(write(tmp_path, "x.pt.trace.json", doc)).tables["device_ops"]
    assert ops["launch_us"].isna().all() and ops["launch_thread"].isna().all()


def raw_shapes(path: Path) -> Counter:
    """(name, Input Dims as compact JSON) of the aten operators that have Input Dims."""
    return Counter(
        (e["name"], json.dumps(e["args"]["Input Dims"]))
        for e in complete(raw(path)["traceEvents"])
        if cat(e) in ("cpu_op", "operator")
        and "Input Dims" in e.get("args", {})
        and not e["name"].startswith(("ProfilerStep#", "Optimizer.", "enumerate(DataLoader)"))
    )


@pytest.mark.parametrize("path", [*OWN_TRACES, SAMPLED, ROCM, CPU_ONLY], ids=lambda p: p.name[:40])
def test_input_shapes_of_aten_ops(path):
    want = raw_shapes(path)
    assert want
    host = read_one(path).tables["host_ops"]
    shaped = host.dropna(subset=["input_shapes"])
    assert (shaped["kind"] == "aten").all()
    assert Counter(zip_strict(shaped["name"], shaped["input_shapes"])) == want


def test_input_shapes_of_a_known_op():
    path = OWN / "ddp_rank0.pt.trace.json.gz"
    first = next(
        e
        for e in complete(raw(path)["traceEvents"])
        if e["name"] == "aten::addmm" and "Input Dims" in e.get("args", {})
    )
    host = read_one(path).tables["host_ops"]
    addmm = host[host["name"] == "aten::addmm"].sort_values("start_us", kind="stable")
    assert addmm["input_shapes"].iloc[0] == json.dumps(first["args"]["Input Dims"])
    assert addmm["input_shapes"].iloc[0] == "[[256], [8, 64], [64, 256], [], []]"
    # not aten: no shapes even where the event has Input Dims
    assert host.loc[host["kind"] != "aten", "input_shapes"].isna().all()
    assert host.loc[host["kind"] == "launch", "input_shapes"].isna().all()


def test_traces_without_shapes_or_runtime_calls():
    alexnet = read_one(ALEXNET).tables["host_ops"]
    assert "input_shapes" not in alexnet or alexnet["input_shapes"].isna().all()
    for path in OWN_TRACES:
        assert "device_ops" not in read_one(path).tables


@pytest.mark.parametrize("ts", [-1e18, 1e18, -3e12])
def test_a_far_off_timestamp_is_ignored_and_named(tmp_path, ts):
    """One event at ts = -1e18 used to become the time origin: every other time lost its
    precision in float64 (computing 0, idle 100%), silently."""
    doc = json.loads(text_of(SAMPLED))
    kernel = next(e for e in doc["traceEvents"] if e.get("cat") == "kernel")
    doc["traceEvents"].append({**kernel, "name": "broken_clock_kernel", "ts": ts})
    profile = read_one(write(tmp_path, "far.pt.trace.json", doc))
    full = read_one(SAMPLED)
    assert rows(profile, "device_ops") == rows(full, "device_ops")
    assert "broken_clock_kernel" not in set(profile.tables["device_ops"]["name"])
    for table, column in (("device_ops", "start_us"), ("steps", "start_us")):
        assert profile.tables[table][column].tolist() == pytest.approx(
            full.tables[table][column].tolist()
        )
    (far,) = [w for w in warnings_of(profile) if "more than a day away" in w]
    assert "1 event" in far and "broken_clock_kernel" in far


def test_each_kernel_name_is_classified_once_per_process():
    """The parts of one trace (and ranks read one after another) meet the same kernels: the
    second walk over them takes every kernel's facts from the first."""
    from advisor_plugins.kineto.parts import walk_events
    from advisor_plugins.kineto.walk import DECODER

    trace = json.loads(gzip.decompress(NCCL.read_bytes()))
    events = DECODER.decode(json.dumps(trace["traceEvents"]).encode())
    device_op_facts.cache_clear()
    first = walk_events([list(events)])
    classified = device_op_facts.cache_info()
    second = walk_events([list(events)])
    again = device_op_facts.cache_info()
    assert classified.misses > 0
    assert again.misses == classified.misses  # nothing classified a second time
    assert again.hits >= classified.hits + classified.misses
    assert second.device_names == first.device_names


def test_device_activity_advisor_does_not_read_is_named(tmp_path: Path) -> None:
    """An MTIA trace (HTA's samples): the device's kernels and DMA are `mtia_ccp_events`,
    its runtime `mtia_runtime`. Read as a host-only trace, it gave "No problems found"."""
    events = [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 0, "dur": 50},
        {"ph": "X", "cat": "mtia_runtime", "name": "launch", "pid": 1, "tid": 1, "ts": 5, "dur": 4},
        {
            "ph": "X",
            "cat": "mtia_ccp_events",
            "name": "pe_exe",
            "pid": 9,
            "tid": 2,
            "ts": 10,
            "dur": 30,
        },
    ]
    path = tmp_path / "mtia_rank_0.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    profile = read_one(path)
    (warning,) = [w for w in profile.warnings if "does not read" in w.problem]
    assert warning.problem.startswith("device activity advisor does not read (mtia_ccp_events")
    assert "MTIA" in warning.problem_zh
    assert "device_ops" not in profile.tables
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events[:2]}))
    assert not any("does not read" in w for w in warnings_of(read_one(plain)))


def test_an_out_of_memory_event_becomes_an_oom_events_row():
    """Our torch 2.13 CPU run (make_out_of_memory.py) asks for 1 PiB in its fourth step and
    catches the error: the trace's one [OutOfMemory] instant, with its request and the memory
    allocated then, is a row MEM-008 reads; the CPU allocator reserves nothing."""
    profile = read_one(FIXTURE_DIR / "kineto_own" / "out_of_memory.pt.trace.json.gz")
    (oom,) = profile.tables["oom_events"].to_dict("records")
    assert oom["device"] == "cpu" and oom["order"] == 0
    assert oom["request_bytes"] == 2**50
    assert oom["allocated_bytes"] == 340008 and oom["reserved_bytes"] == 0
    steps = profile.tables["steps"]
    inside = steps[(steps["start_us"] <= oom["time_us"]) & (oom["time_us"] <= steps["end_us"])]
    assert inside["step"].tolist() == [3]  # ProfilerStep#3, the fourth iteration
    (finding,) = [f for f in advisor.analyze(profile.meta.path).findings if f.rule.id == "MEM-008"]
    assert finding.message.startswith("An allocation of 1,024 TiB failed on device cpu")
    assert "expandable_segments" not in " ".join(finding.suggestions)
    assert "record the allocator's history" not in " ".join(finding.suggestions)  # no CPU history
