"""Trace snippets (advisor/traces.py): each finding's window of the profile as a Chrome trace.

A snippet must load as it is in Perfetto and chrome://tracing: a JSON object with a
`traceEvents` array of complete events (`ph: X`, numeric `ts`/`dur` in µs, integer `pid`/`tid`)
and metadata events naming every process and thread used. `load_trace` checks exactly that
(the fields Perfetto's JSON importer reads), and the tests check the events against the
original files read independently of advisor: the evidence's operators are inside, events are
where the raw file puts them, nothing of the window is missing unless counted as dropped.
"""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from conftest import DEMO, REAL

import advisor
import advisor.snippet_picks
import advisor.trace_cuts
import advisor.traces
from advisor.cli import main
from advisor.outputs import MANIFEST, render_outputs, write_files, write_outputs
from advisor.snippet_picks import MAX_EVENTS
from advisor.traces import profile_snippets, snippet_name

KINETO = REAL / "kineto/timeline_analysis__sampled_rank-0.json.gz"
KINETO_BASE = REAL / "kineto/amd_trace__mi250_minitoy_train_ROCm6_2_kineto.json.gz"
"""A trace whose ts count from baseTimeNanoseconds, not from the epoch."""
ASCEND_PT = REAL / "ascend_pt/rank0_ascend_pt"
TRACE_VIEW = ASCEND_PT / "ASCEND_PROFILER_OUTPUT/trace_view.json"


def run(*args: object) -> Any:
    return CliRunner().invoke(main, ["run", *map(str, args), "-q", "--lang", "en"])


def load_trace(path: Path) -> dict[str, Any]:
    """A snippet as a trace viewer reads it; fails on anything Perfetto's JSON importer or
    chrome://tracing would reject or misplace."""
    document = json.loads(path.read_text(encoding="utf-8"))
    assert isinstance(document, dict) and isinstance(document["traceEvents"], list)
    assert document["displayTimeUnit"] in ("ms", "ns")
    assert all(isinstance(v, str) for v in document["otherData"].values())
    named: dict[str, set[tuple[int, int]]] = {"process_name": set(), "thread_name": set()}
    used: set[tuple[int, int]] = set()
    for event in document["traceEvents"]:
        assert event["ph"] in ("X", "M"), event
        assert isinstance(event["pid"], int) and not isinstance(event["pid"], bool)
        assert isinstance(event["tid"], int) and not isinstance(event["tid"], bool)
        assert isinstance(event["name"], str)
        if event["ph"] == "M":
            assert isinstance(event["args"], dict)
            if event["name"] in named:
                assert isinstance(event["args"]["name"], str) and event["args"]["name"]
                named[event["name"]].add((event["pid"], event["tid"]))
            continue
        for key in ("ts", "dur"):
            assert isinstance(event[key], (int, float)) and math.isfinite(event[key])
        assert event["dur"] >= 0
        assert isinstance(event.get("args", {}), dict)
        used.add((event["pid"], event["tid"]))
    assert {pid for pid, _ in used} <= {pid for pid, _ in named["process_name"]}
    assert used <= named["thread_name"], "every lane is named"
    return document


def complete(document: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for e in document["traceEvents"] if e["ph"] == "X"]


def check_window(document: dict[str, Any], window: Any) -> list[dict[str, Any]]:
    """The snippet's events all overlap the finding's window and include every operator the
    window names; returns the events."""
    events = complete(document)
    assert events, "a window of a profile with events has events"
    assert all(
        e["ts"] <= window.end_us + 1e-3 and e["ts"] + e["dur"] >= window.start_us - 1e-3
        for e in events
    )
    names = {e["name"] for e in events}
    assert set(window.names) <= names, set(window.names) - names
    return events


def raw_events(path: Path) -> list[dict[str, Any]]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as handle:  # type: ignore[operator]
        data = json.load(handle)
    return data["traceEvents"] if isinstance(data, dict) else data


def test_kineto_snippets_hold_the_windows_events_as_the_file_writes_them(tmp_path: Path) -> None:
    result = advisor.analyze(KINETO)
    (analysis,) = result.analyses
    placed = [f for f in analysis.findings if f.window is not None]
    assert placed, "the Kineto fixture has findings with windows"
    assert run(KINETO, "-o", tmp_path / "out").exit_code == 0
    raw = [e for e in raw_events(KINETO) if e.get("ph") == "X"]
    for finding in placed:
        document = load_trace(tmp_path / "out/traces" / snippet_name(None, finding.rank))
        assert document["otherData"]["rule"] == finding.rule.id
        assert document["otherData"]["source"].startswith("original events of ")
        events = check_window(document, finding.window)
        # every raw event overlapping the window, read straight from the file, is in it
        steps = {e["name"]: e for e in raw if e["name"].startswith("ProfilerStep#")}
        step = steps[f"ProfilerStep#{finding.window.step}"]
        lo, hi = step["ts"], step["ts"] + step["dur"]
        assert finding.window.end_us - finding.window.start_us == pytest.approx(hi - lo)
        inside = [e for e in raw if e["ts"] <= hi and e["ts"] + e["dur"] >= lo]
        assert len(events) + int(document["otherData"]["dropped"]) == len(inside)
        assert int(document["otherData"]["dropped"]) == 0 and len(events) < MAX_EVENTS
        (mine,) = [e for e in events if e["name"] == step["name"]]
        assert mine["dur"] == step["dur"]
        assert mine["ts"] == pytest.approx(finding.window.start_us)
        assert mine["args"] == step.get("args", mine.get("args"))
    memcpy = next(f for f in placed if f.rule.id == "MEM-001")
    assert memcpy.window.names == ("Memcpy HtoD (Pageable -> Device)",)


def test_kineto_relative_to_base_time_lands_on_the_steps_table() -> None:
    """ts relative to baseTimeNanoseconds: the snippet's step event sits where the steps
    table puts the step, not 1.7e15 µs away."""
    (analysis,) = advisor.analyze(KINETO_BASE).analyses
    snippets = profile_snippets(analysis)
    assert snippets
    steps = analysis.tables["steps"].set_index("step")
    for finding in analysis.findings:
        if finding.rank not in snippets:
            continue
        step = finding.window.step
        events = complete(snippets[finding.rank])
        # the host's step annotation (the GPU's copy of it starts when the kernels do)
        (marker,) = [
            e
            for e in events
            if e["name"] == f"ProfilerStep#{step}" and e.get("cat") == "user_annotation"
        ]
        assert marker["ts"] == pytest.approx(steps.loc[step, "start_us"], abs=1e-3)


def test_torch_npu_snippets_cut_the_original_trace_view(tmp_path: Path) -> None:
    (analysis,) = advisor.analyze(ASCEND_PT).analyses
    snippets = profile_snippets(analysis)
    named = [f for f in analysis.findings if f.window is not None and f.window.names]
    assert {f.rule.id for f in named} >= {"OP-003", "HOST-004"}
    raw = raw_events(TRACE_VIEW)
    processes = {
        e["pid"]: e["args"]["name"]
        for e in raw
        if e.get("ph") == "M" and e["name"] == "process_name"
    }
    ops = analysis.tables["device_ops"]
    for finding in named:
        path = tmp_path / f"{finding.rank}.json"
        path.write_text(json.dumps(snippets[finding.rank]), encoding="utf-8")
        document = load_trace(path)
        events = check_window(document, finding.window)
        names = {
            e["pid"]: e["args"]["name"]
            for e in document["traceEvents"]
            if e["ph"] == "M" and e["name"] == "process_name"
        }
        assert all(processes[pid] == label for pid, label in names.items())
        for name in finding.window.names:
            kernels = ops.loc[ops["name"] == name, "start_us"]
            if kernels.empty:
                continue  # a host operator
            shown = sorted(e["ts"] for e in events if e["name"] == name)
            # trace_view.json's ts strings land where kernel_details.csv puts the kernels, to
            # within the 0.25 µs a float64 keeps of the epoch-µs origin the report records
            inside = kernels[kernels.between(finding.window.start_us, finding.window.end_us)]
            assert shown == pytest.approx(sorted(inside), abs=0.25)
            assert {processes[e["pid"]] for e in events if e["name"] == name} == {"Ascend Hardware"}


def test_csv_profile_snippets_come_from_the_tables(tmp_path: Path) -> None:
    """msprof CSV summaries have no trace: the window's rows become the events."""
    out = tmp_path / "out"
    assert run(DEMO, "-o", out).exit_code == 0
    (analysis,) = advisor.analyze(DEMO).analyses
    placed = [f for f in analysis.findings if f.window is not None]
    written = sorted(p.name for p in (out / "traces").iterdir())
    assert written == sorted(snippet_name(None, f.rank) for f in placed)
    ops = analysis.tables["device_ops"]
    for finding in placed:
        document = load_trace(out / "traces" / snippet_name(None, finding.rank))
        assert document["otherData"]["source"] == "built from advisor's normalized tables"
        events = check_window(document, finding.window)
        lanes = {
            e["pid"]: e["args"]["name"]
            for e in document["traceEvents"]
            if e["ph"] == "M" and e["name"] == "process_name"
        }
        device = [e for e in events if lanes[e["pid"]] == "device"]
        start, end = finding.window.start_us, finding.window.end_us
        task_end = ops["start_us"] + ops["duration_us"]
        assert len(device) == int(((ops["start_us"] <= end) & (task_end >= start)).sum())
        if finding.window.step is not None:
            assert f"step {finding.window.step}" in {e["name"] for e in events}
    html = (out / "report.html").read_text(encoding="utf-8")
    for finding in placed:
        assert f'href="traces/{snippet_name(None, finding.rank)}"' in html


def test_several_profiles_name_snippets_after_their_reports(tmp_path: Path) -> None:
    ranks = tmp_path / "ranks"
    ranks.mkdir()
    for rank in (0, 1):
        (ranks / f"rank{rank}.json.gz").write_bytes(KINETO.read_bytes())
    out = tmp_path / "out"
    assert run(ranks, "-o", out, "--format", "json,traces").exit_code == 0
    reports = sorted(p.name for p in out.glob("prof_rule_*.json"))
    snippets = sorted(p.name for p in (out / "traces").iterdir())
    labels = {r.removeprefix("prof_rule_").removesuffix(".json") for r in reports}
    assert snippets and {s.split("-")[1] for s in snippets} <= labels
    assert len({s.split("-")[1] for s in snippets}) == 2, "both ranks have snippets"
    for name in snippets:
        load_trace(out / "traces" / name)
    assert not (out / "report.html").exists()


def test_snippets_are_cut_one_profile_at_a_time_as_they_are_written(
    tmp_path: Path, monkeypatch
) -> None:
    """Sixteen ranks' snippets held together took the advisor process to 649 MB (a 10 MB
    trace each): a profile's snippets are cut when its first file is written, and each is
    let go once rendered, so no other profile's are held when the next profile's trace is
    read."""
    ranks = tmp_path / "ranks"
    ranks.mkdir()
    for rank in (0, 1, 2):
        (ranks / f"rank{rank}.json.gz").write_bytes(KINETO.read_bytes())
    result = advisor.analyze(ranks, keep_tables=False)
    outputs = render_outputs(result, ["json", "traces"])
    snippet_files = [name for name in outputs if name.startswith("traces/")]
    assert snippet_files and all(callable(outputs[name]) for name in snippet_files)
    held: list[int] = []  # snippets held by any profile when a trace is read
    cut: list[dict[int, Any]] = []
    real_snippets = advisor.traces.profile_snippets

    def profile_snippets(analysis):
        held.append(sum(len(documents) for documents in cut))
        cut.append(real_snippets(analysis))
        return cut[-1]

    monkeypatch.setattr(advisor.traces, "profile_snippets", profile_snippets)
    write_files(tmp_path / "out", outputs)
    assert len(cut) == 3 and held == [0, 0, 0]
    assert not any(cut), "every snippet was let go once written"
    for name in snippet_files:
        load_trace(tmp_path / "out" / name)


def test_stale_snippets_go_and_the_users_files_stay(tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert run(DEMO, "-o", out).exit_code == 0
    first = sorted(p.name for p in (out / "traces").iterdir())
    assert len(first) > 1
    (out / "traces/my-notes.txt").write_text("mine", encoding="utf-8")
    assert run(DEMO, "-o", out, "--select", "STEP-001").exit_code == 0
    assert sorted(p.name for p in (out / "traces").iterdir()) == ["finding-1.json", "my-notes.txt"]
    assert (out / "traces/my-notes.txt").read_text(encoding="utf-8") == "mine"
    (out / "traces/my-notes.txt").unlink()
    assert run(DEMO, "-o", out, "--format", "json,html").exit_code == 0
    assert not (out / "traces").exists(), "a folder of stale snippets only is removed"
    manifest = json.loads((out / MANIFEST).read_text(encoding="utf-8"))
    assert not [n for n in manifest["outputs"]["run"] if n.startswith("traces/")]
    assert "trace-link" not in (out / "report.html").read_text(encoding="utf-8")


def test_a_traces_link_is_never_written_through(tmp_path: Path) -> None:
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    out.mkdir()
    elsewhere.mkdir()
    (elsewhere / "finding-1.json").write_text("not advisor's", encoding="utf-8")
    (out / "traces").symlink_to(elsewhere, target_is_directory=True)
    (out / MANIFEST).write_text(
        json.dumps({"outputs": {"run": ["traces/finding-1.json", "traces/../x"]}}),
        encoding="utf-8",
    )
    result = run(DEMO, "-o", out)
    assert result.exit_code == 5, result.output
    assert "traces" in result.output
    assert [p.name for p in elsewhere.iterdir()] == ["finding-1.json"]
    assert (elsewhere / "finding-1.json").read_text(encoding="utf-8") == "not advisor's"


def test_traces_need_a_folder_and_the_api_writes_them(tmp_path: Path) -> None:
    refused = run(DEMO, "-o", "-", "--format", "json,traces")
    assert refused.exit_code == 2 and "traces" in refused.output
    assert run(DEMO, "-o", "-").exit_code == 0  # the default formats with -o - write no file
    written = write_outputs(advisor.analyze(DEMO), tmp_path / "api", ["traces"])
    assert written and all(p.parent.name == "traces" for p in written if p.suffix == ".json")


def test_batches_decoded_as_structs_give_the_same_snippets(monkeypatch, tmp_path: Path) -> None:
    """A large trace is decoded batch by batch into structs, the last batch (all of a small
    file) as dicts: cut into small batches, a fixture goes both ways with the same result;
    an event with a NaN time (written by some profilers) is left out."""
    raw = json.loads(gzip.decompress(KINETO.read_bytes()))
    raw["traceEvents"].append({"ph": "X", "name": "broken", "ts": "NaN", "dur": 1, "pid": 1})
    raw["traceEvents"].append({"ph": "X", "name": "nan", "ts": float("nan"), "dur": 1, "pid": 1})
    trace = tmp_path / "trace.json"
    trace.write_text(json.dumps(raw), encoding="utf-8")
    (analysis,) = advisor.analyze(trace).analyses
    whole = profile_snippets(analysis)
    monkeypatch.setattr(advisor.trace_cuts, "CHUNK_BYTES", 64 * 1024)
    batched = profile_snippets(analysis)
    assert trace.stat().st_size > 20 * 64 * 1024, "the trace spans many batches"
    assert whole and batched == whole
    for number, document in whole.items():
        path = tmp_path / f"{number}.json"
        path.write_text(json.dumps(document, allow_nan=False), encoding="utf-8")
        assert not {"broken", "nan"} & {e["name"] for e in complete(load_trace(path))}


@pytest.mark.parametrize(
    "workers", ["in this process", pytest.param("spawned", marks=pytest.mark.integration)]
)
def test_snippets_filtered_in_parts_are_the_sequential_ones(
    monkeypatch, tmp_path: Path, workers: str
) -> None:
    """A large trace is filtered for the snippets in parts on several cores: cut into many
    parts (folded here, or by real worker processes), the snippets are the one-pass ones."""
    from contextlib import contextmanager

    from advisor.formats import parallel

    trace = tmp_path / "trace.json"
    trace.write_bytes(gzip.decompress(KINETO.read_bytes()))
    (analysis,) = advisor.analyze(trace).analyses
    whole = profile_snippets(analysis)
    monkeypatch.setattr(advisor.trace_cuts, "PARALLEL_BYTES", 0)
    monkeypatch.setattr(parallel, "PART_BYTES", trace.stat().st_size // 8)
    if workers == "spawned":
        monkeypatch.setenv(parallel.WORKERS_ENV, "2")
    else:

        @contextmanager
        def no_pool(processes: int):  # noqa: ANN202
            yield None

        monkeypatch.setattr(parallel, "decode_workers", lambda: 4)
        monkeypatch.setattr(parallel, "_pool", no_pool)
    parts: list[int] = []
    read_in_parts = parallel.read_in_parts

    def counting(*args: Any, **kwargs: Any) -> Any:
        result = read_in_parts(*args, **kwargs)
        parts.append(0 if result is None else result.parts)
        return result

    monkeypatch.setattr(parallel, "read_in_parts", counting)
    in_parts = profile_snippets(analysis)
    assert parts and parts[0] > 2, "the trace was filtered in parts"
    assert whole and in_parts == whole


def test_step_spans_take_each_steps_first_placed_row() -> None:
    """msprof repeats step numbers per model: a step's window is its first row with a start
    and an end; a first row ending before it starts places the step nowhere (not a later
    row); rows without a number or times are skipped."""
    import pandas as pd

    from advisor.engine.windows import step_spans
    from advisor.model import Profile, ProfileMeta, conform

    steps = pd.DataFrame(
        {
            "step": [1, 1, 2, 3, 3, None, 4],
            "start_us": [0.0, 50.0, 100.0, 300.0, 200.0, 400.0, None],
            "end_us": [100.0, 150.0, 200.0, 250.0, 300.0, 500.0, 600.0],
        }
    )
    profile = Profile(ProfileMeta("t", "mem"), {"steps": conform("steps", steps)})
    assert step_spans(profile) == {1: (0.0, 100.0), 2: (100.0, 200.0)}


@pytest.mark.parametrize("seed", range(4))
def test_a_snippet_lists_its_events_by_start_the_longer_first(seed: int) -> None:
    """Pick.events: the named events and the longest others, ordered by start, at one start
    the longer first, and events equal in both in the order they were kept (named first,
    then the others, longest first, of equal length the later offered first, as
    heapq.nlargest gives them)."""
    import random

    from advisor.engine.windows import Window
    from advisor.snippet_picks import Lanes, Pick

    rng = random.Random(seed)
    pick = Pick(Window(0.0, 10.0, None, names=("named",)), Lanes())
    offered = []
    for order in range(200):
        name = rng.choice(["named", "other", "other"])
        event = {"name": name, "ph": "X", "ts": rng.choice([0, 1.5, 2, 3.0]), "pid": 1}
        event |= {"dur": rng.choice([0, 1, 2.5, 4]), "tid": order}
        offered.append(event)
        pick.offer(event, order)
    named = [e for e in offered if e["name"] == "named"]
    others = sorted(
        (e for e in offered if e["name"] != "named"),
        key=lambda e: (e["dur"], e["tid"]),  # tid: the order offered
        reverse=True,
    )
    expected = sorted([*named, *others], key=lambda e: (e["ts"], -e["dur"]))
    assert [e for e in pick.events() if e["ph"] == "X"] == expected
    assert [e["tid"] for e in pick.events() if e["ph"] == "X"] == [e["tid"] for e in expected]


@pytest.mark.parametrize(("seed", "count"), [(0, 40), (1, 40), (2, 41), (3, 90), (4, 300)])
def test_windows_sharing_a_span_keep_what_each_would_keep_alone(
    seed: int, count: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Offered: the events of windows that differ in names only are kept once while every
    window keeps them all, and offered to each window past MAX_EVENTS (here 40: under it,
    at it, just past and well past). Each window's events are those it keeps when offered
    every event itself, in the same order, ties of start and length included; windows naming
    none of the events share one list."""
    import random

    from advisor.engine.windows import Window
    from advisor.snippet_picks import Lanes, Offered, Pick

    monkeypatch.setattr(advisor.snippet_picks, "MAX_EVENTS", 40)
    rng = random.Random(seed)
    names = [("a",), ("b", "a"), ("zzz",), ("yyy",), ()]
    lanes = Lanes()
    shared = [Pick(Window(0.0, 10.0, None, names=n), lanes) for n in names]
    alone = [Pick(Window(0.0, 10.0, None, names=n), lanes) for n in names]
    offered = Offered(shared)
    for order in range(count):
        event = {"name": rng.choice("abc"), "ph": "X", "ts": rng.choice([0, 1.5, 2]), "pid": 1}
        event |= {"dur": rng.choice([0, 1, 2.5]), "tid": rng.choice([1, 2, 3])}
        offered.offer(event, order)
        for pick in alone:
            pick.offer(event, order)
    offered.close()
    for mine, theirs in zip(shared, alone):
        assert mine.seen == theirs.seen == count
        assert mine.events() == theirs.events()
        assert [id(e) for e in mine.events()[-min(count, 40) :]] == [
            id(e) for e in theirs.events()[-min(count, 40) :]
        ]
    assert (shared[2].events() is shared[3].events()) == (count <= 40)


@pytest.mark.parametrize("seed", range(4))
def test_a_dropped_profile_keeps_the_longest_rows_of_each_window(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a run that drops the tables keeps for the snippets (window_rows): of the rows
    overlapping a window, the MAX_EVENTS longest, of equal ones the first, as pandas'
    nlargest picks them; only the columns the events are made of."""
    import numpy as np
    import pandas as pd

    from advisor.engine.windows import Window
    from advisor.model import Profile, ProfileMeta

    monkeypatch.setattr(advisor.snippet_picks, "MAX_EVENTS", 5)
    rng = np.random.default_rng(seed)
    start = rng.choice([0.0, 1.0, 2.0, 5.0, np.nan], size=40)
    duration = rng.choice([0.0, -0.0, 1.0, 3.0], size=40)
    ops = pd.DataFrame(
        {
            "name": [f"k{i}" for i in range(40)],
            "start_us": start,
            "duration_us": duration,
            "stream": 7,
            "category": "compute",
            "op_type": "x",
        },
        index=pd.RangeIndex(100, 140),
    )
    windows = [Window(0.5, 2.5, None), Window(4.0, 9.0, None)]
    finding = type("F", (), {"window": None})
    profile = Profile(ProfileMeta("t", "mem"), {"device_ops": ops})
    kept = advisor.traces.window_rows(profile, [finding(), *(_placed(w) for w in windows)])
    end = start + duration
    length = pd.Series(end - start, index=ops.index)
    expected = sorted(
        {
            label
            for w in windows
            for label in length[(start <= w.end_us) & (end >= w.start_us)].nlargest(5).index
        }
    )
    assert kept["device_ops"].index.tolist() == expected
    assert list(kept["device_ops"].columns) == [
        "start_us",
        "duration_us",
        "name",
        "stream",
        "category",
    ]


def _placed(window: Any) -> Any:
    """A finding-like object with a window (window_rows reads only that)."""
    return type("F", (), {"window": window})()
