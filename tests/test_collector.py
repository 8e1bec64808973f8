"""The garbage collector of a command-line run (advisor.collector): tuned and frozen in the
`advisor` process, left alone where a program calls advisor in its own process; and the end of
that process, which skips the teardown but nothing a user could notice."""

from __future__ import annotations

import gc
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import DEMO, FIXTURE_DIR

from advisor.cli import main
from advisor.collector import (
    ARROW_POOL,
    ARROW_POOL_VARIABLE,
    MIDDLE_COLLECTION_AFTER,
    SMALL_RUN_BYTES,
    YOUNG_COLLECTION_EVERY,
)
from advisor.reading import input_bytes

PROBE = """
import atexit, gc, json, sys
from advisor.cli import entry
out, inputs = sys.argv[1], sys.argv[2:]
sys.argv = ["advisor", "run", *inputs, "-o", out, "--format", "json", "--quiet"]
collecting_at_import = []
class Watch:  # notes whether the collector runs while pandas is imported
    def find_spec(self, name, path=None, target=None):
        if name == "pandas":
            collecting_at_import.append(gc.isenabled())
        return None
sys.meta_path.insert(0, Watch())
import advisor.cli.run, advisor.session
frozen_at = {}
def noting(name, function):
    def call(*args, **kwargs):
        if name == "write":
            frozen_at[name] = gc.get_freeze_count()
        result = function(*args, **kwargs)
        frozen_at.setdefault(name, gc.get_freeze_count())
        return result
    return call
advisor.session.freeze_imports = noting("imports", advisor.session.freeze_imports)
advisor.cli.run.write_outputs = noting("write", advisor.cli.run.write_outputs)
atexit.register(
    lambda: print(json.dumps({
        "threshold": gc.get_threshold(),
        "frozen": gc.get_freeze_count(),
        "frozen_at": frozen_at,
        "enabled": gc.isenabled(),
        "collecting_at_import": collecting_at_import,
        "arrow_pool": __import__("pyarrow").default_memory_pool().backend_name,
    }))
)
entry()
"""


@pytest.mark.parametrize("several", [False, True], ids=["one small input", "two inputs"])
def test_the_advisor_process_collects_less_often_and_freezes_its_imports(
    tmp_path: Path, several: bool
) -> None:
    out = tmp_path / "out"
    inputs = [DEMO, FIXTURE_DIR / "kineto_own" / "compare_base.pt.trace.json.gz"][: 1 + several]
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(out), *map(str, inputs)],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    state = json.loads(done.stdout.strip().splitlines()[-1])  # printed at exit
    assert state["threshold"][:2] == [YOUNG_COLLECTION_EVERY, MIDDLE_COLLECTION_AFTER]
    # pandas, numpy and pyarrow alone leave tens of thousands of objects alive
    assert state["frozen"] > 20_000
    # and what the analysis left, before the outputs are written (freeze_survivors)
    assert state["frozen_at"]["write"] > state["frozen_at"]["imports"] > 20_000
    # no collection while pandas is imported; after it, cycles are collected again unless
    # the run analyses one small input (skip_cycles_for)
    assert state["collecting_at_import"] == [False]
    assert state["enabled"] is several
    assert input_bytes(DEMO) <= SMALL_RUN_BYTES
    # pyarrow allocates from the C library's heap that numpy uses (keep_freed_memory)
    assert state["arrow_pool"] == (ARROW_POOL if _glibc() else "mimalloc")
    assert (out / "prof_rule_0.json").is_file()


def test_cycles_are_skipped_for_one_small_input_of_the_command_line_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import advisor.collector as collector

    assert gc.isenabled()
    try:
        collector.skip_cycles_for(lambda: 0)  # a program calling advisor: its collector is its own
        assert gc.isenabled()
        monkeypatch.setattr(collector, "_command_line", True)
        collector.skip_cycles_for(lambda: SMALL_RUN_BYTES + 1)
        assert gc.isenabled()
        collector.skip_cycles_for(lambda: SMALL_RUN_BYTES)
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_a_paused_collection_ends_as_the_collector_was() -> None:
    """collection_paused turns the collector off for its block only, and leaves it as it
    found it: on again after an error, off where the caller had turned it off."""
    from advisor.collector import collection_paused

    assert gc.isenabled()
    try:
        with pytest.raises(ValueError), collection_paused():
            assert not gc.isenabled()
            raise ValueError("a decoding error")
        assert gc.isenabled()
        gc.disable()
        with collection_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_what_the_analysis_left_is_frozen_in_the_command_line_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import advisor.collector as collector

    frozen = gc.get_freeze_count()
    survivor = [object() for _ in range(10)]  # tracked container alive when frozen
    try:
        collector.freeze_survivors()  # a program calling advisor: its collector is its own
        assert gc.get_freeze_count() == frozen
        monkeypatch.setattr(collector, "_command_line", True)
        collector.freeze_survivors()
        assert gc.get_freeze_count() > frozen
        assert not any(survivor is o for o in gc.get_objects())  # out of every collection
    finally:
        gc.unfreeze()


def test_a_program_calling_the_command_keeps_its_collector(tmp_path: Path) -> None:
    threshold, frozen, enabled = gc.get_threshold(), gc.get_freeze_count(), gc.isenabled()
    result = CliRunner().invoke(
        main, ["run", str(DEMO), "-o", str(tmp_path / "out"), "--format", "json", "--quiet"]
    )
    assert result.exit_code == 0, result.output
    assert gc.get_threshold() == threshold
    assert gc.get_freeze_count() == frozen
    assert gc.isenabled() == enabled


def _advisor(*args: str, probe: str = "") -> subprocess.CompletedProcess[str]:
    """`python -m advisor ARGS` as a user runs it, after `probe` (Python run first), with
    buffered standard streams whatever this process has."""
    code = f"{probe}\nimport sys\nsys.argv = ['advisor', *sys.argv[1:]]\nimport advisor.__main__\n"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=300, env=env
    )


def test_the_process_ends_with_the_commands_code_and_all_its_output(tmp_path: Path) -> None:
    # the JSON report on stdout is ~30 KB: lost in part if the buffered stream were not flushed
    done = _advisor("run", str(DEMO), "-o", "-", "--quiet")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["data"]
    failed = _advisor("run", str(DEMO), "-o", str(tmp_path / "a"), "-q", "--fail-on", "low")
    assert failed.returncode == 1
    assert failed.stderr.startswith("advisor: --fail-on low:")
    missing = _advisor("run", str(tmp_path / "nothing"), "-o", str(tmp_path / "b"), "-q")
    assert missing.returncode == 3
    assert "no such file or directory" in missing.stderr


def test_the_process_flushes_its_streams_and_runs_exit_handlers(tmp_path: Path) -> None:
    handler = tmp_path / "handler"
    probe = f"""
import atexit, pathlib, sys
atexit.register(pathlib.Path({str(handler)!r}).write_text, "ran")
# stdout is a pipe: this stays in its buffer until flushed
atexit.register(sys.stdout.write, "written at exit\\n")
"""
    done = _advisor("--version", probe=probe)
    assert done.returncode == 0
    assert done.stdout.startswith("advisor")
    assert done.stdout.endswith("written at exit\n")
    assert handler.read_text() == "ran"


def test_the_process_waits_for_a_thread_still_at_work(tmp_path: Path) -> None:
    thread = tmp_path / "thread"
    probe = f"""
import pathlib, threading, time
def late():
    time.sleep(0.5)
    pathlib.Path({str(thread)!r}).write_text("done")
threading.Thread(target=late).start()
"""
    done = _advisor("--version", probe=probe)
    assert done.returncode == 0
    assert thread.read_text() == "done"


_FRESH_PAGES = """
import resource, sys
from advisor.collector import keep_freed_memory
if sys.argv[1] == "kept":
    keep_freed_memory()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(10):  # a table's columns made, then freed together
    blocks = [bytearray(8 * 1024 * 1024) for _ in range(4)]  # zero-filled: every page written
    del blocks
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _glibc() -> bool:
    return sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"


@pytest.mark.skipif(not _glibc(), reason="glibc's allocator")
@pytest.mark.parametrize("chosen", [None, "jemalloc"], ids=["default", "the user's choice"])
def test_pyarrow_allocates_from_the_heap_numpy_uses_unless_the_user_chose(
    chosen: str | None,
) -> None:
    probe = (
        "from advisor.collector import keep_freed_memory; keep_freed_memory(); "
        "import pyarrow; print(pyarrow.default_memory_pool().backend_name)"
    )
    env = {k: v for k, v in os.environ.items() if k != ARROW_POOL_VARIABLE}
    if chosen is not None:
        env[ARROW_POOL_VARIABLE] = chosen
    run = [sys.executable, "-c", probe]
    done = subprocess.run(run, capture_output=True, text=True, check=True, env=env)
    assert done.stdout.split()[-1] == (chosen or ARROW_POOL)


@pytest.mark.skipif(not _glibc(), reason="glibc's allocator")
def test_freed_blocks_are_reused_instead_of_mapped_again() -> None:
    """Ten times four 8 MiB blocks allocated, then freed together: by default glibc hands
    the freed top of its heap back each time, so every round maps its 32 MiB again page by
    page (~8,000 page faults); kept, the first round's pages serve all ten."""

    def faults(mode: str) -> int:
        run = [sys.executable, "-c", _FRESH_PAGES, mode]
        return int(subprocess.run(run, capture_output=True, text=True, check=True).stdout)

    default, kept = faults("default"), faults("kept")
    assert default > 10 * 5_000
    assert kept < default / 5
