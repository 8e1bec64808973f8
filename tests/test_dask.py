"""`--scheduler`: the ranks are read on a Dask cluster and the analysis equals the local one."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import FIXTURE_DIR

import advisor
from advisor.api import AnalysisResult
from advisor.cli import main

pytestmark = pytest.mark.integration

distributed = pytest.importorskip("distributed")  # installed by the test extra ([dask])

OWN = FIXTURE_DIR / "kineto_own"


CLUSTER = """
import sys
import distributed
with distributed.LocalCluster(
    n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None
) as cluster:
    print(cluster.scheduler_address, flush=True)
    sys.stdin.read()  # until the tests close it
"""


@pytest.fixture(scope="module")
def scheduler():
    """The address of a two-worker LocalCluster run by a process of its own, as a user's
    cluster is: the threads that manage its worker processes then never live in the test
    process (on Python 3.9 one of them once kept pytest from exiting after every test had
    passed). The process is stopped at the end of the module, killed if it does not stop."""
    cluster = subprocess.Popen(
        [sys.executable, "-c", CLUSTER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert cluster.stdin is not None and cluster.stdout is not None
    try:
        address = cluster.stdout.readline().strip()
        assert address.startswith("tcp://"), f"the cluster did not start: {address!r}"
        yield address
    finally:
        cluster.stdin.close()
        try:
            cluster.wait(timeout=60)
        except subprocess.TimeoutExpired:
            cluster.kill()
            cluster.wait()


@pytest.fixture
def ranks(tmp_path: Path) -> Path:
    """The own DDP traces (the 4-rank run when present), copied: fixtures stay untouched."""
    traces = sorted(OWN.glob("ddp4_rank*.pt.trace.json.gz")) or sorted(
        OWN.glob("ddp_rank*.pt.trace.json.gz")
    )
    folder = tmp_path / "ranks"
    folder.mkdir()
    for trace in traces:
        shutil.copy(trace, folder)
    return folder


def outcome(result: AnalysisResult) -> list[tuple]:
    return [(f.rule.id, f.message, f.impact_us) for f in result.findings]


def test_dask_reading_equals_local_reading(scheduler, ranks):
    local = advisor.analyze(ranks, jobs=1)
    remote = advisor.analyze(ranks, scheduler=scheduler)
    assert not local.input_errors and not remote.input_errors
    assert outcome(remote) == outcome(local)
    assert local.analyses[-1].profile.meta.source_format == "cluster"
    assert remote.analyses[-1].tables["ranks"].equals(local.analyses[-1].tables["ranks"])
    assert [a.profile.meta.rank for a in remote.analyses] == [
        a.profile.meta.rank for a in local.analyses
    ]


def test_cli_scheduler_option(scheduler, ranks, tmp_path):
    result = CliRunner().invoke(
        main,
        [
            "run",
            str(ranks),
            "--scheduler",
            scheduler,
            "--format",
            "json",
            "-o",
            str(tmp_path / "out"),
        ],
    )
    assert result.exit_code == 0, result.output
    assert (tmp_path / "out/prof_rule_cluster.json").is_file()


def test_cli_scheduler_without_dask_says_how_to_install(ranks, monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)  # import fails as if not installed
    result = CliRunner().invoke(main, ["run", str(ranks), "--scheduler", "tcp://127.0.0.1:1"])
    assert result.exit_code == 2
    (line,) = result.output.strip().splitlines()
    assert "pip install 'dl-perf-advisor[dask]'" in line


def test_unreachable_scheduler_is_one_line(ranks):
    """Nothing listens at the address: one line at once (a Client would retry for its connect
    timeout, 30 s by default), and no event-loop thread left running in this process."""
    import socket
    import threading

    with socket.socket() as probe:  # a port nothing listens at once it is closed
        probe.bind(("127.0.0.1", 0))
        address = f"tcp://127.0.0.1:{probe.getsockname()[1]}"
    before = set(threading.enumerate())
    started = time.monotonic()
    result = CliRunner().invoke(main, ["run", str(ranks), "--scheduler", address])
    assert result.exit_code == 2, result.output
    (line,) = result.output.strip().splitlines()
    assert line.endswith(f"cannot reach the Dask scheduler {address}: Connection refused")
    assert time.monotonic() - started < 10
    assert [t.name for t in set(threading.enumerate()) - before if t.is_alive()] == []
