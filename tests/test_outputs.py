"""What `advisor run` leaves in its output folder when it is interrupted, re-run, or given
profiles whose content would make unsafe file names.

tests/test_cli.py checks what the outputs contain; this module checks how they are written:
a report is complete or absent (never half), a re-run replaces files cleanly and removes the
earlier run's outputs it does not rewrite (and nothing else), and no profile string or
manifest entry decides where a file goes or which file is removed.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterable
from pathlib import Path
from types import SimpleNamespace

import pytest
from click.testing import CliRunner
from conftest import DEMO, FIXTURE_DIR

import advisor
import advisor.render.html
from advisor.cli import main
from advisor.compare import compare
from advisor.outputs import (
    MANIFEST,
    MAX_LABEL,
    OutputFolderError,
    compare_stdout_document,
    output_dir,
    read_manifest,
    timestamped,
    tune_ops_file,
    write_compare_outputs,
    write_files,
    write_outputs,
)
from advisor.outputs import report_names as _report_names

KINETO = FIXTURE_DIR / "kineto_own/healthy.pt.trace.json.gz"
OWN = FIXTURE_DIR / "kineto_own"
OUTPUTS = {"prof_rule_0.json", "report.html", "operator_tuning_file.cfg", MANIFEST}
UNSAFE = (
    "../../escape",
    "/abs/path",
    "a/../../b",
    "nul\x00byte",
    "ctl\x01\x1b[31m\r\n\t",
    "..",
    ".hidden",
    " ",
    "x" * 250,
)


def run(*args: object) -> int:
    return CliRunner().invoke(main, ["run", *map(str, args), "-q", "--lang", "en"]).exit_code


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under `folder` (the trace snippets in traces/ too), by relative name."""
    return {
        p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()
    }


def top_level(names: Iterable[str]) -> set[str]:
    """The names of a snapshot outside the traces/ folder, which is checked on its own."""
    return {n for n in names if "/" not in n}


def check_name(name: str) -> None:
    """A plain file name: no separators, control characters, hidden dot, or excess length."""
    assert name.startswith("prof_rule_") and name.endswith(".json")
    assert "/" not in name and "\\" not in name
    assert name.isprintable() and " " not in name
    assert len(name.encode()) <= len("prof_rule_.json") + MAX_LABEL + 8


def fail_render(*_args: object, **_kwargs: object) -> str:
    raise RuntimeError("renderer crashed")


def interrupt_renaming_to(name: str, monkeypatch) -> None:
    """Ctrl-C at the moment a finished temp file would be renamed to `name`."""
    real_replace = os.replace

    def interrupted(src: str | Path, dst: str | Path) -> None:
        if Path(dst).name == name:
            raise KeyboardInterrupt
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", interrupted)


@pytest.mark.parametrize("where", ["render", "write", "rename"])
def test_interrupted_run_leaves_the_earlier_report_intact(
    tmp_path: Path, monkeypatch, request: pytest.FixtureRequest, where: str
) -> None:
    out = tmp_path / "out"
    assert run(DEMO, "-o", out) == 0
    before = snapshot(out)
    assert top_level(before) == OUTPUTS
    assert any(n.startswith("traces/finding-") for n in before)
    (out / "report.html").write_text("<p>earlier report</p>", encoding="utf-8")
    before = snapshot(out)

    if where == "render":
        monkeypatch.setattr(advisor.render.html, "render_html", fail_render)
    elif where == "write":  # the disk fills up while the temp file is being written
        request.getfixturevalue("full_disk")
    else:  # Ctrl-C after the temp file is complete, before it takes the report's name
        interrupt_renaming_to("report.html", monkeypatch)

    assert run(DEMO, "-o", out) != 0
    after = snapshot(out)
    assert after["report.html"] == before["report.html"], "the earlier report was damaged"
    assert set(after) == set(before), "temp files were left behind"
    if where == "render":
        assert after == before, "nothing should change when rendering fails"


def test_rerun_into_the_same_folder_replaces_the_reports(tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert run(DEMO, "-o", out) == 0
    first = snapshot(out)
    for name in first:
        (out / name).write_text("stale", encoding="utf-8")
    assert run(DEMO, "-o", out) == 0
    second = snapshot(out)
    assert set(second) == set(first) and top_level(second) == OUTPUTS
    assert all(content != b"stale" for content in second.values())
    assert {k: len(v) for k, v in second.items()} == {k: len(v) for k, v in first.items()}


def test_reports_get_the_permissions_of_any_new_file(tmp_path: Path) -> None:
    """Shared with colleagues and CI artefact servers: not the 0600 of a private temp file."""
    old = os.umask(0o022)
    try:
        assert run(DEMO, "-o", tmp_path) == 0
    finally:
        os.umask(old)
    modes = {n: (tmp_path / n).stat().st_mode & 0o777 for n in snapshot(tmp_path)}
    assert top_level(modes) == OUTPUTS and set(modes.values()) == {0o644}
    assert (tmp_path / "traces").stat().st_mode & 0o777 == 0o755


@pytest.mark.parametrize("key", ["device_id", "rank", "path"])
def test_report_names_never_leave_the_folder(key: str) -> None:
    """Built-in readers only produce numeric device ids and ranks; a third-party reader's
    meta may hold anything."""
    metas = []
    for text in UNSAFE:
        meta = SimpleNamespace(
            device_id=None,
            rank=None,
            source_format="kineto",
            path=f"/data/{text.replace('/', '_').replace(chr(0), '_')}.json",
        )
        if key == "device_id":
            meta.device_id = text
        elif key == "rank":
            meta.rank = text  # a plugin's rank is meant to be an int; names must not rely on it
        metas.append(meta)
    result = SimpleNamespace(
        analyses=[SimpleNamespace(profile=SimpleNamespace(meta=m)) for m in metas]
    )
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
    (written,) = (p for p in out.iterdir() if p.name != MANIFEST)
    check_name(written.name)
    assert "evil" in written.name


# --- the manifest: stale outputs of an earlier run ------------------------------------------


def ddp4_ranks(folder: Path, ranks: range) -> Path:
    """Copies of the 4-rank gloo DDP traces (tests/fixtures/kineto_own) for `ranks`."""
    folder.mkdir(parents=True, exist_ok=True)
    for rank in ranks:
        shutil.copy(OWN / f"ddp4_rank{rank}.pt.trace.json.gz", folder)
    return folder


def manifest(folder: Path) -> dict:
    return json.loads((folder / MANIFEST).read_text(encoding="utf-8"))


def test_fewer_ranks_remove_the_earlier_ranks_reports_and_keep_the_users_files(
    tmp_path: Path,
) -> None:
    out = tmp_path / "out"
    assert run(ddp4_ranks(tmp_path / "four", range(4)), "-o", out, "--format", "json,html") == 0
    # CPU ranks have no device id: their reports are named by rank, and say so
    assert {f"prof_rule_rank{r}.json" for r in range(4)} <= set(snapshot(out))
    (out / "notes.txt").write_text("my notes", encoding="utf-8")
    (out / "prof_rule_7.json").write_text("{}", encoding="utf-8")  # not written by advisor

    assert run(ddp4_ranks(tmp_path / "two", range(2)), "-o", out, "--format", "json") == 0
    assert set(snapshot(out)) == {
        "prof_rule_rank0.json",
        "prof_rule_rank1.json",
        "prof_rule_cluster.json",
        "notes.txt",
        "prof_rule_7.json",
        MANIFEST,
    }
    assert (out / "notes.txt").read_text(encoding="utf-8") == "my notes"
    assert manifest(out)["outputs"] == {
        "run": ["prof_rule_rank0.json", "prof_rule_rank1.json", "prof_rule_cluster.json"]
    }


def test_tuning_file_removed_when_no_operator_is_advised_any_more(tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert run(DEMO, "-o", out) == 0
    assert (out / "operator_tuning_file.cfg").exists()
    assert run(DEMO, "-o", out, "--select", "STEP-001") == 0
    # STEP-001 is finding 1 now: the snippets of the first run's other findings are stale
    assert set(snapshot(out)) == {
        "prof_rule_0.json",
        "report.html",
        "traces/finding-1.json",
        MANIFEST,
    }


HOSTILE_ENTRIES = [
    "../victim.txt",
    "../../etc/passwd",
    "{passwd}",
    "{victim}",
    "sub/x.json",
    "..",
    ".",
    "",
    ".hidden",
    "link.json",
    "folder.json",
    MANIFEST,
    "a\\..\\..\\victim.txt",
    7,
    None,
    ["x"],
]


def test_hostile_manifest_entries_are_never_removed(tmp_path: Path) -> None:
    """Targets live under tmp_path (a stand-in etc/passwd included), never the real ones."""
    out = tmp_path / "a" / "out"
    (out / "sub").mkdir(parents=True)
    (out / "folder.json").mkdir()
    victim = tmp_path / "a" / "victim.txt"
    victim.write_text("keep me", encoding="utf-8")
    passwd = tmp_path / "etc" / "passwd"
    passwd.parent.mkdir()
    passwd.write_text("root:x:0:0", encoding="utf-8")
    (out / "sub/x.json").write_text("keep", encoding="utf-8")
    (out / ".hidden").write_text("keep", encoding="utf-8")
    (out / "link.json").symlink_to(victim)
    entries = [
        str(victim) if e == "{victim}" else str(passwd) if e == "{passwd}" else e
        for e in HOSTILE_ENTRIES
    ]
    (out / MANIFEST).write_text(
        json.dumps({"outputs": {"run": entries, "compare": entries}}), encoding="utf-8"
    )
    assert read_manifest(out) == {
        "run": ["link.json", "folder.json"],
        "compare": ["link.json", "folder.json"],
    }

    assert run(DEMO, "-o", out, "--format", "json") == 0
    assert victim.read_text(encoding="utf-8") == "keep me"
    assert (out / "link.json").is_symlink() and (out / "folder.json").is_dir()
    assert (out / "sub/x.json").exists() and (out / ".hidden").exists()
    assert passwd.read_text(encoding="utf-8") == "root:x:0:0"
    assert manifest(out)["outputs"]["run"] == ["prof_rule_0.json", "operator_tuning_file.cfg"]


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"{not json",
        b"\xff\xfe",
        b"[1, 2]",
        b"null",
        b'{"outputs": "prof_rule_0.json"}',
        b'{"outputs": {"run": "report.html"}}',
        b'{"outputs": {"run": {"report.html": 1}}}',
        b"[" * 100_000,
    ],
)
def test_corrupt_manifest_is_ignored(tmp_path: Path, content: bytes) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "report.html").write_text("a user's own page", encoding="utf-8")
    (out / MANIFEST).write_bytes(content)
    assert run(DEMO, "-o", out, "--format", "json") == 0
    assert (out / "report.html").read_text(encoding="utf-8") == "a user's own page"
    assert manifest(out)["outputs"] == {"run": ["prof_rule_0.json", "operator_tuning_file.cfg"]}


def test_manifest_as_a_link_is_not_followed(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text(json.dumps({"outputs": {"run": ["notes.txt"]}}), encoding="utf-8")
    (out / "notes.txt").write_text("mine", encoding="utf-8")
    (out / MANIFEST).symlink_to(elsewhere)
    assert run(DEMO, "-o", out, "--format", "json") == 0
    assert (out / "notes.txt").exists()
    assert not (out / MANIFEST).is_symlink()  # replaced by advisor's own, the target untouched
    assert json.loads(elsewhere.read_text(encoding="utf-8")) == {"outputs": {"run": ["notes.txt"]}}


def test_interrupted_run_is_still_cleaned_up_by_the_next(tmp_path: Path, monkeypatch) -> None:
    out = tmp_path / "out"
    write_files(out, {"a.json": "1"})
    interrupt_renaming_to("c.json", monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        write_files(out, {"b.json": "2", "c.json": "3"})
    monkeypatch.undo()
    assert (out / "b.json").exists()  # written before the interruption, already recorded
    assert write_files(out, {"d.json": "4"}) == [out / "d.json"]
    assert set(snapshot(out)) == {"d.json", MANIFEST}


def test_run_and_compare_into_one_folder_keep_each_others_outputs(tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert run(DEMO, "-o", out, "--format", "json") == 0
    base, slow = OWN / "compare_base.pt.trace.json.gz", OWN / "compare_slow.pt.trace.json.gz"
    compare = CliRunner().invoke(
        main, ["compare", str(base), str(slow), "-o", str(out), "-q", "--format", "json,html"]
    )
    assert compare.exit_code == 0, compare.output
    assert {"prof_rule_0.json", "compare.json", "compare.html"} <= set(snapshot(out))
    again = CliRunner().invoke(
        main, ["compare", str(base), str(slow), "-o", str(out), "-q", "--format", "json"]
    )
    assert again.exit_code == 0, again.output
    assert set(snapshot(out)) == {
        "prof_rule_0.json",
        "operator_tuning_file.cfg",
        "compare.json",
        "prof_rule_compare.json",
        MANIFEST,
    }


def test_write_outputs_api(tmp_path: Path) -> None:
    result = advisor.analyze(DEMO)
    written = write_outputs(result, tmp_path / "api", ["json"])
    assert [p.name for p in written] == ["prof_rule_0.json", "operator_tuning_file.cfg"]
    assert write_outputs(result, tmp_path / "none", ["text"]) == []
    assert not (tmp_path / "none").exists()


def test_tune_ops_file_api() -> None:
    result = advisor.analyze(DEMO)
    assert json.loads(tune_ops_file(result)) == {"tune_ops_name": result.tune_ops()}
    assert result.tune_ops()
    assert tune_ops_file(advisor.analyze(DEMO, select=["STEP-001"])) is None


def test_output_dir_api_refuses_a_folder_inside_an_input(tmp_path: Path) -> None:
    profile = tmp_path / "profile"
    profile.mkdir()
    assert output_dir(tmp_path / "out", [profile]) == tmp_path / "out"
    with pytest.raises(OutputFolderError, match="advisor never writes into a profile"):
        output_dir(profile / "report", [profile])
    assert timestamped("advisor-report").startswith("advisor-report-2")


def test_write_compare_outputs_api(tmp_path: Path) -> None:
    result = compare(OWN / "compare_base.pt.trace.json.gz", OWN / "compare_slow.pt.trace.json.gz")
    written = write_compare_outputs(result, tmp_path / "cmp")
    assert [p.name for p in written] == [
        "compare.json",
        "prof_rule_compare.json",
        "compare.html",
        "performance_comparison_result.xlsx",
    ]
    assert read_manifest(tmp_path / "cmp") == {"compare": [p.name for p in written]}
    document = compare_stdout_document(result)
    assert json.loads((tmp_path / "cmp/compare.json").read_text("utf-8")) == document["compare"]
    assert write_compare_outputs(result, tmp_path / "cmp", ["xlsx"]) == [
        tmp_path / "cmp/performance_comparison_result.xlsx"
    ]
    assert set(snapshot(tmp_path / "cmp")) == {"performance_comparison_result.xlsx", MANIFEST}
