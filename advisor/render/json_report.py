"""Builds the prof_rule-style report dict of one profile and validates it against its schema.

The shape `{"status": 0, "data": {<group>: [{"Rule Type", "Rule Description", "result": [...]}]}}`
is what msprof's prof_rule_{device}.json consumers expect; every other key is an extension
they ignore. The schema ships in the package (advisor/schemas/report.schema.json).
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from importlib.resources import files
from typing import Any

from advisor.applicability import MISSING, Inapplicable
from advisor.engine.evaluate import Evaluation, Finding
from advisor.engine.outcome import SEVERITIES
from advisor.engine.rules import Rule
from advisor.engine.savings import CriticalPath, FixFirst
from advisor.metrics import ProfileMetrics
from advisor.model import Profile, RunInfo
from advisor.version import __version__
from advisor.workload import WORKLOADS


def validate_report(report: dict[str, Any]) -> None:
    """Raise jsonschema.ValidationError when a report breaks the published schema (a check
    for tests and consumers: a run builds reports by construction and never imports
    jsonschema for them)."""
    import jsonschema

    schema = files("advisor").joinpath("schemas/report.schema.json").read_text(encoding="utf-8")
    jsonschema.validate(report, json.loads(schema))


def _finding(f: Finding) -> dict[str, Any]:
    rule = f.rule
    tuning_data: list[Any] | dict[str, Any] = f.tune_ops if rule.tune_ops else dict(f.values)
    return {
        "Rule Subtype": rule.subtype or f.title,
        "Rule Suggestion": " ".join(f"{i}. {s}" for i, s in enumerate(f.suggestions, 1)),
        "Tuning Data": tuning_data,
        "rule_id": rule.id,
        "rule_name": rule.name,
        "title": f.title,
        "severity": f.severity,
        "message": f.message,
        "values": f.values,
        "params": f.params,
        "impact_us": f.impact_us,
        "impact_ratio": f.impact_ratio,
        "rank": f.rank,
        "measured_us": f.measured_us,
        "impact_note": f.impact_note,
        "uncapped_impact_us": f.uncapped_impact_us,
        "shares_time_with": f.shares_time_with,
        "step_time_if_fixed_us": f.step_time_if_fixed_us,
        "if_fixed_bounded_by": f.if_fixed_bounded_by,
        "sources": [source.to_dict() for source in f.sources],
        "evidence": f.evidence,
        "window": None if f.window is None else f.window.to_dict(),
        "suggestions": f.suggestions,
        "source": rule.source,
    }


def _critical_path(path: CriticalPath | None) -> dict[str, Any] | None:
    if path is None:
        return None
    return {"steps": path.steps, "step_us": path.step_us, "by_bound": dict(path.by_bound)}


def _fix_first(fix: FixFirst | None) -> dict[str, Any] | None:
    if fix is None:
        return None
    return {
        "rules": list(fix.rules),
        "step_us": fix.step_us,
        "step_time_if_fixed_us": fix.step_time_if_fixed_us,
        "saving_ratio": fix.saving_ratio,
    }


def _not_applicable(evaluation: Evaluation) -> list[dict[str, Any]]:
    """Rules that did not run, each with why: data missing here (with how to collect it) or
    data this format never records."""
    out = []
    for rule, missing in evaluation.not_applicable:
        why = evaluation.inapplicable.get(rule.id, Inapplicable(MISSING))
        out.append(
            {
                "rule_id": rule.id,
                "rule_name": rule.name,
                "title": rule.text(evaluation.lang).title,
                "missing": missing,
                "reason": why.reason,
                "collect": list(why.collect),
            }
        )
    return out


def build_report(
    profile: Profile,
    evaluation: Evaluation,
    rules: list[Rule],
    run: RunInfo,
    metrics: ProfileMetrics,
    tuning: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The prof_rule dict of one evaluated profile, built once from the typed results (the
    metrics derived for it and, where AOE results were found, the tuning loop)."""
    data: dict[str, list[dict[str, Any]]] = {}
    for finding in sorted(evaluation.findings, key=lambda f: f.rank):
        data.setdefault(finding.rule.group, []).append(
            {
                "Rule Type": finding.rule.type,
                "Rule Description": finding.title,
                "result": [_finding(finding)],
            }
        )
    by_severity = {s: sum(f.severity == s for f in evaluation.findings) for s in SEVERITIES}
    meta = profile.meta.to_dict()
    meta["workload"] = WORKLOADS[evaluation.training]
    meta["tables"] = {name: len(df) for name, df in profile.tables.items()}
    return {
        "status": 0,
        "data": data,
        "advisor": {
            "version": __version__,
            "generated_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "lang": evaluation.lang,
            "config": run.config,
            **({"rule_overrides": list(run.rule_overrides)} if run.rule_overrides else {}),
        },
        "profile": meta,
        "summary": {
            "findings": len(evaluation.findings),
            "by_severity": by_severity,
            "total_time_us": evaluation.total_us,
            "combined_impact_us": evaluation.combined_impact_us,
            "critical_path": _critical_path(evaluation.critical_path),
            "fix_first": _fix_first(evaluation.fix_first),
        },
        "metrics": metrics.to_json(),
        "not_applicable": _not_applicable(evaluation),
        "warnings": [w.to_dict(evaluation.lang) for w in profile.warnings],
        "rules": {
            r.id: {
                "source": r.source,
                "params": evaluation.params.get(r.id, {}),
                "outcome": evaluation.outcomes.get(r.id, "not_applicable"),
            }
            for r in rules
        },
        "rule_errors": [{"rule_id": r.id, "problem": p} for r, p in evaluation.errors],
        **({"tuning_loop": tuning} if tuning is not None else {}),
    }
