"""Broken inputs: every reader, hundreds of ways (tests/corpus), never a traceback.

For each case `advisor run` must end with 0 (the rest analysed, with warnings) or 3 (an input
could not be read), say which file and what is wrong on one line, keep analysing the profile's
other files and ranks, and leave the input byte for byte as it was. The cases run in-process
through click's CliRunner: a subprocess per case would take minutes.
"""

from __future__ import annotations

import builtins
import copy
import functools
import hashlib
import io
import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from clirunner import separate_runner
from corpus.make_cases import BASES, Case, can_deny_reading, cases, unreadable_case

import advisor.ruleset
from advisor.cli import main
from advisor.plugin_manager import PluginHost

pytestmark = pytest.mark.slow

CASES = cases()
EXIT_OK, EXIT_UNREADABLE = 0, 3


@pytest.fixture(scope="module", autouse=True)
def rules_once() -> None:
    """Load the shipped rules once for the module: every case would otherwise spend most of
    its time re-validating the same YAML, which is not what these tests are about."""
    original = advisor.ruleset.load_ruleset
    shipped = original(PluginHost(), [])
    patch = pytest.MonkeyPatch()
    patch.setattr(
        advisor.ruleset,
        "load_ruleset",
        lambda host, paths, tables=None: (
            copy.deepcopy(shipped) if not paths else original(host, paths, tables)
        ),
    )
    yield
    patch.undo()


def digest(root: Path) -> dict[str, str]:
    """Every entry under root: contents and mode of files, link targets (never followed)."""
    out = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        if path.is_symlink():
            out[rel] = "link:" + os.readlink(path)
        elif path.is_file():
            mode = f"{path.stat().st_mode:o}"
            try:
                out[rel] = mode + ":" + hashlib.sha256(path.read_bytes()).hexdigest()
            except PermissionError:  # the unreadable-file case, when not root
                out[rel] = mode
        else:
            out[rel] = "dir"
    return out


def baseline(base: str, scratch: Path) -> dict[str, dict]:
    """Reports of the unbroken profile, by report file name."""
    return _baselines(base, str(scratch))


@functools.cache
def _baselines(base: str, scratch: str) -> dict[str, dict]:
    root = BASES[base].copy(Path(scratch) / f"baseline-{base}")
    out = Path(scratch) / f"baseline-{base}-out"
    result = CliRunner().invoke(main, ["run", str(root), "-o", str(out), "--format", "json"])
    assert result.exit_code == EXIT_OK, result.output
    return {p.name: json.loads(p.read_text()) for p in out.glob("prof_rule_*.json")}


def run_case(root: Path, out: Path) -> tuple[int, str, str, dict[str, dict]]:
    result = separate_runner().invoke(main, ["run", str(root), "-o", str(out), "--format", "json"])
    reports = {p.name: json.loads(p.read_text()) for p in out.glob("prof_rule_*.json")}
    return result.exit_code, result.stdout, result.stderr, reports


def check(case: Case, root: Path, scratch: Path) -> None:
    before = digest(root)
    code, stdout, stderr, reports = run_case(root, scratch / f"{case.id}-out")
    shown = f"exit {code}\n--- stdout\n{stdout[-1500:]}\n--- stderr\n{stderr[-3000:]}"
    assert "Traceback" not in stdout + stderr, shown
    assert code in (EXIT_OK, EXIT_UNREADABLE), shown
    lines = stderr.splitlines()
    assert all(line.startswith("advisor: ") for line in lines), shown  # one line per message
    # a reader that raised something other than UnreadableInput is a crash, even when caught
    assert not any("failed: " in line or "internal error" in line for line in lines), shown
    name = Path(case.target).name
    naming = [line for line in lines if name in line]
    if case.loud or code == EXIT_UNREADABLE:
        # formats recognised by content: a file that no longer looks like one is not claimed
        unclaimed = [
            line for line in lines if "nothing advisor can read" in line and str(root) in line
        ]
        assert naming or unclaimed, f"no message names {name}\n{shown}"
        assert all(line.split(name, 1)[1].strip(" :'\")") for line in naming), shown
    if code == EXIT_UNREADABLE and not reports:
        assert lines[-1] == "advisor: no profile could be read", shown
    assert digest(root) == before, "the input was changed"
    expected = baseline(case.base, scratch)
    if BASES[case.base].ranks:  # the other ranks' reports are all still there
        broken = [
            n for n, r in expected.items() if any(name in f for f in r["profile"]["files_read"])
        ]
        assert set(expected) - set(broken) - {"prof_rule_cluster.json"} <= set(reports), shown
        return
    if reports:  # partly read: every other file of the profile still read

        def read(found: dict[str, dict]) -> set[str]:
            return {f for r in found.values() for f in r["profile"]["files_read"]}

        others = {f for f in read(expected) if not f.endswith(name)}
        assert others <= read(reports), f"no longer read: {others - read(reports)}\n{shown}"


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("corpus")


def test_corpus_is_large() -> None:
    assert len(CASES) >= 200
    assert len({c.id for c in CASES}) == len(CASES)
    assert {c.base for c in CASES} == set(BASES)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_broken_input(case: Case, scratch: Path) -> None:
    root = case.build(scratch)
    if root is None:
        pytest.skip(f"{case.kind} does not apply to {case.target}")
    check(case, root, scratch)


UNREADABLE = [
    unreadable_case("ascend_pt", "rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv"),
    unreadable_case("kineto_ranks", "ddp_rank1.pt.trace.json.gz"),
    unreadable_case(
        "msprof",
        "PROF_000001_20260105093000123_SMALLCASE/"
        "mindstudio_profiler_output/op_summary_20260105093512.csv",
    ),
    unreadable_case("mindspore", "run_2_profiler/framework_raw_1.csv"),
    unreadable_case("aoe", "good/aoe_result_opat_20260105103000123_pid4242.json"),
]


@pytest.mark.parametrize("case", UNREADABLE, ids=[c.id for c in UNREADABLE])
def test_unreadable_permissions(case: Case, scratch: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """chmod 0 where it works; as root (which reads anything) the kernel's answer, EACCES, is
    given by `open` for that one file instead, so the same code paths are tested."""
    root = case.build(scratch)
    assert root is not None
    target = (root / case.target).resolve()
    if can_deny_reading():
        os.chmod(target, 0)
    else:
        real_open = builtins.open

        def denying_open(file, *args, **kwargs):  # noqa: ANN001, ANN202 (open's signature)
            if isinstance(file, (str, os.PathLike)) and Path(file).resolve() == target:
                raise PermissionError(13, "Permission denied", str(file))
            return real_open(file, *args, **kwargs)

        monkeypatch.setattr(builtins, "open", denying_open)
        monkeypatch.setattr(io, "open", denying_open)
    try:
        check(case, root, scratch)
    finally:
        os.chmod(target, 0o644)


# ---------------------------------------------------------------------------------------------
# memory: a large trace under an address-space limit

LIMIT_SCRIPT = """
import resource, sys
limit = int(sys.argv[1])
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
from advisor.cli import main
sys.argv = ["advisor", "run", *sys.argv[2:]]
main()
"""


def write_trace(path: Path, events: int) -> None:
    """A Kineto-like trace of `events` CPU ops, several tens of MB."""
    with open(path, "w", encoding="utf-8") as fh:
        fh.write('{"schemaVersion": 1, "traceEvents": [')
        for i in range(events):
            fh.write(
                ("" if i == 0 else ",")
                + json.dumps(
                    {
                        "ph": "X",
                        "cat": "cpu_op",
                        "name": f"aten::op_{i % 97}",
                        "pid": 1,
                        "tid": 1 + i % 4,
                        "ts": 1_000_000 + i * 10,
                        "dur": 7,
                        "args": {"External id": i, "Sequence number": i, "pad": "p" * 40},
                    }
                )
            )
        fh.write('], "traceName": "big"}')


def run_limited(args: list[str], limit: int, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", LIMIT_SCRIPT, str(limit), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )


def baseline_memory(cwd: Path) -> int:
    """Address space advisor needs to start and read a tiny profile (imports, arrow pools)."""
    small = BASES["kineto_cpu"].sources[0]
    for limit in (1 << 30, 2 << 30, 3 << 30, 4 << 30, 6 << 30):
        done = run_limited(
            [str(small), "-o", str(cwd / "small-out"), "-q", "--format", "json"], limit, cwd
        )
        if done.returncode == 0:
            return limit
    pytest.skip("advisor does not start under a 6 GiB address-space limit here")


@pytest.mark.skipif(not hasattr(resource, "RLIMIT_AS"), reason="no RLIMIT_AS on this system")
def test_large_trace_under_memory_limit(tmp_path: Path) -> None:
    """A 60 MB trace with a limit that leaves far less than the dicts of every event would
    need: advisor streams it, or refuses on one line; never a MemoryError traceback."""
    trace = tmp_path / "big.pt.trace.json"
    write_trace(trace, 300_000)
    size = trace.stat().st_size
    assert size > 40 << 20
    before = hashlib.sha256(trace.read_bytes()).hexdigest()
    limit = baseline_memory(tmp_path) + 4 * size  # whole-file dicts take 5-8x the file
    done = run_limited(
        [str(trace), "-o", str(tmp_path / "out"), "--format", "json"], limit, tmp_path
    )
    output = done.stdout + done.stderr
    assert "Traceback" not in output and "MemoryError" not in output, output[-3000:]
    assert done.returncode in (EXIT_OK, EXIT_UNREADABLE), output[-3000:]
    if done.returncode == EXIT_UNREADABLE:
        assert any("big.pt.trace.json" in line for line in done.stderr.splitlines()), output
    else:
        report = json.loads(next((tmp_path / "out").glob("prof_rule_*.json")).read_text())
        assert report["profile"]["tables"]["host_ops"] == 300_000
    assert hashlib.sha256(trace.read_bytes()).hexdigest() == before


def test_memory_error_reading_whole_file_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where a file is read at once (CSV, small JSON), running out of memory is reported as
    that file being too large, not as a crash."""
    from advisor.errors import UnreadableInput
    from advisor.formats.csv_text import read_csv_strings
    from advisor.formats.files import load_json, read_bytes

    csv_file = tmp_path / "op_summary_20260105093512.csv"
    csv_file.write_text("a,b\n1,2\n")
    json_file = tmp_path / "info.json.0"
    json_file.write_text('{"a": 1}')

    def no_memory(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        raise MemoryError

    import pandas as pd

    monkeypatch.setattr("advisor.formats.csv_text.io.StringIO", no_memory)  # a small file
    with pytest.raises(UnreadableInput, match="op_summary_20260105093512.csv: .*memory"):
        read_csv_strings(csv_file)
    monkeypatch.setattr("advisor.formats.csv_text.SMALL_CSV_BYTES", -1)  # a large one
    monkeypatch.setattr(pd, "read_csv", no_memory)
    monkeypatch.setattr("pyarrow.csv.read_csv", no_memory)  # what advisor uses on pandas 2
    with pytest.raises(UnreadableInput, match="op_summary_20260105093512.csv: .*memory"):
        read_csv_strings(csv_file)
    monkeypatch.setattr("advisor.formats.files.orjson.loads", no_memory)
    with pytest.raises(UnreadableInput, match="info.json.0: .*memory"):
        load_json(json_file)
    monkeypatch.setattr("advisor.formats.files.gzip.GzipFile.read", no_memory)
    gz = tmp_path / "x.json.gz"
    gz.write_bytes(__import__("gzip").compress(b"[]"))
    with pytest.raises(UnreadableInput, match="x.json.gz: .*memory"):
        read_bytes(gz)
