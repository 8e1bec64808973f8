"""Short ranked terminal summary: what to fix first, in a few lines per profile.

Details (evidence, thresholds, skipped rules) belong in the HTML/JSON reports; the terminal
output only points at them. Lines are wrapped before colouring so ANSI codes never count
towards the width, and control characters from profile strings are replaced so a crafted op
name cannot drive the terminal.
"""

from __future__ import annotations

import textwrap
import unicodedata
from typing import Any

import click

from advisor.render.format import findings_by_rank, fmt_pct, fmt_us, profile_label, report_lang

SEVERITY_STYLE: dict[str, dict[str, Any]] = {
    "high": {"fg": "red", "bold": True},
    "medium": {"fg": "yellow", "bold": True},
    "low": {"fg": "cyan"},
}
DETAILS_HINT = "(use --format html or json for details)"
INDENT = "  "
LABELS: dict[str, dict[str, str]] = {
    "zh": {
        "No problems found": "未发现性能问题",
        "{n} more finding{s}": "另有 {n} 项发现未列出",
        "{n} rule{s} not applicable": "{n} 条规则不适用",
        "{n} reader warning{s}": "读取数据时有 {n} 条告警",
        "{n} rule error{s}": "{n} 条规则执行出错",
        DETAILS_HINT: "（详见 --format html 或 json 输出）",
        "AOE: {tuned} of {advised} advised operator{s} tuned":
            "AOE：建议调优的 {advised} 个算子中已调优 {tuned} 个",
        " ({results})": "（{results}）",
        "{n} improved": "{n} 个性能提升",
        "{n} regressed": "{n} 个性能劣化",
        "{n} failed": "{n} 个失败",
        "{n} incomplete": "{n} 个未完成",
        ", {n} not tuned": "，{n} 个未调优",
    },
}
"""Fixed phrases of the summary per language, keyed by the English phrase; English needs none."""


def _label(lang: str, phrase: str, count: int = 1, **values: Any) -> str:
    """A fixed phrase in `lang`, filled in; `count` picks the English plural ending {s}."""
    return LABELS.get(lang, {}).get(phrase, phrase).format(s=_s(count), **values)


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


def _wide(c: str) -> bool:
    return unicodedata.east_asian_width(c) in "WF"


def _cells(text: str) -> int:
    """Terminal columns a text takes: CJK characters are two columns wide."""
    return sum(2 if _wide(c) else 1 for c in text)


def _wrap(text: str, width: int, indent: str, first: str | None = None) -> list[str]:
    first = indent if first is None else first
    text = _printable(text)
    if _cells(text) == len(text):
        return textwrap.wrap(text, width=width, initial_indent=first, subsequent_indent=indent,
                             break_on_hyphens=False)
    return _wrap_wide(text, width, indent, first)


CLOSING = frozenset("，。；：、！？）」』》")
"""Chinese punctuation that must not start a line; it may stick out by one character."""


def _wrap_wide(text: str, width: int, indent: str, first: str) -> list[str]:
    """Wrap text holding CJK characters by columns: Chinese may break between any two
    characters, while runs of Latin letters and digits (op names, numbers) stay whole."""
    tokens: list[str] = []
    for c in " ".join(text.split()):
        if tokens and c != " " and not _wide(c) and tokens[-1][-1] != " " \
                and not _wide(tokens[-1][-1]):
            tokens[-1] += c
        else:
            tokens.append(c)
    lines: list[str] = []
    line = first
    for token in tokens:
        if _cells(line) + _cells(token) > width and line.strip() and token not in CLOSING:
            lines.append(line.rstrip())
            line = indent
        if token == " " and line == indent:
            continue
        line += token
    if line.strip():
        lines.append(line.rstrip())
    return lines


def _s(n: int) -> str:
    return "" if n == 1 else "s"


def _profile_lines(report: dict, width: int, color: bool, max_findings: int) -> list[str]:
    profile = report["profile"]
    header = f"{profile_label(profile)} ({profile['source_format']})"
    lines = [_style(line, color, bold=True) for line in _wrap(header, width, INDENT, first="")]
    lang = report_lang(report)
    findings = findings_by_rank(report)
    if not findings:
        lines.append(INDENT + _style(_label(lang, "No problems found"), color, fg="green"))
    for _, f in findings[:max_findings]:
        lines.extend(_finding_lines(f, width, color))
    if "tuning_loop" in report:
        lines.extend(_wrap(_tuning_line(report["tuning_loop"]["summary"], lang), width, INDENT))
    hidden = len(findings) - max_findings
    notes = [(hidden, "{n} more finding{s}")] if hidden > 0 else []
    notes += [
        (len(report["not_applicable"]), "{n} rule{s} not applicable"),
        (len(report["warnings"]), "{n} reader warning{s}"),
        (len(report["rule_errors"]), "{n} rule error{s}"),
    ]
    hint = _label(lang, DETAILS_HINT)
    sep = "" if lang == "zh" else " "
    for count, what in notes:
        if count:
            lines.extend(_wrap(f"{_label(lang, what, count, n=count)}{sep}{hint}", width,
                                   INDENT))
    return lines


def _tuning_line(summary: dict, lang: str = "en") -> str:
    """One line closing the AOE loop; the per-operator table is in the HTML/JSON reports."""
    sep = "，" if lang == "zh" else ", "
    results = sep.join(_label(lang, f"{{n}} {s}", n=summary[s])
                       for s in ("improved", "regressed", "failed", "incomplete") if summary[s])
    return (_label(lang, "AOE: {tuned} of {advised} advised operator{s} tuned",
                   summary["advised"], tuned=summary["tuned"], advised=summary["advised"])
            + (_label(lang, " ({results})", results=results) if results else "")
            + _label(lang, ", {n} not tuned", n=summary["not_tuned"]))


def _finding_lines(f: dict, width: int, color: bool) -> list[str]:
    """Rank, severity, title and impact on top; message and first suggestion indented below."""
    lead = f"{INDENT}{f['rank']:>2}. "
    severity = f"{f['severity'].upper():<7}"
    indent = " " * (len(lead) + len(severity))
    impact = f"{fmt_us(f['impact_us'])} ({fmt_pct(f['impact_ratio'])})"
    room = width - len(indent) - len(impact) - 2
    beside = room >= 20  # impact right-aligned on the title line when there is space
    title_width = room if beside else max(width - len(indent), 1)
    title = _wrap(f["title"], title_width, "") or [""]
    lines = []
    for i, part in enumerate(title):
        sev = _style(severity, color, **SEVERITY_STYLE[f["severity"]])
        start = lead + sev if i == 0 else indent
        line = start + _style(part, color, bold=True)
        if i == 0 and beside:
            line += " " * (room - _cells(part) + 2) + impact
        lines.append(line)
    if not beside:
        lines.append(indent + impact)
    lines.extend(_wrap(f["message"], width, indent))
    if f["suggestions"]:
        lines.extend(_wrap(f["suggestions"][0], width, indent + "  ", first=indent + "→ "))
    return lines
