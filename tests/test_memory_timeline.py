"""The PyTorch profiler's memory timeline exports (plugins/memory_timeline.py, MEM-010): both
shapes of our own torch 2.13 run (tests/fixtures/memory_timeline_own), checked against the
file read here with plain json."""

from __future__ import annotations

import gzip
import json
import random
import tracemalloc
from html import unescape
from pathlib import Path

import pytest
from click.testing import CliRunner
from clirunner import separate_runner
from conftest import FIXTURE_DIR, REAL

import advisor
from advisor.cli import main
from advisor.compare import compare
from advisor.errors import UnreadableInput
from advisor.model import contract_problems
from advisor.render.messages import message
from advisor_plugins.memory_timeline import KINDS, MemoryTimelineReader, read_peak

OWN = FIXTURE_DIR / "memory_timeline_own"
SIZES = OWN / "mlp_adam_cpu.json.gz"
RAW = OWN / "mlp_adam_cpu.raw.json.gz"
READER = MemoryTimelineReader()


def kinds_of(path: Path) -> dict[str, dict]:
    (profile,) = READER.read(path)
    assert contract_problems(profile) == []
    table = profile.tables["memory_kinds"]
    return {row["kind"]: row for row in table.to_dict("records")}


def test_both_shapes_give_the_kinds_at_the_peak_the_file_holds():
    """[times, sizes]: the row whose kinds add up to the most (the first such) is the peak;
    the raw events added up per kind give the same figures."""
    times, sizes = json.loads(gzip.decompress(SIZES.read_bytes()))
    totals = [sum(row[1:]) for row in sizes]
    peak_row = sizes[totals.index(max(totals))][1:]
    expected = {
        kind: (float(peak_row[k]), peak_row[k] / max(totals), float(max(r[k + 1] for r in sizes)))
        for k, kind in enumerate(KINDS)
    }
    for path in (SIZES, RAW):
        got = kinds_of(path)
        assert {
            k: (r["at_peak_bytes"], pytest.approx(r["peak_share"]), r["max_bytes"])
            for k, r in got.items()
        } == expected
    assert max(totals) == 34_281_672  # about 33 MiB: parameters, Adam's state, gradients


def test_the_raw_events_are_added_up_per_kind_with_releases_negative():
    events = json.loads(gzip.decompress(RAW.read_bytes()))
    held = [0] * len(KINDS)
    for _, _, delta, kind in events:
        held[kind] += delta
    assert min(held) >= 0  # every release follows its tensor's creation
    assert any(delta < 0 for _, _, delta, _ in events)


def test_detect_takes_lists_of_numbers_and_leaves_traces_alone(tmp_path: Path):
    assert READER.detect(SIZES) and READER.detect(RAW)
    trace = next(REAL.glob("kineto/*.json.gz"))
    assert not READER.detect(trace)
    listed = tmp_path / "timeline.json"
    listed.write_text("[[1, 2], [3, 4]]")
    assert READER.detect(listed)
    with pytest.raises(UnreadableInput, match="not a memory timeline export"):
        READER.read(listed)


@pytest.mark.parametrize("chunk_bytes", [1, 7, 64, 997])
@pytest.mark.parametrize("indent", [None, 1])
@pytest.mark.parametrize("source", [SIZES, RAW], ids=["sizes", "raw"])
def test_any_cut_of_the_file_gives_the_figures_of_the_whole(
    tmp_path: Path, source: Path, indent: int | None, chunk_bytes: int
):
    """The file is read in batches: wherever the chunks end (inside a number, between a
    row's `]` and the list's, in whitespace), the figures are those of the whole file."""
    whole = read_peak(source).rows()
    assert len(whole) == len(KINDS)
    path = tmp_path / "timeline.json"
    path.write_text(json.dumps(json.loads(gzip.decompress(source.read_bytes())), indent=indent))
    assert read_peak(path, chunk_bytes=chunk_bytes).rows() == whole


@pytest.mark.parametrize("chunk_bytes", [16, 4096])
def test_raw_events_of_one_microsecond_are_one_moment(tmp_path: Path, chunk_bytes: int):
    """Events at the same µs are one moment (a tensor made and freed within it never shows),
    the tensors alive before the profile (time -1) join its first moment."""
    events = [
        [-1, 1, 100, 0],  # a parameter, alive before
        [-1, 1, 50, 1],  # optimizer state, alive before
        [1_000, 1, 30, 4],  # an activation made and freed within 1 µs
        [1_500, 3, -30, 4],
        [2_000, 1, 500, 3],  # a temporary made and freed within 2 µs
        [2_900, 3, -500, 3],
        [3_000, 1, 10, 5],  # a gradient
    ]
    path = tmp_path / "memory.raw.json"
    path.write_text(json.dumps(events))
    rows = {row["kind"]: row for row in read_peak(path, chunk_bytes=chunk_bytes).rows()}
    assert {k: r["at_peak_bytes"] for k, r in rows.items() if r["at_peak_bytes"]} == {
        "parameter": 100.0,
        "optimizer_state": 50.0,
        "gradient": 10.0,
    }
    assert rows["parameter"]["peak_share"] == 100 / 160
    assert rows["activation"]["max_bytes"] == rows["temporary"]["max_bytes"] == 0.0


def test_memory_follows_a_batch_not_the_file(tmp_path: Path):
    """Ten times the events, the same peak of traced memory: well under the file's size (the
    whole document decoded at once held some ten times it)."""
    read_peak(RAW)  # numpy and msgspec imported, the decoders made

    def traced_peak(count: int) -> tuple[int, int]:
        rng, time, events = random.Random(count), 10**18, []
        for i in range(count):
            time += rng.randint(100, 3_000)
            events.append([time, 1 + 2 * (i % 2), 4096 * (-1) ** i, (i // 2) % len(KINDS)])
        path = tmp_path / f"memory_{count}.raw.json"
        path.write_text(json.dumps(events))
        tracemalloc.start()
        try:
            read_peak(path, chunk_bytes=64 * 1024)
            return tracemalloc.get_traced_memory()[1], path.stat().st_size
        finally:
            tracemalloc.stop()

    small, _ = traced_peak(30_000)
    large, size = traced_peak(300_000)
    assert large < 1.5 * small
    assert large < size / 8


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("[[1, 2, 3, 4], [5, 6", "the file ends inside a row"),
        ("[[1, 2, 3, 9]]", "an event of kind 9"),
        ("[[0, 1], [[0, 1, 2, 3, 4, 5, 6, 7, 8]]]", "2 times but 1 rows of sizes"),
        ("[[1, 2, 3, 4], [5, 6, 7, 0.5]]", "rows of 4 whole numbers: Expected `int`, got `float`"),
        ('[[1, 2, 3, 4], [5, 6, 7, "0"]]', "rows of 4 whole numbers: Expected `int`, got `str`"),
        ("[[1, 2, 3, 4], [5, 6, 7]]", "rows of 4 whole numbers"),
        ("[[1, 2, 3, 4]] [5]", "more after the end of the document"),
        ("[[1, 2, 3, 4], [5, 6, 7, 0]", "',' expected, found the end of the file"),
        ("[[1, 2], [3", "a list of rows holding something other than a row"),
        ("[[1, 2, , 3], [[0, 1, 2, 3, 4, 5, 6, 7, 8]]]", "not a JSON list of whole numbers"),
        ("[[1, 2], [3, 4]]", "a list of rows holding something other than a row"),
    ],
)
def test_a_broken_export_is_one_line_naming_the_file(tmp_path: Path, content: str, problem: str):
    path = tmp_path / "memory.json"
    path.write_text(content)
    result = separate_runner().invoke(main, ["run", str(path), "-o", str(tmp_path / "out")])
    assert result.exit_code == 3
    assert "Traceback" not in result.stderr
    assert f"{path}: " in result.stderr and problem in result.stderr


def test_mem_010_is_silent_on_the_small_run_and_names_the_optimizer_state_below_its_limit():
    """The own MLP peaks at 33 MiB, under MEM-010's 1 GiB: it passes; with the limit at 0 it
    names Adam's state, 37.0% of the peak, and gives the sharding advice only."""
    (quiet,) = advisor.analyze(SIZES).analyses
    assert quiet.evaluation.outcomes["MEM-010"].value == "passed"
    (loud,) = advisor.analyze(SIZES, params={"MEM-010": {"min_peak_bytes": 0}}).analyses
    (finding,) = [f for f in loud.findings if f.rule.id == "MEM-010"]
    assert finding.values["top_kind"] == "optimizer_state"
    assert "holding the most is the optimizer state: 12.1 MiB (37.0%" in finding.message
    assert any("ZeRO stage 1" in s for s in finding.suggestions)
    assert not any("activation checkpointing" in s for s in finding.suggestions)


def test_a_folder_of_exports_is_a_profile_each(tmp_path: Path):
    """Both shapes of both runs (batch 256 and 1024)."""
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["run", str(OWN), "-o", str(out), "--format", "json"])
    assert result.exit_code == 0, result.output
    reports = [json.loads(p.read_text()) for p in sorted(out.glob("prof_rule_*.json"))]
    assert sorted(r["profile"]["source_format"] for r in reports) == ["memory-timeline"] * 4


def test_two_exports_compare_their_peaks_and_the_kinds_holding_them():
    """Batch 1024 against 256: the peak moves into the backward pass, where autograd's own
    tensors (8 MiB) are held; compare_memory_kinds is each export's memory_kinds side by side,
    and CMP-006 (the peak grew 10.7%, over its 10%) names that kind, in both languages."""
    larger = OWN / "mlp_adam_cpu_batch1024.json.gz"
    result = compare(SIZES, larger)
    overall = result.table("compare_overall").set_index("metric")
    assert overall.loc["memory_peak", ["base", "comparison"]].tolist() == [34_281_672, 37_949_632]
    table = result.table("compare_memory_kinds").set_index("kind")
    for path, side in ((SIZES, "base"), (larger, "comp")):
        for kind, row in kinds_of(path).items():
            assert table.loc[kind, f"{side}_at_peak_bytes"] == row["at_peak_bytes"]
            assert table.loc[kind, f"{side}_max_bytes"] == row["max_bytes"]
    assert (table["diff_bytes"] == table["comp_at_peak_bytes"] - table["base_at_peak_bytes"]).all()
    assert table.index[0] == "autograd_detail" and table["diff_bytes"].iloc[0] == 8_388_608
    (finding,) = [f for f in result.evaluation.findings if f.rule.id == "CMP-006"]
    assert "the peak is autograd's own tensors (+8.00 MiB;" in finding.message
    (chinese,) = [
        f for f in compare(SIZES, larger, lang="zh").evaluation.findings if f.rule.id == "CMP-006"
    ]
    assert "峰值时占用增加最多的张量类型是 autograd 内部张量" in chinese.message


@pytest.mark.parametrize(
    ("lang", "heading", "first"),
    [
        ("en", "Memory at the peak by kind of tensor", "optimizer state"),
        ("zh", "峰值时各类张量占用的内存", "优化器状态"),
    ],
)
def test_the_report_shows_what_each_kind_held_at_the_peak(
    tmp_path: Path, lang: str, heading: str, first: str
):
    """MEM-010 is silent on a 33 MiB peak, but the report still shows the kinds at the peak
    (as the JSON report's metrics hold them), largest first, each with its share and its own
    highest (a kind that never held memory is left out; here each did)."""
    out = tmp_path / "out"
    args = ["run", str(RAW), "-o", str(out), "--format", "json,html", "--lang", lang]
    assert CliRunner().invoke(main, args).exit_code == 0
    (report_path,) = out.glob("prof_rule_*.json")
    metrics = json.loads(report_path.read_text())["metrics"]
    assert metrics["memory_kinds"] == [
        {k: row[k] for k in ("kind", "at_peak_bytes", "peak_share", "max_bytes")}
        for row in kinds_of(RAW).values()
    ]
    html = (out / "report.html").read_text(encoding="utf-8")
    chart = html[html.index(heading) :]
    labels = [unescape(p.split("<", 1)[0]) for p in chart.split('text-anchor="end">')[1:]]
    held = sorted(
        (row for row in kinds_of(RAW).values() if row["max_bytes"] > 0),
        key=lambda row: -row["at_peak_bytes"],
    )
    expected = [message(lang, f"memory_kind.{row['kind']}") for row in held]
    assert labels[: len(expected)] == expected and expected[0] == first
    assert len(held) == len(KINDS)  # each kind held memory at some time in this run
    assert "12.1 MiB · 37.0%" in chart


def test_reports_of_other_profiles_have_no_memory_kinds(tmp_path: Path):
    out = tmp_path / "out"
    trace = next(REAL.glob("kineto/*.json.gz"))
    assert CliRunner().invoke(main, ["run", str(trace), "-o", str(out), "-q"]).exit_code == 0
    for path in out.glob("prof_rule_*.json"):
        assert "memory_kinds" not in json.loads(path.read_text())["metrics"]
    assert "峰值时各类张量" not in (out / "report.html").read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("lang", "line"),
    [
        ("en", "Memory at the peak 32.7 MiB: optimizer state 37.0%, parameters 30.7%, gradients"),
        ("zh", "峰值内存 32.7 MiB：优化器状态 37.0%，参数 30.7%，梯度 18.5%"),
    ],
)
def test_the_terminal_says_what_held_the_peak(tmp_path: Path, lang: str, line: str):
    """The kinds holding 1% of the peak or more, largest first (temporaries' 4 B are left to
    report.html)."""
    args = ["run", str(SIZES), "-o", str(tmp_path / "out"), "--lang", lang]
    result = separate_runner().invoke(main, args, env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.stderr
    assert line in result.stdout
    assert ("temporary" not in result.stdout) and ("临时张量" not in result.stdout)
