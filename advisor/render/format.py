"""How every renderer shows numbers to people, and text on a terminal.

The terminal summary, the HTML report, the compare page and `advisor top` all format through
these functions, so a value reads the same everywhere: "3.14 µs", never "3.1 µs" in one place
and "3.14 µs" in another. The rules:

- durations (µs) keep about three significant digits (2 decimals below 10, 1 below 100, none
  from 100) and switch to ms from 10,000 µs; byte sizes the same, in B, KiB, MiB, GiB, TiB;
- a table column of durations or sizes has one unit, the one its largest value needs, named in
  its header, so "11.6 ms" never sits above "9,157 µs";
- a non-zero value that would print as zero says so: "<0.01 ms", "<0.1%" (negative: "-<0.1%");
- percentages have one decimal; counts have thousands separators;
- missing values (None, NaN) are an en dash, not "nan" or "None", which read like bugs.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from advisor.engine.outcome import SEVERITIES

MISSING = "–"


def _missing(x: Any) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


def _finite(x: Any) -> bool:
    """A real number that can be scaled and rounded (not a bool, NaN or infinity)."""
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _decimals(x: float) -> int:
    """Fewer decimals for bigger numbers: about three significant digits, never fewer integers."""
    ax = abs(x)
    if ax == 0 or ax >= 100:
        return 0
    return 2 if ax < 10 else 1


def _below_shown(x: float, smallest: str) -> str:
    """A non-zero value too small for the decimals shown: "<0.01", or "-<0.01" below zero."""
    return ("-" if x < 0 else "") + "<" + smallest


@dataclass(frozen=True)
class _Scale:
    """The units of one quantity, smallest first: (name, size in the smallest unit, the
    value from which it is used, whether it shows decimals)."""

    units: tuple[tuple[str, float, float, bool], ...]

    def unit(self, values: Iterable[Any]) -> str:
        """The unit the largest of `values` (missing ones ignored) is shown in."""
        largest = max((abs(v) for v in values if not _missing(v)), default=0.0)
        return next(name for name, _, start, _ in reversed(self.units) if largest >= start)

    def show(self, x: Any, unit: str) -> str:
        """`x` (in the smallest unit) as a number of `unit`, without the unit's name."""
        if not _finite(x):
            return fmt_num(x)
        size, fractions = next((size, f) for name, size, _, f in self.units if name == unit)
        value = x / size
        if not fractions:
            return f"{value:,.0f}"
        if 0 < abs(value) < 0.005:
            return _below_shown(value, "0.01")
        return f"{value:,.{_decimals(value)}f}"


TIME = _Scale((("µs", 1, 0, True), ("ms", 1_000, 10_000, True)))
"""Durations, given in µs: ms from 10,000 µs, so 9,999 µs stays exact."""
SIZE = _Scale((("B", 1, 0, False), ("KiB", 2**10, 2**10, True), ("MiB", 2**20, 2**20, True),
               ("GiB", 2**30, 2**30, True), ("TiB", 2**40, 2**40, True)))
"""Byte sizes, given in bytes."""


def column_unit(values: Iterable[Any]) -> str:
    """The one unit ("µs" or "ms") for a column of µs durations: the one fmt_us would pick for
    the largest; missing values are ignored; an empty column is µs."""
    return TIME.unit(values)


def fmt_us_as(x: float | None, unit: str) -> str:
    """A duration given in µs, shown in `unit` ("µs" or "ms", from column_unit) whatever its
    size; a tiny non-zero value in a ms column reads "<0.01 ms" rather than "0.00 ms"."""
    return MISSING if _missing(x) else f"{TIME.show(x, unit)} {unit}"


def fmt_us(x: float | None) -> str:
    """A duration given in µs, in the unit its size needs ("9,999 µs", "12.3 ms")."""
    return fmt_us_as(x, column_unit([x]))


def fmt_bytes(x: float | None) -> str:
    """A size given in bytes, in the binary unit its size needs ("512 B", "1.50 MiB")."""
    if _missing(x):
        return MISSING
    unit = SIZE.unit([x])
    return f"{SIZE.show(x, unit)} {unit}"


def fmt_pct(ratio: float | None) -> str:
    """A 0..1 ratio as a percentage with one decimal; a tiny non-zero share says "<0.1%"
    instead of "0.0%"."""
    if ratio is None or math.isnan(ratio):
        return MISSING
    if math.isinf(ratio):
        return fmt_num(ratio) + "%"
    pct = ratio * 100
    if 0 < abs(pct) < 0.05:
        return _below_shown(pct, "0.1%")
    return f"{pct:.1f}%"


def fmt_num(x: Any) -> str:
    """A plain number with thousands separators; anything else as readable text."""
    if _missing(x):
        return MISSING
    if isinstance(x, bool):
        return "true" if x else "false"
    if isinstance(x, int):
        return f"{x:,}"
    if isinstance(x, float):
        if math.isinf(x):
            return "∞" if x > 0 else "-∞"
        if x.is_integer() and abs(x) < 1e15:
            return f"{int(x):,}"
        if abs(x) >= 100:
            return f"{x:,.1f}"
        return f"{x:.4g}"
    if isinstance(x, str):
        return x
    if isinstance(x, (list, tuple)):
        return ", ".join(fmt_num(v) for v in x)
    return json.dumps(x, default=str, ensure_ascii=False)


@dataclass(frozen=True)
class Column:
    """How a table shows one named column: the name without its unit suffix (`stem`), the unit
    the header names (None when there is none), and each value's text without that unit."""

    stem: str
    unit: str | None
    show: Callable[[Any], str]

    def value(self, x: Any) -> str:
        """One value with the unit written beside it, for a value shown on its own."""
        text = self.show(x)
        if self.unit is None or text == MISSING:
            return text
        return text + self.unit if self.unit == "%" else f"{text} {self.unit}"


def _numbers_in(scale: _Scale, unit: str) -> Callable[[Any], str]:
    return lambda v: scale.show(v, unit) if _finite(v) else fmt_num(v)


def _percent(per: float) -> Callable[[Any], str]:
    """Values that are `per` × a 0..1 ratio, shown as fmt_pct shows the ratio, minus the %."""
    return lambda v: fmt_pct(v / per).removesuffix("%") if _finite(v) else fmt_num(v)


def column_format(name: str, values: Sequence[Any]) -> Column:
    """How to show a column called `name` holding `values`, by the project's naming rules:
    `*_us` durations in µs, `*bytes` sizes, `*ratio`/`*share` 0..1 fractions and `*_pct`
    percentages (both shown as %), `*_gbps` GB/s, `*_mb` MB; anything else as fmt_num."""
    if name.endswith("_us"):
        unit = TIME.unit(v for v in values if _finite(v))
        return Column(name[:-3], unit, _numbers_in(TIME, unit))
    if name.endswith("bytes"):
        unit = SIZE.unit(v for v in values if _finite(v))
        return Column(name[:-5].rstrip("_") or name, unit, _numbers_in(SIZE, unit))
    if name.endswith(("ratio", "share")):
        return Column(name, "%", _percent(1))
    if name.endswith("_pct"):
        return Column(name[:-4], "%", _percent(100))
    for suffix, unit in (("_gbps", "GB/s"), ("_mb", "MB")):
        if name.endswith(suffix):
            return Column(name[:-len(suffix)], unit, fmt_num)
    return Column(name, None, fmt_num)


def fmt_value(name: str, x: Any) -> str:
    """A named value shown on its own, by the naming rules of column_format: `*_us` are µs,
    `*ratio` and `*share` 0..1 fractions shown as percentages (never 0.8614 beside 10.0%)."""
    if _missing(x) or isinstance(x, bool) or not isinstance(x, (int, float)):
        return fmt_num(x)
    return column_format(name, [x]).value(x)


def fmt_tick(us: float, unit: str) -> str:
    """A chart axis label: round values in one unit without trailing zeros ("0", "2.5 ms")."""
    if us == 0:
        return "0"
    value = us / 1000 if unit == "ms" else us
    return f"{value:,.3f}".rstrip("0").rstrip(".") + f" {unit}"


def findings_by_rank(report: dict) -> list[tuple[str, dict]]:
    """All findings of a report as (rule type, finding), most important first.

    The engine ranks by impact; ties (which should not happen) fall back to severity, then to
    impact, so the order is still deterministic.
    """
    found = [
        (group.get("Rule Type", name), finding)
        for name, groups in report["data"].items()
        for group in groups
        for finding in group["result"]
    ]
    return sorted(
        found,
        key=lambda gf: (
            gf[1]["rank"],
            SEVERITIES.index(gf[1]["severity"]),
            -(gf[1]["impact_us"] or 0),
        ),
    )


def report_lang(reports: list[dict] | dict) -> str:
    """The language a report (or the first of several) was written in; older reports are "en"."""
    first = reports if isinstance(reports, dict) else (reports[0] if reports else {})
    return first.get("advisor", {}).get("lang", "en")


def profile_label(profile: dict) -> str:
    """Names a profile for people: device, rank and path, whichever are known."""
    device = profile.get("device_name") or profile.get("device_kind") or ""
    if profile.get("device_id") not in (None, ""):
        device = f"{device} #{profile['device_id']}".strip()
    parts = [device] if device else []
    if profile.get("rank") is not None:
        world = profile.get("world_size")
        parts.append(f"rank {profile['rank']}" + (f"/{world}" if world else ""))
    parts.append(profile["path"])
    return " · ".join(parts)


def as_number(value: Any) -> float | None:
    """A rank or device id as a number, for ordering 2 before 10; None when it is not one."""
    if isinstance(value, bool) or value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def rank_order(report: dict) -> tuple:
    """Numeric rank order (then device id, then path); profiles without a rank last."""
    profile = report["profile"]
    rank, device = as_number(profile.get("rank")), as_number(profile.get("device_id"))
    return (rank is None, rank or 0.0, device is None, device or 0.0, str(profile.get("path")))


def terminal_safe(text: str, *, flatten: bool = False) -> str:
    """`text` with every character that is not printable (ESC, BEL, C1 controls, bidi
    overrides ...) replaced by U+FFFD: operator, kernel and file names come from profiles other
    people made, and `\x1b]52;...` in a kernel name would set the reader's clipboard,
    `\x1b]0;...` the window title, `\x1b[2J` clear the screen. Line breaks and tabs are kept;
    with `flatten`, for text about to be wrapped, every whitespace control (line breaks, tabs,
    carriage returns ...) becomes a space instead."""
    return "".join(
        c if c.isprintable() or (not flatten and c in "\n\t")
        else " " if flatten and c.isspace() else "\N{REPLACEMENT CHARACTER}"
        for c in text
    )


def terminal_json(document: Any, **options: Any) -> str:
    """JSON text that is safe on a terminal and still the same JSON: characters JSON leaves
    raw (C1 controls such as the one-byte CSI \x9b, bidi overrides) are written as \\uXXXX
    escapes; Chinese and other printable text stays readable."""
    text = json.dumps(document, ensure_ascii=False, **options)
    return "".join(c if c.isprintable() or c == "\n" else _json_escape(c) for c in text)


def _json_escape(char: str) -> str:
    code = ord(char)
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    code -= 0x10000  # outside the BMP: a surrogate pair, as JSON spells it
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"

