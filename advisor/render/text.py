"""Short ranked terminal summary: what to fix first, in a few lines per profile.

Details (evidence, thresholds, skipped rules) belong in the HTML/JSON reports; the terminal
output only points at them. Lines are wrapped before colouring so ANSI codes never count
towards the width, and control characters from profile strings are replaced so a crafted op
name cannot drive the terminal.
"""

from __future__ import annotations

import textwrap
from typing import Any

import click

from advisor.render.format import findings_by_rank, fmt_pct, fmt_us, profile_label

SEVERITY_STYLE: dict[str, dict[str, Any]] = {
    "high": {"fg": "red", "bold": True},
    "medium": {"fg": "yellow", "bold": True},
    "low": {"fg": "cyan"},
}
DETAILS_HINT = "(use --format html or json for details)"
INDENT = "  "


def render_text(
    reports: list[dict], *, width: int = 100, color: bool = False, max_findings: int = 10
) -> str:
    """Short ranked terminal summary."""
    return "\n\n".join(
        "\n".join(_profile_lines(r, width, color, max_findings)) for r in reports
    ) + "\n"


def _style(text: str, color: bool, **kw: Any) -> str:
    return click.style(text, **kw) if color else text


def _printable(text: str) -> str:
    return "".join(
        c if c.isprintable() else " " if c.isspace() else "\N{REPLACEMENT CHARACTER}"
        for c in text
    )


def _wrap(text: str, width: int, indent: str, first: str | None = None) -> list[str]:
    return textwrap.wrap(
        _printable(text), width=width, initial_indent=indent if first is None else first,
        subsequent_indent=indent, break_on_hyphens=False,
    )


def _s(n: int) -> str:
    return "" if n == 1 else "s"


def _profile_lines(report: dict, width: int, color: bool, max_findings: int) -> list[str]:
    profile = report["profile"]
    header = f"{profile_label(profile)} ({profile['source_format']})"
    lines = [_style(line, color, bold=True) for line in _wrap(header, width, INDENT, first="")]
    findings = findings_by_rank(report)
    if not findings:
        lines.append(INDENT + _style("No problems found", color, fg="green"))
    for _, f in findings[:max_findings]:
        lines.extend(_finding_lines(f, width, color))
    if "tuning_loop" in report:
        lines.extend(_wrap(_tuning_line(report["tuning_loop"]["summary"]), width, INDENT))
    hidden = len(findings) - max_findings
    notes = [(hidden, "more finding{s}")] if hidden > 0 else []
    notes += [
        (len(report["not_applicable"]), "rule{s} not applicable"),
        (len(report["warnings"]), "reader warning{s}"),
        (len(report["rule_errors"]), "rule error{s}"),
    ]
    for count, what in notes:
        if count:
            lines.extend(_wrap(f"{count} {what.format(s=_s(count))} {DETAILS_HINT}", width, INDENT))
    return lines


def _tuning_line(summary: dict) -> str:
    """One line closing the AOE loop; the per-operator table is in the HTML/JSON reports."""
    results = ", ".join(f"{summary[s]} {s}" for s in ("improved", "regressed", "failed",
                                                      "incomplete") if summary[s])
    return (f"AOE: {summary['tuned']} of {summary['advised']} advised operator"
            f"{_s(summary['advised'])} tuned" + (f" ({results})" if results else "")
            + f", {summary['not_tuned']} not tuned")


def _finding_lines(f: dict, width: int, color: bool) -> list[str]:
    """Rank, severity, title and impact on top; message and first suggestion indented below."""
    lead = f"{INDENT}{f['rank']:>2}. "
    severity = f"{f['severity'].upper():<7}"
    indent = " " * (len(lead) + len(severity))
    impact = f"{fmt_us(f['impact_us'])} ({fmt_pct(f['impact_ratio'])})"
    room = width - len(indent) - len(impact) - 2
    beside = room >= 20  # impact right-aligned on the title line when there is space
    title_width = room if beside else max(width - len(indent), 1)
    title = textwrap.wrap(_printable(f["title"]), width=title_width, break_on_hyphens=False) or [""]
    lines = []
    for i, part in enumerate(title):
        sev = _style(severity, color, **SEVERITY_STYLE[f["severity"]])
        start = lead + sev if i == 0 else indent
        line = start + _style(part, color, bold=True)
        if i == 0 and beside:
            line += " " * (room - len(part) + 2) + impact
        lines.append(line)
    if not beside:
        lines.append(indent + impact)
    lines.extend(_wrap(f["message"], width, indent))
    if f["suggestions"]:
        lines.extend(_wrap(f["suggestions"][0], width, indent + "  ", first=indent + "→ "))
    return lines
