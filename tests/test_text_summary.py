"""The terminal summary a user reads first: width, colour, suggestions, one unit per column,
pointers at the files written, and many ranks led by the cluster's verdict."""

from __future__ import annotations

import copy
import io
import json
import re
import shutil
import unicodedata
from collections.abc import Sequence
from importlib import resources

import jsonschema
import pytest
from conftest import FIXTURE_DIR
from hypothesis import given, settings
from hypothesis import strategies as st

import advisor
from advisor.render.html import DETAILED_RANKS, render_html
from advisor.render.text import (
    MAX_RANK_DETAILS,
    color_enabled,
    display_width,
    render_text,
    terminal_width,
    written_line,
)
from advisor.units import column_unit, fmt_us, fmt_us_as

SCHEMA = json.loads(resources.files("advisor").joinpath("schemas/report.schema.json").read_text())
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def cells(line: str) -> int:
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in line)


def finding(
    rank: int, severity: str, title: str, impact_us: float, suggestions: list[str] | None = None
) -> dict:
    return {
        "Rule Subtype": title,
        "Rule Suggestion": "",
        "Tuning Data": [],
        "rule_id": f"R{rank:03d}",
        "rule_name": f"rule_{rank}",
        "title": title,
        "severity": severity,
        "message": f"{title} costs time.",
        "values": {},
        "params": {},
        "impact_us": impact_us,
        "impact_ratio": min(impact_us / 200_000, 1.0),
        "rank": rank,
        "evidence": None,
        "suggestions": suggestions or [f"fix {title.lower()}"],
        "source": "rules/x.yaml",
    }


def report(
    findings: list[dict] = (),
    *,
    rank: int | None = None,
    fmt: str = "msprof",
    lang: str = "en",
    step_us: float = 10_000.0,
    path: str = "/data/prof",
) -> dict:
    out = {
        "status": 0,
        "data": {
            "g": [
                {"Rule Type": "t", "Rule Description": f["title"], "result": [f]} for f in findings
            ]
        },
        "advisor": {"version": "0.1.0", "generated_at": "2024-05-01T12:00:00Z", "lang": lang},
        "profile": {
            "source_format": fmt,
            "path": path,
            "framework": "pytorch",
            "device_kind": "npu",
            "files_read": [],
        },
        "summary": {"findings": len(findings), "by_severity": {}, "total_time_us": None},
        "metrics": {"steps": [{"step": 1, "duration_us": step_us}], "core_types": []},
        "not_applicable": [],
        "warnings": [],
        "rules": {},
        "rule_errors": [],
    }
    if rank is not None:
        out["profile"].update(rank=rank, device_id="0")
    jsonschema.validate(out, SCHEMA)
    return copy.deepcopy(out)


def cluster_run(n: int, serious: set[int], lang: str = "en") -> list[dict]:
    """`n` rank reports stored in string order of their folders (rank 10 before rank 2, as a
    sorted folder listing gives them), the cluster's report last."""
    ranks = sorted(range(n), key=lambda r: f"rank{r}")
    reports = []
    for r in ranks:
        found = (
            [finding(1, "high", f"Rank {r} problem", 5_000.0 + r)]
            if r in serious
            else [finding(1, "low", "Small thing", 10.0)]
        )
        reports.append(report(found, rank=r, lang=lang, path=f"/run/rank{r}", step_us=30_000.0 + r))
    verdict = report(
        [finding(1, "high", "One rank is slower than the others", 90_000.0)],
        fmt="cluster",
        lang=lang,
        path="/run",
    )
    verdict["profile"]["world_size"] = n
    return [*reports, verdict]


# --- suggestions ----------------------------------------------------------------------------


@pytest.mark.parametrize("count", [1, 2, 3])
def test_few_suggestions_are_all_shown(count: int) -> None:
    tips = [f"Suggestion number {i}." for i in range(1, count + 1)]
    out = render_text([report([finding(1, "high", "Slow", 5_000.0, tips)])])
    assert all(f"→ {tip}" in out for tip in tips)
    assert "more suggestion" not in out


@pytest.mark.parametrize("lang, more", [("en", "+3 more suggestions"), ("zh", "另有 3 条建议")])
def test_many_suggestions_show_two_and_count_the_rest(lang: str, more: str) -> None:
    tips = [f"Suggestion number {i}." for i in range(1, 6)]
    out = render_text([report([finding(1, "high", "Slow", 5_000.0, tips)], lang=lang)])
    assert "→ Suggestion number 1." in out and "→ Suggestion number 2." in out
    assert "Suggestion number 3." not in out
    assert more in out


# --- units ----------------------------------------------------------------------------------


def test_column_unit_and_fmt_us_as() -> None:
    assert column_unit([11_600.0, 9_157.0, None, float("nan")]) == "ms"
    assert column_unit([9_157.0, 12.0]) == "µs"
    assert column_unit([]) == "µs"
    assert fmt_us_as(9_157.0, "ms") == "9.16 ms"
    assert fmt_us_as(11_600.0, "ms") == "11.6 ms"
    assert fmt_us_as(1.0, "ms") == "<0.01 ms"
    assert fmt_us_as(0.0, "ms") == "0 ms"
    assert fmt_us_as(9_157.0, "µs") == "9,157 µs"
    assert fmt_us_as(None, "ms") == fmt_us(None)
    assert fmt_us(9_157.0) == "9,157 µs" and fmt_us(11_600.0) == "11.6 ms"  # unchanged


def test_impact_column_uses_one_unit() -> None:
    found = [
        finding(1, "high", "Big", 11_600.0),
        finding(2, "high", "Medium", 9_157.0),
        finding(3, "low", "Small", 12.0),
    ]
    out = render_text([report(found)])
    impacts = re.findall(r"([\d,.<]+) (µs|ms) \(", out)
    assert [unit for _, unit in impacts] == ["ms", "ms", "ms"], out
    assert "9.16 ms" in out and "9,157 µs" not in out


# --- width, colour, pointers ----------------------------------------------------------------


@pytest.mark.parametrize("columns, expected", [("70", 70), ("20", 60), ("500", 160)])
def test_terminal_width_follows_columns_within_bounds(
    monkeypatch, columns: str, expected: int
) -> None:
    monkeypatch.setenv("COLUMNS", columns)
    assert terminal_width() == expected


@pytest.mark.parametrize("width", [60, 70, 90])
def test_every_line_fits_the_width(width: int) -> None:
    tips = ["A long suggestion " * 8, "Another long one " * 6, "third", "fourth"]
    reports = [
        report(
            [
                finding(1, "high", "A long title that " * 5, 123_456.0, tips),
                finding(2, "medium", "Short", 99.0),
            ],
            lang=lang,
        )
        for lang in ("en", "zh")
    ]
    for text in (
        render_text(reports, width=width),
        render_text(cluster_run(12, {3, 10}), width=width),
    ):
        assert max(cells(line) for line in text.splitlines()) <= width, text


class _Stream(io.StringIO):
    def __init__(self, tty: bool) -> None:
        super().__init__()
        self._tty = tty

    def isatty(self) -> bool:
        return self._tty


@pytest.mark.parametrize(
    "env, tty, expected",
    [
        ({}, True, True),
        ({}, False, False),
        ({"NO_COLOR": "1"}, True, False),
        ({"FORCE_COLOR": "1"}, False, True),
        ({"FORCE_COLOR": "1", "NO_COLOR": "1"}, True, False),
        ({"FORCE_COLOR": "0"}, False, False),
        ({"NO_COLOR": ""}, True, True),  # only a non-empty NO_COLOR counts
    ],
)
def test_color_enabled(monkeypatch, env: dict[str, str], tty: bool, expected: bool) -> None:
    for name in ("NO_COLOR", "FORCE_COLOR", "TERM"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert color_enabled(_Stream(tty)) is expected


def test_notes_point_at_the_files_written() -> None:
    one = report([finding(1, "high", "Slow", 5_000.0)])
    one["not_applicable"] = [
        {
            "rule_id": "R9",
            "rule_name": "r9",
            "title": "t",
            "missing": ["x"],
            "reason": "missing",
            "collect": [],
        }
    ]
    assert "(use --format html or json for details)" in render_text([one])
    pointed = render_text([one], details=["report.html"])
    assert "1 rule skipped: data missing from this profile (details in report.html)" in pointed
    assert "--format" not in pointed
    silent = render_text([one], details=[None])
    assert "1 rule skipped: data missing from this profile\n" in silent
    assert "details" not in silent
    assert "（详见 report.html）" in render_text(
        [{**one, "advisor": {**one["advisor"], "lang": "zh"}}], details=["report.html"]
    )


def test_missing_data_is_told_with_how_to_collect_it_once() -> None:
    one = report([finding(1, "high", "Slow", 5_000.0)])
    shapes = "record_shapes=True in torch.profiler.profile"
    one["not_applicable"] = [
        {
            "rule_id": f"R{i}",
            "rule_name": f"r{i}",
            "title": "t",
            "missing": ["x"],
            "reason": "missing",
            "collect": [shapes],
        }
        for i in range(3)
    ] + [
        {
            "rule_id": "AOE-001",
            "rule_name": "aoe",
            "title": "t",
            "missing": ["aoe_ops"],
            "reason": "not_recorded",
            "collect": [],
        }
    ]
    jsonschema.validate(one, SCHEMA)
    out = render_text([one], details=[None], width=100)
    assert "3 rules skipped: data missing from this profile" in out
    assert out.count(shapes) == 1  # one setting that three rules need is said once
    assert "1 rule skipped: data this format never records" in out
    assert "AOE-001" not in out
    zh = render_text([{**one, "advisor": {**one["advisor"], "lang": "zh"}}], details=[None])
    assert "3 条规则未执行：本次性能数据缺少所需数据" in zh and "采集方法：" + shapes in zh


def test_overlapping_findings_say_what_they_stand_for_together() -> None:
    findings = [
        finding(1, "high", "Idle device", 60_000.0),
        finding(2, "high", "Task wait", 50_000.0),
    ]
    one = report(findings)
    one["summary"].update(total_time_us=100_000.0, combined_impact_us=60_000.0)
    jsonschema.validate(one, SCHEMA)
    out = render_text([one], width=120)
    assert "Together at most 60.0 ms (60.0%)" in out and "not 110 ms" in out
    apart = report(findings)
    apart["summary"].update(total_time_us=200_000.0, combined_impact_us=110_000.0)
    assert "Together" not in render_text([apart])  # nothing shared: nothing to say


def test_the_impact_column_says_it_holds_profile_totals() -> None:
    """The figure beside a title is its time over the whole profile, which beside "step
    time 10 ms" reads as per step unless the list says so: once, with the profile's time and
    its steps (only when they are all of it: warm-up steps left out of the critical path
    would make "N steps" wrong)."""
    findings = [finding(1, "high", "Data wait", 12_000.0), finding(2, "low", "Small", 10.0)]
    one = report(findings)
    one["summary"].update(
        total_time_us=100_000.0, critical_path={"steps": 10, "step_us": 10_000.0, "by_bound": {}}
    )
    jsonschema.validate(one, SCHEMA)
    lines = render_text([one], width=120).splitlines()
    legend = "  At right: time at stake in the 100 ms profiled (10 steps), and its share of the "
    assert lines[1] == legend + "time measured"
    assert lines[2].startswith("   1. HIGH   Data wait") and lines[2].endswith("12.0 ms (6.0%)")
    one["summary"]["critical_path"].update(steps=9, step_us=9_000.0)  # a warm-up step left out
    assert "in the 100 ms profiled, and its share" in render_text([one], width=120)
    one["advisor"]["lang"] = "zh"
    assert "右侧：涉及的时间（所采集的共 100 ms），及其占所度量时间的比例" in render_text([one])
    for f in findings:
        f["impact_us"] = None
    assert "At right" not in render_text([report(findings)], width=120)
    one = report(findings)
    one["summary"].update(total_time_us=100_000.0)
    assert "At right" not in render_text([one], width=120)  # no finding with a time


def test_config_in_effect_is_named_first() -> None:
    one = report([finding(1, "high", "Slow", 5_000.0)])
    one["advisor"]["config"] = "/work/project/advisor.yaml"
    jsonschema.validate(one, SCHEMA)
    out = render_text([one])
    assert out.startswith("Config: /work/project/advisor.yaml\n")
    assert "Config:" not in render_text([report([finding(1, "high", "Slow", 5_000.0)])])


def test_written_line_names_the_files() -> None:
    assert (
        written_line(["prof_rule_0.json", "report.html"], "out")
        == "Wrote report.html, prof_rule_0.json in out"
    )
    many = written_line([f"prof_rule_{r}.json" for r in range(300)] + ["report.html"], "out")
    assert many == (
        "Wrote report.html, prof_rule_0.json, prof_rule_1.json, prof_rule_2.json "
        "and 297 more in out"
    )
    assert "已写入 out" in written_line(["report.html"], "out", lang="zh")


# --- many ranks -----------------------------------------------------------------------------


def test_cluster_verdict_first_then_ranks_in_numeric_order() -> None:
    out = render_text(cluster_run(12, {3, 10}))
    lines = out.splitlines()
    assert lines[0].endswith("(cluster of 12 ranks)")
    assert "One rank is slower than the others" in lines[1]
    table = lines.index("12 ranks, in rank order")
    rows = [line.split()[0] for line in lines[table + 2 : table + 14]]
    assert rows == [str(r) for r in range(12)]
    assert out.index("One rank is slower") < out.index("Rank 3 problem")
    details = out[out.index("worst first") :]
    assert details.index("rank 10 ·") < details.index("rank 3 ·")  # worst first
    assert "rank 0 ·" not in details  # low findings only: the table is enough


def test_cluster_table_headings_in_chinese() -> None:
    lines = render_text(cluster_run(4, {1}, lang="zh")).splitlines()
    table = next(i for i, line in enumerate(lines) if line.startswith("4 个 rank（按 rank"))
    assert lines[table + 1].split() == ["rank", "平均迭代耗时", "高", "中", "低", "首要问题"]
    assert lines[table + 2].split()[:5] == ["0", "30.0", "ms", "0", "0"]


def test_cluster_table_shows_the_step_time_the_ranks_are_compared_on() -> None:
    """The ranks' table gives each rank the cluster's mean step time (over the steps no rank
    spent warming up, the figure of the cluster's findings and of report.html's chart), not
    the rank's own mean: a rank whose first step was slow (its peers' warm-up) would look
    like a straggler the cluster's analysis does not find."""
    reports = cluster_run(3, {1})
    verdict = reports[-1]
    verdict["metrics"]["ranks"] = [{"rank": r, "duration_us": 25_000.0 + 100 * r} for r in range(3)]
    jsonschema.validate(verdict, SCHEMA)
    lines = render_text(reports).splitlines()
    table = lines.index("3 ranks, in rank order")
    rows = [line.split()[:3] for line in lines[table + 2 : table + 5]]
    assert rows == [["0", "25.0", "ms"], ["1", "25.1", "ms"], ["2", "25.2", "ms"]]
    # without the cluster's figures, each rank's own (its critical path: 30,000 + rank µs)
    del verdict["metrics"]["ranks"]
    lines = render_text(reports).splitlines()
    table = lines.index("3 ranks, in rank order")
    assert lines[table + 2].split()[:3] == ["0", "30.0", "ms"]


@pytest.mark.slow
def test_three_hundred_ranks_keep_the_verdict_on_top() -> None:
    reports = cluster_run(300, set(range(0, 300, 7)))
    lines = render_text(reports, details=["report.html"] * len(reports)).splitlines()
    first = next(i for i, line in enumerate(lines) if "One rank is slower" in line)
    assert first < 20
    shown = [line for line in lines if re.search(r"· rank \d+ ·", line)]
    assert len(shown) == MAX_RANK_DETAILS
    serious = len(range(0, 300, 7))
    assert (
        f"{serious - MAX_RANK_DETAILS} more ranks with findings at or above medium "
        "(details in report.html)" in lines
    )
    assert len(lines) < 300 + 120  # one table row per rank, not a block each


class CountedReports(Sequence):
    """Reports as a run keeps them: each access unpacks one (advisor.api), so it is counted."""

    def __init__(self, reports: list[dict]) -> None:
        self.reports, self.reads = reports, 0

    def __len__(self) -> int:
        return len(self.reports)

    def __getitem__(self, index):  # noqa: ANN001, ANN204
        report = copy.deepcopy(self.reports[index])  # past the end: IndexError, no read
        self.reads += 1
        return report


def test_three_hundred_ranks_are_each_unpacked_once_for_the_table() -> None:
    """The table, the order and the notes read an outline of each rank; only the cluster and
    the worst ranks shown in full are read again, and the text is the same as from a list."""
    reports = cluster_run(300, set(range(0, 300, 7)))
    counted = CountedReports(reports)
    details = ["report.html"] * len(reports)
    assert render_text(counted, details=details) == render_text(reports, details=details)
    assert counted.reads <= len(reports) + 1 + MAX_RANK_DETAILS


def test_the_page_of_three_hundred_ranks_reads_each_report_once_for_its_table() -> None:
    """The page's order and its table of ranks come from one read of each report; only the
    sections shown in full read their reports again (the page is the same as from a list)."""
    reports = cluster_run(300, set(range(0, 300, 7)))
    counted = CountedReports(reports)
    assert render_html(counted) == render_html(reports)
    assert counted.reads <= len(reports) + DETAILED_RANKS + 1 + 4  # language, settings


def test_single_profile_prints_as_before() -> None:
    one = report([finding(1, "high", "Slow", 5_000.0)], rank=0)
    out = render_text([one])
    assert "rank order" not in out
    assert out.startswith("npu #0 · rank 0 · /data/prof (msprof)\n   1. HIGH   Slow ")


def test_colour_only_adds_escape_codes() -> None:
    reports = cluster_run(4, {1})
    coloured = render_text(reports, color=True)
    assert "\x1b[" in coloured
    assert ANSI.sub("", coloured) == render_text(reports)


def test_the_impact_column_is_explained_when_capped_or_unmeasured() -> None:
    capped = finding(1, "high", "Vector time", 14_092.0)
    capped.update(measured_us=14_092.0, uncapped_impact_us=18_100.0, impact_ratio=1.0)
    unmeasured = finding(2, "high", "Queue empty", 0.0)
    unmeasured.update(
        impact_us=None, impact_ratio=None, impact_note="queue samples tell how often, not how long"
    )
    one = report([capped, unmeasured])
    jsonschema.validate(one, SCHEMA)
    out = render_text([one], width=120)
    assert "(impact capped at the 14.1 ms measured; the rule computed 18.1 ms)" in out
    assert "(no time estimate: queue samples tell how often, not how long)" in out


@pytest.mark.parametrize(
    ("lang", "bounded", "line"),
    [
        ("en", [], "if fixed: step time 10.0 ms → 9.00 ms (−10.0%)"),
        (
            "en",
            ["communication"],
            "if fixed: step time 10.0 ms → 9.00 ms (−10.0%; at most the time of exposed "
            "communication on the critical path)",
        ),
        (
            "en",
            ["host", "idle"],
            "(−10.0%; at most the time of waiting for the host, unexplained idle time on the "
            "critical path)",
        ),
        ("zh", ["communication"], "（−10.0%；不超过未被掩盖的通信在关键路径上的时间）"),
    ],
)
def test_a_saving_below_the_time_at_stake_names_what_held_it(lang, bounded, line) -> None:
    """96% of the profile at stake and -10% if fixed read as a contradiction unless the
    reader is told the critical path's time of that kind held the saving (text and HTML)."""
    slow_link = finding(1, "high", "Slow link", 19_200.0)
    slow_link.update(step_time_if_fixed_us=9000.0, if_fixed_bounded_by=bounded)
    one = report([slow_link], lang=lang, step_us=10_000.0)
    one["summary"]["critical_path"] = {"steps": 2, "step_us": 10_000.0, "by_bound": {}}
    jsonschema.validate(one, SCHEMA)
    text = " ".join(render_text([one], width=400).split())
    page = " ".join(render_html([one]).split())
    assert line in text and line in page
    assert ("关键路径" in text or "critical path" in text) == bool(bounded)


@pytest.mark.parametrize(
    ("step_us", "after_us", "line"),
    [
        (809_431.75, 808_618.0, None),  # 0.1%, but 809 ms -> 809 ms: nothing to show
        (10_000.0, 9_989.0, "if fixed: step time 10.0 ms → 9.99 ms (−0.1%)"),
        (10_000.0, 9_991.0, None),  # under 0.1%
    ],
)
def test_an_if_fixed_line_is_left_out_when_its_times_read_the_same(step_us, after_us, line):
    """A rank of a real cluster output: 0.81 ms of small transfers in an 809 ms step read
    "if fixed: step time 809 ms → 809 ms (−0.1%)", a change the figures do not show."""
    small = finding(1, "low", "Small transfers", 810.0)
    small.update(step_time_if_fixed_us=after_us)
    one = report([small], step_us=step_us)
    one["summary"]["critical_path"] = {"steps": 1, "step_us": step_us, "by_bound": {}}
    text = " ".join(render_text([one], width=400).split())
    page = " ".join(render_html([one]).split())
    for shown in (text, page):
        if line is None:
            assert "if fixed" not in shown
        else:
            assert line in shown


def test_ranks_whose_own_findings_count_another_ranks_warm_up_are_named(tmp_path) -> None:
    """The real 4-rank MindSpore pipeline run: ranks 2 and 3 warm up for 2.2-2.4 s in step 1,
    so the cluster compares every rank over steps 2-5. Ranks 0 and 1 found no warm-up of their
    own, so their findings (made before the cluster) count step 1 too: rank 1's own 'if fixed'
    starts from 186 ms where the table says 179. The terminal and report.html say so; the
    gloo run, where no rank warms up, says nothing."""
    result = advisor.analyze(FIXTURE_DIR / "real" / "mindspore_cluster_4rank")
    text = " ".join(render_text(result.reports, width=200).split())
    assert "Each rank's own findings count its own steady steps: those of ranks 0, 1 also" in text
    page = render_html(result.reports)
    assert "those of ranks 0, 1 also count steps the cluster leaves out" in page
    for trace in (FIXTURE_DIR / "kineto_own").glob("ddp4_rank*.pt.trace.json.gz"):
        shutil.copy(trace, tmp_path)
    gloo = advisor.analyze(tmp_path)
    assert len(gloo.reports) == 5  # four ranks and the cluster
    assert "own steady steps" not in render_text(gloo.reports, width=200)
    assert "own steady steps" not in render_html(gloo.reports)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(max_codepoint=0x7F)) | st.text())
def test_display_width_counts_wide_characters_twice(text):
    expected = sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)
    assert display_width(text) == expected
    assert display_width("性能 ok") == 7
