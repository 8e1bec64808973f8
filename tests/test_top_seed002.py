"""`advisor top` options of MegEngine's profile_analyze (seed 002): --input-dtype,
--top-end-key, --copy-time, --show-host and the total device/host summary.

Expected values are worked out by hand from tests/fixtures/megengine (make_fixtures.py writes
them; times there are seconds, shown here in µs) and checked again against the raw files where
the arithmetic is long (the real Kineto trace, the msprof CSV).
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import unicodedata
from collections import defaultdict

import pandas as pd
import pytest
from click.testing import CliRunner
from clirunner import separate_runner
from conftest import FIXTURE_DIR

from advisor.cli import main
from advisor.model import Profile, ProfileMeta, conform
from advisor.top import MissingData, TopOptions, rank_host_operators, rank_operators, summary

MEGENGINE = FIXTURE_DIR / "megengine"
COPY = MEGENGINE / "static_copy" / "profiling.json"
TIMELINE = MEGENGINE / "dynamic" / "4242.chrome_timeline.json"
ALEXNET = (
    FIXTURE_DIR
    / "real"
    / "kineto"
    / "critical_path__alexnet__benchmark_result_2869224_1695835535_trace.json.gz"
)
MSPROF = FIXTURE_DIR / "msprof" / "PROF_000001_20260105093000123_SMALLCASE"

# static_copy, device (start, kern, end) per comp node, µs:
#   conv      gpu0:0 100 130 500           end-start 400  kern-start 30
#   cast      gpu0:0 500 505 560                      60              5
#   copy      gpu0:0 560 570 640  -> 80, 10; gpu0:1 560 600 630 -> 70, 40
#             longest end-start 80 (gpu0:0), longest kern-start 40 (gpu0:1)
#   fc        gpu0:1 640 650 840                     200             10
#   onehot    gpu0:1 840 842 870                      30              2
#   copy_back gpu0:0 870 890 920                      50             20
# total device time 400 + 60 + 80 + 200 + 30 + 50 = 820
# host (start, kern, end) on thread "@": conv 10 15 40 (30, 5), cast 40 42 50 (10, 2),
#   copy 50 58 70 (20, 8), fc 70 73 95 (25, 3), onehot 95 96 105 (10, 1),
#   copy_back 105 110 120 (15, 5); total host time 30 + 10 + 20 + 25 + 10 + 15 = 110
# inputs: conv Float32;Float32, cast Float32, copy Float16, fc Float16;Float16,
#   onehot Float16;Int32, copy_back Float32
DEVICE_TOTAL, HOST_TOTAL = 820.0, 110.0


def run(*args: str) -> dict:
    """The one profile of `top ... --format json` (stdout only)."""
    result = separate_runner().invoke(main, ["top", *args, "--format", "json"])
    assert result.exit_code == 0, result.stderr
    (profile,) = json.loads(result.stdout)["profiles"]
    return profile


def names(rows: list[dict]) -> list[str]:
    return [r["name"] for r in rows]


def test_summary_gives_total_device_and_host_time():
    profile = run(str(COPY))
    assert profile["summary"] == {
        "total_device_us": pytest.approx(DEVICE_TOTAL),
        "total_host_us": pytest.approx(HOST_TOTAL),
    }
    # the same totals straight from the file, as profile_analyze sums them: per operator
    # the longest end - start over its comp nodes (host threads)
    doc = json.loads(COPY.read_text(encoding="utf-8"))
    for side, total in (("device", DEVICE_TOTAL), ("host", HOST_TOTAL)):
        by_op = doc["profiler"][side].values()
        assert sum(
            max(t["end"] - t["start"] for t in op.values()) * 1e6 for op in by_op
        ) == pytest.approx(total)
    # share is over the total device time: conv 400 / 820
    assert profile["rows"][0]["share"] == pytest.approx(400 / 820)
    # the timeline: device 2 steps x (conv + elemwise + HostToDevice + Memcpy), step 1
    # 400 + 80 + 50 + 40 = 570, step 2 600 + 80 + 50 + 40 = 770; host: the worker's operator
    # executions, 2 x (100 + 30) = 260
    assert run(str(TIMELINE))["summary"] == {
        "total_device_us": pytest.approx(1340.0),
        "total_host_us": pytest.approx(260.0),
    }


def test_text_summary_lines():
    result = separate_runner().invoke(main, ["top", str(COPY), "-k", "1", "--copy-time"])
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[1] == "total device time 820 µs, total host time 110 µs"
    # copies: copy 80 + copy_back 50 = 130, mean 65; waits 40 + 20 = 60, mean 30
    assert lines[2] == (
        "copy time (2 copy operators): total 130 µs, mean 65.0 µs; "
        "copy wait time: total 60.0 µs, mean 30.0 µs"
    )


def test_text_output_in_chinese_keeps_the_columns_lined_up():
    """--lang zh: the profile line, summary, headings and warnings in Chinese; a heading of
    Chinese characters takes two terminal columns each, so the numbers below it still end
    where it ends. JSON keeps its keys whatever the language."""
    args = ["top", str(COPY), "-k", "2", "--copy-time", "--show-host", "--lang", "zh"]
    result = separate_runner().invoke(main, args)
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].endswith("：2 行")
    assert lines[1] == "设备总耗时 820 µs，Host 总耗时 110 µs"
    assert lines[2] == (
        "拷贝耗时（2 个拷贝算子）：总计 130 µs，平均 65.0 µs；"
        "拷贝等待耗时：总计 60.0 µs，平均 30.0 µs"
    )
    head, first = lines[3], lines[5]
    assert head.split()[:4] == ["名称", "算子类型", "核类型", "次数"]

    def columns(text: str) -> int:  # terminal columns
        return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)

    def end_of(line: str, text: str) -> int:
        return columns(line[: line.index(text) + len(text)])

    def start_of(line: str, text: str) -> int:
        return columns(line[: line.index(text)])

    assert end_of(head, "耗时 (µs)") == end_of(first, " 400")  # conv's time, right-aligned
    assert start_of(head, "输入 shape") == start_of(first, "[32,3,32,32]")  # text, left-aligned
    assert "Host 侧（host_ops）：2 行" in lines
    english = run(str(COPY), "-k", "2")
    args = ["top", str(COPY), "-k", "2", "--format", "json", "--lang", "zh"]
    chinese = json.loads(separate_runner().invoke(main, args).stdout)["profiles"][0]
    assert chinese["rows"] == english["rows"] and chinese["summary"] == english["summary"]


def test_top_end_key_kern_ranks_the_wait_before_the_kernel():
    profile = run(str(COPY), "--top-end-key", "kern")
    assert profile["time_key"] == "kern"
    # kern - start: copy 40 (gpu0:1's, not gpu0:0's 10), conv 30, copy_back 20, fc 10,
    # cast 5, onehot 2
    assert names(profile["rows"]) == ["copy", "conv", "copy_back", "fc", "cast", "onehot"]
    assert [r["time_us"] for r in profile["rows"]] == pytest.approx([40, 30, 20, 10, 5, 2])
    assert profile["rows"][0]["share"] == pytest.approx(40 / DEVICE_TOTAL)  # over end times
    assert profile["rows"][-1]["cumulative_us"] == pytest.approx(107)  # 40+30+20+10+5+2
    assert profile["summary"]["total_device_us"] == pytest.approx(DEVICE_TOTAL)
    # the time bounds apply to the time ranked: waits of at least 15 µs
    rows = run(str(COPY), "--top-end-key", "kern", "--min-time", "15")["rows"]
    assert names(rows) == ["copy", "conv", "copy_back"]
    # aggregated by type: Copy 40 + 20 = 60
    rows = run(str(COPY), "--top-end-key", "kern", "--aggregate", "sum")["rows"]
    assert (rows[0]["op_type"], rows[0]["count"]) == ("Copy", 2)
    assert rows[0]["time_us"] == pytest.approx(60)
    # end, the default, is the whole operator: conv 400 first
    assert run(str(COPY))["rows"][0]["time_us"] == pytest.approx(400)


def test_input_dtype_keeps_operators_with_an_input_of_that_type():
    # Float16 inputs: copy, fc, onehot; by time fc 200, copy 80, onehot 30
    assert names(run(str(COPY), "--input-dtype", "Float16")["rows"]) == ["fc", "copy", "onehot"]
    assert names(run(str(COPY), "--input-dtype", "float16")["rows"]) == ["fc", "copy", "onehot"]
    assert names(run(str(COPY), "--input-dtype", "Int32")["rows"]) == ["onehot"]
    # Float32: conv 400, cast 60, copy_back 50 (onehot's Float16;Int32 has no Float32)
    assert names(run(str(COPY), "--input-dtype", "Float32")["rows"]) == [
        "conv",
        "cast",
        "copy_back",
    ]
    assert run(str(COPY), "--input-dtype", "Float64")["rows"] == []
    # the timeline records a dtype on HostToDevice only: its two 50 µs copies
    rows = run(str(TIMELINE), "--input-dtype", "Float32")["rows"]
    assert names(rows) == ["HostToDevice", "HostToDevice"]
    assert [r["time_us"] for r in rows] == pytest.approx([50, 50])


def test_input_dtype_on_an_ascend_op_summary():
    """msprof's op_summary records 'Input Data Types' (FLOAT16;FLOAT16): the same filter."""
    table = next((MSPROF / "mindstudio_profiler_output").glob("op_summary_*.csv"))
    with table.open(encoding="utf-8") as handle:
        ops = list(csv.DictReader(handle))
    expected = [
        float(r["Task Duration(us)"])
        for r in ops
        if "FLOAT16" in [d.strip() for d in r["Input Data Types"].split(";")]
    ]
    rows = run(str(MSPROF), "--input-dtype", "float16", "-k", "0")["rows"]
    assert 0 < len(rows) < len(ops)
    assert sorted(r["time_us"] for r in rows) == pytest.approx(sorted(expected))


def test_copy_time_sums_the_copy_operators_the_filters_keep():
    summary = run(str(COPY), "--copy-time")["summary"]
    # copy 80 + copy_back 50 = 130, mean 65; waits 40 + 20 = 60, mean 30
    assert summary["copy_count"] == 2
    assert summary["copy_us"] == pytest.approx(130)
    assert summary["copy_mean_us"] == pytest.approx(65)
    assert summary["copy_wait_us"] == pytest.approx(60)
    assert summary["copy_wait_mean_us"] == pytest.approx(30)
    # profile_analyze takes the copies among the filtered operators: only copy has Float16
    summary = run(str(COPY), "--copy-time", "--input-dtype", "Float16")["summary"]
    assert summary["copy_count"] == 1
    assert (summary["copy_us"], summary["copy_wait_us"]) == pytest.approx((80, 40))
    # ... but not the time bounds: copy_back (50 µs) stays with --min-time 60
    assert run(str(COPY), "--copy-time", "--min-time", "60")["summary"]["copy_us"] == pytest.approx(
        130
    )
    summary = run(str(COPY), "--copy-time", "--type", "Conv")["summary"]
    assert summary["copy_count"] == 0 and summary["copy_us"] == 0
    assert summary["copy_mean_us"] is None and summary["copy_wait_mean_us"] is None
    # the timeline: 2 x HostToDevice 50 + 2 x Memcpy 40 = 180, mean 45; no kern times
    summary = run(str(TIMELINE), "--copy-time")["summary"]
    assert summary["copy_count"] == 4
    assert (summary["copy_us"], summary["copy_mean_us"]) == pytest.approx((180, 45))
    assert summary["copy_wait_us"] is None


def test_show_host_ranks_the_host_side_with_the_same_options():
    profile = run(str(COPY), "--show-host")
    host = profile["host_rows"]
    # host end - start: conv 30, fc 25, copy 20, copy_back 15, cast 10, onehot 10
    assert names(host) == ["conv", "fc", "copy", "copy_back", "cast", "onehot"]
    assert [r["time_us"] for r in host] == pytest.approx([30, 25, 20, 15, 10, 10])
    assert host[0]["share"] == pytest.approx(30 / HOST_TOTAL)
    assert host[0]["op_type"] == "ConvolutionForward"  # from the device operator of that name
    # the filters and the end key apply to the host table too: Float16 operators' host
    # kern - start: copy 8, fc 3, onehot 1
    host = run(str(COPY), "--show-host", "--input-dtype", "Float16", "--top-end-key", "kern")[
        "host_rows"
    ]
    assert names(host) == ["copy", "fc", "onehot"]
    assert [r["time_us"] for r in host] == pytest.approx([8, 3, 1])
    host = run(str(COPY), "--show-host", "--aggregate", "sum", "-k", "1")["host_rows"]
    assert (host[0]["op_type"], host[0]["time_us"]) == ("Copy", pytest.approx(35))  # 20 + 15
    # the timeline's host side is the worker's execution of each operator: 100 and 30 µs
    host = run(str(TIMELINE), "--show-host", "--aggregate", "sum")["host_rows"]
    assert [(r["op_type"], r["count"], r["time_us"]) for r in host] == [
        ("ConvolutionForward", 2, 200),
        ("Elemwise", 2, 60),
    ]
    assert "host_rows" not in run(str(COPY))


def test_show_host_in_text_and_csv():
    result = separate_runner().invoke(main, ["top", str(COPY), "--show-host", "-k", "2"])
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    at = lines.index("host (host_ops): 2 rows")
    assert lines[at + 3].split()[:4] == ["conv", "ConvolutionForward", "1", "30.0"]
    result = separate_runner().invoke(
        main, ["top", str(COPY), "--show-host", "-k", "2", "--format", "csv"]
    )
    table = list(csv.DictReader(io.StringIO(result.stdout)))
    assert [(r["side"], r["name"]) for r in table] == [
        ("device", "conv"),
        ("device", "fc"),
        ("host", "conv"),
        ("host", "fc"),
    ]


def test_kineto_host_total_counts_nested_operators_once():
    """On a real Kineto trace the host rows are aten operators, nested in each other
    (aten::to > aten::_to_copy > ...): the total host time is their union per thread."""
    with gzip.open(ALEXNET, "rt", encoding="utf-8") as fh:
        events = json.load(fh)["traceEvents"]
    spans = defaultdict(list)
    for e in events:
        if e.get("ph") == "X" and e.get("cat") == "cpu_op":
            spans[e["tid"]].append((float(e["ts"]), float(e["ts"]) + float(e["dur"])))
    union = 0.0
    for intervals in spans.values():
        end = float("-inf")
        for start, stop in sorted(intervals):
            union += max(0.0, stop - max(start, end))
            end = max(end, stop)
    profile = run(str(ALEXNET), "--show-host", "-k", "3")
    assert profile["summary"]["total_host_us"] == pytest.approx(union)
    assert sum(len(v) for v in spans.values()) > len(profile["host_rows"]) == 3
    assert profile["host_rows"][0]["name"].startswith("aten::")


@pytest.mark.parametrize(
    "path, option, needs",
    [
        (TIMELINE, ["--top-end-key", "kern"], "--top-end-key kern needs"),
        (ALEXNET, ["--top-end-key", "kern"], "--top-end-key kern needs"),
        (ALEXNET, ["--input-dtype", "float"], "--input-dtype needs"),
        (MSPROF, ["--show-host"], "--show-host needs"),
    ],
    ids=["timeline-kern", "kineto-kern", "kineto-dtype", "msprof-host"],
)
def test_an_option_the_format_has_no_data_for_is_one_line_and_exit_2(path, option, needs):
    result = separate_runner().invoke(main, ["top", str(path), *option])
    assert result.exit_code == 2 and result.stdout == ""
    (line,) = [x for x in result.stderr.splitlines() if not x.startswith("advisor: warning:")]
    assert needs in line and str(path) in line and "lacks" in line


def test_one_profile_lacking_the_data_does_not_hide_the_others():
    result = separate_runner().invoke(
        main, ["top", str(COPY), str(TIMELINE), "--top-end-key", "kern", "--format", "json"]
    )
    assert result.exit_code == 0
    assert "--top-end-key kern needs" in result.stderr and str(TIMELINE) in result.stderr
    (profile,) = json.loads(result.stdout)["profiles"]
    assert profile["path"] == str(COPY)


def test_help_lists_the_options():
    out = CliRunner().invoke(main, ["top", "--help"]).output
    for option in ("--input-dtype", "--top-end-key", "--copy-time", "--show-host"):
        assert option in out


def test_per_type_statistics_lack_what_the_options_need():
    """A profile with only op_stats (per-type totals, no executions): the summary still gives
    the total device time (2 x 30 + 1 x 40 = 100 µs), the options needing per-execution data
    say so."""
    profile = Profile(ProfileMeta("stats_only", "/data/stats"))
    profile.tables["op_stats"] = conform(
        "op_stats",
        pd.DataFrame(
            {
                "op_type": ["MatMul", "Cast"],
                "core_type": ["AI_CORE", "AI_VECTOR_CORE"],
                "count": [2, 1],
                "total_us": [60.0, 40.0],
                "ratio": [0.6, 0.4],
            }
        ),
    )
    assert summary(profile, TopOptions()) == {"total_device_us": 100.0, "total_host_us": None}
    with pytest.raises(MissingData, match="--copy-time needs"):
        summary(profile, TopOptions(), copy_time=True)
    with pytest.raises(MissingData, match="--top-end-key kern needs"):
        rank_operators(profile, TopOptions(end_key="kern"))
    with pytest.raises(MissingData, match="--input-dtype needs"):
        rank_operators(profile, TopOptions(input_dtype="float16"))
    with pytest.raises(MissingData, match="--show-host needs"):
        rank_host_operators(profile, TopOptions())
