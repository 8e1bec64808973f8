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

PyTorch 2.13 deprecates the export in favour of allocator snapshots (memory_snapshot.py reads
those), which know where in the code memory was allocated but not what it holds.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import orjson

from advisor.errors import UnreadableInput
from advisor.formats.files import read_bytes, read_head
from advisor.hookspecs import hookimpl
from advisor.model import Profile, ProfileMeta, conform_records

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
        return _HEAD.match(read_head(path, HEAD_BYTES)) is not None

    def read(self, path: Path) -> list[Profile]:
        path = Path(path)
        try:
            document = orjson.loads(read_bytes(path))
        except orjson.JSONDecodeError as exc:
            raise UnreadableInput(path, f"not JSON: {exc}") from None
        times, sizes = _timeline(path, document)
        meta = ProfileMeta(
            "memory-timeline", str(path), framework="PyTorch", files_read=[str(path)]
        )
        profile = Profile(meta)
        profile.tables["memory_kinds"] = conform_records(
            "memory_kinds", _kind_rows(times, sizes), _COLUMNS
        )
        return [profile]


@hookimpl
def advisor_readers() -> list[MemoryTimelineReader]:
    return [MemoryTimelineReader()]


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _timeline(path: Path, document: Any) -> tuple[list[int], list[list[int]]]:
    """(times, bytes of each kind after each time) of either shape; UnreadableInput when the
    document is neither."""
    width = len(KINDS) + 1
    if (
        isinstance(document, list)
        and len(document) == 2
        and all(isinstance(part, list) for part in document)
        and len(document[0]) == len(document[1])
        and all(_whole(t) for t in document[0])
        and all(
            isinstance(row, list) and len(row) == width and all(_whole(v) for v in row)
            for row in document[1]
        )
    ):
        return document[0], [row[1:] for row in document[1]]
    if isinstance(document, list) and all(
        isinstance(e, list) and len(e) == 4 and all(_whole(v) for v in e) for e in document
    ):
        return _replay(path, document)
    raise UnreadableInput(
        path,
        "a JSON list that is not a memory timeline export ([times, sizes by kind], or "
        "[time, action, bytes, kind] events)",
    )


def _replay(path: Path, events: list[list[int]]) -> tuple[list[int], list[list[int]]]:
    """The raw events added up per kind, one row per distinct time (in µs, as the other shape
    gives them; the tensors alive before the profile at its first time)."""
    held = [0] * len(KINDS)
    times: list[int] = []
    sizes: list[list[int]] = []
    first = min((t for t, *_ in events if t >= 0), default=0)
    for t, _action, delta, kind in events:
        if not 0 <= kind < len(KINDS):
            raise UnreadableInput(path, f"an event of kind {kind}, not one of 0-{len(KINDS) - 1}")
        held[kind] += delta
        at = (first if t < 0 else t) // 1000
        if times and times[-1] == at:
            sizes[-1] = held.copy()
        else:
            times.append(at)
            sizes.append(held.copy())
    return times, sizes


def _kind_rows(times: list[int], sizes: list[list[int]]) -> list[dict[str, Any]]:
    """Per kind: its bytes at the peak (the first moment the kinds together held the most),
    its share of that peak and its own highest."""
    if not sizes:
        return []
    totals = [sum(row) for row in sizes]
    peak_at = max(range(len(totals)), key=totals.__getitem__)
    peak = totals[peak_at]
    return [
        {
            "device": "",
            "kind": kind,
            "at_peak_bytes": float(sizes[peak_at][k]),
            "peak_share": sizes[peak_at][k] / peak if peak > 0 else None,
            "max_bytes": float(max(row[k] for row in sizes)),
        }
        for k, kind in enumerate(KINDS)
    ]
