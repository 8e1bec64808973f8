"""SARIF 2.1.0 (`advisor.sarif`): findings as code-scanning results, so a CI pipeline's
code-scanning view (GitHub's upload-sarif, GitLab, IDE viewers) shows each one on the line of
the user's code that launched its operators.

Built from the same evaluated result as the prof_rule JSON and the HTML report
(`advisor.api.AnalysisResult`), never from either of them. One SARIF `run` holds every
profile: the driver lists each rule evaluated on any profile once, each finding is one result.
A finding's primary location is the source line with the most time (`Finding.sources`), the
other lines its related locations; a finding without recorded stacks points at the profile
it was found in (its file, or its folder with the files read as related locations). Paths
inside the working directory are written relative to it (base `%SRCROOT%`), others as
file:// URIs.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from advisor.engine.evaluate import Finding, SourceLocation
from advisor.engine.outcome import Severity
from advisor.engine.rules import Rule
from advisor.render.messages import message
from advisor.units import fmt_pct, fmt_us
from advisor.version import __version__

if TYPE_CHECKING:
    from advisor.api import AnalysisResult, ProfileAnalysis

SARIF_VERSION = "2.1.0"
SARIF_SCHEMA = (
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
)
SRCROOT = "%SRCROOT%"
"""The base id of relative URIs: the working directory advisor ran in (a CI checkout)."""
LEVELS = {
    Severity.HIGH.value: "error",
    Severity.MEDIUM.value: "warning",
    Severity.LOW.value: "note",
}
"""SARIF level per severity; anything else (an informational severity) is a note."""
FINGERPRINT = "advisorFinding/v1"


def level(severity: str) -> str:
    """The SARIF level of a severity: high error, medium warning, low (and anything else) note."""
    return LEVELS.get(str(severity), "note")


def render_sarif(result: AnalysisResult, cwd: Path | None = None) -> str:
    """The SARIF log of a run, as JSON text; `cwd` (default: the working directory) is the
    folder paths are written relative to."""
    return json.dumps(sarif_log(result, cwd), indent=2, ensure_ascii=False)


def sarif_log(result: AnalysisResult, cwd: Path | None = None) -> dict[str, Any]:
    """The SARIF log of a run as a dict (see the module's docstring)."""
    root = Path(os.path.abspath(cwd or Path.cwd()))
    rules = _evaluated_rules(result.analyses)
    index = {rule.id: i for i, rule in enumerate(rules)}
    lang = result.analyses[0].evaluation.lang if result.analyses else "en"
    results = [_result(f, a, index[f.rule.id], root) for a in result.analyses for f in a.findings]
    return {
        "$schema": SARIF_SCHEMA,
        "version": SARIF_VERSION,
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "advisor",
                        "version": __version__,
                        "rules": [_rule(rule, lang) for rule in rules],
                    }
                },
                "originalUriBaseIds": {SRCROOT: {"uri": _folder_uri(root)}},
                "invocations": [_invocation(result)],
                "results": results,
            }
        ],
    }


def _folder_uri(folder: Path) -> str:
    """A folder's file:// URI with the trailing slash a base URI needs."""
    uri = folder.as_uri()
    return uri if uri.endswith("/") else uri + "/"


def _evaluated_rules(analyses: Sequence[ProfileAnalysis]) -> list[Rule]:
    """Every rule evaluated on any profile, once, in the order the profiles list them."""
    rules: dict[str, Rule] = {}
    for analysis in analyses:
        for rule in analysis.rules:
            rules.setdefault(rule.id, rule)
    return list(rules.values())


def _rule(rule: Rule, lang: str) -> dict[str, Any]:
    """A reportingDescriptor: the title as the short description, the docs' first paragraph
    as the full one and the whole docs as help. A rule without a fixed severity gets no
    default level (its findings' severity follows their time at stake)."""
    title = rule.text(lang).title
    docs = rule.docs.strip() or title
    descriptor: dict[str, Any] = {
        "id": rule.id,
        "name": rule.name,
        "shortDescription": {"text": title},
        "fullDescription": {"text": docs.split("\n\n", 1)[0].replace("\n", " ")},
        "help": {"text": docs, "markdown": docs},
        "properties": {"tags": [rule.group, *rule.tags], "group": rule.group},
    }
    if rule.severity is not None:
        descriptor["defaultConfiguration"] = {"level": level(rule.severity)}
    return descriptor


def at_stake(finding: Finding) -> str:
    """The finding's time at stake as a sentence in its language ("Time at stake: 1.20 ms
    (5.0% of 24.0 ms)."), or why none is given; empty when neither is known."""
    if finding.impact_us is None:
        note = finding.impact_note
        return message(finding.lang, "no_estimate_line", note=note) if note else ""
    if finding.impact_ratio is None or finding.measured_us is None:
        return message(finding.lang, "at_stake_line", impact=fmt_us(finding.impact_us))
    return message(
        finding.lang,
        "at_stake_share_line",
        impact=fmt_us(finding.impact_us),
        share=fmt_pct(finding.impact_ratio),
        measured=fmt_us(finding.measured_us),
    )


def _result(
    finding: Finding, analysis: ProfileAnalysis, rule_index: int, root: Path
) -> dict[str, Any]:
    profile = analysis.profile
    sources = list(finding.sources)
    if sources:
        primary = [_source_location(sources[0], root)]
        related = [_source_location(s, root) for s in sources[1:]]
    else:
        primary, related = _profile_locations(profile.meta.path, profile.meta.files_read, root)
    for i, location in enumerate(related, start=1):
        location["id"] = i
    text = " ".join(t for t in (finding.message, at_stake(finding)) if t)
    where = primary[0]["physicalLocation"]["artifactLocation"]["uri"]
    identity = "\0".join((finding.rule.id, profile.label, where))
    out: dict[str, Any] = {
        "ruleId": finding.rule.id,
        "ruleIndex": rule_index,
        "level": level(finding.severity),
        "message": {"text": text},
        "locations": primary,
        "partialFingerprints": {FINGERPRINT: hashlib.sha256(identity.encode()).hexdigest()},
        "properties": {
            "severity": str(finding.severity),
            "impact_us": finding.impact_us,
            "impact_ratio": finding.impact_ratio,
            "rank": finding.rank,
            "step_time_if_fixed_us": finding.step_time_if_fixed_us,
            "profile": profile.label,
            "suggestions": list(finding.suggestions),
        },
    }
    if related:
        out["relatedLocations"] = related
    return out


def artifact_location(path: str, root: Path) -> dict[str, str]:
    """An artifactLocation for a file or folder path (a relative one is taken from `root`, the
    working directory): relative to `root` (base %SRCROOT%) when it lies inside it, else a
    file:// URI; a folder's ends with a slash."""
    full = Path(os.path.normpath(root / path))
    slash = "/" if full.is_dir() else ""
    if full == root or root in full.parents:
        relative = full.relative_to(root).as_posix()
        return {"uri": quote(relative) + slash if relative != "." else "./", "uriBaseId": SRCROOT}
    return {"uri": full.as_uri().rstrip("/") + slash}


def _source_location(source: SourceLocation, root: Path) -> dict[str, Any]:
    physical: dict[str, Any] = {"artifactLocation": artifact_location(source.file, root)}
    if source.line is not None and source.line >= 1:
        physical["region"] = {"startLine": source.line}
    share = f", {fmt_pct(source.share)}" if source.share is not None else ""
    return {
        "physicalLocation": physical,
        "logicalLocations": [{"name": source.function, "kind": "function"}],
        "message": {"text": f"{source.function}: {fmt_us(source.time_us)}{share}"},
    }


def _profile_locations(
    path: str, files_read: Sequence[str], root: Path
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The profile as the finding's location, for findings without source lines: the profile
    file, or its folder with the files read from it as related locations."""
    base = Path(path)
    primary = [{"physicalLocation": {"artifactLocation": artifact_location(path, root)}}]
    if not base.is_dir():
        return primary, []
    related = [
        {"physicalLocation": {"artifactLocation": artifact_location(str(base / f), root)}}
        for f in files_read
    ]
    return primary, related


def _invocation(result: AnalysisResult) -> dict[str, Any]:
    """Whether the run went through, with the inputs it could not read and the rules that
    failed while evaluating as notifications."""
    notes: list[dict[str, Any]] = [
        {"level": "error", "message": {"text": str(e)}} for e in result.input_errors
    ]
    notes += [
        {
            "level": "error",
            "message": {"text": f"{a.profile.label}: {rule.id}: {problem}"},
            "associatedRule": {"id": rule.id},
        }
        for a in result.analyses
        for rule, problem in a.evaluation.errors
    ]
    invocation: dict[str, Any] = {"executionSuccessful": bool(result.analyses)}
    if notes:
        invocation["toolExecutionNotifications"] = notes
    return invocation
