"""`advisor top`'s text output in English or Chinese: each profile's line, its summary, the
ranked tables. The words come from the catalog (advisor.render.messages); CSV and JSON keep the
column names, which scripts read."""

from __future__ import annotations

from typing import TYPE_CHECKING

from advisor.compat import zip_strict
from advisor.lazy import lazy_module
from advisor.render.format import column_format, fmt_value
from advisor.render.messages import message
from advisor.render.text import display_width

if TYPE_CHECKING:
    import pandas as pd
else:
    pd = lazy_module("pandas")

HEADINGS = {
    "name": "top.column.name",
    "op_type": "top.column.op_type",
    "core_type": "top.column.core_type",
    "count": "top.column.count",
    "time_us": "top.column.time",
    "total_us": "top.column.total",
    "share": "top.column.share",
    "cumulative_us": "top.column.cumulative",
    "flops": "top.column.flops",
    "gflops": "top.column.gflops",
    "bytes": "top.column.bytes",
    "gbps": "top.column.gbps",
    "start_us": "top.column.start",
    "input_shapes": "top.column.input_shapes",
    "input_dtypes": "top.column.input_dtypes",
    "output_shapes": "top.column.output_shapes",
}
"""The catalog key of each column's heading (advisor.top.output_columns); the unit follows."""


def profile_line(
    lang: str, label: str, source_format: str, table: str, path: str, rows: int
) -> str:
    return message(
        lang, "top.profile", rows, label=label, format=source_format, table=table, path=path, n=rows
    )


def summary_lines(numbers: dict[str, float | None], lang: str = "en") -> list[str]:
    """profile_analyze's summary: total device and host time; copy time where asked for."""

    def us(key: str) -> str:
        value = numbers.get(key)
        return "N/A" if value is None else fmt_value(key, value)

    lines = [message(lang, "top.totals", device=us("total_device_us"), host=us("total_host_us"))]
    if "copy_us" in numbers:
        count = int(numbers["copy_count"] or 0)
        lines.append(
            message(
                lang,
                "top.copies",
                count,
                n=count,
                total=us("copy_us"),
                mean=us("copy_mean_us"),
                wait=us("copy_wait_us"),
                wait_mean=us("copy_wait_mean_us"),
            )
        )
    return lines


def kern_note(lang: str) -> str:
    """What the time column holds with --top-end-key kern."""
    return message(lang, "top.kern")


def host_line(lang: str, rows: int) -> str:
    """The line above the host ranking (--show-host)."""
    return message(lang, "top.host", rows, n=rows)


def format_table(frame: pd.DataFrame, max_width: int = 48, lang: str = "en") -> str:
    """A plain-text table: numbers right-aligned as the reports show them (advisor.render.
    format), each column's unit in its header, text cut to fit; Chinese characters take two
    terminal columns."""
    cells: list[list[str]] = []
    numeric: list[bool] = []
    for col in frame.columns:
        values = frame[col].astype(object).where(frame[col].notna(), None).tolist()
        column = column_format(col, values)
        numeric.append(pd.api.types.is_numeric_dtype(frame[col]))
        heading = message(lang, HEADINGS[col]) if col in HEADINGS else col
        header = heading + (f" ({column.unit})" if column.unit else "")
        cells.append([header] + [_clip(column.show(v), max_width) for v in values])
    widths = [max(display_width(c) for c in column) for column in cells]
    lines = []
    for i in range(len(frame) + 1):
        parts = [
            _pad(column[i], w, right=num) for column, w, num in zip_strict(cells, widths, numeric)
        ]
        lines.append("  ".join(parts).rstrip())
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _pad(text: str, width: int, *, right: bool) -> str:
    fill = " " * (width - display_width(text))
    return fill + text if right else text + fill


def _clip(text: str, max_width: int) -> str:
    return text if len(text) <= max_width else text[: max_width - 1] + "…"
