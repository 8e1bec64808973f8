"""The compare HTML page: both runs, the breakdown side by side, findings and the top diffs.

Built on the report page's environment, stylesheet and finding macro, so a compare finding
looks like any other; only the tables of two runs are new.
"""

from __future__ import annotations

from typing import Any

from advisor.render.compare_outputs import side_notes
from advisor.render.format import fmt_value, report_lang
from advisor.render.fragment import anchor_prefix, render_fragment
from advisor.render.html import _profile_view, _row_view, page_environment
from advisor.render.messages import CATALOG, LANGS, Translate, message, translator
from advisor.units import fmt_bytes, fmt_num, fmt_pct, fmt_us

TOP_ROWS = 20
SECTIONS = (
    ("compare_op_stats", "ops", "changed_operators", "diff_us"),
    ("compare_comm", "comm", "comm_per_collective", "diff_us"),
    ("compare_memory", "memory", "memory_per_operator", "diff_bytes"),
    ("compare_allocation_sites", "sites", "memory_per_site", "diff_bytes"),
    ("compare_memory_kinds", "kinds", "memory_per_kind", "diff_bytes"),
    ("compare_modules", "modules", "modules_per_step", "diff_us"),
    ("compare_apis", "apis", "apis_per_name", "diff_us"),
    ("compare_kernels", "kernels", "kernels_per_shape", "diff_us"),
    ("compare_profiling", "profiling", "profiling_options", None),
)
"""The tables of top diffs: compare table, anchor, title's message key, column to rank by
(None: a table of facts, shown as it is)."""
OVERALL_HEADINGS = {
    "Metric": "column.metric",
    "Baseline": "baseline",
    "Comparison": "column.comparison",
    "Diff": "column.diff",
    "Ratio": "column.ratio",
}
LABELS: dict[str, dict[str, str]] = {
    lang: {
        **{name: message(lang, key) for name, key in OVERALL_HEADINGS.items()},
        "not_minimal_profiling": message(lang, "not_minimal_profiling"),
        **{
            key.removeprefix("metric."): message(lang, key)
            for key in CATALOG
            if key.startswith("metric.")
        },
    }
    for lang in LANGS
}
"""The words of the terminal's breakdown table (compare_outputs.overall_lines) per language:
its headings and the metrics' names, from the message catalog."""


def _cell(unit: str, value: Any) -> str:
    """A breakdown value: a size for the memory peak, else a duration."""
    return fmt_bytes(value) if unit == "bytes" else fmt_us(value)


def _overall_rows(
    rows: list[dict[str, Any]], tr: Translate, inflated: bool = False
) -> list[dict[str, Any]]:
    times = [
        v for r in rows if r["unit"] == "µs" for v in (r["base"], r["comparison"]) if v is not None
    ]
    top = max(times, default=0.0) or 1.0

    def width(r: dict[str, Any], key: str) -> float:
        value = r[key]
        if r["unit"] != "µs" or value is None:
            return 0.0
        return round(100.0 * max(value, 0.0) / top, 1)

    out = []
    for r in rows:
        diff = r["diff"]
        trend = "" if diff is None or diff == 0 else ("worse" if diff > 0 else "better")
        counts = " → ".join(
            fmt_num(r[k]) for k in ("base_count", "comp_count") if r.get(k) is not None
        )
        out.append(
            {
                "metric": r["metric"],
                "label": tr(f"metric.{r['metric']}")
                + (tr("not_minimal_profiling") if inflated and r["metric"] == "e2e" else ""),
                "base": _cell(r["unit"], r["base"]),
                "comparison": _cell(r["unit"], r["comparison"]),
                "diff": ("+" if trend == "worse" else "") + _cell(r["unit"], diff),
                "ratio": fmt_pct(r["ratio"]),
                "trend": trend,
                "counts": counts,
                "base_width": width(r, "base"),
                "comp_width": width(r, "comparison"),
            }
        )
    return out


def _table_view(
    rows: list[dict[str, Any]], table: str, anchor: str, title: str, diff: str | None
) -> dict[str, Any]:
    """The rows that changed most, worse first then better, with the diff column marked."""
    ordered = (
        rows[:TOP_ROWS]
        if diff is None
        else sorted(rows, key=lambda r: -abs(r.get(diff) or 0.0))[:TOP_ROWS]
    )
    columns = list(ordered[0]) if ordered else []
    body = [
        [
            (
                fmt_value(c, r[c]),
                ("worse" if (r[c] or 0) > 0 else "better" if (r[c] or 0) < 0 else "")
                if c == diff
                else "",
            )
            for c in columns
        ]
        for r in ordered
    ]
    return {
        "anchor": anchor,
        "title": title,
        "table": table,
        "columns": columns,
        "rows": body,
        "total": len(rows),
    }


def render_compare_html(report: dict[str, Any], document: dict[str, Any]) -> str:
    """The compare page from the compare profile's report and the compare.json document."""
    return page_environment().get_template("compare.html.j2").render(_page(report, document))


def render_compare_html_fragment(report: dict[str, Any], document: dict[str, Any]) -> str:
    """The same page as a fragment for a notebook cell (render/fragment.py)."""
    return render_fragment(
        page_environment().get_template("compare.html.j2"), _page(report, document, anchor_prefix())
    )


def _page(report: dict[str, Any], document: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """What compare.html.j2 shows, for the page and its fragment alike; `prefix` starts
    every id."""
    lang = report_lang(report)
    tr = translator(lang)
    tables = document["tables"]
    options = document["options"]
    return {
        "lang": lang,
        "tr": tr,
        "prefix": prefix,
        "title": tr("advisor_compare"),
        "version": document["advisor"].get("version", ""),
        "generated_at": document["advisor"].get("generated_at", ""),
        "runs": [
            (tr("baseline"), document["baseline"]),
            (tr("column.comparison"), document["comparison"]),
        ],
        "options": [
            ("use_input_shape", options["use_input_shape"]),
            ("max_kernel_num", options["max_kernel_num"]),
            ("op_name_map", len(options["op_name_map"])),
            *(
                (name, options[name])
                for name in ("base_step", "comparison_step")
                if options.get(name) is not None
            ),
        ],
        "notes": side_notes(document["baseline"], document["comparison"], tr),
        "overall": _overall_rows(
            tables["compare_overall"], tr, inflated=bool(tables.get("compare_profiling"))
        ),
        "profile": _profile_view(_row_view(report, tr, f"{prefix}p1"), report, tr),
        "tables": [
            _table_view(tables[name], name, anchor, tr(title), diff)
            for name, anchor, title, diff in SECTIONS
            if tables.get(name)
        ],
    }
