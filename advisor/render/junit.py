"""JUnit XML (`advisor-junit.xml`): each rule a test case, so a CI pipeline's test view
(GitLab's `artifacts:reports:junit`, Jenkins, GitHub test-report actions) lists what advisor
checked and which checks failed.

Built from the same evaluated result as the prof_rule JSON and the HTML report
(`advisor.api.AnalysisResult`). One <testsuite> per profile (named by its rank, device or
file), one <testcase> per rule evaluated on it (classname: the rule's group; name: its id and
title). A rule that fired at or above the threshold is a <failure> (the finding's message);
one that fired below it passes, its finding in <system-out>; one that could not run is
<skipped> with why (the data missing, and how to collect it); one whose evaluation failed is
an <error>. The threshold is --fail-on, or medium when none is given, so low findings never
turn a test report red.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections import Counter
from typing import TYPE_CHECKING

from advisor.applicability import MISSING, Inapplicable
from advisor.compat import zip_strict
from advisor.engine.evaluate import at_least
from advisor.engine.outcome import Outcome
from advisor.render.messages import message
from advisor.render.sarif import at_stake

if TYPE_CHECKING:
    from advisor.api import AnalysisResult, ProfileAnalysis
    from advisor.engine.rules import Rule

DEFAULT_FAIL_ON = "medium"
"""The threshold without --fail-on: a finding of medium or high severity fails its test case."""
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
"""Characters XML 1.0 cannot hold at all (control characters from a profile's strings)."""


def xml_text(text: str) -> str:
    """`text` with the characters XML 1.0 forbids replaced by U+FFFD, so a kernel name with a
    control character still gives a file every JUnit reader can parse."""
    return _NOT_XML.sub("\N{REPLACEMENT CHARACTER}", text)


def render_junit(result: AnalysisResult, fail_on: str | None = None) -> str:
    """The JUnit XML of a run; `fail_on` is the lowest severity that fails a test case
    (DEFAULT_FAIL_ON when None)."""
    threshold = fail_on or DEFAULT_FAIL_ON
    suites = ET.Element("testsuites", name="advisor")
    names = [_suite_name(a) for a in result.analyses]
    totals: Counter[str] = Counter()
    for analysis, name in zip_strict(result.analyses, names):
        unique = name if names.count(name) == 1 else f"{name} ({analysis.profile.meta.path})"
        suite = _suite(analysis, xml_text(unique), threshold)
        totals.update(
            {k: int(suite.get(k, "0")) for k in ("tests", "failures", "errors", "skipped")}
        )
        suites.append(suite)
    for key in ("tests", "failures", "errors", "skipped"):
        suites.set(key, str(totals[key]))
    ET.indent(suites)
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"


def _suite_name(analysis: ProfileAnalysis) -> str:
    """What the profile is for people: "cluster", "rank 3", "device 1" or its file name."""
    return "cluster" if analysis.profile.meta.source_format == "cluster" else analysis.profile.label


def _suite(analysis: ProfileAnalysis, name: str, threshold: str) -> ET.Element:
    evaluation = analysis.evaluation
    findings = {f.rule.id: f for f in evaluation.findings}
    errors = {rule.id: problem for rule, problem in evaluation.errors}
    missing = {rule.id: needs for rule, needs in evaluation.not_applicable}
    suite = ET.Element("testsuite", name=name)
    properties = ET.SubElement(suite, "properties")
    meta = analysis.profile.meta
    for key, value in (("path", meta.path), ("format", meta.source_format), ("fail_on", threshold)):
        ET.SubElement(properties, "property", name=key, value=xml_text(str(value)))
    counts: Counter[str] = Counter()
    for rule in analysis.rules:
        case = ET.SubElement(
            suite,
            "testcase",
            classname=xml_text(rule.group),
            name=xml_text(f"{rule.id} {rule.text(evaluation.lang).title}"),
        )
        outcome = evaluation.outcomes.get(rule.id, Outcome.NOT_APPLICABLE)
        counts["tests"] += 1
        if outcome == Outcome.FIRED:
            finding = findings[rule.id]
            text = xml_text(" ".join(t for t in (finding.message, at_stake(finding)) if t))
            if at_least(finding.severity, threshold):
                counts["failures"] += 1
                failure = ET.SubElement(case, "failure", message=text, type=str(finding.severity))
                failure.text = xml_text("\n".join([text, *finding.suggestions]))
            else:
                ET.SubElement(case, "system-out").text = xml_text(
                    message(
                        evaluation.lang,
                        "fired_below",
                        severity=message(evaluation.lang, f"severity.{finding.severity}"),
                        fail_on=threshold,
                        message=text,
                    )
                )
        elif outcome == Outcome.ERROR:
            counts["errors"] += 1
            ET.SubElement(
                case, "error", message=xml_text(errors.get(rule.id, "")), type="rule error"
            )
        elif outcome == Outcome.NOT_APPLICABLE:
            counts["skipped"] += 1
            why = _skip_reason(rule, missing.get(rule.id, []), analysis)
            ET.SubElement(case, "skipped", message=xml_text(why))
    for key in ("tests", "failures", "errors", "skipped"):
        suite.set(key, str(counts[key]))
    return suite


def _skip_reason(rule: Rule, needs: list[str], analysis: ProfileAnalysis) -> str:
    """Why a rule did not run, as the engine recorded it: the data this profile lacks and how
    to collect it, or the data its format never records."""
    evaluation = analysis.evaluation
    why = evaluation.inapplicable.get(rule.id, Inapplicable(MISSING))
    key = "skip_missing" if why.reason == MISSING else "skip_not_recorded"
    text = message(evaluation.lang, key, needs=", ".join(needs))
    for hint in why.collect:
        text += "; " + message(evaluation.lang, "to_collect", hint=hint)
    return text
