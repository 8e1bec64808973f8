"""`advisor top`: rankings checked against ones computed by hand from the raw files."""

from __future__ import annotations

import csv
import gzip
import io
import json

import pytest
from click.testing import CliRunner
from clirunner import separate_runner
from conftest import FIXTURE_DIR

from advisor.cli import main
from advisor.compat import zip_strict

FIXTURES = FIXTURE_DIR / "megengine"
STATIC = FIXTURES / "static" / "profiling.json"
TIMELINE = FIXTURES / "dynamic" / "4242.chrome_timeline.json"
ALEXNET = (
    FIXTURE_DIR
    / "real"
    / "kineto"
    / "critical_path__alexnet__benchmark_result_2869224_1695835535_trace.json.gz"
)


def static_ops() -> list[dict]:
    """name, type, time (µs), flo, bytes per operator, straight from the static JSON."""
    doc = json.loads(STATIC.read_text(encoding="utf-8"))
    out = []
    for oid, opr in doc["graph_exec"]["operator"].items():
        (t,) = doc["profiler"]["device"][oid].values()
        fp = doc["profiler"]["opr_footprint"][oid]
        out.append(
            {
                "name": opr["name"],
                "type": opr["type"],
                "time": (t["end"] - t["start"]) * 1e6,
                "flo": fp["computation"],
                "bytes": fp["memory"],
            }
        )
    return out


def top(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["top", *args])
    return result.exit_code, result.output


def top_json(*args: str) -> list[dict]:
    """The rows of `top --format json`: stdout only (reader warnings go to stderr)."""
    result = separate_runner().invoke(main, ["top", *args, "--format", "json"])
    assert result.exit_code == 0, result.stderr
    (profile,) = json.loads(result.stdout)["profiles"]
    return profile["rows"]


def test_default_ranking_is_slowest_first_with_rates():
    ops = sorted(static_ops(), key=lambda o: -o["time"])
    rows = top_json(str(STATIC))
    assert [r["name"] for r in rows] == [o["name"] for o in ops]
    total = sum(o["time"] for o in ops)
    running = 0.0
    for row, op in zip_strict(rows, ops):
        running += op["time"]
        assert row["time_us"] == pytest.approx(op["time"])
        assert row["share"] == pytest.approx(op["time"] / total)
        assert row["cumulative_us"] == pytest.approx(running)
        assert row["gbps"] == pytest.approx(op["bytes"] / (op["time"] * 1e-6) / 1e9)
        if op["flo"] is None:
            assert row["gflops"] is None
        else:
            assert row["gflops"] == pytest.approx(op["flo"] / (op["time"] * 1e-6) / 1e9)


def test_top_k_ascending_and_order_by_any_column():
    ops = static_ops()
    rows = top_json(str(STATIC), "-k", "2", "--ascending")
    assert [r["name"] for r in rows] == [o["name"] for o in sorted(ops, key=lambda o: o["time"])][
        :2
    ]
    by_bw = sorted(ops, key=lambda o: -o["bytes"] / o["time"])
    rows = top_json(str(STATIC), "--order-by", "gbps")
    assert [r["name"] for r in rows] == [o["name"] for o in by_bw]


@pytest.mark.parametrize("how", ["sum", "mean", "max", "min"])
def test_aggregate_by_type(how):
    funcs = {"sum": sum, "mean": lambda v: sum(v) / len(v), "max": max, "min": min}
    groups: dict[str, list[float]] = {}
    for op in static_ops():
        groups.setdefault(op["type"], []).append(op["time"])
    expected = sorted(((t, funcs[how](v), len(v)) for t, v in groups.items()), key=lambda x: -x[1])
    rows = top_json(str(STATIC), "--aggregate", how)
    assert [(r["op_type"], r["count"]) for r in rows] == [(t, n) for t, _, n in expected]
    assert [r["time_us"] for r in rows] == pytest.approx([v for _, v, _ in expected])
    elemwise = next(r for r in rows if r["op_type"] == "Elemwise")
    assert elemwise["total_us"] == pytest.approx(sum(groups["Elemwise"]))


def test_time_type_and_name_filters():
    ops = static_ops()
    rows = top_json(str(STATIC), "--min-time", "60", "--max-time", "300")
    assert sorted(r["name"] for r in rows) == sorted(
        o["name"] for o in ops if 60 <= o["time"] <= 300
    )
    rows = top_json(str(STATIC), "--type", "^Elem", "--type", "Matrix")
    assert sorted(r["name"] for r in rows) == sorted(
        o["name"] for o in ops if o["type"] in ("Elemwise", "MatrixMul")
    )
    rows = top_json(str(STATIC), "--name", "relu")  # a plain word: substring
    assert sorted(r["name"] for r in rows) == ["relu1", "relu2"]


def test_text_and_csv_output():
    code, out = top(str(STATIC), "-k", "1")
    assert code == 0
    lines = out.splitlines()
    # the summary first, as profile_analyze prints it: device 500 + 100 + 200 + 50 µs; each
    # operator's host entry runs from start - 50 µs to start - 20 µs, 4 x 30 µs
    assert lines[1] == "total device time 850 µs, total host time 120 µs"
    assert "GFLOPS" in lines[2] and "GB/s" in lines[2]
    assert "time (µs)" in lines[2] and "share (%)" in lines[2]  # units as the reports name them
    assert lines[4].split()[:6] == ["conv1", "ConvolutionForward", "GPU", "1", "500", "58.8"]
    code, out = top(str(STATIC), "--format", "csv")
    assert code == 0
    table = list(csv.DictReader(io.StringIO(out)))
    assert [r["name"] for r in table] == [
        o["name"] for o in sorted(static_ops(), key=lambda o: -o["time"])
    ]
    assert {r["profile"] for r in table} == {"profiling.json"}


def test_errors_are_one_line_with_exit_2(tmp_path):
    code, out = top(str(STATIC), "--order-by", "nope")
    assert code == 2 and "Traceback" not in out
    assert "--order-by: no column 'nope'" in out and len(out.strip().splitlines()) == 1
    code, out = top(str(STATIC), "--type", "(")
    assert code == 2 and "not a valid regular expression" in out
    path = tmp_path / "9.chrome_timeline.json"  # host events and a step, no device kernels
    path.write_text(
        json.dumps(
            {
                "traceEvents": [
                    {
                        "name": "thread_name",
                        "ph": "M",
                        "pid": 1,
                        "tid": 1,
                        "args": {"name": "channel"},
                    },
                    {"name": "OpDispatch", "ph": "B", "ts": 0, "pid": 1, "tid": 1},
                    {"name": "OpDispatch", "ph": "E", "ts": 3, "pid": 1, "tid": 1},
                    {"name": "StopStep", "ph": "i", "ts": 10, "pid": 1, "tid": 1},
                ]
            }
        ),
        encoding="utf-8",
    )
    code, out = top(str(path))
    assert code == 2 and "no operator times in this profile" in out
    assert str(path) in out and "Traceback" not in out


def test_ranks_a_real_kineto_trace():
    with gzip.open(ALEXNET, "rt", encoding="utf-8") as fh:
        events = json.load(fh)["traceEvents"]
    device = [
        e
        for e in events
        if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
    ]
    expected = sorted((e["dur"] for e in device), reverse=True)[:5]
    rows = top_json(str(ALEXNET), "-k", "5")
    assert [r["time_us"] for r in rows] == pytest.approx(expected)
    total = sum(e["dur"] for e in device)
    assert rows[0]["share"] == pytest.approx(expected[0] / total)
    rows = top_json(str(ALEXNET), "-k", "0")
    assert len(rows) == len(device)


def test_timeline_aggregate_counts_kernels_per_type():
    doc = json.loads(TIMELINE.read_text(encoding="utf-8"))
    gpu_begins = [e for e in doc["traceEvents"] if e.get("tid") == 102 and e["ph"] == "B"]
    convs = sum(1 for e in gpu_begins if e["name"] == "ConvolutionForward")
    rows = top_json(str(TIMELINE), "--aggregate", "sum", "--type", "Conv")
    assert [(r["op_type"], r["count"]) for r in rows] == [("ConvolutionForward", convs)]
