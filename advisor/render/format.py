"""How every renderer shows tables, values and text on a terminal.

The terminal summary, the HTML report, the compare page and `advisor top` all format through
these functions and the number formats of `advisor.units` (which rule messages use too), so a
value reads the same everywhere: "3.14 µs", never "3.1 µs" in one place and "3.14 µs" in
another. On top of those, a table column of durations or sizes has one unit, the one its
largest value needs, named in its header, so "11.6 ms" never sits above "9,157 µs".
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, overload

from advisor.engine.outcome import SEVERITIES
from advisor.render.messages import message
from advisor.units import (
    MISSING,
    SIZE,
    TIME,
    Scale,
    column_unit,
    finite,
    fmt_num,
    fmt_pct,
    fmt_us,
    fmt_us_as,
    is_missing,
)

T = TypeVar("T")


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


def _numbers_in(scale: Scale, unit: str) -> Callable[[Any], str]:
    return lambda v: scale.show(v, unit) if finite(v) else fmt_num(v)


def _percent(per: float) -> Callable[[Any], str]:
    """Values that are `per` × a 0..1 ratio, shown as fmt_pct shows the ratio, minus the %."""
    return lambda v: fmt_pct(v / per).removesuffix("%") if finite(v) else fmt_num(v)


def column_format(name: str, values: Sequence[Any]) -> Column:
    """How to show a column called `name` holding `values`, by the project's naming rules:
    `*_us` durations in µs, `*bytes` sizes, `*ratio`/`*share` 0..1 fractions and `*_pct`
    percentages (both shown as %), `*_gbps` GB/s, `*_mb` MB; anything else as fmt_num."""
    if name.endswith("_us"):
        unit = TIME.unit(v for v in values if finite(v))
        return Column(name[:-3], unit, _numbers_in(TIME, unit))
    if name.endswith("bytes"):
        unit = SIZE.unit(v for v in values if finite(v))
        return Column(name[:-5].rstrip("_") or name, unit, _numbers_in(SIZE, unit))
    if name.endswith(("ratio", "share")):
        return Column(name, "%", _percent(1))
    if name.endswith("_pct"):
        return Column(name[:-4], "%", _percent(100))
    for suffix, unit in (("_gbps", "GB/s"), ("_mb", "MB")):
        if name.endswith(suffix):
            return Column(name[: -len(suffix)], unit, fmt_num)
    return Column(name, None, fmt_num)


def fmt_value(name: str, x: Any) -> str:
    """A named value shown on its own, by the naming rules of column_format: `*_us` are µs,
    `*ratio` and `*share` 0..1 fractions shown as percentages (never 0.8614 beside 10.0%)."""
    if is_missing(x) or isinstance(x, bool) or not isinstance(x, (int, float)):
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


MIN_IF_FIXED_SHARE = 0.001
"""A finding's "if fixed" estimate is left out below this saving (0.1% of step time)."""


def _saving(before: float, after: float) -> dict[str, str]:
    unit = column_unit([before, after])  # "10.0 ms → 9.00 ms", not "→ 9,000 µs"
    return {
        "before": fmt_us_as(before, unit),
        "after": fmt_us_as(after, unit),
        "saving": f"−{fmt_pct(1.0 - after / before)}",
    }


def if_fixed_line(f: dict, report: dict, lang: str) -> str | None:
    """ "if fixed: step time A → B (−X%)" for a finding, naming the critical-path time that
    kept the saving below the time at stake; None without an estimate or when it saves next
    to nothing (under MIN_IF_FIXED_SHARE, or too little to show: "809 ms → 809 ms")."""
    after = f.get("step_time_if_fixed_us")
    path = report["summary"].get("critical_path")
    if after is None or not path or not path["step_us"]:
        return None
    if 1.0 - after / path["step_us"] < MIN_IF_FIXED_SHARE:
        return None
    saving = _saving(path["step_us"], after)
    if saving["before"] == saving["after"]:
        return None
    bounded_by = f.get("if_fixed_bounded_by")
    if not bounded_by:
        return message(lang, "if_fixed_line", **saving)
    bounds = message(lang, "list_sep").join(message(lang, f"bound.{b}") for b in bounded_by)
    return message(lang, "if_fixed_bounded_line", bounds=bounds, **saving)


def source_values(source: dict) -> dict[str, str]:
    """A finding's source line as every renderer shows it: `location` (`train.py:42 step()`,
    file alone where the stack names no line or function) and `share` of the finding's
    operator time (its time where the share is unknown)."""
    location = (
        source["file"] if source.get("line") is None else f"{source['file']}:{source['line']}"
    )
    if source.get("function"):
        location += f" {source['function']}()"
    share = source.get("share")
    return {
        "location": location,
        "share": fmt_us(source["time_us"]) if share is None else fmt_pct(share),
    }


def fix_first_values(report: dict) -> dict[str, Any] | None:
    """The "fix these first" rule ids with the step time now, were they fixed, and the
    saving, formatted, and the message key for one rule or several (`key`); None when the
    report names none."""
    fix = report["summary"].get("fix_first")
    if not fix or not fix["step_us"]:
        return None
    key = "fix_first_line" if len(fix["rules"]) > 1 else "fix_first_one"
    if fix["step_time_if_fixed_us"] is None:  # they hold all of the steps' time
        return {"key": f"{key}_all", "rules": list(fix["rules"]), "before": fmt_us(fix["step_us"])}
    saving = _saving(fix["step_us"], fix["step_time_if_fixed_us"])
    return {"key": key, "rules": list(fix["rules"]), **saving}


def report_lang(reports: Sequence[dict] | dict) -> str:
    """The language a report (or the first of several) was written in; older reports are "en"."""
    first = reports if isinstance(reports, dict) else (reports[0] if reports else {})
    return first.get("advisor", {}).get("lang", "en")


def profile_label(profile: dict, lang: str = "en") -> str:
    """Names a profile for people: device, training or inference (it words the advice), rank
    and path, whichever are known."""
    device = profile.get("device_name") or profile.get("device_kind") or ""
    if profile.get("device_id") not in (None, ""):
        device = f"{device} #{profile['device_id']}".strip()
    parts = [device] if device else []
    if profile.get("workload"):
        parts.append(message(lang, f"workload.{profile['workload']}"))
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


def steady_step_count(report: dict) -> int:
    """How many steps a profile's own analysis counts (those it did not find warming up)."""
    return sum(1 for s in report.get("metrics", {}).get("steps", []) if not s.get("warmup"))


def ranks_counting_left_out_steps(
    cluster: dict | None, steady_steps: Mapping[float, int]
) -> list[float]:
    """The ranks whose own findings count more steps than the cluster compares them over:
    steps the cluster leaves out as other ranks' warm-up (advisor.cluster), which a rank's own
    analysis, made before the cluster was built, cannot know. `steady_steps`: each rank's
    steady_step_count."""
    out = []
    for row in (cluster or {}).get("metrics", {}).get("ranks", []):
        rank, steps = as_number(row.get("rank")), as_number(row.get("steps"))
        if rank is not None and steps is not None and steady_steps.get(rank, 0) > steps:
            out.append(rank)
    return out


def rank_list(ranks: Sequence[float], most: int = 8) -> str:
    """Rank numbers for a sentence: '0, 1, 5', the first `most` and an ellipsis."""
    shown = ", ".join(str(int(r)) if float(r).is_integer() else str(r) for r in ranks[:most])
    return shown + (", …" if len(ranks) > most else "")


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
    if text.isprintable():  # the usual case, told in C: nothing to replace
        return text
    return "".join(
        c
        if c.isprintable() or (not flatten and c in "\n\t")
        else " "
        if flatten and c.isspace()
        else "\N{REPLACEMENT CHARACTER}"
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


class Picked(Sequence[T]):
    """The items of `items` at `positions`, read from `items` on each access: a run's reports
    may be unpacked anew on each read (api.AnalysisResult.report_sequence), and a list of
    them would hold every report at once."""

    def __init__(self, items: Sequence[T], positions: Sequence[int]) -> None:
        self._items, self._positions = items, positions

    def __len__(self) -> int:
        return len(self._positions)

    @overload
    def __getitem__(self, index: int) -> T: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[T]: ...

    def __getitem__(self, index: int | slice) -> T | Sequence[T]:
        if isinstance(index, slice):
            return Picked(self._items, self._positions[index])
        return self._items[self._positions[index]]
