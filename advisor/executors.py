"""Where ranks are read: a local pool of processes or the workers of a Dask cluster.

Both are `concurrent.futures.Executor`s, so reading (reading.read_inputs) maps the same function
over the claims whichever runs it; only how the executor is opened and closed differs.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Executor, ProcessPoolExecutor
from contextlib import contextmanager
from multiprocessing import get_context

from advisor.errors import AdvisorError

DASK_EXTRA = "pip install 'dl-perf-advisor[dask]'"


class SchedulerError(AdvisorError):
    """The Dask scheduler asked for cannot be used (dask missing or unreachable)."""


@contextmanager
def process_pool(workers: int) -> Iterator[Executor]:
    """Local worker processes, started with spawn: readers may have started threads
    (pyarrow) that fork would copy in a broken state."""
    with ProcessPoolExecutor(workers, mp_context=get_context("spawn")) as pool:
        yield pool


@contextmanager
def dask_executor(address: str) -> Iterator[Executor]:
    """The workers of the Dask cluster whose scheduler listens at `address` (tcp://...)."""
    try:
        from distributed import Client
    except ImportError:
        raise SchedulerError(f"--scheduler needs dask.distributed: {DASK_EXTRA}") from None
    try:
        client = Client(address, set_as_default=False)
    except (OSError, TimeoutError, ValueError) as exc:
        raise SchedulerError(f"cannot reach the Dask scheduler {address}: {exc}") from None
    with client:
        yield client.get_executor()
