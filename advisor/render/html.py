"""Self-contained HTML report: one page, one fixed script, no external resources.

The page is opened from disk, mailed around and attached to tickets, so it must work offline
and must be safe to open even though it shows strings from untrusted profiles (op names, paths,
messages). Every profile string therefore goes through Jinja2 autoescaping; only plugin
`ReportSection.html`, which comes from trusted code, is inserted as is. Charts are inline SVG
laid out here in Python, so the template only places shapes. The one script (report.js: table
sorting, details opened for printing) is a packaged file the page's CSP admits by its SHA-256,
so no other script, injected or not, can run.
"""

from __future__ import annotations

import base64
import hashlib
import math
from collections.abc import Mapping, Sequence
from functools import cache
from importlib import resources
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup

from advisor.applicability import NOT_RECORDED
from advisor.compat import zip_strict
from advisor.engine.outcome import SEVERITIES
from advisor.hookspecs import ReportSection
from advisor.render.format import (
    Picked,
    as_number,
    column_format,
    findings_by_rank,
    fix_first_values,
    fmt_tick,
    fmt_value,
    if_fixed_line,
    profile_label,
    rank_list,
    rank_order,
    ranks_counting_left_out_steps,
    report_lang,
    source_values,
    steady_step_count,
)
from advisor.render.fragment import anchor_prefix, render_fragment
from advisor.render.headings import readable
from advisor.render.messages import CATALOG, Translate, kind_words, translator
from advisor.render.page_code import page_cache
from advisor.render.timeline import timeline_chart
from advisor.units import MISSING, column_unit, fmt_bytes, fmt_num, fmt_pct, fmt_us, fmt_us_as

MAX_STEPS = 200

# Step components in drawing order. The device split (compute / exposed comm / idle) explains
# step time better than the msprof iteration split, so it wins when both are present.
# Labels are message keys (advisor.render.messages).
DEVICE_SPLIT = (
    ("computing_us", "chart.computing", "#4c78a8"),
    ("comm_not_overlapped_us", "chart.comm_not_overlapped", "#f58518"),
    ("free_us", "chart.free", "#b8b8b8"),
)
ITERATION_SPLIT = (
    ("fp_bp_us", "chart.fp_bp", "#4c78a8"),
    ("grad_refresh_us", "chart.grad_refresh", "#72b7b2"),
    ("data_aug_bound_us", "chart.data_aug_bound", "#e45756"),
)
OTHER = ("chart.other", "#e3e3e3")
UNSPLIT = ("chart.step_time", "#4c78a8")  # when a profile has durations but no breakdown

# Ranks without the device split (host-only profiles, e.g. gloo) have their time in
# collectives, drawn in place of the communication not overlapped.
HOST_RANK_SPLIT = (
    ("computing_us", "chart.computing", "#4c78a8"),
    ("communication_us", "chart.communication", "#f58518"),
    ("free_us", "chart.free", "#b8b8b8"),
)

STEP_CHART = {"width": 1000, "height": 280, "left": 70, "right": 12, "top": 12, "bottom": 44}
RANK_CHART = {
    "width": 1000,
    "label": 70,
    "right": 12,
    "top": 6,
    "axis": 24,
    "row": 22,
    "dense_row": 6,
    "dense_from": 64,
    "scroll_from": 64,
}
"""Horizontal bars, one row per rank; from `dense_from` ranks rows shrink to `dense_row` px
and only every few carry a label, and the chart scrolls (1000 ranks: a 6000 px tall SVG in a
box of the normal chart height)."""
CORE_CHART = {"width": 1000, "row": 30, "label": 180, "value": 250, "top": 6}
LABEL_CHARS = 22  # longer core type names are shortened in the chart, kept whole in tooltips
COLLAPSE_FROM = 8
"""From this many rank profiles beside a cluster report, each rank's section starts collapsed:
the cluster's verdict and the sortable table of ranks are what a reader of 300 ranks needs."""
DETAILED_RANKS = 64
"""Beside a cluster report, at most this many ranks get a section of their own: those with
the most severe findings, then the slowest; every other rank is a row of the overview table,
its detail in its prof_rule JSON. 1,000 full sections made a page of about 55 MB that no
browser shows well, and every section was held in memory at once to build it."""


@cache
def page_environment() -> Environment:
    """The pages' Jinja2 environment; their compiled code comes from the user's cache, else
    from the source shipped in page_code.json (page_code.py), else Jinja2 compiles them."""
    env = Environment(
        loader=PackageLoader("advisor", "render/templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        bytecode_cache=page_cache(),
    )
    env.filters.update(us=fmt_us, pct=fmt_pct, num=fmt_num)
    return env


def render_html(
    reports: Sequence[dict],
    *,
    title: str | None = None,
    sections: Sequence[ReportSection] = (),
    traces: Sequence[Mapping[int, str]] = (),
    notes: Sequence[str] = (),
) -> str:
    """One self-contained HTML page for one or more profiles (devices/ranks), in the language
    the reports were written in. `traces`, per report, the relative link of each finding's
    trace snippet by the finding's number (advisor/traces.py); `notes`, the run's notes
    (AnalysisResult.notes), shown under the title."""
    overview = _overview(reports, translator(report_lang(reports)))
    page = _page(reports, title, sections, overview=overview, notes=notes)
    _link_traces(page["profiles"], [traces[k] for k in overview[0]] if traces else [])
    return page_environment().get_template("report.html.j2").render(page)


def _link_traces(profiles: Sequence[dict[str, Any]], traces: Sequence[Mapping[int, str]]) -> None:
    """Give each finding view the link of its snippet (profiles and `traces` in page order;
    no traces: no links)."""
    for k, view in enumerate(profiles):
        links = traces[k] if traces else {}
        for finding in view["findings"]:
            finding["trace"] = links.get(finding["rank"])


def render_html_fragment(
    reports: Sequence[dict], *, title: str | None = None, notes: Sequence[str] = ()
) -> str:
    """The same report as a fragment for a notebook cell: no <html> wrapper, no script, its
    styles scoped to the fragment and its anchors made unique on the notebook's page;
    `notes`, the run's notes, as on the page."""
    return render_fragment(
        page_environment().get_template("report.html.j2"),
        _page(reports, title, (), anchor_prefix(), notes=notes),
    )


def _page_order(report: dict) -> tuple[Any, ...]:
    """Where a profile's section comes on the page: the cluster's verdict first (with hundreds
    of ranks it must not come last), then by rank."""
    return (report["profile"]["source_format"] != "cluster", *rank_order(report))


def _overview(
    reports: Sequence[dict], tr: Translate, prefix: str = ""
) -> tuple[list[int], list[dict[str, Any]]]:
    """The positions in `reports` in page order, and the overview table's rows in that order:
    each report read once, and not kept (a run's reports may be unpacked on each read)."""
    keys, rows = [], []
    for report in reports:
        keys.append(_page_order(report))
        rows.append(_row_view(report, tr))
    order = sorted(range(len(keys)), key=keys.__getitem__)
    ordered = [rows[k] for k in order]
    for i, row in enumerate(ordered, start=1):
        row["anchor"] = f"{prefix}p{i}"
    return order, ordered


def _page(
    reports: Sequence[dict],
    title: str | None,
    sections: Sequence[ReportSection],
    prefix: str = "",
    overview: tuple[list[int], list[dict[str, Any]]] | None = None,
    notes: Sequence[str] = (),
) -> dict[str, Any]:
    """What report.html.j2 shows, for the page and its fragment alike; `overview`: the page
    order and table rows (_overview) when already made. Every report is read for its table
    row and only the detailed ones again for their sections, none kept."""
    lang = report_lang(reports)
    tr = translator(lang)
    order, rows = _overview(reports, tr, prefix) if overview is None else overview
    ordered = Picked(reports, order)
    beside_cluster = bool(rows) and rows[0]["format"] == "cluster"
    detailed = _detailed(rows, beside_cluster)
    profiles = [
        _profile_view(row, ordered[i - 1], tr) if i in detailed else row
        for i, row in enumerate(rows, start=1)
    ]
    if beside_cluster:
        steady = {
            r["rank_number"]: r["steady_steps"] for r in rows[1:] if r["rank_number"] is not None
        }
        counting_more = ranks_counting_left_out_steps(ordered[0], steady)
        profiles[0]["own_steps_note"] = (
            tr("own_steps_note", len(counting_more), ranks=rank_list(counting_more))
            if counting_more
            else None
        )
    for view in profiles[1:] if beside_cluster and len(ordered) > COLLAPSE_FROM else ():
        view["collapsed"] = view["detailed"]
    meta = reports[0].get("advisor", {}) if reports else {}
    script = _script()
    return {
        "lang": lang,
        "tr": tr,
        "title": tr("advisor_report") if title is None else title,
        "profiles": profiles,
        "notes": list(notes),
        "collapsed": sum(1 for v in profiles if v["collapsed"]),
        "table_only": sum(1 for v in profiles if not v["detailed"]),
        "detailed_ranks": DETAILED_RANKS,
        "version": meta.get("version", ""),
        "generated_at": meta.get("generated_at", ""),
        "config": meta.get("config"),
        "script": Markup(script),
        "script_hash": Markup(_hash(script)),  # base64 and quotes only, from our own file
        # Plugin HTML is trusted code output: the only markup not escaped on this page.
        "sections": [{"title": s.title, "html": Markup(s.html)} for s in sections],
    }


@cache
def _script() -> str:
    """The page's one script, as packaged (its hash in the CSP must match it byte for byte)."""
    return (
        resources.files("advisor")
        .joinpath("render/templates/report.js")
        .read_text(encoding="utf-8")
    )


def _hash(script: str) -> str:
    """The CSP source that admits exactly this script."""
    digest = hashlib.sha256(script.encode("utf-8")).digest()
    return "'sha256-" + base64.b64encode(digest).decode("ascii") + "'"


def _detailed(rows: Sequence[dict[str, Any]], beside_cluster: bool) -> set[int]:
    """The page positions (from 1) of the profiles that get a section: all of them, or beside
    a cluster report the cluster and the DETAILED_RANKS ranks with the most severe findings
    (then the longest time, then the lowest rank)."""
    if not beside_cluster or len(rows) <= DETAILED_RANKS + 1:
        return set(range(1, len(rows) + 1))
    ranks = sorted(
        range(2, len(rows) + 1),
        key=lambda i: (
            -rows[i - 1]["severity_sort"],
            -(rows[i - 1]["total_time_us"] or 0.0),
            i,
        ),
    )
    return {1, *ranks[:DETAILED_RANKS]}


def _row_view(report: dict, tr: Translate, anchor: str = "") -> dict[str, Any]:
    """What the overview table shows of one profile (a profile without a section of its own
    is only this); `anchor` names its place on the page (_overview sets it once placed)."""
    profile, summary = report["profile"], report["summary"]
    findings = findings_by_rank(report)
    rank = profile.get("rank")
    return {
        "anchor": anchor,
        "detailed": False,
        "collapsed": False,
        "label": profile_label(profile, report_lang(report)),
        "format": profile["source_format"],
        "rank": MISSING
        if rank is None
        else (
            tr("rank_of_world", rank=rank, world=profile["world_size"])
            if profile.get("world_size")
            else str(rank)
        ),
        "rank_sort": rank if isinstance(rank, (int, float)) else "",
        "total_time_us": summary["total_time_us"],
        "severity_counts": [(s, summary["by_severity"].get(s, 0)) for s in SEVERITIES],
        # sorts most high findings first, then most medium, then most low
        "severity_sort": sum(
            summary["by_severity"].get(s, 0) * 10_000 ** (2 - i) for i, s in enumerate(SEVERITIES)
        ),
        "finding_count": len(findings),
        "top_title": findings[0][1]["title"] if findings else None,
        "findings": [],
        "steady_steps": steady_step_count(report),
        "rank_number": as_number(rank),
    }


def _profile_view(row: dict[str, Any], report: dict, tr: Translate) -> dict[str, Any]:
    """Everything the template shows for one profile, with every optional field resolved,
    added to its overview `row` (_row_view, whose anchor starts the section's anchors)."""
    profile = report["profile"]
    anchor = row["anchor"]
    summary = report["summary"]
    findings = findings_by_rank(report)
    device = profile.get("device_name") or profile["device_kind"]
    if profile.get("device_id") not in (None, ""):
        device = f"{device} #{profile['device_id']}"
    unit = column_unit(f.get("impact_us") for _, f in findings)
    combined = summary.get("combined_impact_us")
    added = sum(f.get("impact_us") or 0.0 for _, f in findings)
    fix = fix_first_values(report)
    return {
        **row,
        "detailed": True,
        "fix_first": None
        if fix is None
        else tr(fix.pop("key"), rules=tr("list_sep").join(fix.pop("rules")), **fix),
        "combined": None
        if combined is None or not added > combined * 1.0001
        else {
            "combined": fmt_us(combined),
            "added": fmt_us(added),
            "share": fmt_pct(combined / summary["total_time_us"])
            if summary.get("total_time_us")
            else None,
        },
        "impact_unit": unit,
        "framework": profile["framework"],
        "device": device or MISSING,
        "path": profile["path"],
        "files_read": profile["files_read"],
        "versions": sorted((profile.get("versions") or {}).items()),
        "steps": _step_chart(report["metrics"]["steps"], tr),
        "ranks": _rank_chart(report["metrics"].get("ranks", []), tr),
        "cores": _core_chart(report["metrics"]["core_types"], tr),
        "classes": _core_chart(report["metrics"].get("compute_classes", []), tr, "compute_class"),
        "memory": _memory_chart(report["metrics"].get("memory_kinds", []), tr),
        "timeline": timeline_chart(
            report["metrics"].get("timeline", []),
            len(report["metrics"]["steps"]),
            [
                (f["rank"], f["title"], f"{anchor}-f{n}", f.get("window"))
                for n, (_, f) in enumerate(findings, start=1)
            ],
            tr,
        ),
        "findings": [
            _finding_view(
                f"{anchor}-f{n}", group, f, unit, tr, if_fixed_line(f, report, report_lang(report))
            )
            for n, (group, f) in enumerate(findings, start=1)
        ],
        "lacking": sorted(
            (r for r in report["not_applicable"] if r.get("reason") != NOT_RECORDED),
            key=lambda r: r["rule_id"],
        ),
        "never_recorded": sorted(
            (r for r in report["not_applicable"] if r.get("reason") == NOT_RECORDED),
            key=lambda r: r["rule_id"],
        ),
        "warnings": [_warning_view(w) for w in report["warnings"]],
        "rule_errors": report["rule_errors"],
        "rule_overrides": report["advisor"].get("rule_overrides", []),
        "tuning_loop": _tuning_loop_view(report.get("tuning_loop")),
    }


def _tuning_loop_view(loop: dict | None) -> dict[str, Any] | None:
    """The advised operators with what AOE did to them, times formatted for the table."""
    if loop is None:
        return None
    return {
        "summary": loop["summary"],
        "sources": loop["sources"],
        "tuned": [
            {
                **r,
                "before": fmt_us(r["before_us"]),
                "after": fmt_us(r["after_us"]),
                "improvement": fmt_value("improvement_pct", r["improvement_pct"]),
            }
            for r in loop["tuned"]
        ],
        "not_tuned": loop["not_tuned"],
    }


def _finding_view(
    anchor: str, group: str, f: dict, unit: str, tr: Translate, if_fixed: str | None
) -> dict[str, Any]:
    raw = f.get("uncapped_impact_us")
    return {
        "if_fixed": if_fixed,
        "sources": [source_values(source) for source in f.get("sources") or []],
        "anchor": anchor,
        "group": group,
        "rank": f["rank"],
        "severity": f["severity"],
        "severity_sort": SEVERITIES.index(f["severity"]),
        "title": f["title"],
        "message": f["message"],
        "impact_us": f["impact_us"],
        "impact_in_unit": fmt_us_as(f["impact_us"], unit).removesuffix(f" {unit}"),
        "impact_ratio": f["impact_ratio"],
        "impact_note": f.get("impact_note"),
        "shares_time_with": f.get("shares_time_with") or [],
        "capped_note": None
        if raw is None
        else tr("impact_capped", raw=fmt_us(raw), measured=fmt_us(f.get("measured_us"))),
        "measured": [(k, fmt_value(k, v)) for k, v in f["values"].items()],
        "thresholds": [(k, fmt_value(k, v)) for k, v in f["params"].items()],
        "suggestions": f["suggestions"],
        "evidence": None if f["evidence"] is None else _evidence_view(f["evidence"], tr),
        "window": _window_text(f.get("window"), tr),
        "trace": None,  # the snippet's link, where one was written (_link_traces)
        "source": f["source"],
        "rule_id": f["rule_id"],
        "rule_name": f["rule_name"],
    }


def _window_text(window: dict | None, tr: Translate) -> str | None:
    """The finding's window as a line ("Window: Step 552 · 623 ms"), or its start and length
    where no step holds it."""
    if not window:
        return None
    duration = fmt_us(window["end_us"] - window["start_us"])
    if window.get("step") is not None:
        where = f"{tr('step_n', n=fmt_num(window['step']))} · {duration}"
    else:
        where = tr("window_span", duration=duration, start=fmt_us(window["start_us"]))
    return tr("window_line", where=where)


def _evidence_view(evidence: dict, tr: Translate) -> dict[str, Any]:
    """The evidence rows as a sortable table: a header with the column's unit, cells in that
    one unit (never "11.6 ms" above "9,157 µs"), numbers right-aligned with their raw value
    to sort by."""
    columns = evidence["columns"]
    rows = evidence["rows"]
    heads: list[str] = []
    cells: list[list[dict[str, Any]]] = [[] for _ in rows]
    for i, name in enumerate(columns):
        values = [row[i] if i < len(row) else None for row in rows]
        column = column_format(name, values)
        heads.append(_heading(column.stem, tr) + (f" ({column.unit})" if column.unit else ""))
        for r, value in enumerate(values):
            number = (
                isinstance(value, (int, float))
                and not isinstance(value, bool)
                and math.isfinite(value)
            )
            cells[r].append(
                {"text": column.show(value), "sort": value if number else None, "num": number}
            )
    return {
        "table": evidence["table"],
        "columns": heads,
        "rows": cells,
        "shown": len(rows),
        "total": evidence["total_rows"],
    }


def _heading(stem: str, tr: Translate) -> str:
    """A column's heading without its unit: the catalog's `column.<stem>` message where there
    is one, else the name made readable ("comm_not_overlapped" -> "Comm not overlapped")."""
    return tr(f"column.{stem}") if f"column.{stem}" in CATALOG else readable(stem)


def _warning_view(w: dict) -> dict[str, str]:
    line = w.get("line")
    return {
        "where": w["file"] if line is None else f"{w['file']}:{line}",
        "column": w.get("column") or MISSING,
        "problem": w["problem"],
        "reader": w.get("reader") or MISSING,
    }


def _number(x: Any) -> float:
    """Chart arithmetic treats missing components as zero-length segments."""
    if x is None or isinstance(x, bool) or not isinstance(x, (int, float)) or math.isnan(x):
        return 0.0
    return float(x)


def _nice_ticks(top: float, count: int = 4) -> list[float]:
    """Round axis ticks (1, 2, 2.5, 5 × 10^k) from 0 to at least `top`."""
    if top <= 0:
        return [0.0, 1.0]
    raw = top / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    return [i * step for i in range(math.ceil(top / step - 1e-9) + 1)]


def _stack(
    row: dict,
    total: float,
    components: Sequence[tuple[str, str, str]],
    rest_label: str,
    rest_colour: str,
) -> list[tuple[str, str, float]]:
    """(label, colour, µs) of one stacked bar: each component capped so the stack never
    exceeds `total`, and what they leave of it as a last `rest` segment."""
    segments, acc = [], 0.0
    for key, label, colour in components:
        value = min(_number(row.get(key)), max(total - acc, 0.0))
        segments.append((label, colour, value))
        acc += value
    if total - acc > total * 1e-3:
        segments.append((rest_label, rest_colour, total - acc))
    return segments


def _step_chart(steps: list[dict], tr: Translate) -> dict[str, Any]:
    """Stacked bars per step; the bar is the step duration, unexplained time shown as "other"."""
    total_steps = len(steps)
    warmup = sum(1 for s in steps if s.get("warmup"))
    steps = steps[:MAX_STEPS]
    keys = set().union(*steps) if steps else set()
    split = DEVICE_SPLIT if keys & {k for k, _, _ in DEVICE_SPLIT} else ITERATION_SPLIT
    components = [(k, tr(label), colour) for k, label, colour in split if k in keys]
    rest_label, rest_colour = OTHER if components else UNSPLIT
    rest_label = tr(rest_label)

    c = STEP_CHART
    plot_w = c["width"] - c["left"] - c["right"]
    plot_h = c["height"] - c["top"] - c["bottom"]
    totals = []
    for s in steps:
        parts = sum(_number(s.get(k)) for k, _, _ in components)
        totals.append(_number(s["duration_us"]) or parts)
    ticks = _nice_ticks(max(totals, default=0))
    tick_unit = column_unit(ticks)  # the axis labels share one unit
    scale = plot_h / ticks[-1]
    slot = plot_w / max(len(steps), 1)
    bar_w = max(slot * 0.72, 1.0)
    label_every = max(1, math.ceil(len(steps) / 25))
    baseline = c["top"] + plot_h

    bars = []
    rest_parts = []
    for i, (s, total) in enumerate(zip_strict(steps, totals)):
        x = c["left"] + i * slot + (slot - bar_w) / 2
        segments = _stack(s, total, components, rest_label, rest_colour)
        rest_parts.append(segments[-1][2] if segments and segments[-1][0] == rest_label else 0.0)
        rects, y = [], float(baseline)
        for _, colour, value in segments:
            h = value * scale
            if h > 0:
                y -= h
                rects.append(
                    {
                        "x": round(x, 2),
                        "y": round(y, 2),
                        "w": round(bar_w, 2),
                        "h": round(h, 2),
                        "fill": colour,
                    }
                )
        tooltip = "; ".join(f"{label} {fmt_us(v)}" for label, _, v in segments)
        bars.append(
            {
                "step": fmt_num(s["step"]),
                "tooltip": f"{tr('step_n', n=fmt_num(s['step']))}: {fmt_us(total)}"
                + (f" ({tooltip})" if tooltip else "")
                + (f" · {tr('warmup_step')}" if s.get("warmup") else ""),
                "rects": rects,
                "label_x": round(x + bar_w / 2, 2) if i % label_every == 0 else None,
            }
        )

    # the means are the steady steps' (advisor.steady), as every other per-step figure
    steady = [i for i, s in enumerate(steps) if not s.get("warmup")] or list(range(len(steps)))
    legend = [
        {
            "label": label,
            "colour": colour,
            "mean": fmt_us(sum(_number(steps[i].get(k)) for i in steady) / len(steady)),
        }
        for k, label, colour in components
    ]
    if any(rest_parts):
        rest = sum(rest_parts[i] for i in steady)
        legend.append(
            {"label": rest_label, "colour": rest_colour, "mean": fmt_us(rest / len(steady))}
        )
    return {
        "count": total_steps,
        "shown": len(steps),
        "warmup": warmup,
        "bars": bars,
        "legend": legend,
        "mean": fmt_us(sum(totals[i] for i in steady) / len(steady)) if totals else MISSING,
        "min": fmt_us(min(totals, default=None)),
        "max": fmt_us(max(totals, default=None)),
        "ticks": [
            {"y": round(baseline - t * scale, 2), "label": fmt_tick(t, tick_unit)} for t in ticks
        ],
        "axis": {
            "x1": c["left"],
            "x2": c["width"] - c["right"],
            "y": baseline,
            "label_y": baseline + 16,
            "title_y": c["height"] - 6,
            "title_x": c["left"] + plot_w / 2,
            "tick_x": c["left"] - 6,
        },
        "width": c["width"],
        "height": c["height"],
    }


def _rank_components(ranks: list[dict]) -> list[tuple[str, str, str]]:
    """The device split the ranks have, or their communication time when they lack it."""
    keys = set().union(*ranks) if ranks else set()
    split = DEVICE_SPLIT if "comm_not_overlapped_us" in keys else HOST_RANK_SPLIT
    return [c for c in split if c[0] in keys]


def _rank_chart(ranks: list[dict], tr: Translate) -> dict[str, Any]:
    """One stacked horizontal bar per rank (mean step time and its breakdown), so a slow or
    uneven rank shows against the others; many ranks become thin rows in a scrolling box."""
    c = RANK_CHART
    components = [(k, tr(label), colour) for k, label, colour in _rank_components(ranks)]
    rest_label, rest_colour = OTHER if components else UNSPLIT
    rest_label = tr(rest_label)
    dense = len(ranks) >= c["dense_from"]
    row = c["dense_row"] if dense else c["row"]
    label_every = max(1, math.ceil(12 / row))  # a label needs about 12 px
    plot_w = c["width"] - c["label"] - c["right"]
    totals = [
        _number(r.get("duration_us")) or sum(_number(r.get(k)) for k, _, _ in components)
        for r in ranks
    ]
    ticks = _nice_ticks(max(totals, default=0))
    tick_unit = column_unit(ticks)
    scale = plot_w / ticks[-1]
    bars, rest_used = [], False
    for i, (r, total) in enumerate(zip_strict(ranks, totals)):
        y = c["top"] + i * row
        segments = _stack(r, total, components, rest_label, rest_colour)
        rest_used = rest_used or bool(segments) and segments[-1][0] == rest_label
        rects, x = [], float(c["label"])
        for _, colour, value in segments:
            w = value * scale
            if w > 0:
                rects.append(
                    {
                        "x": round(x, 2),
                        "y": round(y + row * 0.15, 2),
                        "w": round(w, 2),
                        "h": round(row * 0.7, 2),
                        "fill": colour,
                    }
                )
                x += w
        parts = "; ".join(f"{label} {fmt_us(v)}" for label, _, v in segments)
        rank = fmt_num(r["rank"])
        bars.append(
            {
                "rank": rank,
                "tooltip": f"{tr('rank_n', n=rank)}: {fmt_us(total)}"
                + (f" ({parts})" if parts else ""),
                "rects": rects,
                "label_y": round(y + row / 2 + 4, 2) if i % label_every == 0 else None,
            }
        )
    legend = [{"label": label, "colour": colour} for _, label, colour in components]
    if rest_used:
        legend.append({"label": rest_label, "colour": rest_colour})
    axis_y = c["top"] + len(ranks) * row
    return {
        "count": len(ranks),
        "bars": bars,
        "legend": legend,
        "scroll": len(ranks) >= c["scroll_from"],
        "ticks": [
            {"x": round(c["label"] + t * scale, 2), "label": fmt_tick(t, tick_unit)} for t in ticks
        ],
        "axis": {
            "x1": c["label"],
            "x2": c["width"] - c["right"],
            "y": axis_y,
            "label_x": c["label"] - 8,
            "tick_y": axis_y + 16,
        },
        "width": c["width"],
        "height": axis_y + c["axis"],
    }


def _shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _core_chart(rows: list[dict], tr: Translate, key: str = "core_type") -> dict[str, Any]:
    """One horizontal bar per core type (or compute class), longest first, with time and
    share."""
    rows = sorted(rows, key=lambda r: -_number(r["total_us"]))
    return _bar_chart(
        [
            (
                str(r[key]),
                _number(r["total_us"]),
                f"{fmt_us(r['total_us'])} · {fmt_pct(r['ratio'])} · "
                + tr("tasks_count", n=fmt_num(r["count"])),
            )
            for r in rows
        ],
        tr("core_chart" if key == "core_type" else "class_chart"),
    )


def _memory_chart(rows: list[dict], tr: Translate) -> dict[str, Any]:
    """One bar per kind of tensor of a memory timeline export by what it held at the peak,
    largest first, with its share of the peak and its own highest; kinds that never held
    memory are left out."""
    rows = sorted(
        (r for r in rows if _number(r["max_bytes"]) > 0),
        key=lambda r: -_number(r["at_peak_bytes"]),
    )
    chart = _bar_chart(
        [
            (
                kind_words(tr, str(r["kind"])),
                _number(r["at_peak_bytes"]),
                f"{fmt_bytes(r['at_peak_bytes'])} · {fmt_pct(r['peak_share'])} · "
                + tr("memory_kind_highest", value=fmt_bytes(r["max_bytes"])),
            )
            for r in rows
        ],
        tr("memory_by_kind"),
    )
    chart["peak"] = fmt_bytes(sum(_number(r["at_peak_bytes"]) for r in rows))
    return chart


def _bar_chart(items: list[tuple[str, float, str]], label: str) -> dict[str, Any]:
    """Horizontal bars of (name, value, the text beside the bar), in the order given, the
    longest as wide as the chart allows."""
    c = CORE_CHART
    longest = max((value for _, value, _ in items), default=0.0) or 1.0
    bar_area = c["width"] - c["label"] - c["value"]
    bars = []
    for i, (name, value, text) in enumerate(items):
        y = c["top"] + i * c["row"]
        w = max(value / longest * bar_area, 1.0)
        bars.append(
            {
                "name": name,
                "short": _shorten(name, LABEL_CHARS),
                "y": y + 4,
                "h": c["row"] - 8,
                "w": round(w, 2),
                "text_y": y + c["row"] / 2 + 4,
                "value_x": round(c["label"] + w + 8, 2),
                "value": text,
            }
        )
    return {
        "bars": bars,
        "label": label,
        "x": c["label"],
        "label_x": c["label"] - 10,
        "width": c["width"],
        "height": c["top"] * 2 + len(items) * c["row"],
    }
