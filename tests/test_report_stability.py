"""Findings and tables on the fixtures stay what they were (issue 13: every optimisation keeps
the same findings and tables).

tests/golden/reports.json holds, per fixture, each profile's findings (rule, severity, rank,
message, time at stake), what each finding shows (its evidence: columns, rows selected, the
first row shown and a digest of all of them; its time window) and a summary of each table
(rows, and per column its non-null count and, for numbers, the sum to 9 significant digits).
A faster reader, a cached rule, a rewritten evidence path or a streamed rank must reproduce
it. New tables and new columns may appear (features land
beside optimisations); a golden table or column that disappears or changes fails.

After a deliberate change of findings or tables, regenerate and review the diff:
    ADVISOR_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/test_report_stability.py
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from conftest import FIXTURE_DIR

import advisor

GOLDEN = Path(__file__).parent / "golden" / "reports.json"
CASES = {
    "kineto_real_nccl": "real/kineto/nccl_parser_config__nccl_data.json.gz",
    "kineto_dataloader": "kineto_own/dataloader_bound.pt.trace.json.gz",
    "kineto_ddp4": "kineto_own/ddp4_rank0.pt.trace.json.gz",
    "ascend_pt_rank0": "real/ascend_pt/rank0_ascend_pt",
    "ascend_db": "ascend_db/rank0_ascend_pt",
    "msprof": "msprof/PROF_000001_20260105093000123_SMALLCASE",
    "msprof_queues": "msprof_queues/PROF_000004_20260110080000000_QUEUES",
    "cann_timeline": "real/cann_timeline",
    "mindspore_legacy": "real/mindspore_legacy/run_2_profiler",
    "mindspore_cluster": "real/mindspore_cluster_4rank",
    "mindspore_gpu": "mindspore_gpu/profiler",
    "megengine": "megengine/static",
    "aoe": "aoe/good",
    "cluster_links": "cluster_links",
}
"""One fixture per reader and the multi-rank paths (a folder of ranks counts as one case)."""


def _number(value: Any) -> float | None:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return float(f"{float(value):.9g}")


def _table_summary(frame: pd.DataFrame) -> dict[str, Any]:
    columns: dict[str, Any] = {}
    for name in frame.columns:
        series = frame[name]
        entry: dict[str, Any] = {"count": int(series.notna().sum())}
        if pd.api.types.is_numeric_dtype(series) and not pd.api.types.is_bool_dtype(series):
            entry["sum"] = _number(pd.to_numeric(series, errors="coerce").sum())
        columns[str(name)] = entry
    return {"rows": len(frame), "columns": columns}


def _plain(value: Any) -> Any:
    """A shown value with numbers to 9 significant digits (as the table sums)."""
    if isinstance(value, float):
        return _number(value)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _shown(finding: Any) -> dict[str, Any]:
    """What a finding shows besides its message: evidence rows and time window."""
    evidence = finding.evidence or {}
    rows = _plain(evidence.get("rows", []))
    return {
        "rule": finding.rule.id,
        "rank": finding.rank,
        "columns": evidence.get("columns"),
        "total_rows": evidence.get("total_rows"),
        "first_row": rows[0] if rows else None,
        "rows_digest": hashlib.sha1(json.dumps(rows).encode()).hexdigest()[:16],
        "window": _plain(finding.window.to_dict()) if finding.window else None,
    }


def _summary(path: Path) -> list[dict[str, Any]]:
    result = advisor.analyze(path)
    out = []
    for analysis in result.analyses:
        findings = sorted(
            (
                f.rule.id,
                f.severity,
                f.rank,
                f.message,
                _number(f.impact_us),
            )
            for f in analysis.findings
        )
        shown = sorted((_shown(f) for f in analysis.findings), key=lambda s: (s["rule"], s["rank"]))
        out.append(
            {
                "profile": f"{analysis.profile.meta.source_format}:{analysis.profile.meta.rank}",
                "findings": [list(f) for f in findings],
                "shown": shown,
                "tables": {
                    name: _table_summary(frame)
                    for name, frame in sorted(analysis.tables.items())
                    if isinstance(frame, pd.DataFrame)
                },
            }
        )
    return sorted(out, key=lambda p: p["profile"])


def _golden() -> dict[str, Any]:
    return json.loads(GOLDEN.read_text(encoding="utf-8")) if GOLDEN.exists() else {}


@pytest.mark.parametrize("case", sorted(CASES))
def test_findings_and_tables_unchanged(case: str) -> None:
    summary = json.loads(json.dumps(_summary(FIXTURE_DIR / CASES[case])))
    if os.environ.get("ADVISOR_UPDATE_GOLDEN"):
        golden = _golden()
        golden[case] = summary
        GOLDEN.write_text(json.dumps(golden, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    expected = _golden().get(case)
    assert expected is not None, f"no golden summary for {case}: run with ADVISOR_UPDATE_GOLDEN=1"
    assert [p["profile"] for p in summary] == [p["profile"] for p in expected]
    for now, was in zip(summary, expected):
        assert now["findings"] == was["findings"], now["profile"]
        assert now["shown"] == was["shown"], f"{now['profile']}: evidence or windows"
        for table, shape in was["tables"].items():
            assert table in now["tables"], f"{now['profile']}: table {table} disappeared"
            current = now["tables"][table]
            assert current["rows"] == shape["rows"], f"{now['profile']}: {table} rows"
            for column, figures in shape["columns"].items():
                assert current["columns"].get(column) == figures, (
                    f"{now['profile']}: {table}.{column}"
                )


def test_report_rows_are_the_frames_rows_as_json_values() -> None:
    """The report's metric rows (metrics._records, read column by column): each row's values
    as DataFrame.to_dict gives them, numpy scalars as Python ones, NaN, NA and NaT as None."""
    import numpy as np

    from advisor.metrics import _records

    frame = pd.DataFrame(
        {
            "count": pd.array([1, None], dtype="Int64"),
            "ratio": [1.5, np.nan],
            "kind": pd.array(["x", None], dtype="string"),
            "warmup": [True, False],
            "step": np.array([1, 2], dtype="int64"),
            "mixed": [None, np.float32(2.5)],
            7: [pd.Timestamp("2026-01-01"), pd.NaT],
        }
    )
    assert _records(frame) == [
        {"count": 1, "ratio": 1.5, "kind": "x", "warmup": True, "step": 1, "mixed": None,
         "7": "2026-01-01 00:00:00"},
        {"count": None, "ratio": None, "kind": None, "warmup": False, "step": 2, "mixed": 2.5,
         "7": None},
    ]  # fmt: skip
    assert all(type(v) is not np.float64 for row in _records(frame) for v in row.values())
    assert _records(pd.DataFrame(index=range(2))) == [{}, {}]
    assert _records(pd.DataFrame({"a": []})) == []
