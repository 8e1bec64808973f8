"""fusion_op_*.csv, the fusions the graph compiler applied (seed 000, issue 19): read into
`graph_fusions` and used by the graph-fusion advice (FUSE-002's `fused_elsewhere`)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
from conftest import FIXTURE_DIR

from advisor.model import Profile, ProfileMeta, contract_problems
from advisor_plugins import fusion_patterns, msprof

SMALL = FIXTURE_DIR / "msprof" / "PROF_000001_20260105093000123_SMALLCASE"
FUSION_OP = FIXTURE_DIR / "msprof" / "fusion_op" / "fusion_op_20260105093512.csv"


def test_fusion_op_is_read_into_graph_fusions(tmp_path: Path) -> None:
    root = shutil.copytree(SMALL, tmp_path / SMALL.name)
    shutil.copy(FUSION_OP, root / "mindstudio_profiler_output")
    (profile,) = msprof.MsprofReader().read(root)
    assert contract_problems(profile) == []
    assert "mindstudio_profiler_output/fusion_op_20260105093512.csv" in profile.meta.files_read
    fusions = profile.tables["graph_fusions"]
    assert fusions["fusion_op"].tolist() == [
        "model/layer1/dense/MatMulV2",
        "model/layer2/dense/MatMulV2",
        "model/layer1/conv1/Conv2D",
        "model/layer1/LayerNorm",
    ]
    assert fusions["op_count"].tolist()[:3] == [2, 2, 3]
    assert fusions["original_ops"].isna().tolist() == [False, False, False, True]
    assert fusions["memory_total_bytes"].tolist()[:2] == [49152 * 1024, 49152 * 1024]
    assert (fusions["model_id"] == 1).all()
    assert [w.problem for w in profile.warnings] == []


def test_a_candidate_pattern_fused_elsewhere_is_counted() -> None:
    """Two of the three fusions hold MatMulV2 followed by BiasAdd (op types read from the node
    names, `_N` copy suffixes dropped); the Conv2D + BiasAdd + Relu one does not."""
    fusions = pd.read_csv(FUSION_OP, dtype=str).rename(columns={"Original Ops": "original_ops"})
    (matmul_bias,) = [p for p in fusion_patterns.catalogue() if p.id == "matmul_bias_add"]
    (conv_cast,) = [p for p in fusion_patterns.catalogue() if p.id == "conv_cast"]
    assert fusion_patterns.fused_elsewhere(matmul_bias, fusions) == 2
    assert fusion_patterns.fused_elsewhere(conv_cast, fusions) == 0


def test_without_fusion_op_the_column_stays_missing() -> None:
    device = pd.DataFrame(
        {
            "name": ["a/MatMul", "a/BiasAdd"],
            "op_type": ["MatMulV2", "BiasAdd"],
            "category": ["compute", "compute"],
            "stream": [1, 1],
            "start_us": [0.0, 70.0],
            "duration_us": [60.0, 40.0],
        }
    )
    profile = Profile(ProfileMeta(source_format="msprof", path="x", framework="TensorFlow"))
    profile.tables["device_ops"] = device
    fusion_patterns.fusion_candidates(profile)
    rows = profile.tables["fusion_candidates"]
    found = rows[rows["kind"] == "graph_fusion"]
    assert len(found) == 1 and found["fused_elsewhere"].isna().all()
