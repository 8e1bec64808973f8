"""Reader for PyTorch profiler (Kineto) Chrome traces: `*.pt.trace.json[.gz]`, one per rank.

A trace is one JSON object: header keys (`schemaVersion`, `deviceProperties`,
`distributedInfo`, `baseTimeNanoseconds`, ...) and `traceEvents`, a list of Chrome trace
events whose `cat` says what they are. Current (`cpu_op`, `kernel`, `gpu_memcpy`...) and 2021
legacy (`Operator`, `Kernel`, `Memcpy`, `Runtime`, string tids) categories are both read.

`ts` and `dur` are microseconds: relative to `baseTimeNanoseconds` when the trace has it,
absolute epoch microseconds otherwise. Every table is rebased to the earliest timed event
(float64 µs); the epoch time of that origin is kept in `meta.extra["time_origin_us"]`, and its
`ts` as the file writes it in `meta.extra["trace_ts_origin"]` (trace snippets read the file
back by it).

The file is decoded in batches (`advisor.formats.stream.EventStream`); each batch is walked
once and freed before the next is decoded. Batches are decoded with msgspec into `TraceEvent`
structs (`advisor.formats.chrome_trace`) that hold only the fields the walk reads (the others
are skipped, never built); a batch the stream gives as dicts (the last one, NaN/Infinity, an
odd shape) is converted to them first. The
walk appends to compact per-table columns: numbers in `array('d')` / `array('q')`, names as
codes into one list of distinct names per category. Each table is built once from its columns
at the end, so memory follows the kept columns, not the file.

Modules: `reader` reads one trace file into its profile (header, time origin, tables);
`walk` is the pass over the events; `tables` builds the tables from its columns; `categories`
says what an event is; `names` shortens kernel names to operator types; `values` parses JSON
values; `sniff` looks at a file's first bytes.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from advisor.hookspecs import hookimpl
from advisor.model import Profile

from .hints import COLLECT, COLLECT_ZH
from .sniff import BLANK, KINETO_MARKERS, read_head

if TYPE_CHECKING:
    from advisor.formats.read_ahead import TraceFold


class KinetoReader:
    """Reads one PyTorch profiler trace file (Kineto Chrome trace JSON, optionally gzipped)."""

    name = "kineto"
    formats = ("PyTorch profiler / Kineto trace (*.pt.trace.json[.gz])",)
    collect = COLLECT
    """How to make the PyTorch profiler record what a rule lacks (see Reader.collect)."""
    collect_zh = COLLECT_ZH

    def detect(self, path: Path) -> bool:
        """`*.pt.trace.json[.gz]` by name; other `*.json[.gz]` by their first 64 KB."""
        path = Path(path)
        name = path.name.lower()
        if not name.endswith((".json", ".json.gz")) or not path.is_file():
            return False
        if name.endswith((".pt.trace.json", ".pt.trace.json.gz")):
            return True
        if name.endswith(".chrome_timeline.json"):
            return False  # MegEngine's profiler timeline (read by the megengine reader)
        head = read_head(path)
        if not head.lstrip(b" \t\r\n\xef\xbb\xbf").startswith(b"{"):
            return False  # Ascend trace_view.json and msprof timelines are bare lists
        if b'"schemaVersion"' in head:
            return True
        return b'"traceEvents"' in head and any(m in head for m in KINETO_MARKERS)

    def read(self, path: Path) -> list[Profile]:
        from .reader import TraceReader  # the reader loads when there is something to read

        return [TraceReader(Path(path)).read()]

    def trace_folds(self, path: Path) -> list[TraceFold]:
        """The trace `read` folds, for advisor to fold ahead while it prepares (not a bare
        list of events, which `read` refuses)."""
        from advisor.formats.read_ahead import TraceFold  # only where a trace is

        from . import reader
        from .parts import walk_events
        from .walk import DECODER

        path = Path(path)
        if not path.is_file() or read_head(path).lstrip(BLANK).startswith(b"["):
            return []
        return [TraceFold(path, DECODER.decode, walk_events, reader.CHUNK_BYTES)]


@hookimpl
def advisor_readers() -> list[KinetoReader]:
    return [KinetoReader()]
