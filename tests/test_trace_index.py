"""The trace index (advisor/formats/trace_index.py): cutting findings' windows decodes only
the batches of a trace that can hold their events, with exactly the snippets of a pass over
the whole file.

The readers note each batch's byte span (EventStream.spans) and times; the snippets of real
traces read in small batches, sequentially and in parts, shuffled so that every batch spans
the whole trace, with unreadable times and after the file changed, are compared with the
snippets of the whole file, and the index is checked to have been used where it can be.
"""

from __future__ import annotations

import gzip
import io
import json
import math
import os
import random
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
from conftest import REAL

import advisor
import advisor.trace_cuts
from advisor.formats import parallel
from advisor.formats.stream import EventStream, array_start
from advisor.formats.trace_index import MARGIN_US, UNBOUNDED, BatchTimes, TraceIndex, build, key
from advisor.traces import profile_snippets

KINETO = REAL / "kineto/timeline_analysis__sampled_rank-0.json.gz"
KINETO_BASE = REAL / "kineto/amd_trace__mi250_minitoy_train_ROCm6_2_kineto.json.gz"
ASCEND_PT = REAL / "ascend_pt/rank0_ascend_pt"


# ---------------------------------------------------------------------------------------------
# The stream's spans


@pytest.mark.parametrize("bom", [False, True], ids=["plain", "bom"])
def test_each_span_holds_exactly_its_batch(tmp_path: Path, bom: bool) -> None:
    doc = json.loads(gzip.decompress(KINETO.read_bytes()))
    path = tmp_path / "trace.json"
    path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + json.dumps(doc, indent=1).encode())
    stream = EventStream(path, chunk_bytes=32 * 1024)
    batches = list(stream)
    data = path.read_bytes()
    assert len(batches) > 5 and len(stream.spans) == len(batches)
    for (start, end), batch in zip(stream.spans[:-1], batches[:-1]):
        assert end is not None and orjson.loads(b"[" + data[start:end] + b"]") == batch
    start, end = stream.spans[-1]
    assert end is None
    prefix = array_start(data[: 1 << 20])
    assert prefix is not None
    (last,) = EventStream(path, span=(start, None), prefix=prefix[0])
    assert last == batches[-1]
    assert sum(len(b) for b in batches) == len(doc["traceEvents"])


def test_a_gz_file_spans_its_inflated_content() -> None:
    """A .gz file's spans lie in its inflated bytes: each holds its batch, and a stream given
    the content standing at a span's start reads that batch back (as the snippets do)."""
    stream = EventStream(KINETO, chunk_bytes=32 * 1024)
    batches = list(stream)
    data = gzip.decompress(KINETO.read_bytes())
    assert len(batches) > 5 and len(stream.spans) == len(batches)
    for (start, end), batch in zip(stream.spans[:-1], batches[:-1]):
        assert end is not None and orjson.loads(b"[" + data[start:end] + b"]") == batch
    head = array_start(data[: 1 << 20])
    assert head is not None
    for k in (0, 3, len(batches) - 1):
        span = stream.spans[k]
        content = io.BytesIO(data)
        content.seek(span[0])
        part = EventStream(KINETO, chunk_bytes=1 << 20, span=span, prefix=head[0], content=content)
        assert list(part) == [batches[k]]


# ---------------------------------------------------------------------------------------------
# What the readers note of each batch


def events(*items: dict) -> bytes:
    return json.dumps(list(items)).encode()


X = {"ph": "X", "name": "op", "cat": "cpu_op", "pid": 1, "tid": 1}


@pytest.mark.parametrize("reader", ["kineto", "ascend"])
def test_readers_note_each_batch_first_start_and_last_end(reader: str) -> None:
    """Ends count (an early event lasting long ends the batch late), metadata names lanes,
    and an event whose time the reader cannot read makes its batch unbounded."""
    if reader == "kineto":
        from advisor_plugins.kineto.walk import DECODER, EventWalk

        state: Any = EventWalk()
        add = state.walk
    else:
        from advisor.formats.trace_columns import DECODER, TraceColumns

        state = TraceColumns()
        add = state.add
    meta = {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "main"}}
    add(DECODER.decode(events({**X, "ts": 50, "dur": 5}, {**X, "ts": 10, "dur": 500})))
    add(DECODER.decode(events(meta, {**X, "ts": "7.5", "dur": "2"})))
    add(DECODER.decode(events(meta)))
    add(DECODER.decode(events({**X, "ts": 1, "dur": 1}, {**X, "ts": "soon", "dur": 1})))
    add(DECODER.decode(events({**X, "ts": 1, "dur": -1})))
    assert state.batch_times == [
        BatchTimes(10, 510, False),
        BatchTimes(7.5, 9.5, True),
        BatchTimes(math.inf, -math.inf, True),
        UNBOUNDED,
        UNBOUNDED,
    ]


# ---------------------------------------------------------------------------------------------
# Which batches a window takes


def index_of(path: Path, times: list[BatchTimes]) -> TraceIndex:
    spans = [(100 * k + 1, 100 * k + 99) for k in range(len(times) - 1)]
    spans.append((100 * (len(times) - 1) + 1, None))
    index = build(path, spans, times)
    assert index is not None
    return index


def test_windows_take_the_batches_they_overlap_joined(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_bytes(b"x" * 1000)
    times = [
        BatchTimes(0, 100, True),  # names lanes: always
        BatchTimes(100, 200),
        BatchTimes(200, 300),
        UNBOUNDED,  # an unreadable time: always
        BatchTimes(400, 500),
        BatchTimes(500, 600),
        BatchTimes(math.inf, -math.inf),  # no complete event
    ]
    index = index_of(path, times)
    origin = 1000.0  # windows are µs after the origin, batches on the file's clock
    assert index.parts(path, origin, [(-850, -820)]) == [(1, 199), (301, 399)]
    assert index.parts(path, origin, [(-750, -650)]) == [(1, 99), (201, 399)]
    assert index.parts(path, origin, [(-850, -550)]) == [(1, 499)]
    assert index.parts(path, origin, [(-450, -420), (-300, -250)]) == [
        (1, 99),
        (301, 399),
        (501, 599),
    ]
    # a window touching a batch within the margin still takes it, past it not
    assert index.parts(path, origin, [(-400 + MARGIN_US / 2, -350)]) == [
        (1, 99),
        (301, 399),
        (501, 599),
    ]
    assert index.parts(path, origin, [(-400 + 2 * MARGIN_US, -350)]) == [(1, 99), (301, 399)]


def test_an_index_of_a_changed_file_is_not_used(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_bytes(b"x" * 1000)
    index = index_of(path, [BatchTimes(0, 100, True), BatchTimes(100, 200)])
    assert index.parts(path, 0.0, [(0, 10)]) == [(1, 99)]
    path.write_bytes(b"y" * 1001)
    assert index.parts(path, 0.0, [(0, 10)]) is None
    path.unlink()
    assert index.parts(path, 0.0, [(0, 10)]) is None


def test_notes_that_do_not_pair_with_the_spans_give_no_index(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_bytes(b"[]")
    assert build(path, [], []) is None
    assert build(path, [(1, None)], [BatchTimes(), BatchTimes()]) is None


# ---------------------------------------------------------------------------------------------
# Snippets: through the index, exactly those of the whole file


@dataclass
class Spy:
    """What `_indexed_parts` gave for each file cut: the bytes of its content taken, and the
    content's size (a .gz file's inflated)."""

    taken: list[tuple[int, int]]


@pytest.fixture
def spy(monkeypatch: pytest.MonkeyPatch) -> Spy:
    seen = Spy([])
    original = advisor.trace_cuts._indexed_parts

    def counting(path: Path, *args: Any) -> Any:
        result = original(path, *args)
        data = path.read_bytes()
        size = len(gzip.decompress(data) if path.suffix == ".gz" else data)  # of the content
        taken = size if result is None else sum((e or size) - s for s, e in result[1])
        seen.taken.append((taken, size))
        return result

    monkeypatch.setattr(advisor.trace_cuts, "_indexed_parts", counting)
    return seen


def small_batches(monkeypatch: pytest.MonkeyPatch, chunk: int) -> None:
    """The readers decode in batches of `chunk` bytes (a real trace is then many batches)."""
    monkeypatch.setattr("advisor_plugins.kineto.reader.CHUNK_BYTES", chunk)

    @dataclass
    class Small(EventStream):
        chunk_bytes: int = chunk

    monkeypatch.setattr("advisor.formats.trace_columns.EventStream", Small)


def snippets_both_ways(analysis: Any) -> tuple[dict[int, Any], dict[int, Any]]:
    """(through the index, from the whole file)."""
    meta = analysis.profile.meta
    assert meta.trace_index, "the reader indexed its trace"
    indexed = profile_snippets(analysis)
    kept, meta.trace_index = meta.trace_index, {}
    try:
        whole = profile_snippets(analysis)
    finally:
        meta.trace_index = kept
    return indexed, whole


def same_snippets(trace: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """`trace` (a file or a folder) read in batches of 16 KB: its snippets through the
    index are those of the whole file; its analysis."""
    small_batches(monkeypatch, 16 * 1024)
    (analysis,) = advisor.analyze(trace).analyses
    indexed, whole = snippets_both_ways(analysis)
    assert whole and indexed == whole
    return analysis


def plain(source: Path, folder: Path, edit: Any = None) -> Path:
    doc = json.loads(gzip.decompress(source.read_bytes()))
    if edit is not None:
        edit(doc)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / source.name.removesuffix(".gz")
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def tiled(events: list[dict], copies: int) -> list[dict]:
    """The events repeated `copies` times one after the other in time (as a longer run of
    the same steps): real fixtures hold two or three steps, whose windows cover most of the
    trace; in a longer one a finding's window is a small part of it."""
    times = [float(e["ts"]) + float(e.get("dur", 0)) for e in events if "ts" in e]
    shift = math.ceil(max(times) - min(float(e["ts"]) for e in events if "ts" in e)) + 1000
    out = [e for e in events if e.get("ph") == "M"]
    for k in range(copies):
        for event in events:
            if event.get("ph") == "M" or "ts" not in event:
                continue
            copy = dict(event)
            ts = event["ts"]
            if isinstance(ts, str):
                whole, dot, frac = ts.partition(".")
                copy["ts"] = f"{int(whole) + k * shift}{dot}{frac}"
            else:
                copy["ts"] = ts + k * shift
            name = copy.get("name")
            if isinstance(name, str) and name.startswith("ProfilerStep#"):
                copy["name"] = f"ProfilerStep#{int(name[13:]) + 1000 * k}"
            out.append(copy)
    return out


@pytest.mark.parametrize("source", [KINETO, KINETO_BASE], ids=["sampled", "mi250"])
@pytest.mark.parametrize("how", ["sequential", "in parts", "gzipped"])
def test_kineto_snippets_through_the_index_are_the_whole_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spy: Spy, source: Path, how: str
) -> None:
    """Also of a .gz file, whose index spans its inflated bytes: one pass inflates it, and
    only the batches the windows need are decoded."""

    def longer(doc: dict) -> None:
        doc["traceEvents"] = tiled(doc["traceEvents"], 6)

    if how == "in parts":
        parts_in_this_process(monkeypatch)
    trace = plain(source, tmp_path, longer)
    if how == "gzipped":
        trace = trace.rename(trace.with_name(trace.name + ".gz"))
        trace.write_bytes(gzip.compress(trace.read_bytes()))
    same_snippets(trace, monkeypatch)
    taken, size = spy.taken[0]
    assert taken < size, "the index was used"


def parts_in_this_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """Traces read in parts of a few KB, every part folded in this process."""
    from contextlib import contextmanager

    @contextmanager
    def no_pool(processes: int):  # noqa: ANN202
        yield None

    monkeypatch.setattr(parallel, "MIN_BYTES", 0)
    monkeypatch.setattr(parallel, "PART_BYTES", 48 * 1024)
    monkeypatch.setattr(parallel, "decode_workers", lambda: 4)
    monkeypatch.setattr(parallel, "_pool", no_pool)


def test_ascend_snippets_through_the_index_are_the_whole_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spy: Spy
) -> None:
    """The torch_npu trace repeated in time: its device tasks (kernel_details.csv) and so
    the windows stay in the first copy, and its times are decimal strings."""
    folder = tmp_path / ASCEND_PT.name
    shutil.copytree(ASCEND_PT, folder)
    trace = folder / "ASCEND_PROFILER_OUTPUT/trace_view.json"
    trace.write_text(json.dumps(tiled(json.loads(trace.read_bytes()), 6)), encoding="utf-8")
    analysis = same_snippets(folder, monkeypatch)
    (index,) = analysis.profile.meta.trace_index.values()
    assert len(index.spans) > 10
    taken, size = spy.taken[0]
    assert taken < size, "the index was used"


def test_shuffled_events_give_the_same_snippets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spy: Spy
) -> None:
    """Events in no time order: every batch spans most of the trace, so the index takes
    (nearly) every batch, and the snippets stay those of the whole file."""

    def shuffle(doc: dict) -> None:
        random.Random(7).shuffle(doc["traceEvents"])

    same_snippets(plain(KINETO, tmp_path, shuffle), monkeypatch)


def test_an_event_reaching_past_its_batch_takes_the_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spy: Spy
) -> None:
    """A span written among early events that lasts to the end of the trace (a step or an
    annotation open for the whole run): its batch is read for a window at the end."""

    def with_long_span(doc: dict) -> None:
        events = tiled(doc["traceEvents"], 6)
        at = len(events) // 4  # in the second of the six copies: no window there
        near = next(e for e in events[at:] if e.get("ph") == "X")
        last = max(e["ts"] + e["dur"] for e in events if e.get("ph") == "X")
        span = {**near, "name": "whole run", "dur": last - near["ts"] - 1}
        events.insert(at, span)
        doc["traceEvents"] = events

    analysis = same_snippets(plain(KINETO_BASE, tmp_path, with_long_span), monkeypatch)
    assert any(
        any(e["name"] == "whole run" for e in snippet["traceEvents"])
        for snippet in profile_snippets(analysis).values()
    )
    assert spy.taken[0][0] < spy.taken[0][1], "the index was used"


def test_a_batch_with_an_unreadable_time_is_always_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spy: Spy
) -> None:
    """An event the reader skips (a time it cannot read) makes its batch unbounded: the
    snippet's own reading decides, as it does in a pass over the whole file."""

    def odd_times(doc: dict) -> None:
        events = doc["traceEvents"]
        for k in range(3, len(events), 997):
            events[k] = {**events[k], "ph": "X", "ts": "soon", "dur": 1}
        events.insert(len(events) // 2, {"ph": "X", "name": "neg", "ts": 1, "dur": -5, "pid": 1})

    analysis = same_snippets(plain(KINETO, tmp_path, odd_times), monkeypatch)
    (index,) = analysis.profile.meta.trace_index.values()
    assert UNBOUNDED in index.times


def test_a_file_changed_after_reading_is_read_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spy: Spy
) -> None:
    def longer(doc: dict) -> None:
        doc["traceEvents"] = tiled(doc["traceEvents"], 6)

    trace = plain(KINETO_BASE, tmp_path, longer)
    small_batches(monkeypatch, 16 * 1024)
    (analysis,) = advisor.analyze(trace).analyses
    before = profile_snippets(analysis)
    assert spy.taken[-1][0] < spy.taken[-1][1]
    stat = trace.stat()
    os.utime(trace, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    after = profile_snippets(analysis)
    assert spy.taken[-1][0] == spy.taken[-1][1], "the changed file was read whole"
    assert after == before  # the content is the same: so are the snippets


def test_the_index_names_the_file_however_it_is_reached(tmp_path: Path) -> None:
    trace = plain(KINETO, tmp_path)
    (analysis,) = advisor.analyze(tmp_path / "." / trace.name).analyses
    assert list(analysis.profile.meta.trace_index) == [key(trace)]
    assert "trace_index" not in analysis.profile.meta.to_dict()  # never in a report
