"""HTML and text rendering of reports: ranking, escaping, self-containment, charts, wrapping."""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import re
from html.parser import HTMLParser
from importlib import resources

import jsonschema
import pandas as pd
import pytest

from advisor.hookspecs import ReportSection
from advisor.render.compare_html import render_compare_html
from advisor.render.format import column_format, fmt_tick, fmt_value
from advisor.render.html import DETAILED_RANKS, MAX_STEPS, _script, render_html
from advisor.render.text import render_text
from advisor.render.top_text import format_table
from advisor.units import fmt_bytes, fmt_num, fmt_pct, fmt_us

SCHEMA = json.loads(resources.files("advisor").joinpath("schemas/report.schema.json").read_text())

PAYLOADS = (
    "<script>alert(1)</script>",
    '"onmouseover="x',
    "</style>",
    "javascript:alert(1)",
)
HOSTILE = " ".join(PAYLOADS)


def valid(report: dict) -> dict:
    """Keeps hand-built test data honest: every report must match the published schema."""
    jsonschema.validate(report, SCHEMA)
    return report


def minimal_report(path: str = "/data/prof_empty") -> dict:
    return valid(
        {
            "status": 0,
            "data": {},
            "advisor": {"version": "0.1.0", "generated_at": "2024-05-01T12:00:00Z"},
            "profile": {
                "source_format": "msprof",
                "path": path,
                "framework": "pytorch",
                "device_kind": "npu",
                "files_read": [],
            },
            "summary": {"findings": 0, "by_severity": {}, "total_time_us": None},
            "metrics": {"steps": [], "core_types": []},
            "not_applicable": [],
            "warnings": [],
            "rules": {},
            "rule_errors": [],
        }
    )


def finding(rank: int, severity: str, title: str, impact_us: float, **extra: object) -> dict:
    f = {
        "Rule Subtype": title,
        "Rule Suggestion": "try this",
        "Tuning Data": [],
        "rule_id": f"R{rank:03d}",
        "rule_name": f"rule_{rank}",
        "title": title,
        "severity": severity,
        "message": f"{title} costs time.",
        "values": {},
        "params": {},
        "impact_us": impact_us,
        "impact_ratio": impact_us / 100_000,
        "rank": rank,
        "evidence": None,
        "suggestions": [f"fix {title.lower()}"],
        "source": "rules/x.yaml",
    }
    f.update(extra)
    return f


def full_report() -> dict:
    """Two findings stored out of rank order, with evidence, skipped rules and warnings."""
    report = copy.deepcopy(minimal_report("/data/prof_run"))
    report["profile"].update(
        device_name="Ascend910B",
        device_id="3",
        rank=3,
        world_size=8,
        files_read=["op_summary_0.csv", "step_trace_0.csv"],
    )
    second = finding(
        2,
        "medium",
        "Small operators dominate",
        4_000.0,
        message="Many tiny ops " + HOSTILE,
        values={"small_op_ratio": 0.42, HOSTILE: 1},
        params={"max_ratio": 0.3},
    )
    first = finding(
        1,
        "high",
        "AI CPU operators on the critical path",
        23_456.0,
        message=(
            "AI CPU operators took a long share of every step; moving them to AI Core kernels "
            "or replacing them with equivalent supported operators would shorten each step."
        ),
        values={"aicpu_us": 23_456.0, "aicpu_ratio": 0.2346},
        params={"max_aicpu_ratio": 0.05},
        suggestions=["Replace the AI CPU ops listed in the evidence.", "Check dtypes."],
        evidence={
            "table": "device_ops",
            "columns": ["name", "duration_us", "count"],
            "rows": [[p, 1234.5, 3] for p in PAYLOADS],
            "total_rows": 17,
        },
    )
    report["data"] = {
        "operator": [{"Rule Type": "operator", "Rule Description": "op rules", "result": [second]}],
        "computation": [
            {"Rule Type": "computation", "Rule Description": "compute rules", "result": [first]}
        ],
    }
    report["summary"] = {
        "findings": 2,
        "by_severity": {"high": 1, "medium": 1, "low": 0},
        "total_time_us": 1_000_000.0,
    }
    report["metrics"] = {
        "steps": [
            {
                "step": n,
                "duration_us": 100_000.0,
                "fp_bp_us": 70_000.0,
                "grad_refresh_us": 20_000.0,
                "data_aug_bound_us": 5_000.0,
            }
            for n in (1, 2, 3)
        ],
        "core_types": [
            {"core_type": "AI_CORE", "total_us": 600_000.0, "ratio": 0.6, "count": 1200},
            {"core_type": HOSTILE, "total_us": 400_000.0, "ratio": 0.4, "count": 80},
        ],
    }
    report["not_applicable"] = [
        {
            "rule_id": "R900",
            "rule_name": "comm_slow",
            "title": "Slow communication",
            "missing": ["comm_ops.bandwidth_gbps"],
            "reason": "missing",
            "collect": [f"profile with communication {HOSTILE}"],
        },
        {
            "rule_id": "R901",
            "rule_name": "queue_empty",
            "title": "Empty queues",
            "missing": [HOSTILE],
            "reason": "not_recorded",
            "collect": [],
        },
    ]
    report["warnings"] = [
        {
            "file": f"op_summary_{HOSTILE}.csv",
            "line": 12,
            "column": "Task Duration(us)",
            "problem": f"not a number: {HOSTILE}",
            "reader": "msprof",
        },
    ]
    report["rules"] = {"R001": {"source": "rules/x.yaml", "params": {}, "outcome": "fired"}}
    return valid(report)


class _Collector(HTMLParser):
    """Every tag and attribute the browser would see."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


def parse(page: str) -> list[tuple[str, dict[str, str | None]]]:
    collector = _Collector()
    collector.feed(page)
    return collector.tags


# --- formatting -----------------------------------------------------------------------------


def test_formatting_helpers() -> None:
    assert fmt_us(None) == fmt_us(float("nan")) == fmt_pct(None) == fmt_num(float("nan")) == "–"
    assert fmt_us(0) == "0 µs"
    assert fmt_us(3.14159) == "3.14 µs"
    assert fmt_us(1234) == "1,234 µs"
    assert fmt_us(9_999) == "9,999 µs"
    assert fmt_us(12_345) == "12.3 ms"
    assert fmt_us(1_234_567) == "1,235 ms"
    assert fmt_pct(0.1523) == "15.2%"
    assert fmt_pct(0.0001) == "<0.1%"
    assert fmt_num(1234567) == "1,234,567"
    assert fmt_value("aicpu_ratio", 0.25) == "25.0%"
    assert fmt_value("top_share", 0.8614) == "86.1%"  # a share reads like the ratios beside it
    assert fmt_value("wait_us", 20_000) == "20.0 ms"
    assert fmt_value("count", 3.0) == "3"


def test_one_rule_for_small_values_sizes_and_units() -> None:
    assert fmt_pct(-0.0001) == "-<0.1%" and fmt_pct(0.0) == "0.0%"
    assert fmt_us(0.001) == "<0.01 µs" and fmt_us(-0.001) == "-<0.01 µs"
    assert fmt_bytes(512) == "512 B" and fmt_bytes(1536) == "1.50 KiB"
    assert fmt_bytes(3 * 2**30) == "3.00 GiB" and fmt_bytes(None) == "–"
    assert fmt_value("reserved_bytes", 2**20) == "1.00 MiB"
    assert fmt_value("cpu_pct", 12.345) == "12.3%"  # already a percentage: as fmt_pct shows it
    assert fmt_value("bandwidth_gbps", 12.5) == "12.5 GB/s"
    assert fmt_value("name", "x") == "x" and fmt_value("wait_us", None) == "–"
    column = column_format("duration_us", [11_600.0, 9_157.0, None])
    assert (column.stem, column.unit) == ("duration", "ms")
    assert [column.show(v) for v in (11_600.0, 9_157.0, None)] == ["11.6", "9.16", "–"]
    assert column_format("small_op_ratio", [0.5]).unit == "%"
    assert fmt_tick(0, "ms") == "0" and fmt_tick(2_500, "ms") == "2.5 ms"


# The same values, as each renderer shows them: terminal summary, HTML report, compare page,
# `advisor top`. Before one formatter served them all, 3.14159 µs read "3.1" in `top` and
# 0.0004 of the time "0.0%" there, "3.14 µs" and "<0.1%" in the reports.
TINY_US, TINY_SHARE, LONG_US, SIZE = 3.14159, 0.0004, 12_345.0, 1.5 * 2**20


def test_every_renderer_shows_a_value_the_same_way() -> None:
    report = full_report()
    report["data"] = {
        "g": [
            {
                "Rule Type": "g",
                "Rule Description": "",
                "result": [
                    finding(
                        1,
                        "high",
                        "Tiny",
                        TINY_US,
                        impact_ratio=TINY_SHARE,
                        evidence={
                            "table": "device_ops",
                            "columns": ["name", "duration_us", "bytes"],
                            "rows": [["op", TINY_US, SIZE]],
                            "total_rows": 1,
                        },
                    )
                ],
            }
        ]
    }
    text = render_text([valid(report)], width=120)
    page = render_html([report])
    assert "3.14 µs (<0.1%)" in text
    assert "<strong>3.14 µs</strong>" in page and "&lt;0.1% of measured time" in page
    assert ">Bytes (MiB)<" in page and ">1.50<" in page  # evidence: the unit in the header

    compare = render_compare_html(report, compare_document())
    overall = compare[compare.index('id="overall-table"') :]
    cells = re.findall(r'<td class="num[^"]*">([^<]*)</td>', overall)
    assert cells[:4] == ["3.14 µs", "12.3 ms", "+12.3 ms", "&lt;0.1%"]
    assert cells[5:9] == ["1.50 MiB", "1.50 MiB", "0 B", "100.0%"]  # [4]: kernels per step
    assert '<td class="">3.14 µs</td>' in compare and '<td class="">1.50 MiB</td>' in compare

    table = format_table(
        pd.DataFrame(
            {
                "name": ["op", "big"],
                "time_us": [TINY_US, LONG_US],
                "share": [TINY_SHARE, 0.5],
                "bytes": [SIZE, SIZE],
            }
        )
    )
    head, _, *rows = table.splitlines()
    assert head.split() == ["name", "time", "(ms)", "share", "(%)", "memory", "(MiB)"]
    assert rows[0].split() == ["op", "<0.01", "<0.1", "1.50"]
    assert rows[1].split() == ["big", "12.3", "50.0", "1.50"]
    alone = format_table(pd.DataFrame({"time_us": [TINY_US]}))
    assert alone.splitlines()[2].strip() == "3.14" and "(µs)" in alone


def test_html_column_headings_come_from_the_catalog() -> None:
    report = full_report()
    first = report["data"]["computation"][0]["result"][0]
    first["evidence"] = {
        "table": "aoe_ops",
        "columns": ["mode", "diff_us", "queue", "team_column"],
        "rows": [["op", 1.0, "q", 2]],
        "total_rows": 1,
    }
    report["advisor"]["lang"] = "zh"
    page = render_html([valid(report)])
    assert ">模式<" in page and ">差值 (µs)<" in page and ">队列<" in page
    assert ">Team column<" in page  # a team rule's own column: its name made readable


def compare_document() -> dict:
    run = {
        "path": "/data/run",
        "source_format": "kineto",
        "framework": "pytorch",
        "device_kind": "gpu",
        "steps": 1,
    }
    return {
        "advisor": {"version": "0.1.0"},
        "baseline": run,
        "comparison": run,
        "options": {"use_input_shape": False, "max_kernel_num": None, "op_name_map": {}},
        "tables": {
            "compare_overall": [
                {
                    "metric": "e2e",
                    "unit": "µs",
                    "base": TINY_US,
                    "comparison": LONG_US,
                    "diff": LONG_US - TINY_US,
                    "ratio": TINY_SHARE,
                },
                {
                    "metric": "memory_peak",
                    "unit": "bytes",
                    "base": SIZE,
                    "comparison": SIZE,
                    "diff": 0.0,
                    "ratio": 1.0,
                },
            ],
            "compare_op_stats": [{"op": "op", "base_us": TINY_US, "diff_us": 1.0}],
            "compare_memory": [{"op": "op", "base_bytes": SIZE, "diff_bytes": 0.0}],
        },
    }


# --- HTML -----------------------------------------------------------------------------------


def test_html_findings_in_rank_order_with_details() -> None:
    page = render_html([full_report()])
    first = page.index("AI CPU operators on the critical path")
    second = page.index("Small operators dominate")
    assert first < second
    assert "23.5 ms" in page and "23.5%" in page  # impact in ms and % of step time
    assert "showing 4 of 17 rows" in page
    assert "Replace the AI CPU ops listed in the evidence." in page
    assert "max_aicpu_ratio" in page and "5.0%" in page  # thresholds next to measured values
    for heading in (
        "Data missing from this profile",
        "Reader warnings",
        "Step breakdown",
        "Time by core type",
    ):
        assert heading in page
    assert "R900" in page and "comm_ops.bandwidth_gbps" in page
    assert "Rule errors" not in page  # only shown when there are some
    assert "Ascend910B #3" in page and "rank 3/8" in page


@pytest.mark.parametrize("payload", PAYLOADS)
def test_html_escapes_profile_strings(payload: str) -> None:
    page = render_html([full_report()], title=payload)
    escaped = (
        payload.replace("&", "&amp;")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace('"', "&#34;")
        .replace("'", "&#39;")
    )
    assert escaped in page
    if escaped != payload:
        assert payload not in page.replace("</style>", "", 1)  # the page's own </style> aside
    tags = parse(page)
    assert not [t for t, _ in tags if t in {"iframe", "object", "embed", "img"}]
    assert [t for t, _ in tags].count("script") == 1 and own_script_only(page)
    attrs = {k: v or "" for _, a in tags for k, v in a.items()}
    assert not [k for k in attrs if k.startswith("on")]
    links = [a[k] or "" for _, a in tags for k in ("href", "src") if k in a]
    assert links and all(link.startswith("#") for link in links)


def own_script_only(page: str) -> bool:
    """The page's one script is the packaged report.js, byte for byte (the CSP hash admits
    nothing else)."""
    start = page.index("<script>") + len("<script>")
    return page[start : page.index("</script>", start)] == _script()


def test_html_only_closes_style_once() -> None:
    page = render_html([full_report()])
    assert page.count("</style>") == 1
    assert page.count("<script") == 1 and own_script_only(page)


def test_html_is_self_contained() -> None:
    page = render_html([full_report(), minimal_report()])
    assert "http://" not in page and "https://" not in page
    assert not re.search(r"""(src|href)\s*=\s*["']?//""", page)
    digest = base64.b64encode(hashlib.sha256(_script().encode()).digest()).decode()
    assert (
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        f"style-src 'unsafe-inline'; img-src data:; script-src 'sha256-{digest}'\">" in page
    )
    assert "<link" not in page and "@import" not in page


def test_html_charts_have_one_bar_per_step_and_core_type() -> None:
    page = render_html([full_report()])
    assert page.count('class="step-bar"') == 3
    assert page.count('class="core-bar"') == 2
    for n in (1, 2, 3):
        assert f'data-step="{n}"' in page
    for label in ("Forward + backward", "Gradient refresh", "Data augmentation bound"):
        assert label in page  # legend
    assert "Other / unattributed" in page  # 5 ms of each 100 ms step is unexplained


def test_html_prefers_device_split_and_limits_long_runs() -> None:
    report = full_report()
    report["metrics"]["steps"] = [
        {
            "step": n,
            "duration_us": 1000.0,
            "computing_us": 600.0,
            "comm_not_overlapped_us": 300.0,
            "free_us": 100.0,
            "fp_bp_us": 900.0,
        }
        for n in range(250)
    ]
    page = render_html([valid(report)])
    assert page.count('class="step-bar"') == MAX_STEPS
    assert f"Showing the first {MAX_STEPS} of 250 steps." in page
    assert "Communication (not overlapped)" in page
    assert "Forward + backward" not in page
    assert "Other / unattributed" not in page


def cluster_report(ranks: list[dict]) -> dict:
    report = minimal_report("/data/cluster")
    report["profile"]["source_format"] = "cluster"
    report["metrics"]["ranks"] = ranks
    return valid(report)


def test_html_cluster_chart_has_one_bar_per_rank() -> None:
    ranks = [
        {
            "rank": r,
            "steps": 10,
            "duration_us": 1000.0 + 500 * (r == 2),
            "computing_us": 600.0 + 500 * (r == 2),
            "comm_not_overlapped_us": 300.0,
            "free_us": 100.0,
        }
        for r in range(4)
    ]
    page = render_html([cluster_report(ranks)])
    assert page.count('class="rank-bar"') == 4
    for r in range(4):
        assert f'data-rank="{r}"' in page
    assert f"Rank 2: {fmt_us(1500.0)} (Computing {fmt_us(1100.0)}" in page  # tooltip
    assert "Communication (not overlapped)" in page and 'class="rank-scroll"' not in page


def test_html_cluster_chart_scrolls_for_a_thousand_ranks() -> None:
    ranks = [
        {"rank": r, "steps": 1, "duration_us": 1000.0, "communication_us": 200.0}
        for r in range(1000)
    ]
    page = render_html([cluster_report(ranks)])
    assert page.count('class="rank-bar"') == 1000
    assert 'class="rank-scroll"' in page
    assert "Other / unattributed" in page  # host-only ranks: communication and the rest
    labels = re.findall(r'text-anchor="end">\d+</text>\s*</g>', page)
    assert 0 < len(labels) < 1000  # thin rows: only every few ranks labelled


def test_html_empty_report() -> None:
    page = render_html([minimal_report()])
    assert "No problems found" in page
    assert "no step data" in page
    assert 'class="step-bar"' not in page and 'class="core-bar"' not in page


def test_html_overview_lists_every_profile() -> None:
    page = render_html([full_report(), minimal_report("/data/other_rank")])
    header = page[: page.index('<section class="profile"')]
    assert 'href="#p1"' in header and 'href="#p2"' in header
    assert "/data/prof_run" in header and "/data/other_rank" in header
    assert page.count('<section class="profile"') == 2


def test_html_fifty_findings_get_a_ranking_table() -> None:
    report = full_report()
    report["data"] = {
        "many": [
            {
                "Rule Type": "many",
                "Rule Description": "",
                "result": [
                    finding(n, "low", f"Finding number {n}", 1000.0 / n) for n in range(50, 0, -1)
                ],
            }
        ]
    }
    page = render_html([valid(report)])
    ranking = page[page.index('<table class="ranking sortable">') :]
    positions = [ranking.index(f">Finding number {n}<") for n in range(1, 51)]
    assert positions == sorted(positions)
    assert page.count('<article class="finding') == 50


def test_html_rule_errors_and_plugin_sections() -> None:
    report = full_report()
    report["rule_errors"] = [{"rule_id": "R777", "problem": "division by zero"}]
    sections = [ReportSection(title="Trace <b>x</b>", html='<div class="plugin-x">ok</div>')]
    page = render_html([valid(report)], sections=sections)
    assert "Rule errors" in page and "division by zero" in page
    assert '<div class="plugin-x">ok</div>' in page  # trusted plugin HTML kept as is
    assert "Trace &lt;b&gt;x&lt;/b&gt;" in page  # but its title is escaped
    assert page.index("plugin-x") > page.index("Reader warnings")


# --- text -----------------------------------------------------------------------------------


def test_text_ranked_summary() -> None:
    out = render_text([full_report()], width=80)
    assert "AI CPU operators on the critical path" in out
    assert "23.5 ms (23.5%)" in out
    assert out.index("AI CPU operators") < out.index("Small operators dominate")
    assert "→ Replace the AI CPU ops" in out
    assert "→ Check dtypes." in out  # every suggestion (up to three), never silently one
    # the rule whose data this profile lacks is counted with how to collect it; the one
    # whose data the format never records is counted after the warnings
    assert "1 rule skipped: data missing from this profile (use --format html or json" in out
    assert "→ to collect it: profile with communication" in out
    assert "1 rule skipped: data this format never records" in out
    assert out.index("reader warning") < out.index("format never records")
    assert "1 reader warning (use --format html or json for details)" in out
    assert "Ascend910B #3 · rank 3/8 · /data/prof_run (msprof)" in out
    assert "\x1b[" not in out


@pytest.mark.parametrize("width", [60, 80, 100])
def test_text_wrapped_to_width(width: int) -> None:
    out = render_text([full_report()], width=width)
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= width
    assert len([line for line in lines if "AI CPU operators" in line]) >= 1
    message_lines = [line for line in lines if line.strip().startswith(("AI CPU", "or replacing"))]
    assert message_lines  # the long message spans several lines


def test_text_limits_findings_and_colours() -> None:
    out = render_text([full_report()], max_findings=1)
    assert "Small operators dominate" not in out
    assert "1 more finding" in out
    coloured = render_text([full_report()], color=True)
    assert "\x1b[" in coloured
    assert re.sub(r"\x1b\[[0-9;]*m", "", coloured) == render_text([full_report()])


def test_text_neutralises_control_characters() -> None:
    report = full_report()
    first = report["data"]["computation"][0]["result"][0]
    first["title"] = "evil\x1b[2J title"
    first["message"] = "bell\x07 and\ttab"
    out = render_text([valid(report)])
    assert "\x1b" not in out and "\x07" not in out
    assert "evil\ufffd[2J title" in out
    assert "bell\ufffd and tab" in out


def test_text_no_problems() -> None:
    out = render_text([minimal_report(), full_report()])
    blocks = out.split("\n\n")
    assert "No problems found" in blocks[0]
    assert "No problems found" not in blocks[1]
    assert "skipped" not in blocks[0]


def test_html_details_a_bounded_number_of_ranks_the_most_severe_first() -> None:
    """Beside a cluster report, only DETAILED_RANKS ranks get a section (a page of 1,000 full
    sections was tens of MB); the others are rows of the table, and the page says so."""
    count = DETAILED_RANKS + 6
    ranks = []
    for r in range(count):
        one = full_report() if r in (3, count - 2) else minimal_report(f"/run/rank{r}")
        one["profile"].update(path=f"/run/rank{r}", rank=r, device_id=str(r))
        ranks.append(valid(one))
    cluster = minimal_report("/run")
    cluster["profile"].update(source_format="cluster", world_size=count)
    page = render_html([*ranks, valid(cluster)])
    sections = re.findall(
        r'<section class="profile" id="p\d+">\s*<h2><span class="mono">([^<]*)', page
    )
    shown = [int(m.group(1)) for label in sections[1:] if (m := re.search(r"rank(\d+)$", label))]
    # the ranks with findings first, then the lowest ranks; sections in rank order
    assert shown == sorted({3, count - 2, *range(DETAILED_RANKS - 1)})
    assert len(sections) == DETAILED_RANKS + 1 and sections[0].endswith("/run")
    overview = page[page.index('<table class="overview sortable">') : page.index("</table>")]
    assert overview.count("<tr>") == count + 2  # the header, the cluster and every rank
    assert f"6 ranks only in the table: the {DETAILED_RANKS} ranks" in page
    rows = {
        int(m.group(1)): row
        for row in overview.split("<tr>")
        if (m := re.search(r"rank(\d+)<", row))
    }
    assert '<a href="#' not in rows[count - 1] and '<a href="#' in rows[count - 2]
    assert page.count('<details class="profile-details">') == DETAILED_RANKS


def test_html_many_ranks_lead_with_the_cluster_and_collapse_the_ranks() -> None:
    ranks = []
    for r in (10, 2, 0, 1, 3, 4, 5, 6, 7, 8, 9):
        one = minimal_report(f"/run/rank{r}")
        one["profile"].update(rank=r, device_id=str(r))
        ranks.append(valid(one))
    cluster = minimal_report("/run")
    cluster["profile"].update(source_format="cluster", world_size=len(ranks))
    page = render_html([*ranks, valid(cluster)])
    sections = re.findall(
        r'<section class="profile" id="p\d+">\s*<h2><span class="mono">([^<]*)', page
    )
    assert sections[0].endswith("/run") and len(sections) == 12
    assert page.count('<details class="profile-details">') == 11  # every rank, not the cluster
    assert page.index('<section class="profile" id="p1">') < page.index(
        '<details class="profile-details">'
    )
    assert [int(re.search(r"rank(\d+)$", label).group(1)) for label in sections[1:]] == list(
        range(11)
    )  # in numeric order, whatever order they came in
    assert "11 rank sections below start collapsed" in page
    overview = page[page.index('<table class="overview sortable">') : page.index("</table>")]
    assert overview.count('data-sort="10"') >= 1  # ranks sort as numbers in the table
    few = render_html([*ranks[:3], valid(cluster)])
    assert '<details class="profile-details">' not in few  # a handful of ranks stays open
