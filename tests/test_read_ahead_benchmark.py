"""benchmarks/read_ahead.py, behind the read-ahead's figures: both sides run on one input,
alternating, and the ratio is of the rounds' own times."""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

import pytest
from conftest import FIXTURE_DIR, load_benchmark


@pytest.mark.slow
@pytest.mark.parametrize("other", ["alone", "before"])
def test_both_sides_are_measured_on_the_same_input(tmp_path, other):
    """Against "alone" (this advisor reading by itself) or "before" (another install, here the same
    one, as it runs by default)."""
    source = FIXTURE_DIR / "kineto_own" / "ddp_rank0.pt.trace.json.gz"
    trace = tmp_path / "in" / source.name.removesuffix(".gz")
    trace.parent.mkdir()
    trace.write_bytes(gzip.decompress(source.read_bytes()))
    advisor = str(Path(sys.executable).parent / "advisor")
    results = tmp_path / "results.json"
    argv = [str(trace.parent), "--rounds", "2", "--advisor", advisor, "--results", str(results)]
    if other == "before":
        argv += ["--before", advisor]
    assert load_benchmark("read_ahead").main(argv) == 0

    (row,) = json.loads(results.read_text())["results"]
    assert set(row) >= {other, "shared"}
    for side in (other, "shared"):
        figures = row[side]
        assert len(figures["walls"]) == 2
        assert figures["wall_s"] > 0 and figures["cpu_s"] > 0 and figures["peak_mb"] > 10
    assert 0.2 < row["wall_ratio"] < 5
    assert row["memory_ratio"] == round(row["shared"]["peak_mb"] / row[other]["peak_mb"], 3)
