"""Garbage-collector settings of a command-line run.

CPython's collector starts a young collection every 700 new container objects and, after
enough of those, walks every object alive. Importing pandas and pyarrow leaves some 60,000
objects alive for the whole run, none of them garbage: the bundled demo spent about 120 ms of
its 1.3 s walking them (measured with gc.callbacks). A run of the command line therefore
collects young objects less often and, once its libraries are imported (`Session.open`,
where every analysis starts), takes what is alive then out of the collector's sight
(`gc.freeze`). Cycles made later are still collected.

Only the command line and its worker processes do this: a notebook or a program that
imports advisor keeps its own collector settings (`freeze_imports` does nothing there).

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
from typing import NoReturn

YOUNG_COLLECTION_EVERY = 2_000
"""New container objects between two young collections (CPython's default: 700). 5,000
saved a little more time but let cyclic garbage holding DataFrames pile up: the peak memory
of a 38 MB Ascend profile rose from 245 to 265 MB; with 2,000 it is 237 MB."""

_command_line = False


def tune_for_command_line() -> None:
    """Collect less often for the rest of this process (a run of advisor, or its worker)."""
    global _command_line
    _command_line = True
    gc.set_threshold(YOUNG_COLLECTION_EVERY, 10, 10)


def freeze_imports() -> None:
    """In a command-line process, import pandas (an analysis needs it) and move every object
    alive now, the imported modules' above all, out of later collections."""
    if not _command_line:
        return
    importlib.import_module("pandas")
    gc.freeze()


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
