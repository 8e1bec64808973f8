"""Output a user can trust: no silent passes, advice for the device in front of them, numbers
that agree with each other. Each test reproduces what a new user met on real profiles."""

from __future__ import annotations

import csv
import json
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner
from conftest import DEMO, FIXTURE_DIR

import advisor
from advisor.cli import main
from advisor.engine.evaluate import MIN_JUDGED_US
from advisor.units import fmt_pct
from advisor_plugins.msprof.framework import framework_of

SHARED = FIXTURE_DIR / "real"
ROCM = SHARED / "kineto" / "amd_trace__mi250_minitoy_train_ROCm6_2_kineto.json.gz"
CPU_ONLY = SHARED / "kineto" / "cpu_only__rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz"
ASCEND_PT = SHARED / "ascend_pt" / "rank0_ascend_pt"
CANN_TIMELINE = SHARED / "cann_timeline" / "PROF_000001_20230818142704322_COJGGGCANRMICFBC"
KINETO_OWN = FIXTURE_DIR / "kineto_own"
SMALL_MSPROF = FIXTURE_DIR / "msprof" / "PROF_000001_20260105093000123_SMALLCASE"
ASCEND_ADVICE = (
    "AOE",
    "aoe ",
    "torch_npu",
    "MindSpore",
    "all_reduce_fusion_config",
    "HCCL_",
    "TASK_QUEUE",
    "operator_tuning_file",
    "MegEngine",
    "@trace",
)


def run_cli(*args: object) -> tuple[int, str]:
    result = CliRunner().invoke(main, [str(a) for a in args])
    return result.exit_code, result.output


def report_of(out: Path) -> dict:
    (path,) = sorted(out.glob("prof_rule_*.json"))
    return json.loads(path.read_text(encoding="utf-8"))


# --- silent passes ---------------------------------------------------------------------------


@pytest.mark.parametrize("selector", ["op-005", "Op-005", "OP-TYPE-DOMINATES"])
def test_select_matches_ids_and_names_in_any_case(tmp_path, selector):
    result = advisor.analyze(DEMO, select=[selector])
    assert [r.id for r in result.rules] == ["OP-005"]


@pytest.mark.parametrize("option", ["--select", "--ignore"])
def test_a_selector_matching_no_rule_is_a_usage_error(tmp_path, option):
    code, output = run_cli("run", DEMO, "-o", tmp_path / "out", option, "OP-05", "--fail-on", "low")
    assert code == 2
    assert "'OP-05' matches no rule" in output and "OP-005" in output  # names it, suggests
    assert not (tmp_path / "out").exists()


def test_a_config_selector_matching_no_rule_names_the_config(tmp_path, monkeypatch):
    (tmp_path / "advisor.yaml").write_text("select: [OP-05]\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    code, output = run_cli("run", DEMO, "-o", tmp_path / "out")
    assert code == 2
    assert f"{tmp_path / 'advisor.yaml'}: select: 'OP-05' matches no rule" in output


@pytest.mark.parametrize("value", ["abc", "true", "1e400", "nan"])
def test_set_checks_the_value_against_the_param_type(tmp_path, value):
    code, output = run_cli(
        "run", DEMO, "-o", tmp_path / "out", "--set", f"OP-002.min_duration_us={value}"
    )
    assert code == 2
    assert "OP-002.min_duration_us expects a finite number (default 20)" in output


def test_set_accepts_numbers_yaml_reads_as_text(tmp_path):
    result = advisor.analyze(DEMO, params={"STEP-001": {"max_ratio": "1e-3"}})
    assert result.analyses[0].evaluation.params["STEP-001"]["max_ratio"] == 0.001


def test_reports_name_the_config_file_in_effect(tmp_path, monkeypatch):
    config = tmp_path / "advisor.yaml"
    config.write_text("params: {OP-002: {min_duration_us: 5}}\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    code, _ = run_cli("run", DEMO, "-o", tmp_path / "out", "--format", "json")
    assert code == 0
    assert report_of(tmp_path / "out")["advisor"]["config"] == str(config)


def test_reports_say_no_config_when_there_is_none(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = advisor.analyze(DEMO)
    assert result.reports[0]["advisor"]["config"] is None


# --- advice for the device and framework ------------------------------------------------------


def test_a_rocm_trace_gets_no_ascend_advice_and_no_tune_ops_file(tmp_path):
    code, _ = run_cli("run", ROCM, "-o", tmp_path / "out", "--format", "json")
    assert code == 0
    report = report_of(tmp_path / "out")
    findings = [f for groups in report["data"].values() for g in groups for f in g["result"]]
    assert findings, "the ROCm trace has findings to check"
    for finding in findings:
        assert finding["suggestions"], f"{finding['rule_id']} has no advice for a GPU"
        for text in finding["suggestions"]:
            assert not any(word in text for word in ASCEND_ADVICE), (finding["rule_id"], text)
        assert finding["Tuning Data"] == [] or isinstance(finding["Tuning Data"], dict)
    assert not (tmp_path / "out" / "operator_tuning_file.cfg").exists()


MATRIX_ADVICE = ("Tensor Core", "cudnn.benchmark", "allow_tf32", "layer that produces")


@pytest.mark.parametrize(
    ("path", "top_type", "told"),
    [  # our H200 run: Adam(fused=True) leads a small model's device time
        (
            FIXTURE_DIR / "kineto_gpu_own" / "dataloader_bound.pt.trace.json.gz",
            "multi_tensor_apply_kernel",
            "ZeroRedundancyOptimizer",
        ),
        # a real MindSpore GPU profile of LeNet: the momentum update leads
        (SHARED / "mindspore_legacy" / "profiler_misc", "ApplyMomentum", "gradient accumulation"),
    ],
)
def test_an_optimizer_update_on_top_gets_no_matrix_or_layer_advice(path, top_type, told):
    """The top operator type was told to use Tensor Core shapes, TF32 and a better layer
    when it was the optimizer's update, whose time follows the parameters."""
    (finding,) = [
        f
        for a in advisor.analyze(path).analyses
        for f in a.findings
        if f.rule.id == "OP-005" and f.values["top_type"] == top_type
    ]
    assert "not a layer of the model" in finding.message
    assert any(told in text for text in finding.suggestions)
    for text in finding.suggestions:
        assert not any(word in text for word in MATRIX_ADVICE), text


PYTORCH_ADVICE = ("torch", "DistributedDataParallel", "DDP", "bucket_cap_mb", "Megatron")


def test_a_mindspore_cann_export_gets_mindspore_advice_only():
    """msprof writes no framework; the real AlexNet timeline's tasks carry MindSpore's scope
    names (Default/network-WithLossCell/...-op8), so PyTorch advice is left out."""
    (analysis,) = advisor.analyze(CANN_TIMELINE).analyses
    assert analysis.report["profile"]["framework"] == "MindSpore"
    suggestions = [text for f in analysis.findings for text in f.suggestions]
    assert any("dataset_sink_mode" in text for text in suggestions)
    assert not [t for t in suggestions if any(word in t for word in PYTORCH_ADVICE)]
    # a CANN export without such names keeps advice for every framework
    (small,) = advisor.analyze(SMALL_MSPROF).analyses
    assert small.report["profile"]["framework"] == "CANN"


@pytest.mark.parametrize(
    ("names", "framework"),
    [
        (["Default/network-WithLossCell/_backbone-AlexNet/conv1-Conv2d/Conv2D-op8"], "MindSpore"),
        (["Gradients/Default/network-WithLossCell/gradConv2D/Conv2DBackprop-op9"], "MindSpore"),
        (["Default/AllReduce-op534_0", "EVENT_RECORD", "Default/MemSet-op550"], "MindSpore"),
        (["MatMul_1", "EVENT_RECORD", "Default/MemSet-op550"], "CANN"),  # one of three
        (["aclnnMatmul_MatMulCommon_MatMulV2", "Cast"], "CANN"),
        (["resnet_model/conv2d/Conv2D"], "CANN"),  # TensorFlow: no -op suffix
        ([], "CANN"),
    ],
)
def test_cann_export_framework_from_task_names(names, framework):
    assert framework_of(pd.DataFrame({"name": pd.Series(names, dtype="string")})) == framework


def test_ascend_profiles_still_write_the_tune_ops_file(tmp_path):
    code, _ = run_cli("run", DEMO, "-o", tmp_path / "out", "--format", "json")
    assert code == 0
    ops = json.loads((tmp_path / "out" / "operator_tuning_file.cfg").read_text())
    assert ops["tune_ops_name"]


def test_not_applicable_rules_say_why():
    (analysis,) = advisor.analyze(CPU_ONLY).analyses
    why = {n["rule_id"]: n for n in analysis.report["not_applicable"]}
    # memory is recorded by the PyTorch profiler when asked: shown with the option
    assert why["MEM-002"]["reason"] == "missing"
    assert why["MEM-002"]["collect"] == ["profile_memory=True"]
    # AOE results and MindSpore data queues never appear in a Kineto trace: counted, hidden
    assert why["AOE-001"]["reason"] == "not_recorded" and why["AOE-001"]["collect"] == []
    assert why["DATA-001"]["reason"] == "not_recorded"
    # FLOPs are not recorded even on a GPU: profiling the GPU would not help EFF-001
    assert why["EFF-001"]["reason"] == "not_recorded"


def test_how_to_collect_copies_depends_on_whether_the_gpu_was_profiled():
    """A CPU-only trace is told to profile the GPU for host<->device copies; a trace that
    holds the GPU's kernels but no copy is not (profiling the GPU again would add nothing);
    SGLang's ROCm trace, whose DtoH copy names no host memory, is not told it holds none."""
    (cpu,) = advisor.analyze(CPU_ONLY).analyses
    (gpu,) = advisor.analyze(SHARED / "kineto" / "nccl_parser_config__nccl_data.json.gz").analyses
    (rocm,) = advisor.analyze(SHARED / "kineto_2025_mi300x_sglang_decode").analyses
    hints = {
        name: {n["rule_id"]: n["collect"] for n in a.report["not_applicable"]}["MEM-001"]
        for name, a in (("cpu", cpu), ("gpu", gpu), ("rocm", rocm))
    }
    assert hints["rocm"] == [
        "host<->device copies that name their host memory (this trace's copies do not say "
        "pinned or pageable, as ROCm traces do not)"
    ]
    # conditional: a trace without device events may come from a job without a GPU
    assert hints["cpu"] == [
        "if the job runs on a GPU, profile it too: "
        "activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]"
    ]
    assert hints["gpu"] and not any("ProfilerActivity" in h for h in hints["gpu"])
    assert "this trace holds none" in hints["gpu"][0]


def test_how_to_collect_names_the_missing_file_where_the_profiler_recorded_it(tmp_path):
    """MindStudio Insight's level-1 run was profiled at Level1 with profile_memory=True
    (its profiler_info_0.json) and shared without trace_view.json and operator_memory.csv:
    it is told which file its output folder lacks, not to set what it set. The same folder
    whose settings say Level0 without memory profiling is told the settings."""
    rank = tmp_path / "rank0_ascend_pt"
    shutil.copytree(SHARED / "msinsight_pytorch_level1" / "rank0_ascend_pt", rank)

    def hints() -> set[str]:
        (analysis,) = advisor.analyze(rank).analyses
        return {h for n in analysis.report["not_applicable"] for h in n["collect"]}

    recorded = hints()
    output = "ASCEND_PROFILER_OUTPUT here holds no"
    assert {
        f"it was recorded (profiler_level=Level1), but {output} trace_view.json: analyse the "
        "whole output folder the profiler wrote",
        f"it was recorded (profile_memory=True), but {output} operator_memory.csv: analyse "
        "the whole output folder the profiler wrote",
    } <= recorded
    assert not any("or above" in h or h.startswith("profile_memory=True") for h in recorded)
    info = rank / "profiler_info_0.json"
    settings = json.loads(info.read_text())
    settings["config"]["experimental_config"]["_profiler_level"] = "Level0"
    settings["config"]["common_config"]["profile_memory"] = False
    info.write_text(json.dumps(settings))
    told = hints()
    assert "profile_memory=True (operator_memory.csv)" in told
    assert any(h.startswith("profiler_level=ProfilerLevel.Level1 or above") for h in told)
    assert not any(output in h for h in told)


# --- numbers that agree -----------------------------------------------------------------------

FIXTURES = [
    ROCM,
    CPU_ONLY,
    ASCEND_PT,
    CANN_TIMELINE,
    DEMO,
    *sorted((SHARED / "kineto").glob("*.json.gz")),
]


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name[:40])
def test_no_impact_above_the_time_it_belongs_to(path):
    for analysis in advisor.analyze(path).analyses:
        for finding in analysis.findings:
            if finding.impact_ratio is not None:
                assert 0 <= finding.impact_ratio <= 1, (finding.rule.id, finding.impact_ratio)
                assert finding.impact_us <= finding.measured_us


OVERCLAIM = """
- id: TEAM-900
  name: claims-three-steps
  title: A team rule whose impact is three times the steps
  group: Op Summary
  type: Computation
  subtype: Test
  requires: [steps.duration_us]
  let:
    steps_us: sum(steps.duration_us)
  when: steps_us > 0
  impact_us: 3 * steps_us
  message: "The steps last {{ steps_us|us }}."
  suggestions: [Nothing to do; this rule overclaims on purpose.]
  docs: A rule written to claim more time than the profile holds.
"""


def test_an_impact_larger_than_the_profile_is_capped_and_the_raw_figure_kept(tmp_path):
    """A (team) rule that claims three times the steps: the finding says at most the profile
    time, 100%, and keeps the raw figure."""
    rules = tmp_path / "team.yaml"
    rules.write_text(OVERCLAIM, encoding="utf-8")
    (analysis,) = advisor.analyze(ASCEND_PT, rules=[rules], select=["TEAM-900"]).analyses
    (finding,) = analysis.findings
    steps_us = analysis.profile.tables["steps"]["duration_us"].sum()
    assert finding.uncapped_impact_us == pytest.approx(3 * steps_us)
    assert finding.impact_us == finding.measured_us < finding.uncapped_impact_us
    assert finding.impact_ratio == 1.0


def test_comm_message_and_impact_column_give_the_same_share():
    (analysis,) = advisor.analyze(SMALL_MSPROF).analyses
    (comm,) = [f for f in analysis.findings if f.rule.id == "COMM-001"]
    shown = re.findall(r"\d+\.\d%", comm.message)
    assert fmt_pct(comm.impact_ratio) == shown[0], (comm.message, comm.impact_ratio)


def test_idle_message_and_impact_column_give_the_same_share():
    (analysis,) = advisor.analyze(ROCM).analyses
    (idle,) = [f for f in analysis.findings if f.rule.id == "STEP-003"]
    assert fmt_pct(idle.impact_ratio) in idle.message, (idle.message, idle.impact_ratio)


@pytest.mark.parametrize("path", [ASCEND_PT, CANN_TIMELINE, ROCM], ids=lambda p: p.name[:30])
def test_findings_are_ranked_by_severity_then_impact(path):
    (analysis,) = advisor.analyze(path).analyses
    order = [("high", "medium", "low").index(f.severity) for f in analysis.findings]
    assert order == sorted(order)
    for a, b in zip(analysis.findings, analysis.findings[1:]):
        if a.severity == b.severity and b.impact_us is not None:
            assert a.impact_us is not None and a.impact_us >= b.impact_us
    assert [f.rank for f in analysis.findings] == list(range(1, len(analysis.findings) + 1))


def test_every_finding_without_an_impact_says_why():
    paths = [SHARED / "mindspore_legacy" / "run_2_profiler", ASCEND_PT, DEMO]
    findings = [f for p in paths for a in advisor.analyze(p).analyses for f in a.findings]
    unmeasured = [f for f in findings if f.impact_us is None]
    assert unmeasured, "these fixtures have findings without a measured impact"
    for finding in unmeasured:
        assert finding.impact_note, finding.rule.id


def test_a_high_rule_without_impact_or_note_is_refused(tmp_path):
    rule = tmp_path / "r.yaml"
    rule.write_text(
        """
id: TEAM-001
name: team-rule
title: A rule that cannot say how much it costs
type: Test
severity: high
when: 1 > 0
message: always
suggestions: [do something]
docs: a rule whose finding would be HIGH without a figure.
""",
        encoding="utf-8",
    )
    code, output = run_cli("rules", "validate", rule)
    assert code == 2
    assert "needs an impact_note" in output


# --- many ranks -------------------------------------------------------------------------------


def test_profiles_are_analysed_in_numeric_order(tmp_path):
    trace = (KINETO_OWN / "healthy.pt.trace.json.gz").read_bytes()
    for n in (10, 2, 1, 11, 0):
        (tmp_path / f"run_{n}.pt.trace.json.gz").write_bytes(trace)
    result = advisor.analyze(tmp_path)
    names = [
        Path(a.profile.meta.path).name
        for a in result.analyses
        if a.profile.meta.source_format != "cluster"
    ]
    assert names == [f"run_{n}.pt.trace.json.gz" for n in (0, 1, 2, 10, 11)]


def test_a_profile_too_short_for_a_step_gives_no_urgent_advice():
    """libkineto's own test trace holds one 0.02 µs kernel and one sync (its device span,
    0.02 µs, stands for the step): shares of it are 100% but mean nothing, so nothing is
    ranked above low and no step time if fixed is promised; a warning says why."""
    (analysis,) = advisor.analyze(SHARED / "kineto_2026_h100_cuda_sync_before").analyses
    evaluation = analysis.evaluation
    assert evaluation.total_us is not None and evaluation.total_us < MIN_JUDGED_US
    assert analysis.findings and {f.severity for f in analysis.findings} == {"low"}
    assert all(f.step_time_if_fixed_us is None for f in analysis.findings)
    assert evaluation.fix_first is None and evaluation.critical_path is None
    assert any("too short to hold a training step" in w.problem for w in analysis.profile.warnings)


def test_findings_holding_the_whole_step_promise_no_step_of_0_ms(tmp_path):
    """Rank 34's gloo trace records all-reduces and four aten::empty, no computation: COMM-001
    (the exposed all-reduces) and STEP-007 (the idle thread between them) hold all of its
    210 ms step. Their fix-first line said "→ −100.0% step time (210 ms → 0 ms)"; the steps
    do work the profile did not record, so it names them with the step time alone. Each
    finding on its own keeps its estimate (the other's time is left)."""
    (analysis,) = advisor.analyze(CPU_ONLY).analyses
    path = analysis.evaluation.critical_path
    fix = analysis.evaluation.fix_first
    assert path.by_bound["compute"] == path.by_bound["host"] == 0.0
    assert set(fix.rules) == {"COMM-001", "STEP-007"}
    assert fix.step_time_if_fixed_us is None and fix.saving_ratio is None
    alone = {f.rule.id: f.step_time_if_fixed_us for f in analysis.findings}
    comm, idle = path.by_bound["communication"], path.by_bound["idle"]
    assert alone["COMM-001"] == pytest.approx(idle, rel=1e-6)
    assert alone["STEP-007"] == pytest.approx(comm, rel=1e-6)
    code, output = run_cli("run", CPU_ONLY, "-o", tmp_path / "out", "--lang", "en")
    assert code == 0
    text = " ".join(output.split())
    assert "Fix these first: COMM-001, STEP-007 (together all of the step time, 210 ms" in text
    assert "→ 0 ms" not in text and "−100.0%" not in text
    summary = report_of(tmp_path / "out")["summary"]["fix_first"]
    assert summary["step_time_if_fixed_us"] is None and summary["saving_ratio"] is None


def test_a_cluster_finding_saves_at_most_its_kind_of_the_slowest_ranks_step():
    """The cluster's budget is the slowest rank's step breakdown: the slow link's extra
    transit (12.8 against 3.2 ms per step in the matrix) cannot shorten a 10 ms step by more
    than the 1 ms of communication no computation hides (step_trace_time.csv). Before, with
    the whole step unattributed, the report promised 10 ms -> 0.4 ms."""
    folder = FIXTURE_DIR / "cluster_links"
    rows = [
        row
        for csv_path in sorted(folder.glob("*/ASCEND_PROFILER_OUTPUT/step_trace_time.csv"))
        for row in csv.DictReader(csv_path.open(encoding="utf-8"))
    ]
    step_us = max(
        float(r["Computing"]) + float(r["Communication(Not Overlapped)"]) + float(r["Free"])
        for r in rows
    )
    exposed_us = max(float(r["Communication(Not Overlapped)"]) for r in rows)
    cluster = advisor.analyze(folder).analyses[-1]
    (link,) = [f for f in cluster.findings if f.rule.id == "CLUSTER-005"]
    path = cluster.evaluation.critical_path
    assert path is not None and path.step_us == pytest.approx(step_us)
    assert link.impact_us > exposed_us * path.steps  # what the link's transit claims
    assert link.step_time_if_fixed_us == pytest.approx(step_us - exposed_us)


def test_the_share_at_right_is_the_share_the_message_gives():
    """HOST-001 on the dataloader-bound trace said '92.8% of step time' beside '156 ms
    (92.6%)': the column divided by the profiled time (with the 0.8 ms between steps), the
    message by the steps' own time. Both now divide by the steps' time (measured_us)."""
    (analysis,) = advisor.analyze(KINETO_OWN / "dataloader_bound.pt.trace.json.gz").analyses
    (loader,) = [f for f in analysis.findings if f.rule.id == "HOST-001"]
    assert loader.impact_ratio == pytest.approx(loader.values["ratio"], rel=1e-12)
    assert fmt_pct(loader.impact_ratio) in loader.message  # "92.8%"
