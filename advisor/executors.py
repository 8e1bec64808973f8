"""Where ranks are read: a local pool of processes or the workers of a Dask cluster.

Both are `concurrent.futures.Executor`s, so reading (reading.map_claims) maps the same function
over the claims whichever runs it; only how the executor is opened and closed differs. Each
opener also says how many tasks the executor runs at once, so that callers keep only a few
more than that in flight (`ordered_map`): results that nobody has consumed yet are memory.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Executor, Future
from contextlib import contextmanager
from typing import TypeVar

from advisor.errors import AdvisorError

DASK_EXTRA = "pip install 'dl-perf-advisor[dask]'"
IN_FLIGHT_PER_SLOT = 2
"""Tasks submitted per task the executor runs at once: one running, one queued behind it."""

T = TypeVar("T")
R = TypeVar("R")


class SchedulerError(AdvisorError):
    """The Dask scheduler asked for cannot be used (dask missing or unreachable)."""


@contextmanager
def process_pool(workers: int) -> Iterator[tuple[Executor, int]]:
    """Local worker processes, started with spawn: readers may have started threads
    (pyarrow) that fork would copy in a broken state. Yields the pool and `workers`.
    The processes start at once and import pandas before their first task
    (collector.start_worker), so their start (about half a second) runs while the caller
    still prepares its first tasks (a session opening) instead of after. They collect garbage
    as the command line does. (multiprocessing is imported here: a run of one rank never
    needs it.)"""
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import get_context

    from advisor.collector import start_worker

    with ProcessPoolExecutor(
        workers, mp_context=get_context("spawn"), initializer=start_worker
    ) as pool:
        for _ in range(workers):  # a task starts a process while none is idle (3.9: all)
            pool.submit(os.getpid)
        yield pool, workers


@contextmanager
def dask_executor(address: str) -> Iterator[tuple[Executor, int]]:
    """The workers of the Dask cluster whose scheduler listens at `address` (tcp://...), and
    how many tasks they run at once (their threads, at least 1)."""
    try:
        from distributed import Client
    except ImportError:
        raise SchedulerError(f"--scheduler needs dask.distributed: {DASK_EXTRA}") from None
    try:
        _check_listening(address)
        client = Client(address, set_as_default=False)
    except (OSError, TimeoutError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        raise SchedulerError(f"cannot reach the Dask scheduler {address}: {reason}") from None
    with client:
        yield client.get_executor(), max(1, sum(client.nthreads().values()))


def _check_listening(address: str) -> None:
    """Raise OSError at once when nothing accepts a TCP connection at a tcp:// or tls://
    address. A Client would retry until its connect timeout (30 s by default) and, failing,
    leave its event-loop thread running in the caller's process (a notebook's, each retry).
    Other transports are left to the Client."""
    import socket

    import dask
    from dask.utils import parse_timedelta
    from distributed.comm import parse_address
    from distributed.comm.addressing import parse_host_port

    scheme, location = parse_address(address, strict=False)
    if scheme not in ("tcp", "tls"):
        return
    host, port = parse_host_port(location)
    timeout = parse_timedelta(dask.config.get("distributed.comm.timeouts.connect"), "seconds")
    with socket.create_connection((host, port), timeout=timeout):
        pass


def ordered_map(
    executor: Executor, fn: Callable[[T], R], items: Iterable[T], slots: int
) -> Iterator[R]:
    """`fn` over `items` on `executor`, results in the items' order, with at most
    IN_FLIGHT_PER_SLOT × `slots` items submitted and not yet consumed (Executor.map submits
    them all at once, so finished results would pile up while the caller is busy). Items
    not started when the caller stops early are cancelled."""
    pending: deque[Future[R]] = deque()
    window = max(1, IN_FLIGHT_PER_SLOT * slots)
    try:
        for item in items:
            pending.append(executor.submit(fn, item))
            if len(pending) >= window:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    finally:
        for future in pending:
            future.cancel()
