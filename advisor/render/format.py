"""Number formatting and report helpers shared by the HTML and text renderers.

Both renderers must show the same numbers the same way, so every value a person reads goes
through these functions. Missing values (None, NaN) are shown as an en dash rather than "nan"
or "None", which read like bugs.
"""

from __future__ import annotations

import json
import math
from typing import Any

from advisor.engine.outcome import SEVERITIES

MISSING = "–"


def _missing(x: Any) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


def _decimals(x: float) -> int:
    """Fewer decimals for bigger numbers: about three significant digits, never fewer integers."""
    ax = abs(x)
    if ax == 0 or ax >= 100:
        return 0
    return 2 if ax < 10 else 1


def fmt_us(x: float | None) -> str:
    """A duration given in µs; switches to ms from 10,000 µs so long times stay short."""
    if _missing(x):
        return MISSING
    if abs(x) >= 10_000:
        ms = x / 1000
        return f"{ms:,.{_decimals(ms)}f} ms"
    return f"{x:,.{_decimals(x)}f} µs"


MS_FROM_US = 10_000
"""Where fmt_us switches from µs to ms; column_unit switches a whole column at the same point."""


def column_unit(values: Any) -> str:
    """The one unit ("µs" or "ms") for a column of µs durations: ms when the largest shown is
    at least 10,000 µs, as fmt_us would pick for it, so "11.6 ms" never sits above "9,157 µs".
    Missing values are ignored; an empty column is µs."""
    largest = max((abs(v) for v in values if not _missing(v)), default=0.0)
    return "ms" if largest >= MS_FROM_US else "µs"


def fmt_us_as(x: float | None, unit: str) -> str:
    """A duration given in µs, shown in `unit` ("µs" or "ms", from column_unit) whatever its
    size; a tiny non-zero value in a ms column reads "<0.01 ms" rather than "0.00 ms"."""
    if _missing(x):
        return MISSING
    if unit == "ms":
        ms = x / 1000
        if 0 < abs(ms) < 0.005:
            return "<0.01 ms"
        return f"{ms:,.{_decimals(ms)}f} ms"
    return f"{x:,.{_decimals(x)}f} µs"


def fmt_pct(ratio: float | None) -> str:
    """A 0..1 ratio as a percentage; tiny non-zero shares say "<0.1%" instead of "0.0%"."""
    if _missing(ratio):
        return MISSING
    pct = ratio * 100
    if 0 < abs(pct) < 0.05:
        return "<0.1%"
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


def fmt_value(name: str, x: Any) -> str:
    """A named value, using the project's unit conventions: `*_us` are µs, `*ratio` and
    `*share` are 0..1 fractions shown as percentages (never 0.8614 beside 10.0%)."""
    if isinstance(x, (int, float)) and not isinstance(x, bool):
        if name.endswith("_us"):
            return fmt_us(x)
        if name.endswith(("ratio", "share")):
            return fmt_pct(x)
    return fmt_num(x)


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


def terminal_safe(text: str) -> str:
    """`text` with every character that is not printable (ESC, BEL, C1 controls, bidi
    overrides ...) replaced by U+FFFD, line breaks and tabs kept: operator, kernel and file
    names come from profiles other people made, and `\x1b]52;...` in a kernel name would
    set the reader's clipboard, `\x1b]0;...` the window title, `\x1b[2J` clear the screen."""
    return "".join(c if c.isprintable() or c in "\n\t" else "\N{REPLACEMENT CHARACTER}"
                   for c in text)


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

