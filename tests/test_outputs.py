"""What `advisor run` leaves in its output folder when it is interrupted, re-run, or given
profiles whose content would make unsafe file names.

tests/test_cli.py checks what the outputs contain; this module checks how they are written:
a report is complete or absent (never half), a re-run replaces files cleanly, and no profile
string decides where a file goes.
"""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

import advisor.render.html
from advisor.cli import MAX_LABEL, _report_names, main

ROOT = Path(__file__).parents[1]
DEMO = ROOT / "advisor/examples/PROF_000001_20260105100000000_DEMO"
KINETO = ROOT / "tests/fixtures/kineto_own/healthy.pt.trace.json.gz"
OUTPUTS = {"prof_rule_0.json", "report.html", "operator_tuning_file.cfg"}
UNSAFE = ("../../escape", "/abs/path", "a/../../b", "nul\x00byte", "ctl\x01\x1b[31m\r\n\t",
          "..", ".hidden", " ", "x" * 250)


def run(*args: object) -> int:
    return CliRunner().invoke(main, ["run", *map(str, args), "-q", "--lang", "en"]).exit_code


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in folder.iterdir()}


def check_name(name: str) -> None:
    """A plain file name: no separators, control characters, hidden dot, or excess length."""
    assert name.startswith("prof_rule_") and name.endswith(".json")
    assert "/" not in name and "\\" not in name
    assert name.isprintable() and " " not in name
    assert len(name.encode()) <= len("prof_rule_.json") + MAX_LABEL + 8


def fail_render(*_args: object, **_kwargs: object) -> str:
    raise RuntimeError("renderer crashed")


@pytest.mark.parametrize("where", ["render", "write", "rename"])
def test_interrupted_run_leaves_the_earlier_report_intact(tmp_path: Path, monkeypatch,
                                                          where: str) -> None:
    out = tmp_path / "out"
    assert run(DEMO, "-o", out) == 0
    before = snapshot(out)
    assert set(before) == OUTPUTS
    (out / "report.html").write_text("<p>earlier report</p>", encoding="utf-8")
    before = snapshot(out)

    if where == "render":
        monkeypatch.setattr(advisor.render.html, "render_html", fail_render)
    elif where == "write":  # the disk fills up while the temp file is being written
        def disk_full(fd: int) -> None:
            raise OSError(errno.ENOSPC, "No space left on device")
        monkeypatch.setattr(os, "fsync", disk_full)
    else:  # Ctrl-C after the temp file is complete, before it takes the report's name
        real_replace = os.replace

        def interrupted(src: str | Path, dst: str | Path) -> None:
            if Path(dst).name == "report.html":
                raise KeyboardInterrupt
            real_replace(src, dst)
        monkeypatch.setattr(os, "replace", interrupted)

    assert run(DEMO, "-o", out) != 0
    after = snapshot(out)
    assert after["report.html"] == before["report.html"], "the earlier report was damaged"
    assert set(after) == OUTPUTS, "temp files were left behind"
    if where == "render":
        assert after == before, "nothing should change when rendering fails"


def test_rerun_into_the_same_folder_replaces_the_reports(tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert run(DEMO, "-o", out) == 0
    first = snapshot(out)
    for path in out.iterdir():
        path.write_text("stale", encoding="utf-8")
    assert run(DEMO, "-o", out) == 0
    second = snapshot(out)
    assert set(second) == OUTPUTS
    assert all(content != b"stale" for content in second.values())
    assert {k: len(v) for k, v in second.items()} == {k: len(v) for k, v in first.items()}


def test_reports_get_the_permissions_of_any_new_file(tmp_path: Path) -> None:
    """Shared with colleagues and CI artefact servers: not the 0600 of a private temp file."""
    old = os.umask(0o022)
    try:
        assert run(DEMO, "-o", tmp_path) == 0
    finally:
        os.umask(old)
    assert {p.name: p.stat().st_mode & 0o777 for p in tmp_path.iterdir()} == dict.fromkeys(
        OUTPUTS, 0o644)


@pytest.mark.parametrize("key", ["device_id", "rank", "path"])
def test_report_names_never_leave_the_folder(key: str) -> None:
    """Built-in readers only produce numeric device ids and ranks; a third-party reader's
    meta may hold anything."""
    metas = []
    for text in UNSAFE:
        meta = SimpleNamespace(device_id=None, rank=None, source_format="kineto",
                               path=f"/data/{text.replace('/', '_').replace(chr(0), '_')}.json")
        if key == "device_id":
            meta.device_id = text
        elif key == "rank":
            meta.rank = text  # a plugin's rank is meant to be an int; names must not rely on it
        metas.append(meta)
    result = SimpleNamespace(analyses=[SimpleNamespace(profile=SimpleNamespace(meta=m))
                                       for m in metas])
    names = _report_names(result)
    assert len(set(names)) == len(UNSAFE)
    for name in names:
        check_name(name)


def test_unsafe_file_name_is_sanitized(tmp_path: Path) -> None:
    trace = tmp_path / "in" / "..\x01\x1b[31m<evil> \r\n.pt.trace.json.gz"
    trace.parent.mkdir()
    shutil.copyfile(KINETO, trace)
    out = tmp_path / "out"
    assert run(trace, "-o", out, "--format", "json") == 0
    (written,) = out.iterdir()
    check_name(written.name)
    assert "evil" in written.name
