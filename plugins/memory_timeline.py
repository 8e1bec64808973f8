"""Reader for the PyTorch profiler's memory timeline exports: `prof.export_memory_timeline()`
to `*.json` / `*.json.gz` (sizes by kind over time) and to `*.raw.json.gz` (the raw events
HTA's MemoryAnalysis reads), from a run profiled with `profile_memory=True`,
`record_shapes=True` and `with_stack=True`.

Unlike an allocator snapshot, the export knows what each tensor is: PyTorch's memory profiler
sorts them into parameters, optimizer state, inputs, temporaries, activations, gradients and
autograd details (and unknown). The export is per device and does not say which.

- `[times, sizes]`: `times` in µs, `sizes[i]` the bytes of each kind after the events at
  `times[i]`, as `[0, parameter, optimizer_state, input, temporary, activation, gradient,
  autograd_detail, unknown]` (torch.profiler._memory_profiler, `_CATEGORY_TO_INDEX` + 1).
- raw: `[time_ns, action, bytes, kind]` per event (kind as above, from 0), `bytes` negative
  for a release; time -1 for tensors alive before the profile.

Both are read a batch at a time (advisor.formats.number_lists): a long run's raw export holds
millions of events, which decoded whole took some ten times the file's size in memory.

PyTorch 2.13 deprecates the export in favour of allocator snapshots (memory_snapshot.py reads
those), which know where in the code memory was allocated but not what it holds.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from advisor.errors import UnreadableInput
from advisor.formats.number_lists import CHUNK_BYTES, NotNumberLists, NumberLists
from advisor.hookspecs import hookimpl
from advisor.lazy import lazy_module
from advisor.model import Profile, ProfileMeta, conform_records

if TYPE_CHECKING:
    import numpy as np
else:
    np = lazy_module("numpy")

KINDS = (
    "parameter",
    "optimizer_state",
    "input",
    "temporary",
    "activation",
    "gradient",
    "autograd_detail",
    "unknown",
)
"""The memory profiler's categories in its export order (None, its last, is unknown)."""
SUFFIXES = (".json", ".json.gz")
HEAD_BYTES = 256
_HEAD = re.compile(rb"^\s*\[\s*\[\s*-?\d+\s*,\s*-?\d+")
"""Both shapes open with a list of whole numbers: times, or a raw event."""
_COLUMNS = ("device", "kind", "at_peak_bytes", "peak_share", "max_bytes")
_SHAPES = "[times, sizes by kind], or [time, action, bytes, kind] events"
_RAW_START = re.compile(rb"\]|\[\s*-?\d+\s*(?:,\s*-?\d+\s*){3}\]\s*(?:,\s*\[\s*-?\d|\])")
"""The raw shape: no event, or a first list of four numbers followed by another such list or
the end (the other shape's first list, its times, is followed by a list of lists)."""
_RAW_HEAD_BYTES = 4096


class MemoryTimelineReader:
    """Reads one memory timeline export into `memory_kinds`: what each kind of tensor held
    at the peak."""

    name = "memory_timeline"
    formats = (
        "PyTorch profiler memory timeline (export_memory_timeline() *.json, *.json.gz, "
        "*.raw.json.gz)",
    )

    def detect(self, path: Path) -> bool:
        """A .json / .json.gz file whose content opens with a list of whole numbers (Chrome
        and Kineto traces open with an object)."""
        path = Path(path)
        if not path.name.lower().endswith(SUFFIXES) or not path.is_file():
            return False
        from advisor.formats.files import read_head  # not for `rules list`

        return _HEAD.match(read_head(path, HEAD_BYTES)) is not None

    def read(self, path: Path) -> list[Profile]:
        path = Path(path)
        peak = read_peak(path)
        meta = ProfileMeta(
            "memory-timeline", str(path), framework="PyTorch", files_read=[str(path)]
        )
        profile = Profile(meta)
        profile.tables["memory_kinds"] = conform_records("memory_kinds", peak.rows(), _COLUMNS)
        return [profile]


@hookimpl
def advisor_readers() -> list[MemoryTimelineReader]:
    return [MemoryTimelineReader()]


def read_peak(path: Path, chunk_bytes: int = CHUNK_BYTES) -> Peak:
    """The peak of either shape, read `chunk_bytes` at a time (memory follows a batch, not
    the file); UnreadableInput when the file is neither shape."""
    from advisor.formats.files import Limits, open_content, reading

    limits = Limits.from_env(path)
    with reading(path), open_content(path, limits) as (content, _raw):
        document = NumberLists(content, chunk_bytes, limits.event_bytes)
        try:
            return _fold(document)
        except NotNumberLists as exc:
            problem = f"not a memory timeline export ({_SHAPES}): {exc}"
            raise UnreadableInput(path, problem) from None


def _fold(document: NumberLists) -> Peak:
    """Either shape's moments into a Peak: the raw events replayed, or the rows of sizes as
    they are (as many as the times before them)."""
    peak = Peak()
    document.open_list()
    if _RAW_START.match(document.head(_RAW_HEAD_BYTES)):
        replay = Replay(peak)
        for events in document.rows(4):
            replay.add(events)
        replay.finish()
    else:
        document.open_list()
        times = sum(len(batch) for batch in document.numbers())
        document.comma()
        document.open_list()
        rows = 0
        for sizes in document.rows(len(KINDS) + 1):
            peak.add(sizes[:, 1:])
            rows += len(sizes)
        document.close_list()
        if rows != times:
            raise NotNumberLists(f"{times} times but {rows} rows of sizes")
    document.end()
    return peak


class Peak:
    """The moment the kinds together held the most (the first such moment) and each kind's
    own highest, over rows of bytes by kind given in time order."""

    def __init__(self) -> None:
        self.total = 0
        self.held: list[int] | None = None  # by kind, at the peak
        self.highest: np.ndarray | None = None

    def add(self, held: np.ndarray) -> None:
        """Rows (moments) of bytes by kind."""
        if not len(held):
            return
        totals = held.sum(axis=1)
        at = int(totals.argmax())
        if self.held is None or totals[at] > self.total:
            self.total, self.held = int(totals[at]), held[at].tolist()
        highest = held.max(axis=0)
        self.highest = highest if self.highest is None else np.maximum(self.highest, highest)

    def rows(self) -> list[dict[str, Any]]:
        """Per kind: its bytes at the peak, its share of the peak, its own highest."""
        if self.held is None or self.highest is None:
            return []
        peak, highest = self.total, self.highest.tolist()
        return [
            {
                "device": "",
                "kind": kind,
                "at_peak_bytes": float(self.held[k]),
                "peak_share": self.held[k] / peak if peak > 0 else None,
                "max_bytes": float(highest[k]),
            }
            for k, kind in enumerate(KINDS)
        ]


class Replay:
    """Raw events added up per kind, batch by batch, into moments: the bytes held after the
    last event of each time (in µs, as the other shape gives them). An event without a time
    (-1: tensors alive before the profile) joins the time before it, or the first time when
    it comes first."""

    def __init__(self, peak: Peak) -> None:
        self.peak = peak
        self.held = np.zeros(len(KINDS), dtype=np.int64)  # after the events so far
        self.at = -1  # their last time (µs); -1 while none had one
        self.seen = False

    def add(self, events: np.ndarray) -> None:
        """A batch of [time_ns, action, bytes, kind] rows."""
        times, delta, kind = events[:, 0], events[:, 2], events[:, 3]
        wrong = (kind < 0) | (kind >= len(KINDS))
        if wrong.any():
            raise NotNumberLists(
                f"an event of kind {kind[wrong][0]}, not one of 0-{len(KINDS) - 1}"
            )
        count = len(events)
        deltas = np.zeros((count, len(KINDS)), dtype=np.int64)
        deltas[np.arange(count), kind] = delta
        held = self.held + np.cumsum(deltas, axis=0)
        timed = np.where(times >= 0, np.arange(count), -1)
        last_timed = np.maximum.accumulate(timed)
        at = np.where(last_timed >= 0, times[np.maximum(last_timed, 0)] // 1000, self.at)
        if self.seen and self.at != -1 and at[0] != self.at:
            self.peak.add(self.held[np.newaxis])  # the batch before ended a moment
        ends = np.flatnonzero((at[1:] != at[:-1]) & (at[:-1] != -1))
        self.peak.add(held[ends])
        self.held, self.at, self.seen = held[-1], int(at[-1]), True

    def finish(self) -> None:
        """The moment the last events end."""
        if self.seen:
            self.peak.add(self.held[np.newaxis])
