"""Runs advisor and its peers on the same fixtures and prints, check by check, what each says.

The table in docs/msprof-analyze-baseline.md ("Check by check") comes from this script:

* every checker of ``msprof-analyze advisor all`` (26.2.0), run on each Ascend input; a
  checker's result is its row in the xlsx ``problems`` sheet (with the numbers of its detail
  sheet), else the warning or error it logged, else "silent";
* every analysis of Holistic Trace Analysis 0.5.0 (benchmarks/hta_parity_driver.py) and the
  recommendations of the PyTorch profiler TensorBoard plugin 0.4.3
  (benchmarks/tb_parity_driver.py), run on each Kineto input;
* ``advisor run`` on the same copies, and for each peer check the advisor rules that answer
  it: fired (message and time at stake), passed (ran, found nothing), not applicable (data
  missing), or "not yet" when no such rule is installed.

Inputs are copied to --work (msprof-analyze writes next to its input); nothing is written into
the repository. Results: markdown on stdout and JSON at --results.

    .venv/bin/python benchmarks/peer_parity.py
    .venv/bin/python benchmarks/peer_parity.py --only msprof --results /tmp/parity.json

The peers live in their own virtualenvs (see benchmarks/README.md for the install lines).
"""

from __future__ import annotations

import argparse
import glob
import json
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
FIX = REPO / "tests" / "fixtures"


@dataclass(frozen=True)
class Input:
    """One input: where it comes from, how it is laid out for the tools, whether it is real."""

    name: str
    sources: tuple[str, ...]  # paths under tests/fixtures, copied into the input folder
    origin: str
    msprof_args: tuple[str, ...] = ()
    wrap: str = ""  # folders a bare file goes into, to give it the layout the tools expect
    extras: tuple[tuple[str, str], ...] = ()  # (fixture file, where it goes in the profile)


ASCEND_INPUTS = (
    Input("rank0", ("real/ascend_pt/rank0_ascend_pt",), "real torch_npu"),
    Input(
        "a2",
        ("real/ascend_pt/a2_kernel_details/kernel_details.csv",),
        "real A2 kernel_details.csv, put in ASCEND_PROFILER_OUTPUT/",
        wrap="a2_ascend_pt/ASCEND_PROFILER_OUTPUT",
    ),
    Input(
        "level1",
        ("ascend_db/msinsight/text_level1_rank0_ascend_pt",),
        "real level1 communication.json, communication_matrix.json, memory_record.csv",
    ),
    Input(
        "db",
        ("ascend_db/rank0_ascend_pt",),
        "database twin of rank0_ascend_pt (made by make_db.py)",
    ),
    Input(
        "cluster",
        tuple(f"cluster_links/node0_100{i}_20260101000000000_ascend_pt" for i in range(4)),
        "synthetic 4-rank cluster (step_trace_time.csv, communication_matrix.json)",
    ),
    Input(
        "smallcase",
        ("msprof/PROF_000001_20260105093000123_SMALLCASE",),
        "synthetic msprof export (CANN 8 layout)",
        ("-pt", "msprof"),
    ),
    Input(
        "multidev",
        ("msprof/PROF_000002_20250610120000456_MULTIDEV",),
        "synthetic msprof export (per-device summary layout)",
        ("-pt", "msprof"),
    ),
    Input(
        "freq_pt",
        ("aicore_freq/rank0_ascend_pt",),
        "synthetic torch_npu trace with AI Core Freq samples (1800 → 900 MHz)",
    ),
    Input(
        "freq_pt_info",
        ("aicore_freq/rank0_ascend_pt",),
        "the same trace with the FREQTEST info.json.0 (rated 1850 MHz) put in a PROF_ folder",
        extras=(
            (
                "aicore_freq/PROF_000001_20240415174447255_FREQTEST/device_0/info.json.0",
                "PROF_000001_20240415174447255_FREQTEST/device_0/info.json.0",
            ),
        ),
    ),
    Input(
        "freq_msprof",
        ("aicore_freq/PROF_000001_20240415174447255_FREQTEST",),
        "synthetic msprof raw-export timeline with AI Core Freq samples and info.json",
        ("-pt", "msprof"),
    ),
    Input(
        "metadata",
        ("metadata/node0_4242_20260101000000000_ascend_pt",),
        "synthetic torch_npu rank with profiler_metadata.json (ENV_VARIABLES)",
    ),
    Input(
        "ms_pp4",
        ("real/mindspore_cluster_4rank",),
        "real MindSpore pipeline-parallel run on 4 devices, old profiler layout",
        ("-pt", "mindspore"),
    ),
    Input(
        "cann",
        ("real/cann_timeline/PROF_000001_20230818142704322_COJGGGCANRMICFBC",),
        "real CANN raw-export timelines",
        ("-pt", "msprof"),
    ),
)

KINETO_INPUTS = (
    Input(
        "sampled",
        ("real/kineto/timeline_analysis__sampled_rank-0.json.gz",),
        "real GPU + NCCL",
    ),
    Input("nccl", ("real/kineto/nccl_parser_config__nccl_data.json.gz",), "real A100 NCCL"),
    Input(
        "alexnet",
        ("real/kineto/critical_path__alexnet__benchmark_result_2869224_1695835535_trace.json.gz",),
        "real GPU, CUDA sync events",
    ),
    Input(
        "mi250",
        ("real/kineto/amd_trace__mi250_minitoy_train_ROCm6_2_kineto.json.gz",),
        "real ROCm",
    ),
    Input(
        "inference",
        ("real/kineto/trace_file_list__inference_rank_1.json.gz",),
        "real GPU inference",
    ),
    Input(
        "cpu_only",
        ("real/kineto/cpu_only__rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz",),
        "real CPU",
    ),
    Input(
        "v100",
        ("real/kineto_2021_v100_computeproperties/gpu_metrics_input.json",),
        "real V100",
    ),
    Input(
        "h100",
        ("real/kineto_2026_h100_cuda_sync_before/before_fix_trace.json",),
        "real H100",
    ),
    Input("backward", ("real/kineto_backward_thread/backward_thread.json",), "real GPU"),
    Input(
        "dataloader",
        ("kineto_own/dataloader_bound.pt.trace.json.gz",),
        "own torch 2.13 CPU trace",
    ),
    Input(
        "ddp4",
        tuple(f"kineto_own/ddp4_rank{i}.pt.trace.json.gz" for i in range(4)),
        "own torch 2.13 CPU traces, 4 gloo ranks, rank 2 slow",
    ),
)


@dataclass(frozen=True)
class Check:
    """A peer's check and the advisor rules that answer it (an id ending in '-' is a prefix)."""

    peer_id: str
    title: str
    rules: tuple[str, ...]
    categories: tuple[str, ...] = ()  # msprof-analyze xlsx category names
    log_patterns: tuple[str, ...] = ()  # msprof-analyze log lines that belong to this checker


MSPROF_CHECKS = (
    Check(
        "schedule/syncbn",
        "SyncBatchNorm count",
        ("HOST-005",),
        ("SyncBatchNorm Issues",),
        ("syncbn",),
    ),
    Check(
        "schedule/timeline_op_dispatch",
        "operator compile (aclopCompileAndExecute)",
        ("HOST-003",),
        ("Operator Dispatch Issues",),
        ("op_dispatch",),
    ),
    Check(
        "schedule/synchronize_stream",
        "SynchronizeStream after Node@launch",
        ("HOST-002",),
        ("Synchronize Stream Issues",),
        ("synchronize_stream",),
    ),
    Check(
        "schedule/timeline_fusion_ops",
        "affinity APIs (fused replacements)",
        ("HOST-004", "FUSE-001", "FUSE-004"),
        ("Affinity API Issues",),
        ("fusion_ops",),
    ),
    Check(
        "schedule/dataloader",
        "slow dataloader",
        ("HOST-001",),
        ("Slow Dataloader Issues",),
        ("dataloader",),
    ),
    Check(
        "schedule/conjectured_analysis",
        "conjectured GC (long free gaps)",
        ("HOST-006",),
        ("Conjectured Gc",),
        ("conjectured_gc",),
    ),
    Check(
        "schedule/gc_analysis",
        "recorded GC events",
        ("HOST-006",),
        ("GC Analysis",),
        ("gc_checker", "gc_analyzer"),
    ),
    Check(
        "schedule/fusible_operator_analysis",
        "fusible operator sequences",
        ("FUSE-003",),
        ("Fusible Operator Analysis",),
        ("fusible_operator",),
    ),
    Check(
        "computation/dynamic_shape_analysis",
        "dynamic-shape operators",
        ("OP-006",),
        ("Operator Dynamic Shape Issues",),
        ("dynamic shape",),
    ),
    Check(
        "computation/aicpu_analysis",
        "AI CPU operators",
        ("OP-002",),
        ("AICPU Issues",),
        ("aicpu operator",),
    ),
    Check(
        "computation/operator_no_bound_analysis",
        "operators bound by no pipeline",
        ("OP-011",),
        ("Operator No Bound Issues",),
        ("operator no bound",),
    ),
    Check(
        "computation/block_dim_analysis",
        "block dim below core count",
        ("OP-010",),
        ("Block Dim Issues",),
        ("block dim",),
    ),
    Check(
        "computation/graph",
        "graph fusion passes",
        ("FUSE-002",),
        ("Fusion Issues",),
        ("graph_fusion",),
    ),
    Check(
        "computation/freq_analysis",
        "AI Core frequency drop",
        ("OP-008",),
        ("AI Core Frequency Issues",),
        ("ai_core_freq", "ai core frequency"),
    ),
    Check(
        "computation/ai_core_performance_analysis",
        "MatMul / FA / vector operator shapes and bounds",
        ("OP-009",),
        (
            "Cube Operator Perf Analysis",
            "FA Operator Perf Analysis",
            "Vector Operator Perf Analysis",
        ),
        ("ai_core_performance", "AICorePerformance"),
    ),
    Check(
        "communication/packet_analysis",
        "small packets",
        ("COMM-004",),
        ("Packet Analysis",),
        ("packet", "communication.json"),
    ),
    Check(
        "communication/communication_retransmission_analysis",
        "RDMA retransmission",
        ("COMM-005",),
        ("Communication Retransmission Analysis",),
        ("retransmission", "communication.json"),
    ),
    Check(
        "communication/bandwidth_contention_analysis",
        "SDMA bandwidth contention",
        ("COMM-006",),
        ("Bandwidth Contention Analysis",),
        ("BandwidthContention", "bandwidth_contention", "communication.json"),
    ),
    Check(
        "communication/byte_alignment_analysis",
        "transfer byte alignment",
        ("COMM-003",),
        ("Byte Alignment Analysis",),
        ("byte_alignment",),
    ),
    Check(
        "overall/over_all",
        "overall summary (free time, benchmark)",
        ("STEP-003", "STEP-004"),
        ("overall summary",),
        ("overall_summary",),
    ),
    Check(
        "overall/environment_variable_analysis",
        "environment variables",
        ("ENV-",),
        ("Environment Variable Issues",),
        ("environment_variable",),
    ),
    Check(
        "cluster/slow_rank",
        "slow rank",
        ("CLUSTER-001", "CLUSTER-003", "CLUSTER-004"),
        ("slow rank",),
        ("slow_rank", "step_trace_time_bean"),
    ),
    Check(
        "cluster/slow_link",
        "slow link",
        ("CLUSTER-005",),
        ("slow link",),
        ("slow_link", "cluster_communication"),
    ),
    Check(
        "cluster/stage_compute",
        "pipeline-stage computation",
        ("CLUSTER-006",),
        ("Pipeline Parallel Stages Computation Analysis",),
        ("pp_stage",),
    ),
    Check(
        "memory/memory",
        "aclMalloc / aclrtFree in the timeline",
        ("MEM-003",),
        ("Memory Operator Issues",),
        ("memory_checker", "memory_analyzer"),
    ),
    Check(
        "comparison/comparison", "kernel / API comparison with -bp", ("CMP-",), (), ("comparison",)
    ),
)

HTA_CHECKS = (
    Check("temporal_breakdown", "idle / compute / non-compute share", ("STEP-003", "STEP-004")),
    Check("idle_time_breakdown", "idle split host wait / kernel wait / other", ("SCHED-001",)),
    Check("gpu_kernel_breakdown", "kernel time by type and top kernels", ("OP-005", "OP-001")),
    Check("gpu_user_annotation_breakdown", "GPU time per user annotation", ()),
    Check("comm_comp_overlap", "communication overlapped by compute", ("COMM-001",)),
    Check("frequent_cuda_kernel_sequences", "frequent kernel sequences", ("FUSE-003",)),
    Check("aten_op_kernels_and_delay", "aten op → kernel launch delay", ("SCHED-002",)),
    Check(
        "cuda_kernel_launch_stats",
        "launch delay, runtime outliers, short kernels",
        ("SCHED-002", "OP-007"),
    ),
    Check("queue_length_summary", "CUDA launch queue length", ("EFF-002",)),
    Check("memory_bw_summary", "memcpy / memset bandwidth", ("MEM-001",)),
    Check("cupti_counters", "CUPTI counters per operator", ("GPU-001",)),
    Check("critical_path", "critical path per step", ("STEP-004",)),
    Check(
        "potential_stragglers", "stragglers from late collectives", ("CLUSTER-002", "CLUSTER-003")
    ),
)

TB_CHECKS = (
    Check("dataloader", "DataLoader > 5% of step", ("HOST-001",), (), ("DataLoader",)),
    Check("ddp_instead_of_dp", "DataParallel on several GPUs", (), (), ("DataParallel",)),
    Check("nccl_backend", "DDP without NCCL", (), (), ("Nccl backend",)),
    Check("communication", "communication > 10% of step", ("COMM-001",), (), ("communication",)),
    Check("gpu_utilization", "GPU utilization < 50%", ("STEP-003",), (), ("low utilization",)),
    Check("amp", "Tensor Core eligible, none used", ("GPU-002",), (), ("Tensor Cores",)),
    Check("memory", "peak memory > 90% of device", ("MEM-002",), (), ("memory usage",)),
    Check("sm_efficiency", "estimated SM efficiency / occupancy (figures only)", ("GPU-001",)),
)


@dataclass
class Tools:
    advisor: str
    msprof: str
    hta: str
    tb: str
    work: Path
    rule_ids: list[str] = field(default_factory=list)


# ---------------------------------------------------------------- inputs


def prepare(inp: Input, root: Path) -> Path:
    """Copy an input's sources under root/name (writable); return the path the tools get.

    Folder names are kept: msprof-analyze recognises a profile by its name (``*_ascend_pt``,
    ``PROF_*``). A single source is handed over as itself, several as their common folder.
    """
    dest = root / inp.name
    if dest.exists():
        shutil.rmtree(dest)
    target = dest / inp.wrap if inp.wrap else dest
    target.mkdir(parents=True)
    for src in (FIX / s for s in inp.sources):
        if src.is_dir():
            shutil.copytree(src, target / src.name)
        else:
            shutil.copy2(src, target / src.name)
    if inp.wrap:
        profile = dest / Path(inp.wrap).parts[0]
    elif len(inp.sources) == 1 and (FIX / inp.sources[0]).is_dir():
        profile = dest / Path(inp.sources[0]).name
    else:
        profile = dest
    for src, where in inp.extras:
        (profile / where).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(FIX / src, profile / where)
    return profile


# ---------------------------------------------------------------- msprof-analyze

XLSX_DUMP = """
import glob, json, sys, openpyxl
files = sorted(glob.glob(sys.argv[1] + '/log/*.xlsx'))
out = {}
if files:
    for ws in openpyxl.load_workbook(files[-1], read_only=True):
        out[ws.title] = [[c for c in row] for row in ws.iter_rows(values_only=True)]
print(json.dumps(out, default=str))
"""


def run_msprof(tools: Tools, path: Path, args: tuple[str, ...]) -> dict[str, Any]:
    out = tools.work / "msprof_out" / path.parent.name / path.name
    shutil.rmtree(out, ignore_errors=True)
    cmd = [
        f"{tools.msprof}/bin/msprof-analyze",
        "advisor",
        "all",
        "-d",
        str(path),
        "-o",
        str(out),
        "-l",
        "en",
    ]
    start = time.perf_counter()
    proc = subprocess.run([*cmd, *args], capture_output=True, text=True, timeout=600)
    seconds = round(time.perf_counter() - start, 2)
    sheets = json.loads(
        subprocess.run(
            [f"{tools.msprof}/bin/python", "-c", XLSX_DUMP, str(out)],
            capture_output=True,
            text=True,
        ).stdout
        or "{}"
    )
    lines = [
        re.sub(r"^\[[^]]*\]", "", line).strip()
        for line in (proc.stdout + proc.stderr).splitlines()
        if re.search(r"\]\[(WARNING|ERROR)\]", line)
        and "as root" not in line
        and "profiling type" not in line
    ]
    return {
        "rc": proc.returncode,
        "seconds": seconds,
        "sheets": sheets,
        "log": list(dict.fromkeys(lines)),
    }


def msprof_outcome(check: Check, run: dict[str, Any]) -> str:
    """What msprof-analyze said for one checker on one input."""
    problems = run["sheets"].get("problems", [])
    said = []
    for row in problems[1:]:
        category, description = str(row[0]), str(row[1]).replace("\n", " ")
        if category not in check.categories:
            continue
        figures = ", ".join(
            f"{name} {value}"
            for name, value in zip(problems[0][3:6], row[3:6], strict=False)
            if value not in (None, "")
        )
        detail = run["sheets"].get(category, [])
        said.append(
            f"**{category}**: {description.strip()}"
            + (f" ({figures})" if figures else "")
            + (f"; {len(detail) - 1} detail rows" if len(detail) > 1 else "")
        )
    if said:
        return "; ".join(said)
    logged = [
        line for line in run["log"] if any(p.lower() in line.lower() for p in check.log_patterns)
    ]
    if logged:
        return "no finding; logged: " + " / ".join(
            re.sub(r"^\[\w+\]\[[^]]*\]\s*", "", x)[:160] for x in logged[:2]
        )
    return "silent"


# ---------------------------------------------------------------- advisor


def run_advisor(tools: Tools, path: Path) -> dict[str, Any]:
    out = tools.work / "advisor_out" / path.parent.name / path.name
    shutil.rmtree(out, ignore_errors=True)
    start = time.perf_counter()
    proc = subprocess.run(
        [tools.advisor, "run", str(path), "-o", str(out), "--format", "json", "-q"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    reports = {
        Path(f).stem.removeprefix("prof_rule_"): json.loads(Path(f).read_text())
        for f in glob.glob(f"{out}/*.json")
    }
    return {
        "rc": proc.returncode,
        "seconds": round(time.perf_counter() - start, 2),
        "error": proc.stderr.strip()[-300:] if proc.returncode else "",
        "reports": reports,
    }


def _findings(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    found = {}
    for bucket in report.get("data", {}).values():
        for item in bucket if isinstance(bucket, list) else []:
            for result in item.get("result", []):
                if result.get("rule_id"):
                    found[result["rule_id"]] = result
    return found


def _matches(rule_ids: list[str], wanted: str) -> list[str]:
    return [r for r in rule_ids if r == wanted or (wanted.endswith("-") and r.startswith(wanted))]


def advisor_states(check: Check, run: dict[str, Any], rule_ids: list[str]) -> dict[str, Any]:
    """Per advisor rule of this check, on one input: its state and, where it fired, what it said.

    States: fired, passed (evaluated, nothing found), n/a (data missing), not run (a cluster
    rule on one profile, a comparison rule outside ``advisor compare``), not yet (no such rule).
    """
    states: dict[str, Any] = {}
    for wanted in check.rules:
        present = _matches(rule_ids, wanted)
        if not present:
            states[wanted] = {"state": "not yet", "fired": []}
            continue
        for rule in present:
            fired, outcomes = [], set()
            for scope, report in sorted(run["reports"].items()):
                outcomes.add(report.get("rules", {}).get(rule, {}).get("outcome", "absent"))
                finding = _findings(report).get(rule)
                if finding:
                    impact = finding.get("impact_us")
                    cost = f" [{impact:,.0f} µs]" if isinstance(impact, (int, float)) else ""
                    where = f"{scope}: " if len(run["reports"]) > 1 else ""
                    fired.append(f"{where}{finding['message']}{cost}")
            if run["rc"] not in (0, 1):
                state = "advisor failed"
            elif fired:
                state = "fired"
            elif "passed" in outcomes:
                state = "passed"
            elif outcomes <= {"absent"}:
                state = "not run"
            else:
                state = "n/a"
            states[rule] = {"state": state, "fired": fired}
    return states


def advisor_outcome(check: Check, run: dict[str, Any], rule_ids: list[str]) -> str:
    """What advisor's rules for this check said on one input, as one line."""
    parts = []
    for rule, info in advisor_states(check, run, rule_ids).items():
        if info["fired"]:
            more = f" (+{len(info['fired']) - 2} more)" if len(info["fired"]) > 2 else ""
            parts.append(f"**{rule} fired**: " + " / ".join(info["fired"][:2]) + more)
        else:
            parts.append(f"{rule}: {info['state']}")
    return "; ".join(parts) if parts else "no advisor rule"


def _first_sentence(text: str, limit: int = 240) -> str:
    """The first sentence of a finding's message (where the figures are), at most ~limit long."""
    match = re.search(r"(?<!e\.g)\. (?=[A-Z])", text)
    sentence = text[: match.start() + 1] if match else text
    if len(sentence) <= limit:
        return sentence
    cut = sentence.rfind("; ", 0, limit)
    return sentence[: cut if cut > limit // 2 else limit] + " …"


def advisor_cell(check: Check, runs: dict[str, Any], rule_ids: list[str]) -> str:
    """advisor's result for one check over all inputs, grouped by state (a table cell).

    A rule that fired is quoted by the first sentence of its message and the time at stake,
    inputs with the same sentence merged; the other states are counted, with the inputs named
    when there are few.
    """
    parts = []
    states_by_rule: dict[str, dict[str, list[str]]] = {}
    quotes: dict[str, dict[str, list[str]]] = {}
    for name, run in runs.items():
        for rule, info in advisor_states(check, run, rule_ids).items():
            states_by_rule.setdefault(rule, {}).setdefault(info["state"], []).append(name)
            for text in info["fired"]:
                cost = re.search(r" \[[^]]*µs\]$", text)
                body = text[: cost.start()] if cost else text
                quote = f'"{_first_sentence(body)}"' + (cost.group(0) if cost else "")
                quotes.setdefault(rule, {}).setdefault(quote, []).append(f"`{name}`")
    for rule, states in states_by_rule.items():
        if set(states) == {"not yet"}:
            parts.append(f"{rule}: *not yet*")
            continue
        said = [f"{', '.join(names)}: {quote}" for quote, names in quotes.get(rule, {}).items()]
        for state in ("passed", "n/a", "not run", "advisor failed"):
            names = states.get(state, [])
            if names:
                listed = f" ({', '.join(f'`{n}`' for n in names)})" if len(names) <= 3 else ""
                said.append(f"*{state}* on {len(names)}{listed}")
        head = f"**{rule} fired** on " if quotes.get(rule) else f"{rule}: "
        parts.append(head + "; ".join(said))
    return " — ".join(parts) if parts else "no advisor rule"


# ---------------------------------------------------------------- HTA and the TensorBoard plugin


def run_hta(tools: Tools, path: Path) -> dict[str, Any]:
    out = tools.work / "hta_out" / path.name
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    proc = subprocess.run(
        [
            f"{tools.hta}/bin/python",
            "-W",
            "ignore",
            str(HERE / "hta_parity_driver.py"),
            str(path),
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    try:
        return json.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        return {"load_error": proc.stderr.strip()[-300:]}


def hta_outcome(check: Check, run: dict[str, Any]) -> str:
    if "load_error" in run:
        return f"HTA cannot load: {run['load_error'][:160]}"
    outcome = run.get(check.peer_id, {})
    if "error" in outcome:
        return f"error: {outcome['error'][:160]}"
    return json.dumps(outcome.get("result"), ensure_ascii=False)[:400]


def run_tb(tools: Tools, paths: list[Path]) -> dict[str, Any]:
    files = [str(f) for p in paths for f in sorted(p.iterdir())]
    proc = subprocess.run(
        [
            f"{tools.tb}/bin/python",
            str(HERE / "tb_parity_driver.py"),
            str(tools.work / "tb_cache"),
            *files,
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=str(tools.work),
    )
    try:
        by_file = json.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        return {"error": proc.stderr.strip()[-300:]}
    return {
        p.name: {Path(f).name: by_file.get(f) for f in files if Path(f).parent == p} for p in paths
    }


def tb_outcome(check: Check, files: dict[str, Any]) -> str:
    """What the plugin's overview said for one check on one input (one entry per trace file)."""
    said = []
    for name, result in files.items():
        where = f"{name}: " if len(files) > 1 else ""
        if not isinstance(result, dict) or "error" in result:
            error = result.get("error") if isinstance(result, dict) else result
            said.append(f"{where}plugin error: {str(error)[:120]}")
            continue
        if check.log_patterns:
            hit = [
                r
                for r in result.get("recommendations", [])
                if any(p in r for p in check.log_patterns)
            ]
            said.append(f"{where}{hit[0][:200]}" if hit else f"{where}silent")
        else:
            figures = {
                k: result.get(k)
                for k in ("gpus", "tensor_core_kernel_pct", "tc_eligible_op_kernel_pct")
            }
            said.append(where + json.dumps(figures)[:220])
    return "; ".join(dict.fromkeys(said)) or "silent"


# ---------------------------------------------------------------- main


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--work", type=Path, default=Path("/tmp/peer-parity"))
    parser.add_argument("--advisor", default=str(REPO / ".venv" / "bin" / "advisor"))
    parser.add_argument("--msprof-venv", default="/tmp/peer-msprof")
    parser.add_argument("--hta-venv", default="/tmp/peer-hta-pd2", help="HTA 0.5.0 with pandas < 3")
    parser.add_argument("--tb-venv", default="/tmp/peer-tb")
    parser.add_argument("--only", default="msprof,hta,tb", help="comma-separated: msprof, hta, tb")
    parser.add_argument("--results", type=Path, default=Path("/tmp/peer-parity.json"))
    args = parser.parse_args(argv)
    only = set(args.only.split(","))
    tools = Tools(args.advisor, args.msprof_venv, args.hta_venv, args.tb_venv, args.work)
    listing = subprocess.run(
        [tools.advisor, "rules", "list"], capture_output=True, text=True
    ).stdout
    tools.rule_ids = [line.split()[0] for line in listing.splitlines()[1:] if line.strip()]
    print(f"advisor rules installed: {len(tools.rule_ids)}")
    results: dict[str, Any] = {"rules": tools.rule_ids}

    if "msprof" in only:
        runs = {}
        for inp in ASCEND_INPUTS:
            path = prepare(inp, args.work / "in")
            runs[inp.name] = {
                "msprof": run_msprof(tools, path, inp.msprof_args),
                "advisor": run_advisor(tools, path),
            }
            m, a = runs[inp.name]["msprof"], runs[inp.name]["advisor"]
            print(
                f"  {inp.name}: msprof-analyze rc {m['rc']} {m['seconds']} s;"
                f" advisor rc {a['rc']} {a['seconds']} s",
                file=sys.stderr,
            )
        results["msprof"] = {
            check.peer_id: {
                name: {
                    "msprof-analyze": msprof_outcome(check, run["msprof"]),
                    "advisor": advisor_outcome(check, run["advisor"], tools.rule_ids),
                }
                for name, run in runs.items()
            }
            for check in MSPROF_CHECKS
        }
        print("\n## msprof-analyze 26.2.0 advisor checkers\n")
        print("inputs: " + "; ".join(f"`{i.name}` ({i.origin})" for i in ASCEND_INPUTS) + "\n")
        _print_table(MSPROF_CHECKS, results["msprof"], "msprof-analyze")
        print("#### findings per input\n")
        results["msprof_findings"] = {}
        for name, run in runs.items():
            problems = [row[0] for row in run["msprof"]["sheets"].get("problems", [])[1:]]
            results["msprof_findings"][name] = [problems, _advisor_summary(run["advisor"])]
            print(
                f"- `{name}`: msprof-analyze {len(problems)} ({', '.join(problems) or '-'});"
                f" advisor {_advisor_summary(run['advisor'])}"
            )
        print()
        advisor_only = {name: run["advisor"] for name, run in runs.items()}
        results["msprof_advisor_cells"] = _print_cells(MSPROF_CHECKS, advisor_only, tools.rule_ids)

    kineto_paths = (
        [prepare(inp, args.work / "kineto") for inp in KINETO_INPUTS]
        if only & {"hta", "tb"}
        else []
    )
    advisor_runs = {p.name: run_advisor(tools, p) for p in kineto_paths}
    if kineto_paths:
        results["advisor_kineto"] = {
            name: {scope: sorted(_findings(r)) for scope, r in run["reports"].items()}
            for name, run in advisor_runs.items()
        }
    if kineto_paths:
        print("\n#### advisor findings per Kineto input\n")
        results["kineto_findings"] = {}
        for name, run in advisor_runs.items():
            results["kineto_findings"][name] = _advisor_summary(run)
            print(f"- `{name}`: {_advisor_summary(run)}")
    if "hta" in only:
        hta_runs = {p.name: run_hta(tools, p) for p in kineto_paths}
        results["hta_raw"] = hta_runs
        results["hta"] = {
            check.peer_id: {
                name: {
                    "hta": hta_outcome(check, hta_runs[name]),
                    "advisor": advisor_outcome(check, advisor_runs[name], tools.rule_ids),
                }
                for name in hta_runs
            }
            for check in HTA_CHECKS
        }
        print("\n## Holistic Trace Analysis 0.5.0\n")
        print("inputs: " + "; ".join(f"`{i.name}` ({i.origin})" for i in KINETO_INPUTS) + "\n")
        _print_table(HTA_CHECKS, results["hta"], "hta")
        results["hta_advisor_cells"] = _print_cells(HTA_CHECKS, advisor_runs, tools.rule_ids)
    if "tb" in only:
        tb_runs = run_tb(tools, kineto_paths)
        results["tb_raw"] = tb_runs
        results["tb"] = {
            check.peer_id: {
                name: {
                    "tb": tb_outcome(check, tb_runs.get(name, {"": tb_runs})),
                    "advisor": advisor_outcome(check, advisor_runs[name], tools.rule_ids),
                }
                for name in advisor_runs
            }
            for check in TB_CHECKS
        }
        print("\n## PyTorch profiler TensorBoard plugin 0.4.3\n")
        _print_table(TB_CHECKS, results["tb"], "tb")
        results["tb_advisor_cells"] = _print_cells(TB_CHECKS, advisor_runs, tools.rule_ids)
    args.results.write_text(json.dumps(results, indent=1, default=str, ensure_ascii=False))
    print(f"\nresults: {args.results}")
    return 0


def _advisor_summary(run: dict[str, Any]) -> str:
    """Number of findings of one advisor run and the rules that fired."""
    total = sum(r.get("summary", {}).get("findings", 0) for r in run["reports"].values())
    fired = sorted({rule for r in run["reports"].values() for rule in _findings(r)})
    return f"{total} ({', '.join(fired) or '-'})"


def _print_cells(checks: tuple[Check, ...], runs: dict[str, Any], rule_ids: list[str]) -> dict:
    """Print advisor's result per check over all inputs (the doc's advisor column)."""
    print("#### advisor, per check over all inputs\n")
    cells = {check.peer_id: advisor_cell(check, runs, rule_ids) for check in checks}
    for peer_id, cell in cells.items():
        print(f"- {peer_id}: {_cell(cell)}")
    print()
    return cells


def _print_table(checks: tuple[Check, ...], table: dict[str, Any], peer: str) -> None:
    for check in checks:
        rows = table[check.peer_id]
        print(f"### {check.peer_id}: {check.title} → {', '.join(check.rules) or '—'}\n")
        for name, said in rows.items():
            peer_said = said[peer]
            print(f"- `{name}`: {peer}: {_cell(peer_said)} | advisor: {_cell(said['advisor'])}")
        print()


if __name__ == "__main__":
    sys.exit(main())
