"""advisor.analyze(): what notebook users get."""

from __future__ import annotations

import pandas as pd
import pytest
from conftest import DEMO

import advisor
from advisor.render.json_report import validate_report


def test_analyze_returns_tables_metrics_findings_and_valid_report():
    result = advisor.analyze(DEMO)
    (analysis,) = result.analyses
    assert isinstance(analysis.tables["device_ops"], pd.DataFrame)
    assert analysis.tables["device_ops"]["duration_us"].dtype == "float64"
    assert set(analysis.metrics.core_types["core_type"]) >= {"AI_CORE", "AI_CPU"}
    assert analysis.report["metrics"]["core_types"] == analysis.metrics.to_json()["core_types"]
    assert [f.rank for f in analysis.findings] == list(range(1, len(analysis.findings) + 1))
    assert result.input_errors == [] and result.rule_errors == []
    validate_report(analysis.report)


def test_params_accept_rule_names_and_change_findings():
    fired = {f.rule.id for f in advisor.analyze(DEMO).findings}
    assert "OP-002" in fired
    tuned = advisor.analyze(DEMO, params={"aicpu-ops": {"min_duration_us": 10_000}})
    assert "OP-002" not in {f.rule.id for f in tuned.findings}
    assert tuned.analyses[0].evaluation.params["OP-002"] == {"min_duration_us": 10_000}


def test_unknown_param_is_a_clear_error():
    with pytest.raises(ValueError, match="has no param 'bogus'"):
        advisor.analyze(DEMO, params={"OP-002": {"bogus": 1}})


def test_unreadable_path_is_recorded_not_raised(tmp_path):
    result = advisor.analyze(tmp_path / "nope", DEMO)
    assert len(result.analyses) == 1
    (error,) = result.input_errors
    assert str(tmp_path / "nope") in str(error)
