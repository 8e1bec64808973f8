"""CANN 8's merged timeline in `mindstudio_profiler_output/` (seed 000, issue 19):
`msprof_{ts}.json` and `step_trace_{ts}.json` written by `msprof --export=on`, with or without
the summary CSVs.

No public export of this layout was found, so the test data is the real CANN timeline of
tests/fixtures/real/cann_timeline (device_0/timeline/*.json, mindinsight's test data) laid out
the way the seed's directory tree shows: the same files, renamed to the merged names. The
per-device layout of the same files is the reference.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest
from conftest import FIXTURE_DIR

from advisor.errors import UnreadableInput
from advisor.model import contract_problems
from advisor_plugins import msprof

REAL = FIXTURE_DIR / "real" / "cann_timeline" / "PROF_000001_20230818142704322_COJGGGCANRMICFBC"
SMALL = FIXTURE_DIR / "msprof" / "PROF_000001_20260105093000123_SMALLCASE"
MERGED = "mindstudio_profiler_output"
STAMP = "20230818142704"


def merged_export(tmp_path: Path, devices: tuple[int, ...] = (0,)) -> Path:
    """A PROF folder whose only export is the merged timeline of the real device_0 files."""
    root = tmp_path / REAL.name
    (root / MERGED).mkdir(parents=True)
    for device in devices:
        (root / f"device_{device}").mkdir()
        shutil.copy(REAL / "device_0" / "info.json.0", root / f"device_{device}" / "info.json.0")
    for kind in ("msprof", "step_trace"):
        shutil.copy(
            REAL / "device_0/timeline" / f"{kind}_0_2_1.json",
            root / MERGED / f"{kind}_{STAMP}.json",
        )
    return root


def read(path: Path) -> list:
    profiles = msprof.MsprofReader().read(path)
    assert all(contract_problems(p) == [] for p in profiles)
    return profiles


def test_the_merged_timeline_alone_is_read_like_the_per_device_one(tmp_path: Path) -> None:
    (merged,) = read(merged_export(tmp_path))
    (per_device,) = read(REAL)
    assert merged.meta.device_id == "0" and merged.meta.source_format == "msprof-timeline"
    assert {f"{MERGED}/msprof_{STAMP}.json", f"{MERGED}/step_trace_{STAMP}.json"} <= set(
        merged.meta.files_read
    )
    assert [w.problem for w in merged.warnings] == []
    pd.testing.assert_frame_equal(merged.tables["steps"], per_device.tables["steps"])
    # tasks: the same compute tasks (the per-device export adds hccl_*.json's collectives)
    compute = [
        t.loc[t["category"] == "compute", ["name", "start_us", "duration_us"]].reset_index(
            drop=True
        )
        for t in (merged.tables["device_ops"], per_device.tables["device_ops"])
    ]
    pd.testing.assert_frame_equal(*compute)
    assert len(compute[0]) > 100
    assert "host_ops" in merged.tables  # the CANN API calls only msprof_*.json records


def test_the_csvs_are_enough_and_the_merged_timeline_is_not_parsed(tmp_path: Path) -> None:
    """op_summary and step_trace CSVs give tasks and steps: a 100 MB msprof_*.json beside them
    is not parsed again for the same tasks."""
    root = shutil.copytree(SMALL, tmp_path / SMALL.name)
    shutil.copy(
        REAL / "device_0/timeline/msprof_0_2_1.json", root / MERGED / f"msprof_{STAMP}.json"
    )
    (profile,) = read(root)
    assert not any(f.endswith(".json") and MERGED in f for f in profile.meta.files_read)
    assert profile.meta.source_format == "msprof-summary"


def test_a_merged_timeline_of_several_devices_is_named_not_guessed(tmp_path: Path) -> None:
    """The merged trace does not say which device a task ran on: with two device folders and
    nothing else, the export is unreadable in one line giving the reason, and nothing is
    attributed to a device."""
    root = merged_export(tmp_path, devices=(0, 1))
    with pytest.raises(UnreadableInput) as raised:
        read(root)
    assert raised.value.problem == (
        f"no readable msprof export ({MERGED}: its timeline JSONs hold 2 devices without "
        "naming them: not read (export per device, or read device_*/timeline))"
    )


def test_without_a_device_folder_the_device_is_said_to_be_assumed(tmp_path: Path) -> None:
    root = merged_export(tmp_path, devices=())
    (profile,) = read(root)
    assert profile.meta.device_id == "0"
    assert [(Path(w.file).name, w.problem) for w in profile.warnings] == [
        (MERGED, "no device_* folder names the device: read as device 0")
    ]
    assert len(profile.tables["steps"]) == 10
