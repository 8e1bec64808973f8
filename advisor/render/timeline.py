"""The report's per-step timeline: which lane the device was in, instant by instant, over a few
steps, with the findings' windows marked, laid out here as inline SVG (no script).

The rows come from the report's `metrics.timeline` (the timeline_lanes table, derived by
plugins/critical_path.py): a few consecutive steps around the slowest, each lane's stretches
already joined to the chart's resolution, with the lane's time inside each stretch, which
sets how solid its rectangle is drawn. Each finding with a window (`window` of a finding)
gets its span shaded and a numbered marker linking to the finding; findings whose window lies
outside the steps shown are named under the chart.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from advisor.render.format import fmt_tick
from advisor.render.messages import Translate
from advisor.units import column_unit, fmt_num, fmt_us

LANES = (
    ("compute", "lane.compute", "#4c78a8"),
    ("communication", "lane.communication", "#f58518"),
    ("data", "lane.data", "#e45756"),
    ("host", "lane.host", "#b279a2"),
    ("idle", "lane.idle", "#9d9d9d"),
)
"""Lanes top to bottom, with their message keys and colours (those of the step chart where
the step chart has the same kind of time)."""
ALWAYS = ("compute", "communication", "host", "idle")
"""Lanes drawn even when empty; data loading only where the profile shows some."""
CHART = {
    "width": 1000,
    "label": 180,
    "right": 12,
    "markers": 24,
    "steps": 16,
    "lane": 20,
    "gap": 4,
    "axis": 22,
}
MARKER_GAP = 18  # px between two markers' centres
MIN_OPACITY = 0.25  # a stretch the lane only partly fills stays visible
MIN_WIDTH = 0.6  # px: a short stretch still shows


def timeline_chart(
    rows: Sequence[dict[str, Any]],
    steps: int,
    findings: Sequence[tuple[int, str, str, dict[str, Any] | None]],
    tr: Translate,
) -> dict[str, Any] | None:
    """The chart's shapes, or None without timeline rows. `steps`: how many steps the profile
    has; `findings`: (number, title, anchor, window) of every finding."""
    rows = [r for r in rows if _finite(r.get("start_us")) and _finite(r.get("end_us"))]
    if not rows:
        return None
    c = CHART
    lo = min(float(r["start_us"]) for r in rows)
    hi = max(float(r["end_us"]) for r in rows)
    span = (hi - lo) or 1.0
    plot_w = c["width"] - c["label"] - c["right"]

    def x(t: float) -> float:
        return round(c["label"] + (min(max(t, lo), hi) - lo) / span * plot_w, 2)

    present = {r["lane"] for r in rows}
    lanes = [lane for lane in LANES if lane[0] in ALWAYS or lane[0] in present]
    top = c["markers"] + c["steps"]
    lane_groups = []
    for i, (lane, key, colour) in enumerate(lanes):
        y = top + i * (c["lane"] + c["gap"])
        mine = [r for r in rows if r["lane"] == lane]
        rects = []
        for r in mine:
            x1, x2 = x(float(r["start_us"])), x(float(r["end_us"]))
            width = float(r["end_us"]) - float(r["start_us"])
            fill = (float(r.get("busy_us") or 0.0) / width) if width > 0 else 1.0
            rects.append(
                {
                    "x": x1,
                    "w": round(max(x2 - x1, MIN_WIDTH), 2),
                    "opacity": round(min(max(fill, MIN_OPACITY), 1.0), 2),
                }
            )
        total = sum(float(r.get("busy_us") or 0.0) for r in mine)
        lane_groups.append(
            {
                "lane": lane,
                "label": tr(key),
                "colour": colour,
                "y": y,
                "h": c["lane"],
                "text_y": y + c["lane"] / 2 + 4,
                "rects": rects,
                "tooltip": f"{tr(key)}: {fmt_us(total)}",
            }
        )
    bottom = top + len(lanes) * (c["lane"] + c["gap"]) - c["gap"]
    shown = _steps(rows)
    bands = [
        {
            "x": x(s_lo),
            "w": round(x(s_hi) - x(s_lo), 2),
            "label": tr("step_n", n=fmt_num(step)),
            "label_x": round((x(s_lo) + x(s_hi)) / 2, 2),
            "labelled": x(s_hi) - x(s_lo) >= 44,
            "odd": i % 2 == 1,
        }
        for i, (step, s_lo, s_hi) in enumerate(shown)
    ]
    marks, outside = _windows(findings, lo, hi, x, tr)
    ticks = _ticks(span)
    unit = column_unit(ticks)
    slowest = max(shown, key=lambda s: s[2] - s[1])[0] if shown else None
    return {
        "width": c["width"],
        "height": bottom + c["axis"],
        "label_x": c["label"] - 8,
        "lanes": lane_groups,
        "bands": bands,
        "band_y": top - 2,
        "band_h": bottom - top + 4,
        "step_y": c["markers"] + c["steps"] - 5,
        "windows": marks["spans"],
        "markers": marks["markers"],
        "marker_y": c["markers"] / 2 + 1,
        "axis": {"y": bottom + 4, "label_y": bottom + 18},
        "ticks": [{"x": x(lo + t), "label": fmt_tick(t, unit)} for t in ticks],
        "steps_shown": len(shown),
        "steps_total": steps,
        "slowest": None if slowest is None else fmt_num(slowest),
        "outside": outside,
        "legend": [{"label": g["label"], "colour": g["colour"]} for g in lane_groups],
    }


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _steps(rows: Sequence[dict[str, Any]]) -> list[tuple[int, float, float]]:
    """(step, start, end) of each step the rows cover, in time order."""
    spans: dict[int, tuple[float, float]] = {}
    for r in rows:
        step = r.get("step")
        if step is None:
            continue
        s, e = float(r["start_us"]), float(r["end_us"])
        lo, hi = spans.get(step, (s, e))
        spans[step] = (min(lo, s), max(hi, e))
    return sorted(((k, lo, hi) for k, (lo, hi) in spans.items()), key=lambda s: s[1])


def _windows(
    findings: Sequence[tuple[int, str, str, dict[str, Any] | None]],
    lo: float,
    hi: float,
    x: Callable[[float], float],
    tr: Translate,
) -> tuple[dict[str, list[dict[str, Any]]], list[str]]:
    """The shaded spans (one per distinct window), a numbered marker per finding with a
    window inside the chart, and the numbers of those outside it."""
    spans: dict[tuple[float, float], dict[str, Any]] = {}
    markers: list[dict[str, Any]] = []
    outside: list[str] = []
    for number, title, anchor, window in findings:
        if not window or not _finite(window.get("start_us")) or not _finite(window.get("end_us")):
            continue
        start, end = float(window["start_us"]), float(window["end_us"])
        step = window.get("step")
        where = f"#{number}" + ("" if step is None else f" ({tr('step_n', n=fmt_num(step))})")
        if end < lo or start > hi:
            outside.append(where)
            continue
        x1, x2 = x(start), x(end)
        span = spans.setdefault((start, end), {"x": x1, "w": round(max(x2 - x1, 1.0), 2)})
        span.setdefault("numbers", []).append(str(number))
        markers.append(
            {
                "number": number,
                "x": round((x1 + x2) / 2, 2),
                "anchor": anchor,
                "tooltip": f"#{number} {title}",
            }
        )
    markers.sort(key=lambda m: (m["x"], m["number"]))
    right = CHART["width"] - CHART["right"] - MARKER_GAP / 2
    for i in range(1, len(markers)):  # side by side, never on top of each other
        markers[i]["x"] = round(max(markers[i]["x"], markers[i - 1]["x"] + MARKER_GAP), 2)
    overflow = markers[-1]["x"] - right if markers else 0.0
    if overflow > 0:
        for m in markers:
            m["x"] = round(max(m["x"] - overflow, CHART["label"]), 2)
    for span in spans.values():
        span["tooltip"] = "#" + ", #".join(span.pop("numbers"))
    return {"spans": list(spans.values()), "markers": markers}, outside


def _ticks(span: float, count: int = 6) -> list[float]:
    """Round offsets from the chart's start (1, 2, 2.5, 5 × 10^k µs) up to `span`."""
    raw = span / count
    magnitude = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1.0
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    return [i * step for i in range(int(span // step) + 1)]
