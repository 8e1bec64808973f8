"""The PyTorch profiler's memory timeline exports (plugins/memory_timeline.py, MEM-010): both
shapes of our own torch 2.13 run (tests/fixtures/memory_timeline_own), checked against the
file read here with plain json."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from clirunner import separate_runner
from conftest import FIXTURE_DIR, REAL

import advisor
from advisor.cli import main
from advisor.errors import UnreadableInput
from advisor.model import contract_problems
from advisor_plugins.memory_timeline import KINDS, MemoryTimelineReader

OWN = FIXTURE_DIR / "memory_timeline_own"
SIZES = OWN / "mlp_adam_cpu.json.gz"
RAW = OWN / "mlp_adam_cpu.raw.json.gz"
READER = MemoryTimelineReader()


def kinds_of(path: Path) -> dict[str, dict]:
    (profile,) = READER.read(path)
    assert contract_problems(profile) == []
    table = profile.tables["memory_kinds"]
    return {row["kind"]: row for row in table.to_dict("records")}


def test_both_shapes_give_the_kinds_at_the_peak_the_file_holds():
    """[times, sizes]: the row whose kinds add up to the most (the first such) is the peak;
    the raw events added up per kind give the same figures."""
    times, sizes = json.loads(gzip.decompress(SIZES.read_bytes()))
    totals = [sum(row[1:]) for row in sizes]
    peak_row = sizes[totals.index(max(totals))][1:]
    expected = {
        kind: (float(peak_row[k]), peak_row[k] / max(totals), float(max(r[k + 1] for r in sizes)))
        for k, kind in enumerate(KINDS)
    }
    for path in (SIZES, RAW):
        got = kinds_of(path)
        assert {
            k: (r["at_peak_bytes"], pytest.approx(r["peak_share"]), r["max_bytes"])
            for k, r in got.items()
        } == expected
    assert max(totals) == 34_281_672  # about 33 MiB: parameters, Adam's state, gradients


def test_the_raw_events_are_added_up_per_kind_with_releases_negative():
    events = json.loads(gzip.decompress(RAW.read_bytes()))
    held = [0] * len(KINDS)
    for _, _, delta, kind in events:
        held[kind] += delta
    assert min(held) >= 0  # every release follows its tensor's creation
    assert any(delta < 0 for _, _, delta, _ in events)


def test_detect_takes_lists_of_numbers_and_leaves_traces_alone(tmp_path: Path):
    assert READER.detect(SIZES) and READER.detect(RAW)
    trace = next(REAL.glob("kineto/*.json.gz"))
    assert not READER.detect(trace)
    listed = tmp_path / "timeline.json"
    listed.write_text("[[1, 2], [3, 4]]")
    assert READER.detect(listed)
    with pytest.raises(UnreadableInput, match="not a memory timeline export"):
        READER.read(listed)


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("[[1, 2], [3", "not JSON"),
        ("[[1, 2, 3, 9]]", "an event of kind 9"),
        ("[[0, 1], [[0, 1, 2, 3, 4, 5, 6, 7, 8]]]", "not a memory timeline export"),
    ],
)
def test_a_broken_export_is_one_line_naming_the_file(tmp_path: Path, content: str, problem: str):
    path = tmp_path / "memory.json"
    path.write_text(content)
    result = separate_runner().invoke(main, ["run", str(path), "-o", str(tmp_path / "out")])
    assert result.exit_code == 3
    assert "Traceback" not in result.stderr
    assert f"{path}: " in result.stderr and problem in result.stderr


def test_mem_010_is_silent_on_the_small_run_and_names_the_optimizer_state_below_its_limit():
    """The own MLP peaks at 33 MiB, under MEM-010's 1 GiB: it passes; with the limit at 0 it
    names Adam's state, 37.0% of the peak, and gives the sharding advice only."""
    (quiet,) = advisor.analyze(SIZES).analyses
    assert quiet.evaluation.outcomes["MEM-010"].value == "passed"
    (loud,) = advisor.analyze(SIZES, params={"MEM-010": {"min_peak_bytes": 0}}).analyses
    (finding,) = [f for f in loud.findings if f.rule.id == "MEM-010"]
    assert finding.values["top_kind"] == "optimizer_state"
    assert "holding the most is the optimizer state: 12.1 MiB (37.0%" in finding.message
    assert any("ZeRO stage 1" in s for s in finding.suggestions)
    assert not any("activation checkpointing" in s for s in finding.suggestions)


def test_a_folder_of_both_exports_is_two_profiles(tmp_path: Path):
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["run", str(OWN), "-o", str(out), "--format", "json"])
    assert result.exit_code == 0, result.output
    reports = [json.loads(p.read_text()) for p in sorted(out.glob("prof_rule_*.json"))]
    assert sorted(r["profile"]["source_format"] for r in reports) == ["memory-timeline"] * 2
