"""Streaming decode of Chrome-trace files: the event array in batches, never all at once.

Profiler traces are hundreds of MB. Decoding a whole file builds a Python dict per event, which
costs 5-8x the file size in memory. Here the file is read in chunks, the event array is cut at
element boundaries, and each slice is decoded on its own (orjson, or the reader's own `decode`,
e.g. `advisor.formats.chrome_trace.EventDecoder`, which skips the fields it does not use), so
a reader can turn one batch into columns before the next is decoded: memory follows the kept
columns, not the file. The last batch and the fallbacks (NaN/Infinity, a salvaged cut file)
always give dicts.

A cut is proposed at `}` `,` `{` (with optional whitespace) and accepted only when the slice
decodes. A `},{` inside a string leaves an unterminated string: the cut then moves past the
end of that string, and from there only to boundaries a tokenizer finds outside strings, so a
slice is decoded at most twice whatever the strings hold (a string full of `},{` once cost one
decode of the whole slice per `},{`). The first batch
ends after at least `chunk_bytes`; the last one is decoded together with whatever follows the
array (Kineto writes `distributedInfo` and `traceName` after it), which gives the header.

What a hostile file may cost is bounded by `advisor.formats.files.Limits`: a .gz file is
inflated within its size and ratio limits, and a slice without an event boundary (an event
that never ends, or a run of whitespace) is refused past `event_bytes` instead of held.

A stream can also cover one part of an uncompressed file's event array (`span`), which
`advisor.formats.parallel` decodes on several cores: the part's bytes are read alone, and its
end must be an event boundary, else `CutNotAtEvent` (the part before it then takes the next one
too). The last part runs to the end of the file and gives the header as above.
"""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import msgspec
import orjson

from advisor.collector import collection_paused
from advisor.errors import UnreadableInput
from advisor.formats.files import (
    EVENT_BYTES_ENV,
    Chunks,
    Limits,
    open_content,
    repair_json,
    size_setting,
)
from advisor.progress import FileProgress

CHUNK_BYTES = 2 * 1024 * 1024
"""Bytes of the event array decoded at a time. 2 MB rather than 8: a batch's events (about
six times its bytes as Python objects) are walked while still in the CPU's cache, the peak
holds a quarter of them, and a trace index (advisor.formats.trace_index) of finer batches lets
a finding's snippet decode less (benchmarks/README.md, round 11: mid-size inputs 6-9% faster,
45 MB less peak memory; 1 MB was slower again)."""
_BOUNDARY = re.compile(rb"\}\s*,\s*\{")
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_STRING_OR_BOUNDARY = re.compile(rb'"(?:[^"\\]|\\.)*"|\}\s*,\s*\{', re.DOTALL)
_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
MAX_HEADER_BYTES = 64 * 1024 * 1024
_RAW_DOCUMENT = msgspec.json.Decoder(dict[str, msgspec.Raw])  # each key's value left undecoded


def _loads_lenient(data: bytes) -> Any:
    """stdlib json accepts NaN and Infinity, which some writers emit and orjson refuses.

    Its recursive parser overflows on deeply nested input: that is invalid input here too.
    """
    try:
        return json.loads(data)
    except RecursionError:
        raise ValueError("nested too deeply") from None


Span = tuple[int, "int | None"]
"""Bytes [start, end) of a trace file's content (a .gz file's inflated bytes) holding whole
events separated by commas; end None: to the end of the file (the array's `]` and what
follows). A stream's `span` is one."""


class CutNotAtEvent(ValueError):
    """A part of the event array does not end at an event boundary (or is not valid JSON)."""


@dataclass
class EventStream:
    """Batches of decoded events of one trace file, plus what decoding noticed.

    Iterate once. Afterwards `header` holds the top-level keys other than `traceEvents` (empty
    for a bare list; after a cut, or an error while reading, the keys written before the
    array), `non_finite` whether NaN/Infinity appeared, and `truncated` how many
    events were recovered from a file that ends in the middle of the array.

    `decode` turns the bytes of a JSON array of events into a list for every batch but the
    last; it must raise ValueError on invalid JSON (the slice is then retried with the
    NaN-tolerant stdlib parser, which also tells a cut inside a string from corruption).
    """

    path: Path
    progress: FileProgress | None = None
    chunk_bytes: int = CHUNK_BYTES
    decode: Callable[[bytes], list[Any]] = orjson.loads
    header: dict[str, Any] = field(default_factory=dict)
    non_finite: bool = False
    truncated: int | None = None
    events: int = 0
    offset: int = field(default=0, repr=False)  # bytes of the array already decoded
    # a part of an uncompressed file: (offset of its first event, offset after its last one,
    # None for the last part), and the document's text before the array (its header)
    span: Span | None = None
    prefix: bytes = b""
    # the content to read the part `span` from, already at its start, instead of the file
    # (a .gz file cannot be entered in the middle): inflated forward part after part
    # (advisor.trace_cuts), or the part's inflated bytes (advisor.formats.parallel)
    content: Chunks | None = field(default=None, repr=False)
    # where each batch yielded lies in the file's content (a .gz file's inflated bytes)
    # (advisor.formats.trace_index)
    spans: list[Span] = field(default_factory=list, repr=False)

    def __iter__(self) -> Iterator[list[Any]]:
        limits = Limits.from_env(self.path)
        # millions of small objects would trigger collections over and over
        with collection_paused():
            try:
                if self.content is not None:
                    yield from self._part(self.content, None, limits.event_bytes)
                    return
                with open_content(self.path, limits) as (source, raw):
                    if self.span is None:
                        yield from self._batches(source, raw, limits.event_bytes)
                    else:
                        raw.seek(self.span[0])
                        yield from self._part(raw, raw, limits.event_bytes)
            except gzip.BadGzipFile:
                raise UnreadableInput(
                    self.path, "not gzip data although the name ends in .gz"
                ) from None
            except (EOFError, OSError) as exc:
                if isinstance(exc, EOFError) or "gzip" in str(exc).lower() or "CRC" in str(exc):
                    raise UnreadableInput(self.path, "truncated or corrupt gzip data") from None
                problem = f"cannot read file: {exc.strerror or exc}"
                raise UnreadableInput(self.path, problem) from None

    # reading ------------------------------------------------------------------------------

    def _read(self, source: Chunks, raw: BinaryIO | None) -> bytes:
        chunk = source.read(self.chunk_bytes)
        if self.progress is not None and chunk and raw is not None:
            self.progress.read(raw.tell() - self.progress.done_bytes)
        return chunk

    def _decode(
        self, data: bytes, *, repair: bool = False, decode: Callable[[bytes], Any] = orjson.loads
    ) -> Any:
        """`decode` (orjson), then (for the end of a file) msprof's known trailer artefacts,
        then the NaN-tolerant stdlib parser; ValueError when the bytes are really invalid."""
        try:
            return decode(data)
        except (ValueError, msgspec.DecodeError) as exc:  # not a ValueError in msgspec 0.20
            repaired = (
                repair_json(data, exc)
                if repair and isinstance(exc, orjson.JSONDecodeError)
                else None
            )
            if repaired is not None:
                return repaired
            value = _loads_lenient(data)
            self.non_finite = True
            return value

    def _batches(self, source: Chunks, raw: BinaryIO, most: int) -> Iterator[list[Any]]:
        """The batches; `most` (0: no limit) bounds the bytes held without an event boundary."""
        buf = bytearray(self._read(source, raw))
        if buf.startswith(b"\xef\xbb\xbf"):
            del buf[:3]
            self.offset = 3  # buf[0] is the file's byte `offset`
        start = len(buf) - len(buf.lstrip())
        while start >= len(buf):  # leading whitespace longer than a chunk
            more = self._read(source, raw)
            if not more:
                raise UnreadableInput(self.path, "empty file")
            self.offset += len(buf)  # only whitespace so far: nothing to keep
            buf = bytearray(more)
            start = len(buf) - len(buf.lstrip())
            if most and self.offset > most:
                raise UnreadableInput(
                    self.path,
                    f"more than {most:,} bytes of whitespace before any JSON" + _how_to_raise(most),
                )
        if buf[start : start + 1] == b"[":
            prefix, pos = b"", start + 1
        elif buf[start : start + 1] == b"{":
            match = _EVENTS_KEY.search(buf)
            while match is None and len(buf) < MAX_HEADER_BYTES:
                more = self._read(source, raw)
                if not more:
                    break
                buf += more
                match = _EVENTS_KEY.search(buf)
            if match is None:
                raise UnreadableInput(self.path, "no traceEvents array in this JSON object")
            prefix, pos = bytes(buf[start : match.start()]), match.end()
            self.header = self._header_only(prefix)  # kept even if the file is cut later
        else:
            raise UnreadableInput(self.path, "not a JSON trace (expected '[' or '{')")
        yield from self._array(source, raw, buf, pos, most, prefix, last=True)

    def _part(self, content: Chunks, raw: BinaryIO | None, most: int) -> Iterator[list[Any]]:
        """The batches of the part `span` of the event array, read from `content`, which
        stands at the part's start (`raw`: the file, for progress)."""
        start, end = self.span or (0, None)
        source = _Window(content, None if end is None else end - start)
        self.offset = start - 1  # buf[0] stands for the byte before the part
        buf = bytearray(b"[") + self._read(source, raw)
        yield from self._array(source, raw, buf, 1, most, self.prefix, last=end is None)

    def _array(
        self,
        source: Chunks,
        raw: BinaryIO | None,
        buf: bytearray,
        pos: int,
        most: int,
        prefix: bytes,
        *,
        last: bool,
    ) -> Iterator[list[Any]]:
        """The batches from buf[pos:] on; `last`: the bytes run to the end of the file."""
        # From here buf[pos - 1] is the byte before the next event (`[`, `,` or a space).
        eof = False
        while True:
            target = pos + self.chunk_bytes
            while not eof and len(buf) < target + 1024:
                more = self._read(source, raw)
                eof = not more
                buf += more
            if eof:
                break
            batch, end, cut = self._leading_batch(buf, pos, target)
            if batch is None:  # no decodable cut yet: read on
                if most and len(buf) - pos > most:
                    raise UnreadableInput(
                        self.path,
                        f"no event boundary within {most:,} bytes after byte {self.offset + pos}: "
                        "an event that large or a run of whitespace" + _how_to_raise(most),
                    )
                more = self._read(source, raw)
                eof = not more
                buf += more
                continue
            self.events += len(batch)
            if self.progress is not None:
                self.progress.decoded(len(batch))
            self.spans.append((self.offset + pos, self.offset + end))
            yield batch
            del batch  # free it before the next slice is decoded
            self.offset += cut - 1
            del buf[: cut - 1]  # cheap: a bytearray drops its head without moving the rest
            pos = 1
        with memoryview(buf) as view:
            rest = bytes(view[pos:])
        del buf
        start = self.offset + pos
        batch = self._last_batch(prefix, rest) if last else self._part_end(rest, start)
        self.spans.append((start, None if last else start + len(rest)))
        yield batch

    def _part_end(self, rest: bytes, start: int) -> list[Any]:
        """The last events of a part that is not the last: `rest` (from byte `start` of the
        file on) must end with an event.

        The part's bytes are the file's, so only their end can be wrong: a cut inside a
        string leaves it unterminated, one inside an event leaves the parse wanting more at
        the end. An error before the end is invalid JSON in the file.
        """
        try:
            events: list[Any] = self._decode(b"[" + rest + b"]", decode=self.decode)
        except json.JSONDecodeError as exc:
            if exc.msg.startswith("Unterminated string") or exc.pos >= len(exc.doc) - 1:
                raise CutNotAtEvent(f"part ending at byte {start + len(rest)}") from None
            at = start + len(exc.doc[: max(exc.pos - 1, 0)].encode("utf-8", "surrogateescape"))
            raise UnreadableInput(self.path, f"invalid JSON at byte {at}: {exc.msg}") from None
        except ValueError as exc:
            raise UnreadableInput(self.path, str(exc)) from None
        self.events += len(events)
        return events

    def _leading_batch(
        self, buf: bytearray, pos: int, target: int
    ) -> tuple[list[Any] | None, int, int]:
        """Decode buf[pos:end] at the first accepted boundary after `target`: (the events,
        `end`, where the next event starts); (None, pos, pos) when no boundary decodes yet.

        The slice is decoded as `[` + events + `]` by writing the brackets over the bytes
        around it (the byte before the first event, the one after the last), so it is copied
        once rather than assembled. A boundary inside a string leaves that string unterminated,
        so only that error means "try the next boundary"; any other error is corruption,
        reported with its offset.
        """
        buf[pos - 1] = 0x5B  # `[`
        match = _BOUNDARY.search(buf, target)
        while match is not None:
            end = match.start() + 1
            saved = buf[end]
            buf[end] = 0x5D  # `]`
            try:
                with memoryview(buf) as view:
                    data = bytes(view[pos - 1 : end + 1])
                batch = self._decode(data, decode=self.decode)
            except json.JSONDecodeError as exc:
                if not exc.msg.startswith("Unterminated string"):
                    at = self.offset + pos + max(exc.pos - 1, 0)
                    raise UnreadableInput(
                        self.path, f"invalid JSON at byte {at}: {exc.msg}"
                    ) from None
                match = _boundary_after_string(buf, pos - 1 + exc.pos)
                continue
            finally:
                buf[end] = saved
            return batch, end, match.end() - 1  # next batch starts at that `{`
        return None, pos, pos

    def _last_batch(self, prefix: bytes, rest: bytes) -> list[Any]:
        """The remaining events, decoded with the text around the array to get the header."""
        whole = (prefix + b'"traceEvents":[' + rest) if prefix else b"[" + rest
        doc = self._typed_document(whole, prefix)
        if doc is None:
            try:
                doc = self._decode(whole, repair=True)
            except ValueError:
                events = self._salvage(rest)
                self.truncated = self.events + len(events)
                doc = {**self.header, "traceEvents": events} if prefix else events
        if prefix:
            if not isinstance(doc, dict):
                raise UnreadableInput(self.path, "the trace object is not a JSON object")
            events = doc.pop("traceEvents", [])
            self.header = doc
        else:
            events = doc
        if not isinstance(events, list):
            raise UnreadableInput(self.path, "traceEvents is not a list")
        self.events += len(events)
        if self.progress is not None:
            self.progress.decoded(len(events))
        return events

    def _typed_document(self, whole: bytes, prefix: bytes) -> Any:
        """The document of the last batch with its events decoded by `decode` like the other
        batches' (several times faster than dicts for a typed decoder), the other keys of an
        object one by one; None when anything needs the lenient path (a trailer, NaN, a cut)."""
        if self.decode is orjson.loads:
            return None
        try:
            if not prefix:
                return self.decode(whole)
            doc: dict[str, Any] = _RAW_DOCUMENT.decode(whole)
            events = doc.get("traceEvents")
            if events is None:
                return None
            return {
                key: (self.decode if key == "traceEvents" else orjson.loads)(bytes(value))
                for key, value in doc.items()
            }
        except (ValueError, msgspec.DecodeError, RecursionError):  # deep nesting: lenient path
            return None

    def _header_only(self, prefix: bytes) -> dict[str, Any]:
        """The keys written before `traceEvents` of a file cut later on (best effort)."""
        try:
            header = orjson.loads(prefix + b'"traceEvents":[]}')
        except orjson.JSONDecodeError:
            return {}
        return header if isinstance(header, dict) else {}

    def _salvage(self, rest: bytes) -> list[Any]:
        """The complete events before the point where a cut file ends.

        Only boundaries before the first error are tried: each try decodes the whole prefix,
        so trying every boundary of a file corrupt early on would take quadratic time.
        """
        data = b"[" + rest + b"]"
        limit = len(rest)
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as exc:
            limit = exc.start - 1
        text = data.decode("utf-8", "surrogateescape")  # a syntax error may come earlier
        try:
            json.loads(text)
        except json.JSONDecodeError as exc:  # exc.pos counts characters: back to bytes
            limit = min(limit, len(text[: exc.pos].encode("utf-8", "surrogateescape")) - 1)
        except RecursionError:
            pass
        ends = [m.start() + 1 for m in _BOUNDARY.finditer(rest)]
        ends.append(rest.rfind(b"}") + 1)
        for end in sorted(set(ends), reverse=True):
            if end <= 0 or end > limit:  # a prefix holding the error cannot decode
                continue
            try:
                events = self._decode(b"[" + rest[:end] + b"]")
            except ValueError:
                continue
            if isinstance(events, list):
                return events
        if self.events:
            return []
        raise UnreadableInput(self.path, "truncated or invalid JSON: no complete event")


class _Window:
    """At most `size` bytes (None: all) of a file's content from its current position."""

    def __init__(self, raw: Chunks, size: int | None) -> None:
        self._raw = raw
        self._left = size

    def read(self, size: int, /) -> bytes:
        if self._left is None:
            return self._raw.read(size)
        chunk = self._raw.read(min(size, self._left))
        self._left -= len(chunk)
        return chunk


def array_start(head: bytes) -> tuple[bytes, int] | None:
    """(the document's text before its `"traceEvents":` key, b"" for a bare list; the offset
    after the event array's `[`) from a trace file's first bytes, as the stream finds them;
    None when these bytes show no event array."""
    start = 3 if head.startswith(b"\xef\xbb\xbf") else 0
    start += len(head) - start - len(head[start:].lstrip())
    first = head[start : start + 1]
    if first == b"[":
        return b"", start + 1
    if first == b"{":
        match = _EVENTS_KEY.search(head, start)
        if match is not None:
            return head[start : match.start()], match.end()
    return None


def _how_to_raise(most: int) -> str:
    """How to read a genuine file past the event limit, for the end of its message."""
    return f"; if the file is genuine, raise {EVENT_BYTES_ENV} (now {size_setting(most)})"


def _boundary_after_string(buf: bytearray, quote: int) -> re.Match[bytes] | None:
    """The first `},{` outside strings after the string that opens at `quote` (which a
    proposed cut fell into); None when the buffer ends first (read on)."""
    string = _STRING.match(buf, quote)
    if string is None:
        return None
    for token in _STRING_OR_BOUNDARY.finditer(buf, string.end()):
        if not token.group().startswith(b'"'):
            return token
    return None
