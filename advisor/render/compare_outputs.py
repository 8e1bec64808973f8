"""The compare tables as a JSON document (with its schema), a spreadsheet and a terminal table.

The JSON keeps every row of every compare table under its normalized name, so scripts read
the same columns the rules see; the spreadsheet names its sheets as the compare tool's users
know them (OperatorCompare, OperatorCompareStatistic, ...).
"""

from __future__ import annotations

import io
import json
import math
from importlib.resources import files
from typing import TYPE_CHECKING, Any

import jsonschema

from advisor.compat import zip_strict
from advisor.engine.evaluate import to_plain
from advisor.lazy import lazy_module
from advisor.render.messages import Translate
from advisor.units import fmt_num, fmt_pct, fmt_us

if TYPE_CHECKING:
    import pandas as pd
else:
    pd = lazy_module("pandas")

COMPARE_SCHEMA: dict[str, Any] = json.loads(
    files("advisor").joinpath("schemas/compare.schema.json").read_text(encoding="utf-8")
)

SHEETS = {
    "compare_overall": "OverallMetrics",
    "compare_op_stats": "OperatorCompareStatistic",
    "compare_ops": "OperatorCompare",
    "compare_comm": "CommunicationCompare",
    "compare_memory": "MemoryCompare",
    "compare_allocation_sites": "MemorySiteCompare",
    "compare_memory_kinds": "MemoryKindCompare",
    "compare_modules": "ModuleCompare",
    "compare_apis": "ApiCompare",
    "compare_kernels": "KernelCompare",
    "compare_profiling": "ProfilingOptions",
}
"""Compare table -> spreadsheet sheet, in sheet order."""

EXCEL_MAX_ROWS = 1_048_575  # rows below the header


def records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    columns = list(frame.columns)
    return [
        {c: to_plain(v) for c, v in zip_strict(columns, row)}
        for row in frame.itertuples(index=False)
    ]


def compare_document(
    tables: dict[str, pd.DataFrame], meta: dict[str, Any], advisor: dict[str, Any]
) -> dict[str, Any]:
    """compare.json: who was compared with what, how, and every compare table's rows."""
    extra = meta["extra"]
    document = {
        "advisor": advisor,
        "baseline": extra["baseline"],
        "comparison": extra["comparison"],
        "options": extra["options"],
        "tables": {name: records(tables[name]) for name in SHEETS if name in tables},
    }
    jsonschema.validate(document, COMPARE_SCHEMA)
    return document


def _header(column: str) -> str:
    """A spreadsheet header from a column name: base_time_us -> Base Time (us)."""
    words = column.replace("comp_", "comparison_").split("_")
    unit = {"us": "(us)", "bytes": "(bytes)"}.get(words[-1])
    if unit:
        words = words[:-1]
    text = " ".join(w.capitalize() for w in words if w)
    return f"{text} {unit}" if unit else text


def spreadsheet(tables: dict[str, pd.DataFrame]) -> bytes:
    """The .xlsx workbook: one sheet per compare table, header frozen, filters on, rows that
    got worse (diff > 0) in red, as the compare tool marks them."""
    import xlsxwriter

    buffer = io.BytesIO()
    book = xlsxwriter.Workbook(buffer, {"in_memory": True, "nan_inf_to_errors": True})
    bold = book.add_format({"bold": True, "bg_color": "#DDEBF7", "border": 1, "text_wrap": True})
    number = book.add_format({"num_format": "#,##0.000"})
    worse = book.add_format({"font_color": "#C00000"})
    for table, sheet_name in SHEETS.items():
        frame = tables.get(table)
        if frame is None:
            continue
        sheet = book.add_worksheet(sheet_name)
        columns = list(frame.columns)
        rows = frame.head(EXCEL_MAX_ROWS)
        for c, column in enumerate(columns):
            sheet.write(0, c, _header(column), bold)
            values = rows[column].tolist()
            numeric = pd.api.types.is_numeric_dtype(rows[column])
            for r, value in enumerate(values, start=1):
                value = to_plain(value)
                if value is None or (isinstance(value, float) and not math.isfinite(value)):
                    continue
                if numeric:
                    sheet.write_number(r, c, value, number)
                else:
                    sheet.write_string(r, c, str(value))
            width = max([len(_header(column)), *(len(str(v)) for v in values[:200])])
            sheet.set_column(c, c, min(max(width, 8), 60))
        sheet.freeze_panes(1, 0)
        if len(rows):
            sheet.autofilter(0, 0, len(rows), len(columns) - 1)
            diff = next((i for i, c in enumerate(columns) if c.startswith("diff")), None)
            if diff is not None:
                letter = xlsxwriter.utility.xl_col_to_name(diff)
                sheet.conditional_format(
                    1,
                    0,
                    len(rows),
                    len(columns) - 1,
                    {"type": "formula", "criteria": f"=${letter}2>0", "format": worse},
                )
    book.close()
    return buffer.getvalue()


def overall_lines(
    overall: pd.DataFrame, labels: dict[str, str] | None = None, inflated: bool = False
) -> list[str]:
    """The breakdown side by side, as the compare tool prints it; `inflated`: a run was not
    profiled minimally, which the E2E row says as the compare tool does."""
    labels = dict(labels or {})
    if inflated:
        labels["e2e"] = labels.get("e2e", "e2e") + labels.get("not_minimal_profiling", "")

    def cell(unit: str, value: Any) -> str:
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return "-"
        if unit == "bytes":
            return f"{fmt_num(value / 2**20)} MiB"
        return fmt_us(value)

    rows = [tuple(labels.get(h, h) for h in ("Metric", "Baseline", "Comparison", "Diff", "Ratio"))]
    for r in overall.itertuples(index=False):
        ratio = "-" if pd.isna(r.ratio) else fmt_pct(r.ratio)
        diff = cell(r.unit, r.diff)
        rows.append(
            (
                labels.get(r.metric, r.metric),
                cell(r.unit, r.base),
                cell(r.unit, r.comparison),
                diff if diff.startswith("-") or diff == "-" else f"+{diff}",
                ratio,
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(5)]
    return [
        "  ".join(
            v.ljust(w) if i == 0 else v.rjust(w) for i, (v, w) in enumerate(zip_strict(row, widths))
        )
        for row in rows
    ]


def side_notes(base: dict[str, Any], comp: dict[str, Any], tr: Translate) -> list[str]:
    """What stands for each side, under the breakdown: the rank picked out of several, the
    step chosen, and the profiler options that inflate its times."""
    lines = []
    for key, run in ((tr("baseline"), base), (tr("column.comparison"), comp)):
        choice = run.get("rank_choice")
        if choice:
            times = choice["mean_step_us"]
            label = choice["label"]
            others = ", ".join(f"{n} {fmt_us(t)}" for n, t in times.items() if n != label)
            lines.append(
                tr(
                    f"rank_{choice['picked']}",
                    side=key,
                    ranks=choice["of_ranks"],
                    label=label,
                    mean=fmt_us(times[label]),
                    others=others,
                )
            )
        if run.get("step") is not None:
            lines.append(tr("step_chosen", side=key, step=run["step"]))
        if run.get("profiling_options"):
            lines.append(
                tr("not_minimal_note", side=key, options=", ".join(run["profiling_options"]))
            )
    return lines
