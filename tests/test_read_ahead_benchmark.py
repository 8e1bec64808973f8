"""benchmarks/read_ahead.py, behind the read-ahead's figures: both modes run on one input,
alternating, and the ratio is of the rounds' own times."""

from __future__ import annotations

import gzip
import sys
from pathlib import Path

import pytest
from conftest import FIXTURE_DIR, load_benchmark


@pytest.mark.slow
def test_both_modes_are_measured_on_the_same_input(tmp_path):
    source = FIXTURE_DIR / "kineto_own" / "ddp_rank0.pt.trace.json.gz"
    trace = tmp_path / "in" / source.name.removesuffix(".gz")
    trace.parent.mkdir()
    trace.write_bytes(gzip.decompress(source.read_bytes()))
    advisor = str(Path(sys.executable).parent / "advisor")
    row = load_benchmark("read_ahead").compare(advisor, trace.parent, rounds=2)

    for mode in ("alone", "shared"):
        figures = row[mode]
        assert len(figures["walls"]) == 2
        assert figures["wall_s"] > 0 and figures["cpu_s"] > 0 and figures["peak_mb"] > 10
    assert 0.2 < row["wall_ratio"] < 5
    assert row["memory_ratio"] == round(row["shared"]["peak_mb"] / row["alone"]["peak_mb"], 3)
