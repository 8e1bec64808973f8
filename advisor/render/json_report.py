"""Builds the prof_rule-style report dict of one profile and validates it against its schema.

The shape `{"status": 0, "data": {<group>: [{"Rule Type", "Rule Description", "result": [...]}]}}`
is what msprof's prof_rule_{device}.json consumers expect; every other key is an extension
they ignore. The schema ships in the package (advisor/schemas/report.schema.json).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib.resources import files
from typing import Any

import jsonschema
import pandas as pd

from advisor import __version__, intervals
from advisor.applicability import MISSING, Inapplicable
from advisor.compat import zip_strict
from advisor.engine.evaluate import Evaluation, Finding, profile_time_us, to_plain
from advisor.engine.outcome import SEVERITIES
from advisor.engine.rules import Rule
from advisor.model import Profile

REPORT_SCHEMA: dict[str, Any] = json.loads(
    files("advisor").joinpath("schemas/report.schema.json").read_text(encoding="utf-8"))
STEP_COLUMNS = ("fp_bp_us", "grad_refresh_us", "data_aug_bound_us", "reduce_us", "computing_us",
                "communication_us", "comm_not_overlapped_us", "free_us", "bubble_us")


@dataclass(frozen=True)
class RunInfo:
    """What every report of one run says about the run: the config file in effect and the
    team rules that replaced shipped ones, so a reader of the report knows what shaped it."""

    config: str | None = None
    rule_overrides: tuple[str, ...] = ()


def validate_report(report: dict[str, Any]) -> None:
    """Raise jsonschema.ValidationError when a report breaks the published schema."""
    jsonschema.validate(report, REPORT_SCHEMA)


def _finding(f: Finding) -> dict[str, Any]:
    rule = f.rule
    tuning_data: list[Any] | dict[str, Any] = f.tune_ops if rule.tune_ops else dict(f.values)
    return {
        "Rule Subtype": rule.subtype or f.title,
        "Rule Suggestion": " ".join(f"{i}. {s}" for i, s in enumerate(f.suggestions, 1)),
        "Tuning Data": tuning_data,
        "rule_id": rule.id, "rule_name": rule.name, "title": f.title,
        "severity": f.severity, "message": f.message, "values": f.values, "params": f.params,
        "impact_us": f.impact_us, "impact_ratio": f.impact_ratio, "rank": f.rank,
        "measured_us": f.measured_us, "impact_note": f.impact_note,
        "uncapped_impact_us": f.uncapped_impact_us, "shares_time_with": f.shares_time_with,
        "evidence": f.evidence, "suggestions": f.suggestions, "source": rule.source,
    }


def step_metrics(profile: Profile) -> list[dict[str, Any]]:
    steps = profile.tables.get("steps")
    if steps is None:
        return []
    cols = ["step", "duration_us", *(c for c in STEP_COLUMNS if profile.has("steps", c))]
    return [{c: to_plain(v) for c, v in zip_strict(cols, row)}
            for row in steps[cols].itertuples(index=False)]


RANK_COLUMNS = ("rank", "steps", "duration_us", "computing_us", "communication_us",
                "comm_not_overlapped_us", "free_us")


def rank_metrics(profile: Profile) -> list[dict[str, Any]]:
    """Per-rank means of a cluster profile: the report's chart of the ranks."""
    ranks = profile.tables.get("ranks")
    if ranks is None:
        return []
    cols = [c for c in RANK_COLUMNS if profile.has("ranks", c)]
    return [{c: to_plain(v) for c, v in zip_strict(cols, row)}
            for row in ranks[cols].itertuples(index=False)]


def _time_by(ops: pd.DataFrame, key: str) -> list[dict[str, Any]]:
    return _shares(ops.groupby(key, dropna=False)["duration_us"].agg(["sum", "count"]), key)


def _shares(grouped: pd.DataFrame, key: str) -> list[dict[str, Any]]:
    """Rows of {key, total_us, ratio, count} from a frame with `sum` and `count` columns."""
    total = float(grouped["sum"].sum()) or 1.0
    grouped = grouped.sort_values("sum", ascending=False)
    return [{key: "unknown" if pd.isna(k) else str(k), "total_us": float(r["sum"]),
             "ratio": float(r["sum"]) / total, "count": int(r["count"])}
            for k, r in grouped.iterrows()]


def compute_class_metrics(profile: Profile) -> list[dict[str, Any]]:
    """Device time per compute class (cube, vector, flash attention, ..., communication)."""
    if not profile.has("device_ops", "compute_class"):
        return []
    return _time_by(profile.tables["device_ops"], "compute_class")


def host_metrics(profile: Profile) -> dict[str, Any]:
    """Host-side counts: data loading per step, synchronisations, compilations, launches,
    and the share of compute kernels shorter than 10 µs."""
    out: dict[str, Any] = {}
    host = profile.tables.get("host_ops")
    steps = len(profile.tables["steps"]) if profile.has("steps") else 0
    if host is not None and "kind" in host:
        kinds = host["kind"]
        for kind, label in (("sync", "sync_calls"), ("compile", "compile_calls"),
                            ("launch", "launch_calls")):
            out[label] = int((kinds == kind).sum())
        outermost = ~(host["nested"].fillna(False).to_numpy(bool) if "nested" in host
                      else intervals.nested_calls(host))
        loader = host.loc[(kinds == "dataloader").fillna(False).to_numpy(bool) & outermost,
                          "duration_us"]
        if steps and not loader.empty:
            out["dataloader_us_per_step"] = float(loader.sum()) / steps
    ops = profile.tables.get("device_ops")
    if ops is not None and "category" in ops:
        compute = ops.loc[(ops["category"] == "compute").fillna(False), "duration_us"]
        if not compute.empty:
            out["small_kernel_share"] = float((compute < 10).mean())
            out["kernels"] = int(len(compute))
    return out


def core_type_metrics(profile: Profile) -> list[dict[str, Any]]:
    """Device time per core type, from device_ops (or op_stats when only statistics exist)."""
    ops = profile.tables.get("device_ops")
    if ops is not None and not ops.empty:
        return _time_by(ops, "core_type")
    stats = profile.tables.get("op_stats")
    if stats is None or stats.empty:
        return []
    return _shares(stats.groupby("core_type", dropna=False).agg(
        sum=("total_us", "sum"), count=("count", "sum")), "core_type")


def _not_applicable(evaluation: Evaluation) -> list[dict[str, Any]]:
    """Rules that did not run, each with why: data missing here (with how to collect it) or
    data this format never records."""
    out = []
    for rule, missing in evaluation.not_applicable:
        why = evaluation.inapplicable.get(rule.id, Inapplicable(MISSING))
        out.append({"rule_id": rule.id, "rule_name": rule.name,
                    "title": rule.text(evaluation.lang).title, "missing": missing,
                    "reason": why.reason, "collect": list(why.collect)})
    return out


def build_report(profile: Profile, evaluation: Evaluation, rules: list[Rule],
                 run: RunInfo | None = None) -> dict[str, Any]:
    run = run or RunInfo()
    data: dict[str, list[dict[str, Any]]] = {}
    for finding in sorted(evaluation.findings, key=lambda f: f.rank):
        data.setdefault(finding.rule.group, []).append({
            "Rule Type": finding.rule.type, "Rule Description": finding.title,
            "result": [_finding(finding)]})
    by_severity = {s: sum(f.severity == s for f in evaluation.findings) for s in SEVERITIES}
    meta = profile.meta.to_dict()
    meta["tables"] = {name: len(df) for name, df in profile.tables.items()}
    return {
        "status": 0,
        "data": data,
        "advisor": {"version": __version__,
                    "generated_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                    "lang": evaluation.lang, "config": run.config,
                    **({"rule_overrides": list(run.rule_overrides)}
                       if run.rule_overrides else {})},
        "profile": meta,
        "summary": {"findings": len(evaluation.findings), "by_severity": by_severity,
                    "total_time_us": profile_time_us(profile),
                    "combined_impact_us": evaluation.combined_impact_us},
        "metrics": {"steps": step_metrics(profile), "core_types": core_type_metrics(profile),
                    "compute_classes": compute_class_metrics(profile),
                    "host": host_metrics(profile), "ranks": rank_metrics(profile)},
        "not_applicable": _not_applicable(evaluation),
        "warnings": [w.to_dict() for w in profile.warnings],
        "rules": {r.id: {"source": r.source, "params": evaluation.params.get(r.id, {}),
                         "outcome": evaluation.outcomes.get(r.id, "not_applicable")}
                  for r in rules},
        "rule_errors": [{"rule_id": r.id, "problem": p} for r, p in evaluation.errors],
    }
