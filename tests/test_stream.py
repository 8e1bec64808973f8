"""The streaming trace decoder gives exactly what decoding the whole file gives."""

from __future__ import annotations

import gzip
import json

import msgspec
import orjson
import pytest
from conftest import FIXTURE_DIR
from hypothesis import given, settings
from hypothesis import strategies as st

from advisor.errors import UnreadableInput
from advisor.formats.stream import EventStream

SHARED = FIXTURE_DIR / "real"

text = st.text(alphabet=st.sampled_from(list('ab},{[]":\\ \n\tµ')), max_size=12)
# orjson decodes integers outside int64/uint64 as floats (its documented limit, not the
# stream's), which no trace writer emits: generated integers stay within 64 bits.
within_64_bits = st.integers(-(2**63), 2**64 - 1)
event = st.fixed_dictionaries(
    {
        "ph": st.sampled_from(["X", "M", "i"]),
        "name": text,
        "ts": st.floats(0, 1e12, allow_nan=False),
        "dur": st.integers(0, 10**6),
        "args": st.dictionaries(
            st.sampled_from(["a", "b c", "x"]), text | within_64_bits, max_size=3
        ),
    }
)


def decode_all(stream: EventStream) -> list:
    return [e for batch in stream for e in batch]


@settings(max_examples=150, deadline=None)
@given(
    st.lists(event, max_size=40),
    st.sampled_from(["bare", "object", "object-tail"]),
    st.sampled_from([None, 1, 2]),
    st.integers(1, 300),
)
def test_batches_equal_whole_decode(tmp_path_factory, events, shape, indent, chunk):
    path = tmp_path_factory.mktemp("s") / "t.json"
    if shape == "bare":
        doc = events
    elif shape == "object":
        doc = {"schemaVersion": 1, "traceEvents": events}
    else:
        doc = {
            "schemaVersion": 1,
            "traceEvents": events,
            "distributedInfo": {"rank": 3},
            "traceName": "x},{y",
        }
    path.write_text(json.dumps(doc, indent=indent), encoding="utf-8")
    stream = EventStream(path, chunk_bytes=chunk)
    assert decode_all(stream) == events
    expected_header = (
        {} if shape == "bare" else {k: v for k, v in doc.items() if k != "traceEvents"}
    )
    assert stream.header == expected_header
    assert stream.truncated is None and stream.events == len(events)


@pytest.mark.parametrize(
    "fixture",
    sorted((SHARED / "kineto").glob("*.json.gz"))
    + [SHARED / "ascend_pt/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json"],
    ids=lambda p: p.name,
)
def test_real_traces_stream_like_a_whole_decode(fixture):
    raw = fixture.read_bytes()
    whole = orjson.loads(gzip.decompress(raw) if fixture.suffix == ".gz" else raw)
    stream = EventStream(fixture, chunk_bytes=64 * 1024)
    events = decode_all(stream)
    expected = whole if isinstance(whole, list) else whole["traceEvents"]
    assert events == expected
    if isinstance(whole, dict):
        assert stream.header == {k: v for k, v in whole.items() if k != "traceEvents"}


def test_truncated_file_keeps_complete_events(tmp_path):
    events = [{"ph": "X", "name": f"e{i}", "ts": i, "dur": 1} for i in range(50)]
    data = json.dumps({"traceEvents": events}).encode()
    path = tmp_path / "cut.json"
    path.write_bytes(data[: len(data) * 2 // 3])
    stream = EventStream(path, chunk_bytes=100)
    got = decode_all(stream)
    assert got == events[: len(got)] and 0 < len(got) < 50
    assert stream.truncated == len(got)


def test_nan_and_infinity_are_accepted_and_noted(tmp_path):
    path = tmp_path / "nan.json"
    path.write_text('[{"ts": NaN, "dur": Infinity}, {"ts": 1, "dur": 2}]')
    stream = EventStream(path)
    events = decode_all(stream)
    assert len(events) == 2 and stream.non_finite


@pytest.mark.parametrize(
    "content, problem",
    [
        (b"", "empty file"),
        (b"   \n ", "empty file"),
        (b"hello", "not a JSON trace"),
        (b'{"a": 1}', "no traceEvents array"),
    ],
)
def test_unreadable_inputs(tmp_path, content, problem):
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(UnreadableInput, match=problem):
        decode_all(EventStream(path))


def test_gz_that_is_not_gzip(tmp_path):
    path = tmp_path / "trace.json.gz"
    path.write_text("[]")
    with pytest.raises(UnreadableInput, match="not gzip data"):
        decode_all(EventStream(path))


@pytest.mark.parametrize("tail", [b",]", b", ]\n", b"]\n[ true]"])
def test_known_writer_trailers_are_repaired_not_truncated(tmp_path, tail):
    path = tmp_path / "t.json"
    path.write_bytes(b'[{"ph": "X", "ts": 1, "dur": 2}, {"ph": "X", "ts": 3, "dur": 4}' + tail)
    stream = EventStream(path)
    assert len(decode_all(stream)) == 2 and stream.truncated is None


def test_corrupt_byte_mid_file_is_reported_at_once(tmp_path):
    events = [{"ph": "X", "name": f"event {i}", "ts": i, "dur": 1} for i in range(20_000)]
    data = bytearray(json.dumps({"traceEvents": events}).encode())
    spot = data.index(b'"ts":', len(data) // 3) + 4  # the colon: structure, not text
    data[spot] = ord("@")
    path = tmp_path / "corrupt.json"
    path.write_bytes(bytes(data))
    with pytest.raises(UnreadableInput, match="invalid JSON at byte") as err:
        decode_all(EventStream(path, chunk_bytes=4096))
    at = int(str(err.value).split("byte ")[1].split(":")[0])
    assert abs(at - spot) < 64


def test_header_before_the_array_survives_a_cut(tmp_path):
    events = [{"ph": "X", "name": f"e{i}", "ts": i, "dur": 1} for i in range(50)]
    data = json.dumps({"distributedInfo": {"rank": 5}, "traceEvents": events}).encode()
    path = tmp_path / "cut.json"
    path.write_bytes(data[: len(data) // 2])
    stream = EventStream(path, chunk_bytes=100)
    decode_all(stream)
    assert stream.header == {"distributedInfo": {"rank": 5}} and stream.truncated


@settings(max_examples=100, deadline=None)
@given(st.lists(event, max_size=40), st.integers(1, 300))
def test_own_decoder_is_used_for_batches_and_a_cut_in_a_string_is_skipped(
    tmp_path_factory, events, chunk
):
    # msgspec's error at a cut inside a string is not the stdlib's "Unterminated string": the
    # stream must still move on to the next boundary rather than report corrupt JSON.
    path = tmp_path_factory.mktemp("s") / "t.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}), encoding="utf-8")
    calls = []

    def decode(data: bytes) -> list:
        calls.append(len(data))
        return msgspec.json.decode(data)

    stream = EventStream(path, chunk_bytes=chunk, decode=decode)
    assert decode_all(stream) == events
    assert stream.header == {"schemaVersion": 1} and not stream.non_finite
    assert stream.events == len(events)


def test_own_decoder_falls_back_for_nan(tmp_path):
    events = [{"ph": "X", "name": f"e{i}", "ts": i, "dur": 1} for i in range(200)]
    text = json.dumps({"traceEvents": events}).replace('"ts": 3,', '"ts": NaN,')
    path = tmp_path / "nan.json"
    path.write_text(text)
    stream = EventStream(path, chunk_bytes=100, decode=msgspec.json.decode)
    got = decode_all(stream)
    assert len(got) == 200 and got[4] == events[4] and stream.non_finite


def test_a_string_full_of_boundaries_is_decoded_a_bounded_number_of_times(tmp_path):
    """An event whose string straddles the batch boundary and holds 200,000 `},{`: every one
    of them used to be tried as a cut, each costing a decode of the whole slice."""
    evil = "},{" * 200_000
    events = [{"ph": "X", "name": f"op{i}", "ts": i, "dur": 1} for i in range(2_000)]
    events.insert(1_000, {"ph": "X", "name": evil, "ts": 5, "dur": 1, "args": {"x": evil}})
    path = tmp_path / "evil.json"
    path.write_text(json.dumps({"traceEvents": events}), encoding="utf-8")
    calls = []

    def counting(data: bytes):
        calls.append(len(data))
        return orjson.loads(data)

    stream = EventStream(path, chunk_bytes=32 * 1024, decode=counting)
    got = decode_all(stream)
    assert [e["name"] for e in got] == [e["name"] for e in events]
    # each slice is tried at most twice: once at a cut inside the string, once past it
    assert len(calls) <= 2 * (path.stat().st_size // (32 * 1024) + 2)


@pytest.mark.parametrize("where", ["before", "between", "after"])
def test_a_whitespace_bomb_is_refused_without_holding_it(tmp_path, monkeypatch, where):
    """A small .json.gz that inflates to a run of whitespace (2 GB in the wild, 24 MB here
    with the limit lowered to 4 MB): refused with one line once the limit is passed, never
    held whole in memory."""
    monkeypatch.setenv("ADVISOR_MAX_EVENT_BYTES", "4M")
    events = [json.dumps({"ph": "X", "name": f"op{i}", "ts": i, "dur": 1}) for i in range(50)]
    blank = b" " * (1024 * 1024)
    path = tmp_path / "bomb.json.gz"
    with gzip.open(path, "wb") as out:
        if where == "before":
            for _ in range(24):
                out.write(blank)
        out.write(b'{"traceEvents": [' + ",".join(events[:25]).encode() + b",")
        if where == "between":
            for _ in range(24):
                out.write(blank)
        out.write(",".join(events[25:]).encode())
        if where == "after":
            for _ in range(24):
                out.write(blank)
        out.write(b"]}")
    assert path.stat().st_size < 200_000
    with pytest.raises(UnreadableInput) as refused:
        decode_all(EventStream(path, chunk_bytes=256 * 1024))
    assert "whitespace" in refused.value.problem and "\n" not in refused.value.problem
