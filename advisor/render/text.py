"""Short ranked terminal summary: what to fix first, in a few lines per profile.

Details (evidence, thresholds, skipped rules) belong in the HTML/JSON reports; the terminal
output only points at them. Lines are wrapped to the terminal's width before colouring so ANSI
codes never count towards the width, and control characters from profile strings are replaced
so a crafted op name cannot drive the terminal.

With several ranks (a cluster report among the reports) the summary starts with the cluster's
verdict, then one table of the ranks in rank order, then the details of the few worst ranks
only: 300 ranks must not bury the one finding that names the slow rank.
"""

from __future__ import annotations

import math
import os
import shutil
import sys
import textwrap
import unicodedata
from collections.abc import Sequence
from typing import Any, TextIO

import click

from advisor.applicability import NOT_RECORDED
from advisor.compat import zip_strict
from advisor.engine.outcome import SEVERITIES, Severity
from advisor.render.format import (
    Picked,
    as_number,
    findings_by_rank,
    fix_first_values,
    if_fixed_line,
    profile_label,
    rank_list,
    rank_order,
    ranks_counting_left_out_steps,
    report_lang,
    source_values,
    steady_step_count,
    terminal_safe,
)
from advisor.render.messages import kind_words, message, translator
from advisor.units import MISSING, column_unit, fmt_bytes, fmt_num, fmt_pct, fmt_us, fmt_us_as

SEVERITY_STYLE: dict[str, dict[str, Any]] = {
    Severity.HIGH.value: {"fg": "red", "bold": True},
    Severity.MEDIUM.value: {"fg": "yellow", "bold": True},
    Severity.LOW.value: {"fg": "cyan"},
}
INDENT = "  "
DEFAULT_WIDTH, MIN_WIDTH, MAX_WIDTH = 100, 60, 160
MAX_SUGGESTIONS = 2
"""Suggestions shown per finding when it has more than one more than this; the rest are
counted ("+2 more suggestions")."""
MAX_RANK_DETAILS = 5
"""Ranks whose findings are shown after the table of ranks, worst first."""
MAX_RANK_FINDINGS = 5
"""Findings shown per rank there (the rest counted); each rank's report has them all."""
MAX_WRITTEN_NAMES = 4
MAX_COLLECT_HINTS = 3
"""Ways to collect missing data shown under the note; the reports list every one per rule."""
SERIOUS = (Severity.HIGH.value, Severity.MEDIUM.value)
AOE_RESULTS = (
    ("improved", "aoe_improved"),
    ("regressed", "aoe_regressed"),
    ("failed", "aoe_failed"),
    ("incomplete", "aoe_incomplete"),
)
"""The AOE outcomes counted in the summary's AOE line, with their message keys."""


def terminal_width(default: int = DEFAULT_WIDTH) -> int:
    """Columns to wrap the summary to: COLUMNS, else the terminal's width, else `default`
    (output to a file or pipe), kept within MIN_WIDTH..MAX_WIDTH so it stays readable."""
    columns = shutil.get_terminal_size((default, 24)).columns
    return max(MIN_WIDTH, min(MAX_WIDTH, columns))


def color_enabled(stream: TextIO | None = None) -> bool:
    """Colour when `stream` (stdout by default) is a terminal. NO_COLOR (any non-empty value,
    https://no-color.org) turns it off whatever else is set; FORCE_COLOR (non-empty, not 0)
    turns it on for a pipe or file, e.g. a CI log that shows colours."""
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR", "").strip().lower() not in ("", "0", "false", "no"):
        return True
    if os.environ.get("TERM") == "dumb":
        return False
    stream = sys.stdout if stream is None else stream
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # a closed or replaced stream
        return False


def render_text(
    reports: Sequence[dict],
    *,
    width: int = DEFAULT_WIDTH,
    color: bool = False,
    max_findings: int = 10,
    details: Sequence[str | None] | None = None,
    max_rank_details: int = MAX_RANK_DETAILS,
) -> str:
    """Short ranked terminal summary, wrapped to `width` columns.

    `details` names, per report, the file written for it that holds the details (e.g.
    "report.html"), or None where no file was written; the notes then point at that file, or
    at nothing. Left out (None), the notes suggest --format html or json.

    With a cluster report (2+ ranks) the cluster's verdict comes first, then a table of the
    ranks in rank order, then the findings of the `max_rank_details` worst ranks with findings
    at or above medium.
    """
    outlines = [_outline(r) for r in reports]  # each report unpacked once for the outlines
    hints = [
        _hint(o, details[i] if details is not None and i < len(details) else None, details is None)
        for i, o in enumerate(outlines)
    ]
    if any(_is_cluster(o) for o in outlines):
        blocks = _cluster_blocks(
            reports, outlines, hints, details, width, color, max_findings, max_rank_details
        )
    else:
        blocks = [
            _profile_lines(r, width, color, max_findings, hint)
            for r, hint in zip_strict(reports, hints)
        ]
    config = outlines[0].get("advisor", {}).get("config") if outlines else None
    if config:  # which thresholds and selections are in effect is part of the verdict
        blocks.insert(
            0,
            _wrap(
                message(report_lang(outlines[0]), "config_line", path=config),
                width,
                INDENT,
                first="",
            ),
        )
    return "\n\n".join("\n".join(block) for block in blocks) + "\n"


def written_line(
    names: Sequence[str], folder: str, *, width: int = DEFAULT_WIDTH, lang: str = "en"
) -> str:
    """The closing line naming the files written, the HTML report first:
    "Wrote report.html, prof_rule_0.json in out"; many files are counted, not listed."""
    ordered = sorted(names, key=lambda n: not n.endswith(".html"))  # stable otherwise
    if len(ordered) > MAX_WRITTEN_NAMES + 1:
        listed = message(
            lang,
            "names_and_more",
            names=", ".join(ordered[:MAX_WRITTEN_NAMES]),
            n=len(ordered) - MAX_WRITTEN_NAMES,
            total=len(ordered),
        )
    else:
        listed = ", ".join(ordered)
    text = terminal_safe(message(lang, "wrote", files=listed, folder=folder), flatten=True)
    # A path is not broken inside: it is copied from the terminal.
    if display_width(text) != len(text):
        return "\n".join(_wrap_wide(text, width, INDENT, "")) or text
    return (
        "\n".join(
            textwrap.wrap(
                text,
                width=width,
                subsequent_indent=INDENT,
                break_long_words=False,
                break_on_hyphens=False,
            )
        )
        or text
    )


_OUTLINE_FINDING = ("rank", "severity", "impact_us", "title")
"""What the rank table and the ordering of ranks read of a finding."""


def _outline(report: dict) -> dict:
    """What the ranks' table, their order and the notes read of a report: its profile,
    settings, summary, steps and findings' ranks, severities, impacts and titles. A run's
    reports may be kept packed, unpacked anew on each access (advisor.api), and of
    hundreds of ranks only the worst few are shown whole: the rest is read from outlines
    (300 ranks: 3,000 unpackings before, 0.7 s)."""
    return {
        **{key: report[key] for key in ("profile", "advisor", "summary") if key in report},
        "metrics": {"steps": report.get("metrics", {}).get("steps", [])},
        "data": {
            name: [
                {
                    **{k: v for k, v in group.items() if k != "result"},
                    "result": [
                        {k: f.get(k) for k in _OUTLINE_FINDING} for f in group.get("result", [])
                    ],
                }
                for group in groups
            ]
            for name, groups in report.get("data", {}).items()
        },
    }


def _is_cluster(report: dict) -> bool:
    return report.get("profile", {}).get("source_format") == "cluster"


def _hint(report: dict, detail: str | None, unknown: bool) -> str:
    """The pointer at the details a report's notes end with, led by the space (or none, in
    Chinese) that joins it to them; '' when nothing holds them."""
    lang = report_lang(report)
    if unknown:
        return message(lang, "details_hint")
    return message(lang, "details_in", files=detail) if detail else ""


def _style(text: str, color: bool, **kw: Any) -> str:
    return click.style(text, **kw) if color else text


def _wide(c: str) -> bool:
    return unicodedata.east_asian_width(c) in "WF"


def display_width(text: str) -> int:
    """Terminal columns a text takes: CJK characters are two columns wide (no ASCII
    character is: a summary of 300 ranks asks some 8,000 texts, most of them ASCII)."""
    if text.isascii():
        return len(text)
    return sum(2 if _wide(c) else 1 for c in text)


def _wrap(text: str, width: int, indent: str, first: str | None = None) -> list[str]:
    first = indent if first is None else first
    text = terminal_safe(text, flatten=True)
    if display_width(text) == len(text):
        return textwrap.wrap(
            text,
            width=width,
            initial_indent=first,
            subsequent_indent=indent,
            break_on_hyphens=False,
        )
    return _wrap_wide(text, width, indent, first)


CLOSING = frozenset("，。；：、！？）」』》")
"""Chinese punctuation that must not start a line: the character before it moves down too."""


def _wrap_wide(text: str, width: int, indent: str, first: str) -> list[str]:
    """Wrap text holding CJK characters by columns: Chinese may break between any two
    characters, while runs of Latin letters and digits (op names, numbers) stay whole."""
    tokens: list[str] = []
    for c in " ".join(text.split()):
        if (
            tokens
            and c != " "
            and not _wide(c)
            and tokens[-1][-1] != " "
            and not _wide(tokens[-1][-1])
        ):
            tokens[-1] += c
        else:
            tokens.append(c)
    lines: list[str] = []
    prefix, parts, used = first, [], display_width(first)
    for token in tokens:
        if token == " " and not parts:
            continue
        if used + display_width(token) > width and parts:
            carry: list[str] = []
            if token in CLOSING:  # no line starts with a closing mark: the word before moves
                cut = len(parts) - 1
                while cut > 0 and parts[cut] in CLOSING:
                    cut -= 1
                if cut > 0 and parts[cut] != " ":
                    carry, parts = parts[cut:], parts[:cut]
            lines.append((prefix + "".join(parts)).rstrip())
            prefix, parts = indent, carry
            used = display_width(indent) + sum(map(display_width, carry))
            if token == " ":
                continue
        parts.append(token)
        used += display_width(token)
    if parts:
        lines.append((prefix + "".join(parts)).rstrip())
    return lines


def _memory_line(kinds: list[dict] | None, lang: str) -> str | None:
    """A memory timeline export's peak and the kinds holding 1% of it or more, the largest
    first (report.html charts them all)."""
    if not kinds:
        return None
    tr = translator(lang)
    total = sum(r["at_peak_bytes"] or 0 for r in kinds)
    shown = sorted(
        (r for r in kinds if (r["peak_share"] or 0) >= 0.01),
        key=lambda r: -(r["at_peak_bytes"] or 0),
    )
    parts = [f"{kind_words(tr, r['kind'])} {fmt_pct(r['peak_share'])}" for r in shown]
    return tr("memory_peak_line", total=fmt_bytes(total), kinds=tr("list_sep").join(parts))


def _header(report: dict, width: int, color: bool) -> list[str]:
    profile = report["profile"]
    kind = profile["source_format"]
    if kind == "cluster" and profile.get("world_size"):
        n = profile["world_size"]
        kind = message(report_lang(report), "cluster_of", n, n=n)
    header = f"{profile_label(profile, report_lang(report))} ({kind})"
    return [_style(line, color, bold=True) for line in _wrap(header, width, INDENT, first="")]


def _profile_lines(
    report: dict, width: int, color: bool, max_findings: int, hint: str
) -> list[str]:
    lines = _header(report, width, color)
    lang = report_lang(report)
    memory = _memory_line(report["metrics"].get("memory_kinds"), lang)
    if memory:
        lines.extend(_wrap(memory, width, INDENT))
    findings = findings_by_rank(report)
    if not findings:
        lines.append(INDENT + _style(message(lang, "no_problems"), color, fg="green"))
    shown = [f for _, f in findings[: max(max_findings, 0)]]
    legend = _impact_legend(report, shown, lang)
    if legend:
        lines.extend(_style(line, color, dim=True) for line in _wrap(legend, width, INDENT))
    unit = column_unit(f.get("impact_us") for f in shown)  # one unit for the whole list
    for f in shown:
        lines.extend(_finding_lines(f, width, color, unit, lang, if_fixed_line(f, report, lang)))
    together = _together_line(report, findings, lang)
    if together:
        lines.extend(_wrap(together, width, INDENT))
    fix_first = _fix_first_line(report, lang)
    if fix_first:
        lines.extend(_wrap(fix_first, width, INDENT))
    if "tuning_loop" in report:
        lines.extend(_wrap(_tuning_line(report["tuning_loop"]["summary"], lang), width, INDENT))
    hidden = len(findings) - len(shown)
    notes = [(hidden, "more_findings")] if hidden > 0 else []
    lacking = [r for r in report["not_applicable"] if r.get("reason") != NOT_RECORDED]
    notes += [
        (len(lacking), "skipped_missing"),
        (len(report["warnings"]), "reader_warnings_count"),
        (len(report["rule_errors"]), "rule_errors_count"),
        (len(report["not_applicable"]) - len(lacking), "skipped_never_recorded"),
    ]
    for count, key in notes:
        if count:
            lines.extend(_wrap(message(lang, key, count, n=count) + hint, width, INDENT))
        if count and key == "skipped_missing":
            for how in _collect_hints(lacking):
                lines.extend(
                    _wrap(
                        message(lang, "to_collect", hint=how),
                        width,
                        INDENT * 3,
                        first=INDENT * 2 + "→ ",
                    )
                )
    return lines


def _collect_hints(rows: list[dict]) -> list[str]:
    """The distinct ways to collect what the rules lacked, most needed first: several rules
    usually lack the same data, and the fix is one profiler setting."""
    counts: dict[str, int] = {}
    for row in rows:
        for how in dict.fromkeys(row.get("collect") or ()):
            counts[how] = counts.get(how, 0) + 1
    return sorted(counts, key=lambda how: -counts[how])[:MAX_COLLECT_HINTS]


def _impact_legend(report: dict, shown: list[dict], lang: str) -> str:
    """What the figures beside the titles are: profile totals, which a reader holding the
    step time below them ("if fixed: step time 9.6 ms -> ...") would otherwise take for
    per-step times. Empty when no finding shown has one."""
    summary = report.get("summary") or {}
    total = as_number(summary.get("total_time_us"))
    if total is None or not any(f.get("impact_us") is not None for f in shown):
        return ""
    path = summary.get("critical_path") or {}
    steps, step_us = path.get("steps"), as_number(path.get("step_us"))
    # the steps, when they are the whole profile (the critical path leaves out warm-up ones)
    whole = steps and step_us is not None and math.isclose(steps * step_us, total, rel_tol=1e-6)
    part = message(lang, "impact_legend_steps", steps, n=steps) if whole else ""
    return message(lang, "impact_legend", total=fmt_us(total), steps=part)


def _together_line(report: dict, findings: list[tuple[str, dict]], lang: str) -> str:
    """ "Together at most X (Y%)" when findings share time: their impacts do not add up."""
    summary = report["summary"]
    combined = summary.get("combined_impact_us")
    added = sum(f.get("impact_us") or 0.0 for _, f in findings)
    if combined is None or not added > combined * 1.0001:
        return ""
    total = summary.get("total_time_us")
    share = f" ({fmt_pct(combined / total)})" if total else ""
    return message(
        lang, "together_line", combined=fmt_us(combined), share=share, added=fmt_us(added)
    )


def _fix_first_line(report: dict, lang: str) -> str:
    """ "Fix these first: A, B → −X% step time": the findings that save the most together."""
    fix = fix_first_values(report)
    if fix is None:
        return ""
    rules = message(lang, "list_sep").join(fix.pop("rules"))
    return message(lang, fix.pop("key"), rules=rules, **fix)


def _impact_notes(f: dict, lang: str) -> list[str]:
    """Why the impact column reads as it does: capped at the time measured, or (for a HIGH
    finding) not measured at all."""
    notes = []
    if f.get("uncapped_impact_us") is not None:
        notes.append(
            message(
                lang,
                "impact_capped_line",
                measured=fmt_us(f.get("measured_us")),
                raw=fmt_us(f["uncapped_impact_us"]),
            )
        )
    if f.get("impact_us") is None and f.get("impact_note") and f["severity"] == Severity.HIGH.value:
        notes.append(message(lang, "no_estimate_line", note=f["impact_note"]))
    return notes


def _tuning_line(summary: dict, lang: str = "en") -> str:
    """One line closing the AOE loop; the per-operator table is in the HTML/JSON reports."""
    results = message(lang, "list_sep").join(
        message(lang, key, n=summary[field]) for field, key in AOE_RESULTS if summary[field]
    )
    return (
        message(
            lang, "aoe_line", summary["advised"], tuned=summary["tuned"], advised=summary["advised"]
        )
        + (message(lang, "aoe_results", results=results) if results else "")
        + message(lang, "aoe_not_tuned", n=summary["not_tuned"])
    )


def _finding_lines(
    f: dict,
    width: int,
    color: bool,
    unit: str | None = None,
    lang: str = "en",
    if_fixed: str | None = None,
) -> list[str]:
    """Rank, severity, title and impact on top; message, the step time were it fixed and
    suggestions indented below: all of them, or the first MAX_SUGGESTIONS and how many more
    there are."""
    lead = f"{INDENT}{f['rank']:>2}. "
    severity = f"{f['severity'].upper():<7}"
    indent = " " * (len(lead) + len(severity))
    unit = unit or column_unit([f.get("impact_us")])
    impact = f"{fmt_us_as(f.get('impact_us'), unit)} ({fmt_pct(f.get('impact_ratio'))})"
    room = width - len(indent) - len(impact) - 2
    beside = room >= 20  # impact right-aligned on the title line when there is space
    title_width = room if beside else max(width - len(indent), 1)
    title = _wrap(f["title"], title_width, "") or [""]
    lines = []
    for i, part in enumerate(title):
        sev = _style(severity, color, **SEVERITY_STYLE.get(f["severity"], {}))
        start = lead + sev if i == 0 else indent
        line = start + _style(part, color, bold=True)
        if i == 0 and beside:
            line += " " * (room - display_width(part) + 2) + impact
        lines.append(line)
    if not beside:
        lines.append(indent + impact)
    lines.extend(_wrap(f["message"], width, indent))
    for note in _impact_notes(f, lang):
        lines.extend(_wrap(note, width, indent))
    if if_fixed:
        lines.extend(_wrap(if_fixed, width, indent))
    for source in f.get("sources") or []:
        line = message(lang, "source_line", **source_values(source))
        lines.extend(_wrap(line, width, indent + "  ", first=indent))
    suggestions = list(f.get("suggestions") or [])
    shown = (
        suggestions if len(suggestions) <= MAX_SUGGESTIONS + 1 else suggestions[:MAX_SUGGESTIONS]
    )
    for suggestion in shown:
        lines.extend(_wrap(suggestion, width, indent + "  ", first=indent + "→ "))
    more = len(suggestions) - len(shown)
    if more:
        lines.extend(_wrap(message(lang, "more_suggestions", more, n=more), width, indent + "  "))
    return lines


# --- many ranks -----------------------------------------------------------------------------


def _rank_label(report: dict) -> str:
    profile = report["profile"]
    if profile.get("rank") is not None:
        return terminal_safe(str(profile["rank"]), flatten=True)
    if profile.get("device_id") not in (None, ""):
        return terminal_safe(f"#{profile['device_id']}", flatten=True)
    return MISSING


def _counts(report: dict) -> dict[str, int]:
    counts = dict.fromkeys(SEVERITIES, 0)
    for _, f in findings_by_rank(report):
        counts[f["severity"]] = counts.get(f["severity"], 0) + 1
    return counts


def _worst_key(report: dict) -> tuple:
    """Most high findings first, then most medium ones, then the most time at stake in them."""
    serious = [f for _, f in findings_by_rank(report) if f["severity"] in SERIOUS]
    impact = sum(as_number(f.get("impact_us")) or 0.0 for f in serious)
    counts = _counts(report)
    return (*(-counts[s] for s in SERIOUS), -impact, rank_order(report))


def _step_time(report: dict, cluster_times: dict[float, float]) -> float | None:
    """Mean step time of a rank: the cluster's figure for it (over the steps no rank spent
    warming up, as the cluster's findings and report.html's chart give it, so that the ranks
    are compared over the same steps), else the one its findings' "step time if fixed" start
    from (its own steady steps, gaps between them included), else the mean of its steady
    steps."""
    rank = as_number(report["profile"].get("rank"))
    if rank is not None and rank in cluster_times:
        return cluster_times[rank]
    path = report.get("summary", {}).get("critical_path") or {}
    if (step_us := as_number(path.get("step_us"))) is not None:
        return step_us
    durations = [
        d
        for s in report.get("metrics", {}).get("steps", [])
        if (d := as_number(s.get("duration_us"))) is not None and not s.get("warmup")
    ]
    return sum(durations) / len(durations) if durations else None


def _pad(text: str, width: int, right: bool = False) -> str:
    space = " " * max(width - display_width(text), 0)
    return space + text if right else text + space


def _clip(text: str, width: int) -> str:
    """`text` cut to `width` terminal columns, an ellipsis marking the cut."""
    text = " ".join(terminal_safe(text, flatten=True).split())
    if display_width(text) <= width:
        return text
    out = ""
    for c in text:
        if display_width(out + c) > width - 1:
            break
        out += c
    return out.rstrip() + "…"


def _rank_table(
    members: Sequence[dict], cluster: dict | None, width: int, color: bool
) -> list[str]:
    """One line per rank, in rank order: step time, findings per severity, the top finding;
    below it, which ranks' own findings count steps the cluster leaves out as warm-up."""
    lang = report_lang(members[0])
    cluster_times = {}
    for row in (cluster or {}).get("metrics", {}).get("ranks", []):
        if (rank := as_number(row.get("rank"))) is not None and (
            duration := as_number(row.get("duration_us"))
        ) is not None:
            cluster_times[rank] = duration
    times: list[float | None] = []
    steady: dict[float, int] = {}  # each rank's own steady steps, read in the same pass
    for r in members:
        times.append(_step_time(r, cluster_times))
        if (rank := as_number(r["profile"].get("rank"))) is not None:
            steady[rank] = steady_step_count(r)
    unit = column_unit(times)
    heads = [
        message(lang, "rank_heading"),
        message(lang, "step_time_heading"),
        *(message(lang, f"severity.{s}").upper() for s in SEVERITIES),
    ]
    cells = [
        [_rank_label(r), fmt_us_as(t, unit), *map(fmt_num, _counts(r).values())]
        for r, t in zip_strict(members, times)
    ]
    widths = [max(display_width(c) for c in column) for column in zip_strict(heads, *cells)]
    used = len(INDENT) + sum(widths) + 2 * len(widths)
    top_width = max(width - used, 0)
    title = message(lang, "ranks_in_order", len(members), n=len(members))
    lines = [_style(line, color, bold=True) for line in _wrap(title, width, INDENT, first="")]
    head = INDENT + "  ".join(
        _pad(h, w, right=i > 0) for i, (h, w) in enumerate(zip_strict(heads, widths))
    )
    if top_width >= 8:
        head += "  " + _clip(message(lang, "top_finding_heading"), top_width)
    lines.append(_style(head.rstrip(), color, bold=True))
    for report, row in zip_strict(members, cells):
        parts = [_pad(row[0], widths[0], right=True), _pad(row[1], widths[1], right=True)]
        for severity, count, w in zip_strict(SEVERITIES, row[2:], widths[2:]):
            text = _pad(count, w, right=True)
            parts.append(_style(text, color, **SEVERITY_STYLE[severity]) if count != "0" else text)
        line = INDENT + "  ".join(parts)
        findings = findings_by_rank(report)
        if top_width >= 8:
            line += "  " + (_clip(findings[0][1]["title"], top_width) if findings else MISSING)
        lines.append(line.rstrip())
    counting_more = ranks_counting_left_out_steps(cluster, steady)
    if counting_more:
        note = message(lang, "own_steps_note", len(counting_more), ranks=rank_list(counting_more))
        lines.extend(_wrap(note, width, INDENT, first=INDENT))
    return lines


def _cluster_blocks(
    reports: Sequence[dict],
    outlines: Sequence[dict],
    hints: list[str],
    details: Sequence[str | None] | None,
    width: int,
    color: bool,
    max_findings: int,
    max_rank_details: int,
) -> list[list[str]]:
    """The clusters' verdict, one table of the ranks, then the worst ranks' findings: whole
    reports for those shown, outlines (`_outline`) for the rest."""
    clusters = {i: reports[i] for i, o in enumerate(outlines) if _is_cluster(o)}
    members = sorted(
        (i for i, o in enumerate(outlines) if not _is_cluster(o)),
        key=lambda i: rank_order(outlines[i]),
    )
    blocks = [
        _profile_lines(report, width, color, max_findings, hints[i])
        for i, report in clusters.items()
    ]
    if not members:
        return blocks
    blocks.append(
        _rank_table(Picked(outlines, members), next(iter(clusters.values())), width, color)
    )
    serious = [
        i
        for i in members
        if any(f["severity"] in SERIOUS for _, f in findings_by_rank(outlines[i]))
    ]
    worst = sorted(serious, key=lambda i: _worst_key(outlines[i]))[: max(max_rank_details, 0)]
    lang = report_lang(outlines[members[0]])
    if worst:
        intro = message(lang, "worst_ranks", shown=len(worst), n=len(serious))
        shown = min(max_findings, MAX_RANK_FINDINGS)
        first, *rest = [_profile_lines(reports[i], width, color, shown, hints[i]) for i in worst]
        blocks.append(_wrap(intro, width, INDENT, first="") + first)
        blocks.extend(rest)
    hidden = [i for i in serious if i not in worst]
    if hidden:
        more = message(lang, "more_ranks", len(hidden), n=len(hidden))
        if details is None:
            hint = hints[hidden[0]]
        else:  # one report.html for all, or a prof_rule file per rank: a few named
            files = list(
                dict.fromkeys(terminal_safe(d, flatten=True) for i in hidden if (d := details[i]))
            )
            listed = ", ".join(files[:3]) + (", …" if len(files) > 3 else "")
            hint = message(lang, "details_in", files=listed) if files else ""
        blocks.append(_wrap(more + hint, width, INDENT, first=""))
    return blocks
