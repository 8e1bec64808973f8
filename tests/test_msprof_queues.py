"""Data-queue summaries of a CANN export (aicpu_mi, dp) -> the queues table, and the DATA
rules on it. Fixture: tests/fixtures/msprof_queues (see its README); expected values are
computed here from the CSVs with the csv module."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import pytest
from conftest import FIXTURE_DIR

from advisor.derive import derive
from advisor.engine.evaluate import evaluate
from advisor.engine.functions import BUILTIN_FUNCTIONS
from advisor.engine.rules import load_rules
from advisor.model import contract_problems
from advisor_plugins import msprof
from advisor_plugins.builtin_rules import advisor_rule_paths
from advisor_plugins.step_metrics import PROVIDERS

PROF = FIXTURE_DIR / "msprof_queues" / "PROF_000004_20260110080000000_QUEUES"
OUT = PROF / "mindstudio_profiler_output"
AICPU_MI = OUT / "aicpu_mi_20260110081500.csv"
DP = OUT / "dp_20260110081500.csv"


def rows(path: Path, device: str) -> list[dict[str, str]]:
    with open(path, newline="") as fh:
        return [r for r in csv.DictReader(fh) if r["Device_id"] == device]


def by_device(path: Path) -> dict[str, object]:
    return {p.meta.device_id: p for p in msprof.MsprofReader().read(path)}


def test_queues_per_device_from_merged_summaries() -> None:
    profiles = by_device(PROF)
    assert sorted(profiles) == ["0", "1"]
    for profile in profiles.values():
        assert contract_problems(profile) == [] and profile.warnings == []
    queues = profiles["0"].tables["queues"]
    reads, samples = rows(AICPU_MI, "0"), rows(DP, "0")
    device = queues[queues["queue"] == "device"]
    host = queues[queues["queue"] == "host"]
    assert list(device["size"]) == [float(r["Queue Size"]) for r in reads]
    assert list(device["empty"]) == [r["Queue Size"] == "0" for r in reads]
    assert list(device["wait_us"]) == pytest.approx(
        [float(r["End Time(us)"]) - float(r["Start Time(us)"]) for r in reads]
    )
    assert list(device["step"]) == list(range(1, len(reads) + 1))
    assert list(host["size"]) == [float(r["Cached Buffer Size"]) for r in samples]
    assert list(host["step"]) == list(range(1, len(samples) + 1))
    # one time base per device: the earliest of both files
    origin = min(
        [float(r["Start Time(us)"]) for r in reads] + [float(r["Timestamp(us)"]) for r in samples]
    )
    assert list(device["time_us"]) == pytest.approx(
        [float(r["Start Time(us)"]) - origin for r in reads]
    )
    assert host["time_us"].iloc[0] == 0.0
    other = profiles["1"].tables["queues"]
    assert set(other["queue"]) == {"device"}  # dp has no rows for device 1
    assert list(other["step"]) == [1, 2]  # counted per device, not per file row
    assert list(other["size"]) == [float(r["Queue Size"]) for r in rows(AICPU_MI, "1")]


def test_per_device_summary_without_device_column(tmp_path: Path) -> None:
    summary = tmp_path / "PROF_1" / "device_3" / "summary"
    summary.mkdir(parents=True)
    (summary / "aicpu_mi_3_1_1.csv").write_text(
        "Node Name,Start Time(us),End Time(us),Queue Size\nq,10,30,0\nq,40,41,7\n"
    )
    (profile,) = msprof.MsprofReader().read(tmp_path / "PROF_1")
    queues = profile.tables["queues"]
    assert profile.meta.device_id == "3"
    assert list(queues["wait_us"]) == [20.0, 1.0] and list(queues["time_us"]) == [0.0, 30.0]
    assert list(queues["empty"]) == [True, False]


def test_bad_queue_files_warn_and_keep_the_rest(tmp_path: Path) -> None:
    prof = tmp_path / PROF.name
    shutil.copytree(PROF, prof)
    out = prof / "mindstudio_profiler_output"
    (out / AICPU_MI.name).write_text("Device_id,Node Name,Start Time(us),End Time(us)\n0,q,1,2\n")
    dp = out / DP.name
    dp.write_text(dp.read_text().replace(",5\n", ",five\n"))
    (profile,) = msprof.MsprofReader().read(prof)
    messages = [str(w) for w in profile.warnings]
    assert all("\n" not in m for m in messages)
    assert any(AICPU_MI.name in m and "missing column 'Queue Size'" in m for m in messages)
    assert any(f"{DP.name}:3" in m and "'five'" in m for m in messages)
    queues = profile.tables["queues"]
    assert set(queues["queue"]) == {"host"}
    assert queues["size"].tolist()[0] == 3.0 and queues["size"].isna().sum() == 1


RULES, ERRORS = load_rules(advisor_rule_paths(), BUILTIN_FUNCTIONS)


def outcomes(profile) -> tuple[dict[str, str], dict[str, object]]:
    rules = [RULES.rules[i] for i in ("DATA-001", "DATA-002", "DATA-004")]
    derive(profile, [n for r in rules for n in r.needs()], PROVIDERS)
    result = evaluate(profile, rules, functions=BUILTIN_FUNCTIONS)
    assert result.errors == []
    return result.outcomes, {f.rule.id: f for f in result.findings}


def test_data_rules_on_a_cann_export() -> None:
    """Reader + DATA rules on a two-device export, expected figures recomputed from the CSVs.
    Python, not a case: the export holds two devices (a case runs on one profile), and the
    fixture lives under tests/, which the wheel does not ship with the rules' case files. The
    rules alone on queue rows are tested by rules/data_pipeline.case.yaml."""
    assert ERRORS == []
    profiles = by_device(PROF)
    states, findings = outcomes(profiles["0"])
    assert states == {"DATA-001": "passed", "DATA-002": "fired", "DATA-004": "fired"}
    reads = rows(AICPU_MI, "0")
    empty = sum(r["Queue Size"] == "0" for r in reads)
    assert findings["DATA-002"].values["device_empty_ratio"] == pytest.approx(empty / len(reads))
    host = [float(r["Cached Buffer Size"]) for r in rows(DP, "0")]
    assert findings["DATA-002"].values["host_empty_ratio"] == pytest.approx(
        host.count(0.0) / len(host)
    )
    waits = [float(r["End Time(us)"]) - float(r["Start Time(us)"]) for r in reads]
    assert findings["DATA-004"].impact_us == pytest.approx(sum(waits))
    assert findings["DATA-004"].values["mean_wait_us"] == pytest.approx(sum(waits) / len(waits))
    # device 1: full queues, short waits, no host samples
    states, findings = outcomes(profiles["1"])
    assert findings == {} and states["DATA-004"] == "passed"
