"""advisor.formats: the format code readers share, and readers that import no other reader."""

from __future__ import annotations

import ast
import re
from typing import Any

import msgspec
import orjson
from conftest import ROOT

from advisor.formats.chrome_trace import NO_RAW, EventDecoder, TraceEvent, raw_value

PLUGINS = ROOT / "plugins"


class Args(msgspec.Struct, gc=False):
    stream: Any = None
    dims: msgspec.Raw = msgspec.field(default=NO_RAW, name="Input Dims")


DECODER = EventDecoder(Args)
EVENTS = [
    {
        "ph": "X",
        "name": "k",
        "cat": "kernel",
        "pid": 1,
        "tid": 2,
        "ts": 10.5,
        "dur": 2,
        "args": {"stream": 7, "Input Dims": [[8, 64], []], "other": "skipped"},
    },
    {"ph": "s", "id": 3, "pid": 1, "tid": 2, "ts": "11.25"},
    {"ph": "M", "name": "thread_name", "pid": 1, "tid": 2, "args": {"name": "main"}},
]


def test_typed_batches_and_decoded_dicts_give_the_same_events() -> None:
    data = orjson.dumps(EVENTS)
    typed = DECODER.events(DECODER.decode(data))
    from_dicts = DECODER.events(orjson.loads(data))
    assert all(e.__class__ is TraceEvent for e in typed + from_dicts)
    assert typed == from_dicts
    first, flow, meta = from_dicts
    assert (first.args.stream, raw_value(first.args.dims)) == (7, [[8, 64], []])
    assert raw_value(typed[0].args.dims) == [[8, 64], []]
    assert (flow.id, flow.ts, flow.args, flow.name) == (3, "11.25", None, "")
    assert meta.args.stream is None and meta.args.dims == NO_RAW


def test_a_batch_structs_cannot_hold_comes_as_dicts_and_is_converted() -> None:
    data = orjson.dumps([*EVENTS, 5, {"ph": "X", "ts": 1, "dur": 1, "args": [1]}])
    batch = DECODER.decode(data)
    assert batch[0].__class__ is dict
    events = DECODER.events(batch)
    assert events[3] == 5  # kept, for the reader to count
    assert events[4].args is None


def test_non_finite_times_of_the_lenient_parser_are_missing() -> None:
    (event,) = DECODER.events([{"ph": "X", "ts": float("nan"), "dur": float("inf")}])
    assert (event.ts, event.dur) == (None, None)


def test_timeline_columns_resolve_process_and_thread_names() -> None:
    """The rows of a process and of the threads whose name matches, the metadata written
    after the events it names."""
    from advisor.formats.trace_columns import read_msprof_columns
    from advisor_plugins.msprof.timeline import Timeline

    stream_3 = {"name": "Stream 3"}
    timeline = Timeline(
        read_msprof_columns(
            [
                [
                    {"ph": "X", "pid": 1, "tid": 2, "name": "k", "ts": 5, "dur": 1},
                    {"ph": "X", "pid": 9, "tid": 2, "name": "other", "ts": 6, "dur": 1},
                    {"ph": "X", "pid": 1, "tid": 4, "name": "api", "ts": "7.5", "dur": 1},
                ],
                [
                    {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "CANN"}},
                    {"ph": "M", "name": "thread_name", "pid": 1, "tid": 2, "args": stream_3},
                ],
            ]
        )
    )
    assert timeline.rows("CANN").text("name").to_pylist() == ["k", "api"]
    assert timeline.rows("CANN").ts.tolist() == [5.0, 7.5]
    streams = timeline.rows("CANN", thread=re.compile(r"^Stream \d+$"))
    assert streams.text("name").to_pylist() == ["k"]
    assert timeline.rows().index.tolist() == [0, 1, 2]
    assert timeline.thread_name(1, 2) == "Stream 3" and timeline.thread_name(9, 2) == ""


def test_no_plugin_imports_another() -> None:
    """Shared format code lives in advisor.formats: a plugin imports only its own modules,
    so blocking one plugin keeps all of its code from running."""
    crossing = []
    for path in sorted(PLUGINS.rglob("*.py")):
        parts = path.relative_to(PLUGINS).with_suffix("").parts
        package_depth = len(parts) - 1  # plugins/x.py: 0; plugins/x/y.py: 1
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:  # relative: must stay inside the plugin's own package
                    if node.level > package_depth:
                        crossing.append(f"{path.name}: from {'.' * node.level}{node.module}")
                    continue
                names = [node.module or ""]
            else:
                continue
            crossing += [
                f"{path.relative_to(PLUGINS)}: {name}"
                for name in names
                if name.split(".")[0] == "advisor_plugins"
            ]
    assert crossing == []
