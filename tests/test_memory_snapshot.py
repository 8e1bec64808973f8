"""PyTorch / torch_npu memory snapshots (_dump_snapshot() pickles): read without running any
Python object they name, their history replayed into allocator_state and allocation_sites,
and MEM-006 / MEM-007 on them. The fixtures are genuine torch_npu snapshots of a leak demo
(tests/fixtures/real/PROVENANCE.md), kept gzipped and inflated here."""

from __future__ import annotations

import gzip
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner
from conftest import FIXTURE_DIR

import advisor
from advisor.cli import main
from advisor.compare import compare
from advisor.compare.peak_memory import moved_places, site_figures
from advisor.errors import UnreadableInput
from advisor.model import contract_problems
from advisor_plugins.memory_snapshot import NO_STACK, MemorySnapshotReader, site_of

SNAPSHOTS = FIXTURE_DIR / "real" / "memory_snapshot"
READER = MemorySnapshotReader()
MIB = 1 << 20
LEAK_BLOCK = 41943040  # the 40 MiB tensor memory_leaks_demo.py makes and keeps each step


def inflated(tmp_path: Path, name: str) -> Path:
    """The fixture `name`.pkl.gz written out as the .pkl file a user has."""
    out = tmp_path / f"{name}.pkl"
    out.write_bytes(gzip.decompress((SNAPSHOTS / f"{name}.pkl.gz").read_bytes()))
    return out


def read_one(path: Path):
    (profile,) = READER.read(path)
    assert contract_problems(profile) == []
    return profile


def site_row(profile, site: str, device: str = "0") -> dict:
    sites = profile.tables["allocation_sites"]
    rows = sites[(sites["site"] == site) & (sites["device"] == device)]
    assert len(rows) == 1, sites[["site", "device"]]
    return rows.iloc[0].to_dict()


def test_detect_takes_pickles_by_name_and_header(tmp_path: Path):
    snapshot = inflated(tmp_path, "snapshot_expandable")
    assert READER.detect(snapshot)
    renamed = tmp_path / "snap.pickle"
    renamed.write_bytes(snapshot.read_bytes())
    assert READER.detect(renamed)
    text = tmp_path / "notes.pkl"
    text.write_text("not a pickle")
    assert not READER.detect(text)
    dataset = tmp_path / "dataset.pkl"  # a pickle, not a snapshot: left to other readers
    dataset.write_bytes(pickle.dumps({"images": [1, 2], "labels": [0, 1]}))
    assert not READER.detect(dataset)
    assert READER.detect(SNAPSHOTS / "snapshot_expandable.pkl.gz")  # as shared: gzipped
    not_gzip = tmp_path / "notes.pkl.gz"
    not_gzip.write_bytes(snapshot.read_bytes())  # named .gz, but not gzip data
    assert not READER.detect(not_gzip)


def test_a_gzipped_snapshot_reads_as_the_inflated_one(tmp_path: Path, monkeypatch):
    packed = SNAPSHOTS / "snapshot_with_multi_devices.pkl.gz"
    got = read_one(packed)
    want = read_one(inflated(tmp_path, "snapshot_with_multi_devices"))
    assert sorted(got.tables) == sorted(want.tables)
    for name, frame in want.tables.items():
        pd.testing.assert_frame_equal(got.tables[name], frame, obj=name)
    monkeypatch.setenv("ADVISOR_MAX_INFLATED_BYTES", "1M")  # the file inflates to 1.3 MB
    with pytest.raises(UnreadableInput, match="inflates to more than 1.00 MiB"):
        READER.read(packed)


def test_the_leak_demo_names_the_line_that_keeps_a_block_each_step(tmp_path: Path):
    """memory_leaks_demo.py line 12 makes a 40 MiB tensor in each of three steps and keeps
    it: three held blocks at three points. The optimizer's state (Adam's _init_group on the
    first step, 322 blocks under line 18) is held too, but was made at one point."""
    profile = read_one(inflated(tmp_path, "snapshot_expandable"))
    assert profile.meta.device_kind == "unknown"  # no torch_npu or torch.cuda frame in it
    (state,) = profile.tables["allocator_state"].to_dict("records")
    assert state["segments"] == 2 and state["expandable_segments"] == 2
    assert state["reserved_bytes"] == 643825664  # the two segments' total_size
    assert state["allocated_bytes"] == 408698880
    assert state["history_entries"] == 8092
    assert not state["history_from_start"]  # the history begins with 90 MiB allocated
    assert state["peak_reserved_bytes"] == state["reserved_bytes"]
    assert state["allocated_bytes"] < state["peak_allocated_bytes"] <= state["peak_reserved_bytes"]

    leak = site_row(profile, "train_one_step (memory_leaks_demo.py:12)")
    assert (leak["allocations"], leak["frees"], leak["held_blocks"]) == (3, 0, 3)
    assert leak["held_bytes"] == 3 * LEAK_BLOCK
    assert leak["held_points"] == 3
    assert leak["held_span"] > 0.5
    assert leak["held_share"] == pytest.approx(3 * LEAK_BLOCK / 408698880)

    optimizer_state = site_row(profile, "train_one_step (memory_leaks_demo.py:18)")
    assert optimizer_state["held_blocks"] == 322
    assert optimizer_state["held_points"] == 1
    assert optimizer_state["held_span"] < 0.05


def test_a_history_from_the_start_walks_back_to_nothing(tmp_path: Path):
    """Device 1 of the two-device snapshot recorded its allocator from the first segment:
    walked back from the snapshot's totals, the history starts at zero, which checks the
    replay against the segments."""
    profile = read_one(inflated(tmp_path, "snapshot_with_multi_devices"))
    assert profile.meta.device_kind == "NPU"  # torch_npu's frames
    states = {row["device"]: row for row in profile.tables["allocator_state"].to_dict("records")}
    assert set(states) == {"0", "1"}
    one = states["1"]
    assert one["history_from_start"]
    assert one["segments"] == 52 and one["expandable_segments"] == 0
    assert one["allocated_bytes"] == 0 and one["reserved_bytes"] == 526 * MIB
    assert one["peak_reserved_bytes"] == 526 * MIB
    assert 0 < one["peak_allocated_bytes"] < one["peak_reserved_bytes"]
    assert states["0"]["expandable_segments"] == states["0"]["segments"] == 3
    sites = profile.tables["allocation_sites"]
    assert (sites[sites["device"] == "1"]["held_blocks"] == 0).all()  # all freed on device 1
    # every block of device 1 is in its history: the places' blocks at the peak make it up
    assert sites[sites["device"] == "1"]["held_at_peak_bytes"].sum() == one["peak_allocated_bytes"]
    assert (
        sites[sites["device"] == "0"]["held_at_peak_bytes"].sum()
        < states["0"]["peak_allocated_bytes"]
    )


def test_run_reports_the_leak_and_not_the_optimizer_state(tmp_path: Path):
    snapshot = inflated(tmp_path, "snapshot_with_multi_devices")
    before = snapshot.read_bytes()
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["run", str(snapshot), "-o", str(out), "--quiet"])
    assert result.exit_code == 0, result.output
    assert snapshot.read_bytes() == before
    (report,) = out.glob("prof_rule_*.json")
    findings = {f.rule.id: f for f in advisor.analyze(snapshot).findings}
    assert "MEM-007" not in findings  # 526 MiB reserved against 450 at once: under the limits
    leak = findings["MEM-006"]
    assert leak.rule.id in report.read_text()
    assert "train_one_step (memory_leaks_demo.py:11) allocated 3 blocks" in leak.message
    assert "120 MiB" in leak.message and "3 separate points" in leak.message
    assert "about 40 MiB each time" in leak.message
    assert "torch_npu.npu.memory._dump_snapshot()" in " ".join(leak.suggestions)
    assert "torch.cuda" not in " ".join(leak.suggestions)


class _Payload:
    """Unpickling this would create the folder `target`."""

    def __init__(self, target: str) -> None:
        self.target = target

    def __reduce__(self):
        return (os.mkdir, (self.target,))


def test_a_pickle_naming_a_function_is_refused_without_running_it(tmp_path: Path):
    target = tmp_path / "ran"
    hostile = tmp_path / "snapshot.pickle"
    hostile.write_bytes(pickle.dumps({"segments": [], "device_traces": [_Payload(str(target))]}))
    assert READER.detect(hostile)
    with pytest.raises(UnreadableInput, match=r"names the Python object (posix|nt|os)\.mkdir"):
        READER.read(hostile)
    assert not target.exists()
    result = CliRunner().invoke(main, ["run", str(hostile), "-o", str(tmp_path / "out")])
    assert result.exit_code != 0
    assert "snapshot.pickle" in result.output and "Traceback" not in result.output
    assert not target.exists()


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (pickle.dumps([1, 2, 3]), "without the 'segments' list"),
        (pickle.dumps({"segments": []})[:-4], "damaged pickle"),
        # a flipped opcode: APPEND to a dict (found by flipping bytes of the real snapshots)
        (b"\x80\x04}K\x01a.", r"damaged pickle \(AttributeError"),
    ],
)
def test_other_pickles_get_one_line(tmp_path: Path, content: bytes, problem: str):
    path = tmp_path / "other.pkl"
    path.write_bytes(content)
    with pytest.raises(UnreadableInput, match=problem):
        READER.read(path)


def test_a_cut_gzipped_snapshot_is_told_as_cut_not_as_a_damaged_pickle(tmp_path: Path):
    """The file's own problem, naming it once (the pickle was never reached)."""
    path = tmp_path / "cut.pkl.gz"
    path.write_bytes((SNAPSHOTS / "snapshot_expandable.pkl.gz").read_bytes()[:3000])
    with pytest.raises(UnreadableInput) as raised:
        READER.read(path)
    assert raised.value.problem == "truncated gzip data"


def test_entries_of_the_wrong_shape_are_left_out(tmp_path: Path):
    """A damaged or hand-made snapshot: entries that are not dicts, an address that is a
    list, sizes that are text. What can be read is, without a traceback."""
    path = tmp_path / "odd.pkl"
    history = [
        "not an entry",
        {"action": "alloc", "addr": [1], "size": "big", "frames": "none"},
        {
            "action": "alloc",
            "addr": 16,
            "size": 1024,
            "frames": [{"name": "f", "filename": "a.py", "line": 3}],
        },
        {"action": "free_completed", "addr": [1], "size": 1},
    ]
    segment = {"device": 0, "total_size": 2048, "allocated_size": 1024, "blocks": ["x"]}
    path.write_bytes(pickle.dumps({"segments": [segment, 7], "device_traces": [history, None]}))
    profile = read_one(path)
    (state,) = profile.tables["allocator_state"].to_dict("records")
    assert (state["segments"], state["reserved_bytes"], state["allocated_bytes"]) == (1, 2048, 1024)
    assert site_row(profile, "f (a.py:3)")["held_bytes"] == 1024


def test_the_site_is_the_innermost_frame_of_user_code():
    library = {"name": "_conv_forward", "filename": "/env/lib/python3.11/site-packages/x.py"}
    user = {"name": "train_one_step", "filename": "/home/me/train.py", "line": 12}
    outer = {"name": "main", "filename": "/home/me/train.py", "line": 40}
    assert site_of([library, user, outer]) == "train_one_step (train.py:12)"
    assert site_of([library]) == "_conv_forward (x.py:?)"  # all in packages: the innermost
    assert site_of([]) == NO_STACK
    assert site_of(None) == NO_STACK


def test_a_stack_without_python_is_named_by_its_autograd_node_or_operator():
    """Snapshots recorded with C++ stacks (stacks="all", as a genuine CUDA snapshot read for
    docs/real-profile-review.md is): the autograd engine's threads run no Python, so the
    backward's blocks are named by the node that made them."""
    allocator = [
        {"name": "torch::unwind::unwind()", "filename": "??", "line": 0},
        {
            "name": "c10::cuda::CUDACachingAllocator::Native::NativeCachingAllocator::malloc",
            "filename": "",
            "line": 0,
        },
    ]
    backward = allocator + [
        {"name": "at::_ops::neg::call(at::Tensor const&)", "filename": "??", "line": 0},
        {
            "name": "torch::autograd::generated::SubBackward0::apply(std::vector<at::Tensor>&&)",
            "filename": "??",
            "line": 0,
        },
        {"name": "torch::autograd::Engine::thread_main()", "filename": "??", "line": 0},
    ]
    assert site_of(backward) == "SubBackward0 (autograd backward)"
    assert site_of(allocator + [backward[2]]) == "aten::neg"
    assert site_of(allocator) == "torch::unwind::unwind()"
    user = {"name": "train_step", "filename": "/home/me/train.py", "line": 7}
    assert site_of([*backward, user]) == "train_step (train.py:7)"  # user code wins


@pytest.mark.parametrize(
    ("frame_name", "kind"),
    [
        ("c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc", "GPU"),
        ("c10_npu::NPUCachingAllocator::DeviceCachingAllocator::malloc", "NPU"),
        ("at::native::empty", "unknown"),
    ],
)
def test_the_allocator_in_a_cpp_stack_names_the_device(tmp_path: Path, frame_name: str, kind: str):
    entry = {
        "action": "alloc",
        "addr": 0,
        "size": 512,
        "frames": [{"name": frame_name, "filename": "", "line": 0}],
    }
    path = tmp_path / "cpp.pickle"
    path.write_bytes(pickle.dumps({"segments": [], "device_traces": [[entry]]}))
    assert read_one(path).meta.device_kind == kind


def _frames(line: int) -> list[dict]:
    return [
        {
            "name": "_conv_forward",
            "filename": "/env/lib/python3.11/site-packages/conv.py",
            "line": 9,
        },
        {"name": "train_step", "filename": "/home/me/train.py", "line": line},
    ]


def _oom_snapshot(request: int) -> dict:
    """A hand-made snapshot of one device with two fixed 1 GiB segments: train.py:10 and
    train.py:30 hold 600 MiB each (a 300 MiB block of line 20 came and went), and then a
    request of `request` bytes failed with 100 MiB free on the device. Each segment then has
    424 MiB free, so a 512 MiB request fails with 848 MiB free in the cache."""
    gib, mib = 1 << 30, MIB
    history = [
        {"action": "segment_alloc", "addr": 0, "size": gib, "frames": _frames(10)},
        {"action": "alloc", "addr": 0, "size": 600 * mib, "frames": _frames(10)},
        {"action": "alloc", "addr": 600 * mib, "size": 300 * mib, "frames": _frames(20)},
        {"action": "free_requested", "addr": 600 * mib, "size": 300 * mib, "frames": []},
        {"action": "free_completed", "addr": 600 * mib, "size": 300 * mib, "frames": []},
        {"action": "segment_alloc", "addr": gib, "size": gib, "frames": _frames(30)},
        {"action": "alloc", "addr": gib, "size": 600 * mib, "frames": _frames(30)},
        {"action": "oom", "size": request, "device_free": 100 * mib, "frames": _frames(40)},
    ]
    segments = [
        {
            "device": 0,
            "address": base,
            "total_size": gib,
            "allocated_size": 600 * mib,
            "active_size": 600 * mib,
            "requested_size": 600 * mib,
            "is_expandable": False,
            "segment_type": "large",
            "blocks": [
                {"address": base, "size": 600 * mib, "state": "active_allocated"},
                {"address": base + 600 * mib, "size": 424 * mib, "state": "inactive"},
            ],
        }
        for base in (0, gib)
    ]
    return {"segments": segments, "device_traces": [history]}


@pytest.mark.parametrize(
    ("request_mib", "kind"),
    [(512, "fragmentation, not a full device"), (1024, "does not fit the device")],
)
def test_an_out_of_memory_error_is_told_with_its_kind(tmp_path: Path, request_mib: int, kind: str):
    path = tmp_path / "oom_snapshot.pickle"
    path.write_bytes(pickle.dumps(_oom_snapshot(request_mib * MIB)))
    profile = read_one(path)
    (oom,) = profile.tables["oom_events"].to_dict("records")
    assert oom["order"] == 0 and oom["device"] == "0"
    assert oom["request_bytes"] == request_mib * MIB
    assert oom["allocated_bytes"] == 1200 * MIB  # walked back from the segments
    assert oom["reserved_bytes"] == 2048 * MIB
    assert oom["device_free_bytes"] == 100 * MIB
    assert profile.tables["allocator_state"]["history_from_start"].all()
    assert site_row(profile, "train_step (train.py:10)")["held_at_oom_bytes"] == 600 * MIB
    assert site_row(profile, "train_step (train.py:20)")["held_at_oom_bytes"] == 0

    (finding,) = [f for f in advisor.analyze(path).findings if f.rule.id == "MEM-008"]
    asked = "512 MiB" if request_mib == 512 else "1.00 GiB"
    assert (
        f"An allocation of {asked} failed on device 0, with 1.17 GiB allocated" in finding.message
    )
    assert "2.00 GiB reserved, 100 MiB still free on the device" in finding.message
    assert "848 MiB free" in finding.message and kind in finding.message
    assert "train_step (train.py:10) (600 MiB" in finding.message
    assert finding.severity.value == "high"
    advice = " ".join(finding.suggestions)  # what fits the kind of error, not both kinds
    if request_mib == 512:
        assert "expandable_segments:True" in advice and "micro-batch" not in advice
    else:
        assert "micro-batch" in advice and "expandable_segments" not in advice


def test_a_history_without_an_out_of_memory_error_passes_mem_008(tmp_path: Path):
    """The history records every out-of-memory error: an empty oom_events, so MEM-008 is
    judged (passed), not skipped for missing data."""
    path = inflated(tmp_path, "snapshot_expandable")
    profile = read_one(path)
    assert profile.tables["oom_events"].empty
    assert profile.tables["allocation_sites"]["held_at_oom_bytes"].isna().all()
    (analysis,) = advisor.analyze(path).analyses
    assert analysis.evaluation.outcomes["MEM-008"].value == "passed"


def test_comparing_two_snapshots_calls_neither_too_short(tmp_path: Path):
    """Profiles without a timeline (snapshots, AOE results) got a compare step of 0 µs, and
    with it the warning that the profile is too short to hold a training step."""
    base, comp = (
        inflated(tmp_path, "snapshot_expandable"),
        inflated(tmp_path, "snapshot_with_multi_devices"),
    )
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["compare", str(base), str(comp), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "too short" not in result.output
    assert (out / "compare.json").is_file()


def test_two_snapshots_compare_their_peaks_and_the_places_holding_them(tmp_path: Path):
    """compare_overall's memory_peak is each snapshot's largest peak (reserved), and
    compare_allocation_sites the places of that device, as each reader's allocation_sites
    gives them; the places the comparison's leak demo makes first (they grew most)."""
    base_path, comp_path = (
        inflated(tmp_path, "snapshot_expandable"),
        inflated(tmp_path, "snapshot_with_multi_devices"),
    )
    result = compare(base_path, comp_path)
    overall = result.table("compare_overall").set_index("metric")
    sides = [read_one(p) for p in (base_path, comp_path)]
    peaks = [p.tables["allocator_state"]["peak_reserved_bytes"].max() for p in sides]
    assert overall.loc["memory_peak", ["base", "comparison"]].tolist() == peaks
    comp_state = sides[1].tables["allocator_state"].set_index("device")
    assert comp_state["peak_reserved_bytes"].idxmax() == "0"  # 614 MiB against device 1's 526
    table = result.table("compare_allocation_sites").set_index("site")
    theirs = sides[1].tables["allocation_sites"]
    on_peak = theirs[theirs["device"] == "0"].set_index("site")["held_at_peak_bytes"]
    base_places = site_figures(sides[0]).index
    shown = on_peak.rename(index=moved_places(base_places, on_peak.index)[1])
    compared = table["comp_peak_bytes"]
    assert compared[shown.index].tolist() == pytest.approx(shown.fillna(0).tolist())
    assert (compared.drop(shown.index) == 0).all()  # places only the baseline names
    assert (table["diff_bytes"] == table["comp_peak_bytes"] - table["base_peak_bytes"]).all()
    # the two runs' script differs by a line above train_one_step: every place is the same
    # code one line apart, holding the same bytes, not one place shrinking and one growing
    assert (table["diff_bytes"] == 0).all()
    assert "train_one_step (memory_leaks_demo.py:18 -> 17)" in table.index
    assert (
        table.loc["train_one_step (memory_leaks_demo.py:18 -> 17)", "comp_peak_bytes"]
        == (on_peak["train_one_step (memory_leaks_demo.py:17)"])
    )
    assert result.evaluation.outcomes["CMP-006"].value == "passed"  # the same 614 MiB peak
    assert "memory_leaks_demo.py:18 -&gt; 17" in result._repr_html_()  # the compare page


@pytest.mark.parametrize(
    ("base", "comp", "pairs"),
    [
        ([10, 20], [10, 20], {}),  # nothing moved
        ([10, 20, 30], [11, 21, 31], {10: 11, 20: 21, 30: 31}),  # a line added above
        ([10, 20, 30], [10, 22, 32], {20: 22, 30: 32}),  # two lines added after line 10
        ([10], [12, 14], {10: 12}),  # the smallest shift of two that pair as many
        ([10, 20], [15, 20], {}),  # a shift pairs no more than none does
    ],
)
def test_code_that_moved_is_one_place(base: list[int], comp: list[int], pairs: dict):
    """Within a function and file, the lines are paired by the shift that pairs the most; a
    place of another function or file is never paired."""
    names = moved_places(
        [f"step (train.py:{n})" for n in base] + ["other (train.py:10)"],
        [f"step (train.py:{n})" for n in comp] + ["other (model.py:11)"],
    )
    expected = {f"step (train.py:{b})": f"step (train.py:{b} -> {c})" for b, c in pairs.items()}
    assert names[0] == expected
    assert names[1] == {
        f"step (train.py:{c})": f"step (train.py:{b} -> {c})" for b, c in pairs.items()
    }


def test_loading_the_plugin_imports_no_pickle():
    """Every command loads every plugin (`rules list` too): pickle waits for a snapshot."""
    probe = "import sys, advisor_plugins.memory_snapshot; print('pickle' in sys.modules)"
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert proc.stdout.strip() == "False", proc.stderr
