"""The per-step timeline: the timeline_lanes table (plugins/critical_path.py) and its drawing in
report.html (advisor/render/timeline.py): lanes that partition each step, a bounded number of
steps and rows, a lane group per lane, numbered markers for the findings' windows, no script.
"""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from conftest import DEMO, REAL

import advisor
from advisor.cli import main
from advisor.model import Profile, ProfileMeta, conform
from advisor.render.html import render_html
from advisor_plugins.critical_path import TIMELINE_RESOLUTION, TIMELINE_STEPS, timeline_lanes

KINETO = REAL / "kineto/timeline_analysis__sampled_rank-0.json.gz"
LANES = ("compute", "communication", "data", "host", "idle")


def per_step(table: pd.DataFrame) -> pd.DataFrame:
    return table.groupby(["step", "lane"])["busy_us"].sum().unstack(fill_value=0.0)


def test_lanes_partition_each_step_and_follow_the_device_timeline() -> None:
    """At each instant the device is in one lane: per step the lanes add up to the step, and
    compute is the union of the non-communication tasks inside it."""
    (analysis,) = advisor.analyze(KINETO).analyses
    lanes = analysis.tables["timeline_lanes"]
    steps = analysis.tables["steps"].set_index("step")
    sums = per_step(lanes)
    assert list(sums.index) == list(steps.index)
    assert sums.sum(axis=1).to_numpy() == pytest.approx(
        (steps["end_us"] - steps["start_us"]).to_numpy()
    )
    ops = analysis.tables["device_ops"]
    compute = ops[ops["category"] != "communication"]
    for step, row in steps.iterrows():
        lo, hi = row["start_us"], row["end_us"]
        # union of the compute tasks clipped to the step, by a plain sweep
        spans = sorted(
            (max(s, lo), min(s + d, hi))
            for s, d in zip(compute["start_us"], compute["duration_us"])
            if s < hi and s + d > lo
        )
        union, reach = 0.0, lo
        for s, e in spans:
            if e > reach:
                union += e - max(s, reach)
                reach = e
        assert sums.loc[step, "compute"] == pytest.approx(union)
    assert (lanes["busy_us"] <= lanes["end_us"] - lanes["start_us"] + 1e-6).all()
    bounds = analysis.tables["step_bounds"].set_index("step")
    assert sums["host"].to_numpy() == pytest.approx(bounds["host_us"].to_numpy())


def test_many_steps_show_the_slowest_with_its_neighbours() -> None:
    (analysis,) = advisor.analyze(DEMO).analyses
    steps = analysis.tables["steps"]
    assert len(steps) > TIMELINE_STEPS
    shown = sorted(analysis.tables["timeline_lanes"]["step"].dropna().unique())
    assert len(shown) == TIMELINE_STEPS
    assert shown == list(range(shown[0], shown[0] + TIMELINE_STEPS)), "consecutive steps"
    slowest = int(steps.loc[(steps["end_us"] - steps["start_us"]).idxmax(), "step"])
    assert slowest in shown
    # the gaps between the steps shown are drawn too: msprof's Data Aug Bound is data loading
    gaps = analysis.tables["timeline_lanes"]
    gaps = gaps[gaps["step"].isna()]
    assert set(gaps["lane"]) >= {"data"}
    by_step = steps.set_index("step")
    for step in shown[1:]:  # the gap before each step but the first shown
        lo, hi = by_step.loc[step - 1, "end_us"], by_step.loc[step, "start_us"]
        gap = gaps[(gaps["start_us"] >= lo) & (gaps["end_us"] <= hi)]
        idle = gap.loc[gap["lane"].isin(["data", "host", "idle"]), "busy_us"].sum()
        assert gap["busy_us"].sum() == pytest.approx(hi - lo)
        data = gap.loc[gap["lane"] == "data", "busy_us"].sum()
        assert data == pytest.approx(min(by_step.loc[step, "data_aug_bound_us"], idle))


def test_a_million_short_kernels_stay_a_small_table() -> None:
    """The table is bounded by the chart's resolution, not by the number of tasks."""
    n = 1_000_000
    rng = np.random.default_rng(7)
    start = np.sort(rng.uniform(0, 1e6, n))
    ops = pd.DataFrame(
        {
            "name": "k",
            "start_us": start,
            "duration_us": rng.uniform(0.1, 0.8, n),
            "category": np.where(rng.random(n) < 0.1, "communication", "compute"),
        }
    )
    steps = pd.DataFrame({"step": [1, 2], "start_us": [0.0, 5e5], "end_us": [5e5, 1e6]})
    profile = Profile(
        ProfileMeta("synthetic", "synthetic"),
        {"device_ops": conform("device_ops", ops), "steps": conform("steps", steps)},
    )
    timeline_lanes(profile)
    lanes = profile.tables["timeline_lanes"]
    assert len(lanes) <= len(LANES) * (TIMELINE_RESOLUTION + 2)
    sums = per_step(lanes)
    assert sums.sum(axis=1).to_numpy() == pytest.approx([5e5, 5e5])
    assert sums["compute"].sum() > 0 and sums["communication"].sum() > 0


class SvgReader(HTMLParser):
    """The timeline's SVG as the page holds it: lane groups, markers, scripts."""

    def __init__(self) -> None:
        super().__init__()
        self.depth = 0
        self.lanes: list[str] = []
        self.rects: dict[str, int] = {}
        self.markers: list[dict[str, str]] = []
        self.scripts = 0
        self.inside_script = 0
        self.lane: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "svg" and a.get("class") == "timeline":
            self.depth = 1
            return
        if not self.depth:
            return
        self.depth += 1
        self.inside_script += tag == "script"
        self.scripts += tag == "script" or any(k.startswith("on") for k in a)
        if tag == "g" and a.get("class") == "lane":
            self.lane = a["data-lane"]
            self.lanes.append(self.lane)
        elif tag == "rect" and self.lane is not None:
            self.rects[self.lane] = self.rects.get(self.lane, 0) + 1
        elif tag == "a" and a.get("class") == "marker":
            self.markers.append(a)

    def handle_endtag(self, tag: str) -> None:
        if not self.depth:
            return
        self.depth -= 1
        if tag == "g":
            self.lane = None


def timeline_of(html: str) -> SvgReader:
    reader = SvgReader()
    reader.feed(html)
    return reader


def test_report_draws_a_lane_group_per_lane_and_a_marker_per_window(tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["run", str(DEMO), "-o", str(out), "-q", "--lang", "en"])
    assert result.exit_code == 0, result.output
    html = (out / "report.html").read_text(encoding="utf-8")
    svg = timeline_of(html)
    (analysis,) = advisor.analyze(DEMO).analyses
    lanes = analysis.tables["timeline_lanes"]
    assert svg.lanes == [lane for lane in LANES if lane != "data" or lane in set(lanes["lane"])]
    assert svg.rects == lanes.groupby("lane").size().to_dict()
    assert svg.scripts == 0
    shown = set(lanes["step"].dropna())
    inside = [f for f in analysis.findings if f.window is not None and f.window.step in shown]
    outside = [f for f in analysis.findings if f.window is not None and f.window.step not in shown]
    assert inside and outside, "the demo has windows in and out of the steps shown"
    assert sorted(int(m["data-finding"]) for m in svg.markers) == sorted(f.rank for f in inside)
    anchors = {m["href"].lstrip("#") for m in svg.markers}
    assert all(f'id="{a}"' in html for a in anchors), "each marker links to its finding"
    for finding in outside:
        assert f"#{finding.rank} (Step {finding.window.step})" in html
    assert f"{TIMELINE_STEPS} of {len(analysis.tables['steps'])} steps" in html


def test_no_timeline_without_one_and_nothing_breaks() -> None:
    """A report without timeline rows (a cluster report, an older prof_rule JSON) renders
    without the figure."""
    (analysis,) = advisor.analyze(DEMO).analyses
    report: dict[str, Any] = {**analysis.report}
    report["metrics"] = {k: v for k, v in report["metrics"].items() if k != "timeline"}
    html = render_html([report])
    assert 'class="timeline"' not in html and timeline_of(html).lanes == []
