"""PAR rules on real traces made by tests/fixtures/kineto_own/make_traces.py (CPU only): the
checks must stay quiet where the thing they look for costs nothing on that hardware."""

from __future__ import annotations

import gzip
import json

from conftest import FIXTURE_DIR

import advisor

OWN = FIXTURE_DIR / "kineto_own"


def outcome(analysis: advisor.api.ProfileAnalysis, rule_id: str) -> str:
    return str(analysis.evaluation.outcomes[rule_id])


def test_data_parallel_on_a_cpu_is_recorded_but_not_advised() -> None:
    """The trace records six `DataParallel.forward` calls (one per profiled step, counted in the
    raw file); without GPUs DataParallel only calls the module: a CPU trace has no device
    tasks, so PAR-001 does not apply and says nothing."""
    path = OWN / "data_parallel.pt.trace.json.gz"
    raw = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    assert sum(e.get("name") == "DataParallel.forward" for e in raw) == 6
    (analysis,) = advisor.analyze(path).analyses
    host = analysis.profile.tables["host_ops"]
    assert (host["name"] == "DataParallel.forward").sum() == 6
    assert "device_ops" not in analysis.profile.tables
    assert outcome(analysis, "PAR-001") == "not_applicable"
    assert not [f for f in analysis.findings if f.rule.id == "PAR-001"]


def test_gloo_on_a_cpu_run_is_not_advised_against() -> None:
    """The DDP ranks all-reduce over gloo on CPUs: comm_ops holds the gloo collectives, and
    PAR-002 (gloo beside GPU kernels) does not apply to a trace without device tasks."""
    (analysis,) = advisor.analyze(OWN / "ddp_rank0.pt.trace.json.gz").analyses
    comm = analysis.profile.tables["comm_ops"]
    assert comm["name"].str.startswith("gloo:").sum() > 0
    assert "device_ops" not in analysis.profile.tables
    assert outcome(analysis, "PAR-002") == "not_applicable"
