"""Data-pipeline rules (rules/data_pipeline.yaml): each fires on its pattern and stays quiet
elsewhere. Expected values are computed here from the rows given."""

from __future__ import annotations

import pandas as pd
import pytest
from test_builtin_rules import ERRORS, RULES, run

from advisor.compat import zip_strict


def evidence(finding) -> list[dict]:
    """Evidence rows as dicts, column -> value."""
    columns = finding.evidence["columns"]
    return [dict(zip_strict(columns, row)) for row in finding.evidence["rows"]]


def queues(host: list[float], device: list[float] = (), waits: list[float] | None = None
           ) -> pd.DataFrame:
    rows = [{"queue": "host", "step": i + 1, "size": s, "capacity": 64.0}
            for i, s in enumerate(host)]
    rows += [{"queue": "device", "step": i + 1, "size": s,
              "wait_us": waits[i] if waits else None} for i, s in enumerate(device)]
    df = pd.DataFrame(rows)
    df["empty"] = df["size"] == 0
    return df


def test_data_rules_load() -> None:
    assert ERRORS == []
    assert {"DATA-001", "DATA-002", "DATA-003", "DATA-004"} <= set(RULES.rules)


def test_host_queue_empty_fires() -> None:
    host = [0, 0, 3, 0, 5, 0, 0, 1, 0, 2]
    (finding,) = run("DATA-001", queues=queues(host))
    empty = sum(1 for s in host if s == 0)
    assert finding.values["empty_ratio"] == pytest.approx(empty / len(host))
    assert finding.values["batches"] == len(host)
    assert len(evidence(finding)) == empty
    assert "60.0%" in finding.message


def test_host_queue_mostly_full_is_silent() -> None:
    assert run("DATA-001", queues=queues([0, 4, 5, 6, 7, 8, 9, 10, 11, 12])) == []


def test_device_queue_empty_with_full_host_queue_fires() -> None:
    host = [10, 12, 9, 11]
    device = [0, 1, 0, 0]
    (finding,) = run("DATA-002", queues=queues(host, device))
    assert finding.values["device_empty_ratio"] == pytest.approx(3 / 4)
    assert finding.values["host_empty_ratio"] == 0
    assert finding.values["mean_host_size"] == pytest.approx(sum(host) / len(host))
    assert [row["step"] for row in evidence(finding)] == [1, 3, 4]


def test_device_queue_empty_with_empty_host_queue_is_silent() -> None:
    # the host queue is empty too: data processing (DATA-001), not transfer
    assert run("DATA-002", queues=queues([0, 0, 0, 4], [0, 0, 1, 0])) == []
    assert run("DATA-002", queues=queues([5, 6, 7], [1, 2, 3])) == []


def pipeline(rows: list[tuple]) -> pd.DataFrame:
    """(op_id, op_type, workers, queue_usage, parent, children, input_usage, empty_ratio);
    every queue sampled 50 times, enough to judge."""
    frame = pd.DataFrame(rows, columns=["op_id", "op_type", "workers", "queue_usage", "parent",
                                        "children", "input_queue_usage", "queue_empty_ratio"])
    return frame.assign(queue_samples=50)


def test_map_op_with_full_inputs_and_empty_output_fires() -> None:
    ops = pipeline([
        (0, "BatchOp", 4, 0.05, None, 1, 0.10, 0.8),
        (1, "MapOp", 2, 0.10, 0, 1, 0.90, 0.6),
        (2, "TFReaderOp", 8, 0.90, 1, 0, None, 0.0),
    ])
    (finding,) = run("DATA-003", pipeline_ops=ops)
    assert finding.values["slow_ops"] == 1
    (row,) = evidence(finding)
    assert row["op_type"] == "MapOp"
    assert row["input_queue_usage"] - row["queue_usage"] == pytest.approx(0.8)
    assert "MapOp (op 1, 2 workers)" in finding.message
    assert "90.0% full" in finding.message
    assert "num_parallel_workers of MapOp" in finding.suggestions[0]


def test_batch_and_source_bottlenecks_get_their_own_advice() -> None:
    batch = pipeline([(0, "BatchOp", 4, 0.0, None, 1, 0.95, 1.0),
                      (1, "MindRecordOp", 4, 0.95, 0, 0, None, 0.0)])
    (finding,) = run("DATA-003", pipeline_ops=batch)
    assert "prefetch_size" in finding.suggestions[0]
    source = pipeline([(0, "BatchOp", 4, 0.0, None, 1, 0.0, 1.0),
                       (1, "GeneratorOp", 1, 0.0, 0, 0, None, 0.75)])
    (finding,) = run("DATA-003", pipeline_ops=source)
    assert evidence(finding)[0]["op_type"] == "GeneratorOp"
    assert "75.0% of 50 samples" in finding.message
    assert "MindRecord" in finding.suggestions[0]


def test_balanced_pipeline_is_silent() -> None:
    ops = pipeline([(0, "BatchOp", 4, 0.5, None, 1, 0.6, 0.0),
                    (1, "MapOp", 8, 0.6, 0, 1, 0.7, 0.1),
                    (2, "ImageFolderOp", 8, 0.7, 1, 0, None, 0.2)])
    assert run("DATA-003", pipeline_ops=ops) == []


def test_getnext_wait_fires_with_impact() -> None:
    waits = [100.0, 2_000.0, 1_500.0]
    (finding,) = run("DATA-004", queues=queues([], [0, 0, 1], waits))
    assert finding.values["mean_wait_us"] == pytest.approx(sum(waits) / 3)
    assert finding.impact_us == pytest.approx(sum(waits))
    assert [row["wait_us"] for row in evidence(finding)] == [2_000.0, 1_500.0]


def test_short_getnext_wait_is_silent() -> None:
    assert run("DATA-004", queues=queues([], [3, 2, 1], [1.0, 0.0, 1.0])) == []


def cpu(system: list[tuple[float, float, float]], cpus: int = 8) -> pd.DataFrame:
    """Host samples of (user_pct, sys_pct, runnable), numbered from 0."""
    return pd.DataFrame([{"scope": "system", "sample": i, "user_pct": u, "sys_pct": s,
                          "runnable": r, "context_switches": 1000.0, "cpus": cpus}
                         for i, (u, s, r) in enumerate(system)])


def test_low_user_cpu_with_data_bottleneck_fires() -> None:
    host = [0, 0, 0, 2, 0] * 2  # ten batches: enough to judge (min_batches)
    samples = [(20.0, 5.0, 2.0), (30.0, 5.0, 3.0), (25.0, 4.0, 2.0)]
    (finding,) = run("DATA-005", queues=queues(host), cpu_usage=cpu(samples))
    assert finding.values["empty_ratio"] == pytest.approx(8 / 10)
    assert finding.values["user_pct"] == pytest.approx((20 + 30 + 25) / 3)
    assert finding.values["samples"] == 3
    assert [row["user_pct"] for row in evidence(finding)] == [20.0, 25.0, 30.0]
    assert "only 25% in user code" in finding.message and "80.0% of batches" in finding.message


def test_low_user_cpu_without_data_bottleneck_or_busy_cpu_is_silent() -> None:
    idle_cpu = cpu([(20.0, 5.0, 2.0)])
    assert run("DATA-005", queues=queues([3, 4, 5, 0]), cpu_usage=idle_cpu) == []
    busy_cpu = cpu([(70.0, 5.0, 2.0), (80.0, 5.0, 2.0)])
    assert run("DATA-005", queues=queues([0, 0, 0]), cpu_usage=busy_cpu) == []


def test_high_system_cpu_with_long_run_queue_fires() -> None:
    samples = [(30.0, 40.0, 12.0), (25.0, 35.0, 10.0), (35.0, 30.0, 14.0)]
    (finding,) = run("DATA-006", cpu_usage=cpu(samples, cpus=8))
    assert finding.values["sys_pct"] == pytest.approx((40 + 35 + 30) / 3)
    assert finding.values["runnable"] == pytest.approx((12 + 10 + 14) / 3)
    assert finding.values["cpus"] == 8
    assert [row["sys_pct"] for row in evidence(finding)] == [40.0, 35.0, 30.0]
    assert evidence(finding)[0]["context_switches"] == 1000.0
    assert "35% in the kernel" in finding.message and "on 8 CPUs" in finding.message


def test_high_system_cpu_with_short_run_queue_is_silent() -> None:
    # sys time is high but fewer runnable processes than CPUs: nobody waits for a core
    assert run("DATA-006", cpu_usage=cpu([(30.0, 40.0, 4.0), (30.0, 45.0, 6.0)])) == []
    assert run("DATA-006", cpu_usage=cpu([(60.0, 10.0, 20.0)])) == []


def cpu_ops(rows: list[tuple]) -> pd.DataFrame:
    """(op_id, op_type, workers, cpu_pct)."""
    return pd.DataFrame(rows, columns=["op_id", "op_type", "workers", "cpu_pct"])


def test_pipeline_operator_cpu_hot_spot_fires() -> None:
    ops = cpu_ops([(0, "Batch", 4, 40.0), (1, "Map", 2, 180.0), (2, "Shuffle", 1, 95.0),
                   (3, "ImageFolder", 8, 160.0)])
    (finding,) = run("DATA-007", pipeline_ops=ops)
    assert finding.values["hot_ops"] == 1  # Shuffle is single-threaded: not counted
    assert finding.values["pipeline_cpu_pct"] == pytest.approx(40 + 180 + 95 + 160)
    (row,) = evidence(finding)
    assert row["op_type"] == "Map" and row["cpu_pct"] / row["workers"] == pytest.approx(90.0)
    assert "Map (op 1) uses 180% CPU with 2 workers, 90% per worker" in finding.message
    assert f"{180 / 475:.1%}" in finding.message
    assert "above 2" in finding.suggestions[0]


def test_pipeline_operators_under_the_per_worker_limit_are_silent() -> None:
    ops = cpu_ops([(0, "Batch", 4, 250.0), (1, "Map", 8, 500.0), (2, "Repeat", 1, 99.0)])
    assert run("DATA-007", pipeline_ops=ops) == []
