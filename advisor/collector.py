"""Memory settings of a command-line run: the garbage collector's and the C allocator's.

CPython's collector starts a young collection every 700 new container objects and, after
enough of those, walks every object alive. Importing pandas and pyarrow leaves some 60,000
objects alive for the whole run, none of them garbage: the bundled demo spent about 120 ms of
its 1.3 s walking them (measured with gc.callbacks). A run of the command line therefore
collects young objects (and the survivors of young collections) less often, imports pandas
with the collector off and, once its libraries are imported (`Session.open`, where every
analysis starts), takes what is alive then out of the collector's sight (`gc.freeze`), and
does so again once the analysis is done, before its outputs are written (`freeze_survivors`).
Cycles made later are still collected, except in a run of one small input
(`skip_cycles_for`), where collecting them costs more than keeping them until the end.

Only the command line and its worker processes do this: a notebook or a program that
imports advisor keeps its own collector settings (`freeze_imports` does nothing there).

The C allocator is told to keep what numpy and pandas free (`keep_freed_memory`): by
default glibc maps large blocks (a column of a large table) from the operating system one by
one and gives the freed top of its heap back, so each new column of a derived table is fresh
memory that the kernel maps page by page; on a 406 MB Kineto trace that was about a fifth of
the run's CPU time. Kept, the freed blocks are reused. pyarrow, which holds every text column
on pandas 3 and reads the CSVs, is told to allocate from that same heap rather than its own
(mimalloc): what one library frees the other then reuses, where two allocators each kept
their own freed memory (the peak of a 38 MB Ascend profile 242 -> 204 MB, of a 94 MB Kineto
trace 242 -> 206 MB, no slower; benchmarks/README.md, round 19).

For the same reason the command line ends its process without tearing down what is alive
(`end_process`): freeing the modules and objects of pandas, pyarrow and an analysis one by
one took about 55 ms of the bundled demo's 0.8 s, and 15 ms of `advisor rules list`, for
memory the operating system takes back at once anyway.
"""

from __future__ import annotations

import atexit
import gc
import importlib
import os
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import NoReturn

YOUNG_COLLECTION_EVERY = 2_000
"""New container objects between two young collections (CPython's default: 700). 5,000
saved a little more time but let cyclic garbage holding DataFrames pile up: the peak memory
of a 38 MB Ascend profile rose from 245 to 265 MB; with 2,000 it is 237 MB."""

MIDDLE_COLLECTION_AFTER = 40
"""Young collections between two collections of the middle generation (CPython's default:
10), which walk every object that outlived a young collection: a trace's columns and tables
while they are built. Measured side by side with 10 (benchmarks/README.md, round 16):
ascend x50 1.02 -> 0.92 s, ascend x400 3.9 -> 3.8 s, the demo -8 ms; peak memory unchanged
on the mid-size inputs, +1.5% on ascend x400."""

SMALL_RUN_BYTES = 16 * 1024 * 1024
"""A command-line run of a single input up to this size collects no cycles once its
libraries are imported (`skip_cycles_for`)."""

_command_line = False


MALLOC_FROM_HEAP_UP_TO = 32 * 1024 * 1024
"""Blocks up to this size come from glibc's heap, not mapped one by one (its largest
setting; its default starts at 128 KiB)."""
MALLOC_KEEP_FREE = 1024 * 1024 * 1024
"""Free memory at the top of the heap kept for reuse, not given back (default 128 KiB)."""
ARROW_POOL_VARIABLE, ARROW_POOL = "ARROW_DEFAULT_MEMORY_POOL", "system"
"""pyarrow's allocator, read when pyarrow is imported: "system" is the C library's malloc."""
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # mallopt's parameters (malloc.h)


def tune_for_command_line(*, allocator: bool = True) -> None:
    """Collect less often and, with `allocator`, keep freed memory for the rest of this
    process (a run of advisor, or its worker). The command line leaves the allocator to the
    commands that analyse profiles (`keep_freed_memory` before they are imported): the others
    would pay for ctypes (2 ms) and use no memory worth keeping."""
    global _command_line
    _command_line = True
    gc.set_threshold(YOUNG_COLLECTION_EVERY, MIDDLE_COLLECTION_AFTER, 10)
    if allocator:
        keep_freed_memory()


def keep_freed_memory() -> None:
    """Have glibc's allocator serve blocks up to MALLOC_FROM_HEAP_UP_TO from its heap and
    keep up to MALLOC_KEEP_FREE of it free for reuse, and pyarrow allocate from it too
    (unless the user chose its allocator); nothing where the C library is not glibc (mallopt
    missing, or not Linux)."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes  # only here: 2 ms of import that a notebook's advisor never needs

    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    # both set: setting either one ends glibc's own adjustment of the other
    mallopt(_M_MMAP_THRESHOLD, MALLOC_FROM_HEAP_UP_TO)
    mallopt(_M_TRIM_THRESHOLD, MALLOC_KEEP_FREE)
    os.environ.setdefault(ARROW_POOL_VARIABLE, ARROW_POOL)  # inherited by worker processes


def in_command_line() -> bool:
    """Whether this process runs the command line (tune_for_command_line was called)."""
    return _command_line


@contextmanager
def collection_paused() -> Iterator[None]:
    """The cycle collector off while the block runs, as it was after: decoding JSON builds
    millions of small objects, and every few hundred of them (YOUNG_COLLECTION_EVERY in the
    command line) would start a young collection over them all again. In any process (a
    notebook's too): what the block drops is freed by reference counting all the same."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


def freeze_imports() -> None:
    """In a command-line process, import pandas (an analysis needs it) and move every object
    alive now, the imported modules' above all, out of later collections. The collector is
    off while pandas is imported: its young collections then walk objects that all stay
    alive (about 16 of pandas' 245 ms), and the import leaves some 700 objects of garbage,
    which stay with the frozen ones."""
    if not _command_line:
        return
    with collection_paused():
        try:
            importlib.import_module("pandas")
        finally:
            gc.freeze()


def start_worker() -> None:
    """Start a worker process of the command line: tuned as it, pandas imported (and frozen)
    before its first task arrives."""
    tune_for_command_line()
    freeze_imports()


def freeze_survivors() -> None:
    """In a command-line process whose analysis is done, move every object alive now out of
    later collections: the outputs only read the analysis, which lives until the process
    ends, and the collections made while they are written (the trace snippets make tens of
    thousands of events) otherwise walk it again and again: on an 88 MB Kineto trace, three
    middle collections took about 70 ms, 5 ms once it was frozen. Reference counting still
    frees what the outputs drop."""
    if _command_line:
        gc.freeze()


def skip_cycles_for(input_bytes: Callable[[], int]) -> None:
    """In a command-line process analysing one input of at most SMALL_RUN_BYTES (asked of
    `input_bytes` only there), turn the cycle collector off for the rest of the run: its
    young collections cost more than the cycles they free. On the bundled demo, 29
    collections took about 12 ms of 0.65 s, and the cycles left uncollected (about 7,000
    objects) did not raise the peak memory (133 against 136 MB); the process ends without
    freeing them (`end_process`). Reference counting still frees everything else; a larger
    input, or several, keeps collecting."""
    if _command_line and input_bytes() <= SMALL_RUN_BYTES:
        gc.disable()


def end_process(code: int | str | None) -> NoReturn:
    """Leave the command line's process with `code` (SystemExit's meaning: None is 0, text
    is printed and gives 1) without freeing every object first: the exit handlers still run
    (temporary folders, worker pools) and the standard streams are flushed, then the process
    ends. While another thread runs, it may still be writing, so the exit is the usual one."""
    if not isinstance(code, (int, type(None))) or threading.active_count() > 1:
        sys.exit(code)
    atexit._run_exitfuncs()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):  # a reader that closed the pipe, or a closed stream
        pass
    os._exit(code or 0)
