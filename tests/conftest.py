"""What every test module shares: where the fixtures are, and how to run a quick subset.

Fixture paths are defined here once (test modules import them: `from conftest import
FIXTURE_DIR`), so moving a fixture folder is a one-line change. Every fixture lives in this
repository (tests/fixtures, advisor/examples), so a clone without anything beside it passes.

`python -m pytest --quick` leaves out the tests marked `slow` (seconds each, or a whole
corpus) and `integration` (they build and install packages, start a browser, a process pool
or a Dask cluster); the full run is the README's test command.
"""

from __future__ import annotations

import errno
import faulthandler
import importlib.util
import os
import shutil
import sys
import tempfile
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

T = TypeVar("T")

ROOT = Path(__file__).resolve().parents[1]
FIXTURE_DIR = ROOT / "tests" / "fixtures"
REAL = FIXTURE_DIR / "real"
"""Genuine profiler output from public projects (see its PROVENANCE.md)."""
DEMO = ROOT / "advisor" / "examples" / "PROF_000001_20260105100000000_DEMO"
"""The bundled example profile the README runs."""


def load_benchmark(name: str) -> Any:
    """A script of benchmarks/ imported as a module (the folder is no package), so that its
    tests call its functions on small inputs."""
    path = ROOT / "benchmarks" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"{name}_benchmark", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def traced_peak(read: Callable[[], T]) -> tuple[T, int]:
    """What `read()` returns, and the peak of memory traced while it ran (tracemalloc): a
    reader's memory, told apart from the file it reads."""
    tracemalloc.start()
    try:
        return read(), tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--quick", action="store_true", help="leave out the tests marked slow or integration"
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.getoption("--quick"):
        return
    left_out = [
        i for i in items if i.get_closest_marker("slow") or i.get_closest_marker("integration")
    ]
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        items[:] = [i for i in items if i not in left_out]


_CACHE_DIR = pytest.StashKey[str]()


def pytest_configure(config: pytest.Config) -> None:
    """The rule cache of the tests' runs (subprocesses and collection included) goes to a
    temporary folder, never the developer's ~/.cache; it is shared, so most runs load warm."""
    config.stash[_CACHE_DIR] = tempfile.mkdtemp(prefix="advisor-test-cache-")
    os.environ["ADVISOR_CACHE_DIR"] = config.stash[_CACHE_DIR]


EXIT_GRACE_ENV, EXIT_GRACE_S = "ADVISOR_TEST_EXIT_GRACE_S", 120.0
"""Seconds the test process may take to end once the tests are over."""


def pytest_unconfigure(config: pytest.Config) -> None:
    if _CACHE_DIR in config.stash:
        os.environ.pop("ADVISOR_CACHE_DIR", None)
        shutil.rmtree(config.stash[_CACHE_DIR], ignore_errors=True)
    # Once (Python 3.9, CI) the process did not end after every test had passed: a thread was
    # reading a pipe whose both ends it held. Should that happen again, every thread's stack
    # is printed and the process ends with status 1: a failure that shows its cause, not a
    # CI run that never ends.
    grace = float(os.environ.get(EXIT_GRACE_ENV) or EXIT_GRACE_S)
    faulthandler.dump_traceback_later(grace, exit=True, file=sys.__stderr__)


@pytest.fixture
def user_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty folder as advisor's cache for this test (ADVISOR_CACHE_DIR), the cache on."""
    folder = tmp_path / "cache"
    monkeypatch.setenv("ADVISOR_CACHE_DIR", str(folder))
    monkeypatch.delenv("ADVISOR_NO_CACHE", raising=False)
    return folder


@pytest.fixture
def blocked_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """ADVISOR_CACHE_DIR naming a file ("not a folder"): no cache can be made there."""
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("ADVISOR_CACHE_DIR", str(blocker))
    monkeypatch.delenv("ADVISOR_NO_CACHE", raising=False)
    return blocker


class _FillingFile:
    """A new file on a disk that fills up: half of the first write lands, then ENOSPC."""

    def __init__(self, handle: Any) -> None:
        self._handle = handle

    def __enter__(self) -> _FillingFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self._handle.close()

    def write(self, data: bytes) -> int:
        self._handle.write(data[: len(data) // 2])
        raise OSError(errno.ENOSPC, "No space left on device")


@pytest.fixture
def full_disk(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every file created new (mode "x", as advisor writes its outputs' temp files) fills the
    disk while it is written."""
    real_open = Path.open

    def filling_open(self: Path, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        handle = real_open(self, mode, *args, **kwargs)
        return _FillingFile(handle) if "x" in mode else handle

    monkeypatch.setattr(Path, "open", filling_open)
