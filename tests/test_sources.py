"""Source locations: the user code lines behind a finding's operators, where the profile recorded
Python stacks (engine/sources.py, the op_stacks table, advisor/formats/python_frames.py).

The real trace is tests/fixtures/kineto_own/with_stack.pt.trace.json.gz (make_traces.py
--only stacks, torch 2.13 CPU, with_stack=True): its model's work runs in two methods of
make_traces.py (`StackModel.expand`, `.head`) and the training loop (`train`). Expected figures
are computed from the raw trace events here, not by the code under test.
"""

from __future__ import annotations

import ast
import gzip
import json
import re
import shutil
import sqlite3
from functools import cache
from pathlib import Path

import pandas as pd
import pytest
from conftest import FIXTURE_DIR

import advisor
from advisor.api import ProfileAnalysis
from advisor.engine.sources import MAX_SOURCES, StackIndex
from advisor.formats.python_frames import Frame, is_user_file, parse_frame, user_frame
from advisor.model import Profile, ProfileMeta, conform
from advisor.render.format import findings_by_rank
from advisor.render.html import render_html
from advisor.render.json_report import validate_report
from advisor.render.text import render_text
from advisor_plugins.step_metrics import op_stacks

KINETO = FIXTURE_DIR / "kineto_own"
WITH_STACK = KINETO / "with_stack.pt.trace.json.gz"
NO_STACK = KINETO / "dynamic_batch.pt.trace.json.gz"
SCRIPT = KINETO / "make_traces.py"


@cache
def analysis(path: Path) -> ProfileAnalysis:
    (result,) = advisor.analyze(path).analyses
    return result


def functions_of(script: Path) -> dict[str, list[tuple[int, int]]]:
    """Each function name of a script with the (first, last) lines of its definitions."""
    spans: dict[str, list[tuple[int, int]]] = {}
    for node in ast.walk(ast.parse(script.read_text())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            spans.setdefault(node.name, []).append((first, node.end_lineno or node.lineno))
    return spans


def raw_events(path: Path) -> list[dict]:
    with gzip.open(path, "rt") as fh:
        return [e for e in json.load(fh)["traceEvents"] if e.get("ph") == "X"]


# --- frames -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "frame"),
    [
        ("make_traces.py(335): expand", Frame("make_traces.py", 335, "expand")),
        ("/root/test/slice.py(116)", Frame("/root/test/slice.py", 116, "")),
        (
            "/home/u/a (copy)/train.py(7): <module>",
            Frame("/home/u/a (copy)/train.py", 7, "<module>"),
        ),
        ("<built-in method pow of Tensor object at 0x7f86>", None),
        ("nn.Module: Linear_0", None),
        ("", None),
    ],
)
def test_frame_text_is_parsed(text: str, frame: Frame | None) -> None:
    assert parse_frame(text) == frame


@pytest.mark.parametrize(
    ("file", "user"),
    [
        ("make_traces.py", True),
        ("train/model.py", True),
        ("/home/me/project/train.py", True),
        ("test.py", True),  # a script named like a standard module is still the user's
        ("torch/nn/modules/module.py", False),
        ("torch_npu/utils/_module.py", False),
        ("typing.py", False),
        ("<frozen os>", False),
        ("/usr/lib/python3.11/threading.py", False),
        ("/opt/venv/lib/python3.11/site-packages/transformers/trainer.py", False),
        ("/usr/local/lib/python3.9/dist-packages/torch/_tensor.py", False),
        ("C:/Python311/Lib/typing.py", False),
    ],
)
def test_user_frames_are_told_from_library_frames(file: str, user: bool) -> None:
    assert is_user_file(file) is user


def test_the_innermost_user_frame_of_a_call_stack_is_picked() -> None:
    stack = (
        "/usr/lib/python3.10/site-packages/torch/nn/functional.py(2450): layer_norm;\r\n"
        "/work/model/block.py(88): forward;\r\n"
        "/usr/lib/python3.10/site-packages/torch/nn/modules/module.py(1501): _call_impl;\r\n"
        "/work/train.py(41): step"
    )
    assert user_frame(stack) == Frame("/work/model/block.py", 88, "forward")
    assert user_frame("torch/_tensor.py(12): backward") is None


# --- a real with_stack trace --------------------------------------------------------------------


def test_op_stacks_place_every_operator_of_the_with_stack_trace_in_make_traces_py() -> None:
    stacks = analysis(WITH_STACK).tables["op_stacks"]
    host = analysis(WITH_STACK).tables["host_ops"]
    assert set(stacks["file"]) == {"make_traces.py"}
    assert set(stacks["function"]) >= {"expand", "head", "train"}
    # each row is the host_ops row it names
    rows = host.iloc[stacks["host_row"].to_numpy()]
    assert (rows["name"].to_numpy() == stacks["name"].to_numpy()).all()
    assert not rows["kind"].isin(["python", "runtime", "launch"]).any()
    # every aten::pow ran in StackModel.expand (x.pow(2.5)) or in backward (train)
    pow_functions = set(stacks.loc[stacks["name"] == "aten::pow", "function"])
    assert pow_functions == {"expand", "train"}


def test_findings_name_make_traces_lines_that_are_really_there() -> None:
    findings = {f.rule.id: f for f in analysis(WITH_STACK).findings}
    assert {"OP-013", "HOST-004"} <= set(findings)
    spans = functions_of(SCRIPT)
    lines = SCRIPT.read_text().splitlines()
    for finding in findings.values():
        for source in finding.sources:
            assert source.file == "make_traces.py"
            assert source.line is not None and 1 <= source.line <= len(lines)
            # the line lies in a function of that name (regenerate the trace if not: see
            # tests/fixtures/kineto_own/README.md)
            assert any(a <= source.line <= b for a, b in spans[source.function]), source
    expand = next(s for s in findings["OP-013"].sources if s.function == "expand")
    # entered while profiling: the profiler names the function at its first line
    assert lines[expand.line - 1].strip().startswith("def expand(")


def test_sources_are_ranked_by_time_with_shares_of_the_findings_operator_time() -> None:
    finding = next(f for f in analysis(WITH_STACK).findings if f.rule.id == "OP-013")
    sources = finding.sources
    assert [s.function for s in sources] == ["train", "expand", "head"]
    times = [s.time_us for s in sources]
    assert times == sorted(times, reverse=True) and len(sources) <= MAX_SOURCES
    shares = [s.share for s in sources]
    assert all(s is not None and 0 < s <= 1 for s in shares)
    assert sum(shares) <= 1 + 1e-9  # type: ignore[arg-type]
    # the shares are of one total: time_us / share is the same for every line
    totals = [s.time_us / s.share for s in sources]  # type: ignore[operator]
    assert max(totals) == pytest.approx(min(totals))


def test_a_line_gets_the_time_of_the_evidence_operators_inside_its_function() -> None:
    """From the raw events: the outermost cpu_ops named in OP-013's evidence that lie inside a
    `make_traces.py(...): expand` python_function event of their thread."""
    finding = next(f for f in analysis(WITH_STACK).findings if f.rule.id == "OP-013")
    evidence = finding.evidence
    assert evidence is not None and evidence["total_rows"] == len(evidence["rows"])
    names = {row[evidence["columns"].index("name")] for row in evidence["rows"]}
    events = raw_events(WITH_STACK)
    for function in ("expand", "head"):
        frames = [
            e
            for e in events
            if e.get("cat") == "python_function" and e["name"].endswith(f": {function}")
        ]
        ops = [e for e in events if e.get("cat") == "cpu_op" and e["name"] in names]
        inside = [
            o
            for o in ops
            if any(
                f["tid"] == o["tid"]
                and f["ts"] <= o["ts"]
                and o["ts"] + o["dur"] <= f["ts"] + f["dur"]
                for f in frames
            )
        ]
        outermost = [
            o
            for o in inside
            if not any(
                p is not o
                and p["tid"] == o["tid"]
                and p["ts"] <= o["ts"]
                and o["ts"] + o["dur"] <= p["ts"] + p["dur"]
                for p in inside
            )
        ]
        expected = sum(o["dur"] for o in outermost)
        got = next(s for s in finding.sources if s.function == function)
        assert expected > 0
        assert got.time_us == pytest.approx(expected, rel=1e-6)


def test_a_trace_without_stacks_names_no_source() -> None:
    result = analysis(NO_STACK)
    assert "op_stacks" not in result.tables
    assert result.findings
    assert all(f.sources == [] for f in result.findings)
    report = result.report
    validate_report(report)
    assert all(f["sources"] == [] for _, f in findings_by_rank(report))
    assert not re.search(r"^\s+at \S+:\d+ ", render_text([report]), re.MULTILINE)
    assert 'class="sources"' not in render_html([report])


def test_json_terminal_and_html_show_the_source_lines() -> None:
    result = analysis(WITH_STACK)
    report = result.report
    validate_report(report)
    by_rule = {f["rule_id"]: f for _, f in findings_by_rank(report)}
    finding = next(f for f in result.findings if f.rule.id == "OP-013")
    assert by_rule["OP-013"]["sources"] == [
        {
            "file": s.file,
            "line": s.line,
            "function": s.function,
            "time_us": s.time_us,
            "share": s.share,
        }
        for s in finding.sources
    ]
    expand = next(s for s in finding.sources if s.function == "expand")
    where = f"make_traces.py:{expand.line} expand()"
    text = render_text([report], width=100)
    assert f"at {where} {expand.share:.1%}" in text
    block = text[text.index("Operators run with input shapes") :]
    # under the finding, before its suggestions
    assert block.index(where) < block.index(f"→ {finding.suggestions[0][:30]}")
    html = render_html([report])
    assert f'<code class="break">{where}</code>' in html


# --- kernels and host calls reach the operator that ran them --------------------------------


def synthetic_profile() -> Profile:
    """Two operators on thread 7, the second inside a user frame of its own; a runtime call and
    three kernels: two launched inside the operators, one launched outside any operator."""
    host = pd.DataFrame(
        {
            "name": ["aten::mm", "aten::add", "cudaStreamSynchronize"],
            "kind": ["aten", "aten", "sync"],
            "start_us": [0.0, 100.0, 150.0],
            "duration_us": [50.0, 80.0, 10.0],
            "thread": [7, 7, 7],
        }
    )
    stacks = pd.DataFrame(
        {
            "host_row": [0, 1],
            "name": ["aten::mm", "aten::add"],
            "thread": [7, 7],
            "start_us": [0.0, 100.0],
            "duration_us": [50.0, 80.0],
            "file": ["model.py", "train.py"],
            "line": [12, 40],
            "function": ["forward", "step"],
        }
    )
    kernels = pd.DataFrame(
        {
            "name": ["gemm", "add_kernel", "orphan"],
            "duration_us": [300.0, 100.0, 600.0],
            "launch_us": [10.0, 120.0, 500.0],
            "launch_thread": pd.array([7, 7, 7], dtype="Int64"),
        }
    )
    tables = {"host_ops": host, "op_stacks": stacks, "device_ops": kernels}
    return Profile(
        ProfileMeta("kineto", "synthetic.json"),
        {name: conform(name, frame) for name, frame in tables.items()},
    )


def test_kernels_are_charged_to_the_line_of_the_operator_that_launched_them() -> None:
    profile = synthetic_profile()
    index = StackIndex(profile, profile.tables["op_stacks"])
    sources = index.locate("device_ops", profile.tables["device_ops"].index)
    assert [(s.file, s.line, s.function, s.time_us) for s in sources] == [
        ("model.py", 12, "forward", 300.0),
        ("train.py", 40, "step", 100.0),
    ]
    # the orphan kernel's time counts in the total but goes to no line
    assert [s.share for s in sources] == [pytest.approx(0.3), pytest.approx(0.1)]


def test_a_host_call_outside_op_stacks_goes_to_the_operator_around_it() -> None:
    profile = synthetic_profile()
    index = StackIndex(profile, profile.tables["op_stacks"])
    (source,) = index.locate("host_ops", pd.Index([2]))
    assert (source.file, source.time_us, source.share) == ("train.py", 10.0, 1.0)
    # an operator and a call inside it: the outer one's time only, once
    (source,) = index.locate("host_ops", pd.Index([1, 2]))
    assert (source.time_us, source.share) == (80.0, 1.0)
    assert index.locate("steps", pd.Index([0])) == []


def test_an_operator_holding_frames_of_its_own_takes_the_frame_around_it() -> None:
    """vLLM's step annotation held the frames of the layers it ran and took the frame at its
    midpoint, an attention layer's forward: an operator's frame encloses it whole. Thread 1:
    serve.py's loop (0-1000) holds a step annotation (10-900) holding two layers' frames; the
    aten::mm inside the second layer takes that layer's frame; an annotation no user frame
    encloses gets none."""
    frames = [
        ("serve.py(50): loop", 0.0, 1000.0),
        ("attention.py(107): forward", 100.0, 300.0),
        ("moe.py(20): forward", 400.0, 300.0),
    ]
    ops = [
        ("execute_step", "annotation", 10.0, 890.0),
        ("aten::mm", "aten", 450.0, 50.0),
        ("warm_up", "annotation", 1500.0, 100.0),
    ]
    host = pd.DataFrame(
        {
            "name": [n for n, _, _ in frames] + [n for n, _, _, _ in ops],
            "kind": ["python"] * len(frames) + [k for _, k, _, _ in ops],
            "start_us": [s for _, s, _ in frames] + [s for _, _, s, _ in ops],
            "duration_us": [d for _, _, d in frames] + [d for _, _, _, d in ops],
            "thread": [1] * (len(frames) + len(ops)),
        }
    )
    profile = Profile(ProfileMeta("kineto", "mem"))
    profile.tables["host_ops"] = conform("host_ops", host)
    op_stacks(profile)
    placed = profile.tables["op_stacks"].set_index("name")
    assert placed.loc["execute_step", ["file", "line"]].tolist() == ["serve.py", 50]
    assert placed.loc["aten::mm", ["file", "line"]].tolist() == ["moe.py", 20]
    assert "warm_up" not in placed.index


# --- torch_npu: the call stacks of its profiler database ----------------------------------------

RANK0_DB = FIXTURE_DIR / "ascend_db" / "rank0_ascend_pt"
OPTIMIZER_STACK = [  # innermost first, as torch_npu writes a `Call stack`
    "/usr/local/lib/python3.9/site-packages/torch/optim/optimizer.py(373): wrapper",
    "/home/user/train.py(88): train_step",
    "/home/user/train.py(120): main",
]
OPERATOR_STACK = [
    "/usr/local/lib/python3.9/site-packages/torch/nn/modules/linear.py(114): forward",
    "/usr/local/lib/python3.9/site-packages/torch/nn/modules/module.py(1501): _call_impl",
    "/home/user/model.py(42): forward",
    "/home/user/train.py(85): train_step",
]


def with_call_stacks(tmp_path: Path) -> Path:
    """The torch_npu database fixture with stacks recorded as torch_npu writes them with
    with_stack=True (torch_npu's `_fwk_api_db_parser.py` / `CallChainIdManager`): a callchainId
    on each PYTORCH_API row, and PYTORCH_CALLCHAINS(id, stack, stackDepth) one row per frame,
    `stack` a STRING_IDS id, `stackDepth` the frame's place in the `Call stack` text (0: the
    innermost). Optimizer calls get OPTIMIZER_STACK, every other op OPERATOR_STACK."""
    folder = shutil.copytree(RANK0_DB, tmp_path / RANK0_DB.name)
    con = sqlite3.connect(folder / "ASCEND_PROFILER_OUTPUT" / "ascend_pytorch_profiler_0.db")
    first = con.execute("SELECT max(id) FROM STRING_IDS").fetchone()[0] + 1
    frames = OPTIMIZER_STACK + OPERATOR_STACK
    con.executemany(
        "INSERT INTO STRING_IDS (id, value) VALUES (?, ?)",
        [(first + i, f) for i, f in enumerate(frames)],
    )
    con.execute("CREATE TABLE PYTORCH_CALLCHAINS (id INTEGER, stack INTEGER, stackDepth INTEGER)")
    rows = [(0, first + d, d) for d in range(len(OPTIMIZER_STACK))]
    rows += [(1, first + len(OPTIMIZER_STACK) + d, d) for d in range(len(OPERATOR_STACK))]
    con.executemany("INSERT INTO PYTORCH_CALLCHAINS VALUES (?, ?, ?)", rows)
    con.execute(
        "UPDATE PYTORCH_API SET callchainId = CASE WHEN (SELECT value FROM STRING_IDS "
        "WHERE id = PYTORCH_API.name) LIKE 'Optimizer.%' THEN 0 ELSE 1 END WHERE type = 50001"
    )
    con.commit()
    con.close()
    return folder


def test_torch_npu_database_call_stacks_name_the_user_lines(tmp_path: Path) -> None:
    folder = with_call_stacks(tmp_path)
    (result,) = advisor.analyze(folder).analyses
    host = result.tables["host_ops"]
    steps = host["name"].str.startswith("Optimizer.").fillna(False)
    assert host.loc[steps, "call_stack"].eq("\n".join(OPTIMIZER_STACK)).all()
    findings = {f.rule.id: f for f in result.findings}
    # the optimizer steps ran in train.py:88 (the torch frame above it is not the user's)
    (source,) = findings["HOST-004"].sources
    assert (source.file, source.line, source.function) == ("/home/user/train.py", 88, "train_step")
    database = folder / "ASCEND_PROFILER_OUTPUT" / "ascend_pytorch_profiler_0.db"
    (expected,) = (
        sqlite3.connect(database)
        .execute(
            "SELECT sum(CAST(endNs AS INTEGER) - CAST(startNs AS INTEGER)) / 1000.0 "
            "FROM PYTORCH_API "
            "WHERE (SELECT value FROM STRING_IDS WHERE id = name) LIKE 'Optimizer.step#%'"
        )
        .fetchone()
    )
    assert source.time_us == pytest.approx(expected) and source.share == pytest.approx(1.0)
    # device kernels reach model.py:42 through the operators that launched them
    kernel_findings = [
        f
        for f in result.findings
        if f.evidence and f.evidence["table"] in ("device_ops", "op_stats")
    ]
    assert kernel_findings
    for finding in kernel_findings:
        assert [(s.file, s.line, s.function) for s in finding.sources] == [
            ("/home/user/model.py", 42, "forward")
        ]
        assert 0 < finding.sources[0].share <= 1  # type: ignore[operator]
    validate_report(result.report)


RANK0_TEXT = FIXTURE_DIR / "real" / "ascend_pt" / "rank0_ascend_pt"


def test_torch_npu_trace_view_call_stacks_name_the_user_lines(tmp_path: Path) -> None:
    """The genuine torch_npu trace with the `Call stack` args torch_npu writes on cpu_op events
    with with_stack=True (`_torch_op_bean.py`: frames joined by ";\\r\\n", innermost first),
    added here: OPTIMIZER_STACK on the optimizer calls, OPERATOR_STACK on every other op."""
    folder = shutil.copytree(RANK0_TEXT, tmp_path / RANK0_TEXT.name)
    trace = folder / "ASCEND_PROFILER_OUTPUT" / "trace_view.json"
    events = json.loads(trace.read_text())
    for event in events:
        if event.get("cat") == "cpu_op":
            stack = OPTIMIZER_STACK if event["name"].startswith("Optimizer.") else OPERATOR_STACK
            event.setdefault("args", {})["Call stack"] = ";\r\n".join(stack)
    trace.write_text(json.dumps(events))
    (result,) = advisor.analyze(folder).analyses
    ops = result.tables["op_stacks"]
    assert set(zip(ops["file"], ops["line"], ops["function"])) == {
        ("/home/user/train.py", 88, "train_step"),
        ("/home/user/model.py", 42, "forward"),
    }
    assert ops["stack"].isin(["\n".join(OPTIMIZER_STACK), "\n".join(OPERATOR_STACK)]).all()
    findings = {f.rule.id: f for f in result.findings}
    optimizer = sum(  # the steps HOST-004 counts, not the zero_grad calls
        e["dur"]
        for e in events
        if e.get("cat") == "cpu_op" and e["name"].startswith("Optimizer.step#")
    )
    (source,) = findings["HOST-004"].sources
    assert (source.file, source.line, source.function) == ("/home/user/train.py", 88, "train_step")
    assert source.time_us == pytest.approx(optimizer) and source.share == pytest.approx(1.0)
    kernel_findings = [
        f
        for f in result.findings
        if f.evidence and f.evidence["table"] in ("device_ops", "op_stats")
    ]
    assert kernel_findings
    for finding in kernel_findings:
        assert [(s.line, s.function) for s in finding.sources] == [(42, "forward")]
    validate_report(result.report)
