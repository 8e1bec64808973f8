"""The MegEngine reader against the hand-built fixtures and broken copies of them.

Expected numbers come from the raw JSON with the standard library only (B/E pairing and unit
conversion are redone here), never from the reader.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner
from conftest import FIXTURE_DIR, traced_peak

import advisor
from advisor.cli import main
from advisor.compat import zip_strict
from advisor.errors import UnreadableInput
from advisor.model import contract_problems
from advisor.plugin_manager import PluginHost
from advisor_plugins.kineto import KinetoReader
from advisor_plugins.megengine import MegEngineReader

FIXTURES = FIXTURE_DIR / "megengine"
TIMELINE = FIXTURES / "dynamic" / "4242.chrome_timeline.json"
STATIC = FIXTURES / "static" / "profiling.json"
READER = MegEngineReader()
DEVICE_THREADS = {"gpu0:0", "cupti stream 7"}


def raw(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def pairs(events: list[dict]) -> list[tuple[str, str, float, float]]:
    """(thread name, event name, start, end) of every B/E pair, matched per tid, LIFO."""
    names = {e["tid"]: e["args"]["name"] for e in events if e.get("ph") == "M"}
    stacks: dict[int, list[dict]] = defaultdict(list)
    out = []
    for event in sorted((e for e in events if e.get("ph") in ("B", "E")), key=lambda e: e["ts"]):
        if event["ph"] == "B":
            stacks[event["tid"]].append(event)
        else:
            begin = stacks[event["tid"]].pop()
            out.append((names[event["tid"]], begin["name"], begin["ts"], event["ts"]))
    return out


def read_one(path: Path):
    (profile,) = READER.read(path)
    assert contract_problems(profile) == []
    return profile


def test_detect_claims_both_layouts_and_kineto_leaves_timelines_alone():
    assert READER.detect(TIMELINE) and READER.detect(STATIC)
    assert not KinetoReader().detect(TIMELINE)  # its "Kernel" category looked like Kineto
    assert not READER.detect(FIXTURES / "make_fixtures.py")
    claimed = [n for n, r in PluginHost().readers() if r.detect(TIMELINE)]
    assert claimed == ["megengine"]


def test_detect_never_opens_a_pytorch_trace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A run of hundreds of ranks: the static-profile check must not read each trace's head."""
    import advisor_plugins.megengine as megengine

    trace = tmp_path / "rank0.pt.trace.json"
    trace.write_bytes(STATIC.read_bytes())  # even one holding a static profile's keys

    def refuse(path: Path) -> bytes:
        raise AssertionError(f"opened {path}")

    monkeypatch.setattr(megengine, "_head", refuse)
    assert not READER.detect(trace)
    assert READER.detect(TIMELINE)


def test_timeline_device_ops_are_matched_pairs_on_device_threads():
    events = raw(TIMELINE)["traceEvents"]
    expected = sorted(
        (end - start, name)
        for thread, name, start, end in pairs(events)
        if thread in DEVICE_THREADS
    )
    profile = read_one(TIMELINE)
    ops = profile.tables["device_ops"]
    got = sorted(zip_strict(ops["duration_us"], ops["name"]))
    assert got == expected
    assert profile.meta.framework == "MegEngine" and profile.meta.device_kind == "GPU"
    assert profile.meta.device_name == "gpu0:0"
    assert profile.warnings == []


def test_timeline_copies_carry_bytes_and_direction():
    events = raw(TIMELINE)["traceEvents"]
    h2d = next(e for e in events if e["name"] == "HostToDevice" and e["ph"] == "E")["args"]
    memcpy = next(e for e in events if e["name"] == "Memcpy" and e["ph"] == "E")["args"]
    ops = read_one(TIMELINE).tables["device_ops"]
    copies = ops[ops["category"] == "memcpy"]
    assert set(copies.loc[copies["name"] == "HostToDevice", "bytes"]) == {
        h2d["nr_elements"] * 4
    }  # Float32
    assert set(copies.loc[copies["name"] == "Memcpy", "bytes"]) == {memcpy["bytes"]}
    assert set(copies.loc[copies["name"] == "Memcpy", "memcpy_kind"]) == {"DtoH"}
    assert set(ops.loc[ops["category"] == "compute", "op_type"]) == {
        "ConvolutionForward",
        "Elemwise",
    }


def test_timeline_host_ops_steps_and_memory():
    events = raw(TIMELINE)["traceEvents"]
    host = [(t, n, s, e) for t, n, s, e in pairs(events) if t not in DEVICE_THREADS]
    profile = read_one(TIMELINE)
    ops = profile.tables["host_ops"]
    launch = ops[ops["kind"] == "launch"]
    assert sorted(launch["duration_us"]) == sorted(e - s for t, _, s, e in host if t == "worker")
    assert len(ops[ops["kind"] == "aten"]) == sum(1 for _, n, _, _ in host if n == "OpDispatch")
    assert len(ops[ops["kind"] == "sync"]) == sum(
        1 for _, n, _, _ in host if n.startswith("GetValue")
    )
    stops = sorted(e["ts"] for e in events if e["name"] == "StopStep")
    origin = min(e["ts"] for e in events if e.get("ph") in ("B", "E", "i", "C", "X"))
    bounds = [origin, *stops]
    steps = profile.tables["steps"]
    assert list(steps["step"]) == list(range(1, len(stops) + 1))
    assert list(steps["duration_us"]) == [b - a for a, b in zip(bounds, bounds[1:])]
    samples = [e["args"]["value"] for e in events if e["name"].endswith("_alloc_mem")]
    assert list(profile.tables["memory"]["allocated_bytes"]) == samples
    assert profile.meta.extra["gpu_usage_ratio"] == 0.55


def test_static_profile_times_are_seconds_and_footprints_give_flops():
    doc = raw(STATIC)
    prof = doc["profiler"]
    profile = read_one(STATIC)
    ops = profile.tables["device_ops"].set_index("name")
    for oid, opr in doc["graph_exec"]["operator"].items():
        (t,) = prof["device"][oid].values()
        row = ops.loc[opr["name"]]
        assert row["duration_us"] == pytest.approx((t["end"] - t["start"]) * 1e6)
        assert row["op_type"] == opr["type"]
        fp = prof["opr_footprint"][oid]
        assert row["bytes"] == fp["memory"]
        if fp["computation"] is None:
            assert row["flops"] != row["flops"]  # NaN: not known, not zero
        else:
            assert row["flops"] == fp["computation"]
    assert ops.loc["conv1", "input_shapes"] == "[32,3,224,224];[64,3,7,7]"
    assert len(profile.tables["host_ops"]) == len(prof["host"])
    assert profile.tables["device_ops"]["start_us"].min() >= 0


def test_unmatched_begin_and_end_give_one_warning_and_keep_the_rest(tmp_path):
    doc = raw(TIMELINE)
    events = doc["traceEvents"]
    # drop the first E of the worker thread and add an E that nothing opened
    worker_e = next(i for i, e in enumerate(events) if e.get("tid") == 101 and e["ph"] == "E")
    del events[worker_e]
    events.append({"name": "Stray", "ph": "E", "ts": 5, "pid": 4242, "tid": 100})
    path = tmp_path / "1.chrome_timeline.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    profile = read_one(path)
    (warning,) = profile.warnings
    assert str(path) in str(warning) and "2 unmatched B/E events" in str(warning)
    device = [p for p in pairs(raw(TIMELINE)["traceEvents"]) if p[0] in DEVICE_THREADS]
    assert len(profile.tables["device_ops"]) == len(device)


def test_truncated_timeline_keeps_the_events_before_the_cut(tmp_path):
    text = TIMELINE.read_text(encoding="utf-8")
    path = tmp_path / "2.chrome_timeline.json"
    path.write_text(text[: len(text) // 2], encoding="utf-8")
    profile = read_one(path)
    assert any("truncated timeline" in str(w) and str(path) in str(w) for w in profile.warnings)
    assert 0 < len(profile.tables["device_ops"]) < len(read_one(TIMELINE).tables["device_ops"])


def test_old_bare_list_layout_is_read(tmp_path):
    events = [
        {"name": "conv", "ph": "B", "ts": 0, "pid": 1, "tid": "host"},
        {"name": "conv", "ph": "E", "ts": 5, "pid": 1, "tid": "host"},
        {"name": "conv", "ph": "B", "ts": 10, "pid": 1, "tid": "gpu0:0"},
        {"name": "conv", "ph": "E", "ts": 35, "pid": 1, "tid": "gpu0:0"},
    ]
    path = tmp_path / "old.chrome_timeline.json"
    path.write_text(json.dumps(events), encoding="utf-8")
    profile = read_one(path)
    assert list(profile.tables["device_ops"]["duration_us"]) == [25.0]
    assert list(profile.tables["device_ops"]["start_us"]) == [10.0]
    assert list(profile.tables["host_ops"]["duration_us"]) == [5.0]


def test_static_operator_with_bad_times_is_skipped_with_a_warning(tmp_path):
    doc = raw(STATIC)
    (entry,) = doc["profiler"]["device"]["2"].values()
    entry["end"] = "N/A"
    path = tmp_path / "profiling.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    profile = read_one(path)
    (warning,) = profile.warnings
    assert str(path) in str(warning) and "1 operator with unreadable profiler times" in str(warning)
    assert sorted(profile.tables["device_ops"]["name"]) == ["conv1", "fc", "relu2"]


def test_broken_static_json_is_one_line_and_exit_3(tmp_path):
    path = tmp_path / "profiling.json"
    path.write_text(STATIC.read_text(encoding="utf-8")[:300], encoding="utf-8")
    with pytest.raises(UnreadableInput, match="not valid JSON"):
        READER.read(path)
    result = CliRunner().invoke(main, ["inspect", str(path)])
    assert result.exit_code == 3
    assert "Traceback" not in result.output
    assert f"{path}: not valid JSON" in result.output


def test_analyze_derives_op_stats_from_megengine_device_ops():
    (analysis,) = advisor.analyze(TIMELINE).analyses
    stats = analysis.tables["op_stats"].set_index("op_type")
    events = raw(TIMELINE)["traceEvents"]
    conv = [e - s for t, n, s, e in pairs(events) if t == "gpu0:0" and n == "ConvolutionForward"]
    assert stats.loc["ConvolutionForward", "count"] == len(conv)
    assert stats.loc["ConvolutionForward", "total_us"] == pytest.approx(sum(conv))


def long_timeline(folder: Path, copies: int) -> Path:
    """The fixture's timeline written `copies` times, copy k shifted by k x 10 ms, its thread
    names once."""
    doc = raw(TIMELINE)
    events = [e for e in doc["traceEvents"] if e.get("ph") == "M"]
    for k in range(copies):
        events += [
            {**e, "ts": e["ts"] + k * 10_000.0}
            for e in doc["traceEvents"]
            if e.get("ph") != "M" and "ts" in e
        ]
    folder.mkdir()
    path = folder / TIMELINE.name
    path.write_text(json.dumps({**doc, "traceEvents": events}))
    return path


def test_a_long_timeline_keeps_compact_events_not_decoded_dicts(tmp_path):
    """1,000 and 3,000 copies of the timeline (5 and 14 MB, both past one batch of events): the
    tables are that many times one copy's, and the peak of traced memory grows by less than
    four times the file (2.4: the events kept as tuples until they are paired, then the
    tables' columns; holding the decoded events, it grew 6 times the file)."""
    one = read_one(long_timeline(tmp_path / "x1", 1)).tables  # also loads every module first

    def traced_read(copies: int) -> tuple[int, int]:
        path = long_timeline(tmp_path / f"x{copies}", copies)
        profile, peak = traced_peak(lambda: read_one(path))
        tables = profile.tables
        for table in ("device_ops", "host_ops", "memory"):
            assert len(tables[table]) == copies * len(one[table]) > 0, table
        return peak, path.stat().st_size

    small_peak, small_size = traced_read(1_000)
    large_peak, large_size = traced_read(3_000)
    assert large_peak - small_peak < 4 * (large_size - small_size), (small_peak, large_peak)


def test_args_that_are_no_object_are_read_as_none_not_a_crash(tmp_path):
    """A counter's or a span's args that is no object: the event keeps its times and name."""
    doc = raw(TIMELINE)
    for event in doc["traceEvents"]:
        if event.get("ph") == "C" or event.get("name") == "OpDispatch":
            event["args"] = [1, 2]
    path = tmp_path / TIMELINE.name
    path.write_text(json.dumps(doc))
    profile, whole = read_one(path), read_one(TIMELINE)
    pd.testing.assert_frame_equal(profile.tables["device_ops"], whole.tables["device_ops"])
    assert len(profile.tables["host_ops"]) == len(whole.tables["host_ops"])
    assert "memory" not in profile.tables  # the counters' values were in their args
