"""JSON documents made only of lists of whole numbers (the PyTorch profiler's memory timeline
exports), decoded a batch at a time.

Such an export has an entry per allocation and release, so a long run's holds millions; decoded
whole, each 37-byte row becomes a Python list of four ints, some 400 bytes of objects. Here the
content is read in chunks, a run of whole rows (or numbers) is cut off, decoded by msgspec (which
refuses a float, a string or a nested list as a value of the wrong type) and turned into an int64
array, so memory follows one batch, not the file. The lists hold no strings: inside a list of
rows, every `]` ends a row; inside a list of numbers, the first `]` ends the list.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import cache
from itertools import chain
from typing import TYPE_CHECKING, Any, NoReturn

from advisor.lazy import lazy_module

if TYPE_CHECKING:
    import msgspec
    import numpy as np

    from advisor.formats.files import Chunks
else:  # a reader's module is loaded by every command, its file read by few
    msgspec = lazy_module("msgspec")
    np = lazy_module("numpy")

CHUNK_BYTES = 2 * 1024 * 1024
"""Bytes read at a time; a batch holds about this much text."""
_WHITESPACE = b" \t\r\n"
_LIST_END = re.compile(rb"\]\s*\]")
"""Inside a list of rows, a row's end followed by the list's."""


@cache
def _decoder(width: int) -> msgspec.json.Decoder[Any]:
    """A list of whole numbers (width 0), or of rows of `width` of them, as tuples (which
    msgspec makes twice as fast as lists)."""
    row: Any = tuple.__class_getitem__((int,) * width)  # tuple[int, int, ...]
    return msgspec.json.Decoder(list.__class_getitem__(row) if width else list[int])


class NotNumberLists(ValueError):
    """The document is not what its reader said comes next (the message says what was found)."""


class NumberLists:
    """A cursor over a document of nested lists of whole numbers: its reader says what comes
    next (`open_list`, `rows`, `numbers`, `comma`, `close_list`, `end`); a document that differs
    raises NotNumberLists."""

    def __init__(self, content: Chunks, chunk_bytes: int, most_bytes: int) -> None:
        self._content = content
        self._chunk_bytes = chunk_bytes
        self._most_bytes = most_bytes  # of text without a place to cut
        self._buffer = b""
        self._ended = False

    def peek(self) -> bytes:
        """The next byte that is not whitespace (b"" at the end of the document)."""
        while True:
            self._buffer = self._buffer.lstrip(_WHITESPACE)
            if self._buffer or not self._fill():
                return self._buffer[:1]

    def head(self, size: int) -> bytes:
        """The next `size` bytes from the next that is not whitespace, left to be read."""
        self.peek()
        while len(self._buffer) < size and self._fill():
            pass
        return self._buffer[:size]

    def open_list(self) -> None:
        self._take(b"[")

    def close_list(self) -> None:
        self._take(b"]")

    def comma(self) -> None:
        self._take(b",")

    def end(self) -> None:
        """Nothing but whitespace is left."""
        if self.peek():
            self._fail("more after the end of the document")

    def rows(self, width: int) -> Iterator[np.ndarray]:
        """The rows of `width` numbers of the list just opened, as (n, width) arrays, up to
        and including the list's `]`."""
        if self.peek() == b"]":
            self._buffer = self._buffer[1:]
            return
        while True:
            if self.peek() != b"[":
                self._fail("a list of rows holding something other than a row")
            ended = _LIST_END.search(self._buffer)
            cut = ended.start() + 1 if ended else self._buffer.rfind(b"]") + 1
            if not cut:
                self._need_more("a row")
                continue
            text, self._buffer = self._buffer[:cut], self._buffer[cut:]
            yield self._decode_rows(text, width)
            if self.peek() == b"]":
                self._buffer = self._buffer[1:]
                return
            self.comma()

    def numbers(self) -> Iterator[np.ndarray]:
        """The numbers of the flat list just opened, in batches, up to and including its
        `]`."""
        if self.peek() == b"]":
            self._buffer = self._buffer[1:]
            return
        while True:
            end = self._buffer.find(b"]")
            cut = end if end >= 0 else self._buffer.rfind(b",")
            if cut < 0:
                self._need_more("a list of numbers")
                continue
            text, self._buffer = self._buffer[:cut], self._buffer[cut + 1 :]
            numbers = self._decode(text, 0, "whole numbers")
            if not len(numbers):  # `,,` split where a chunk ended
                self._fail("a list of numbers with an empty place")
            yield numbers
            if end >= 0:
                return

    def _decode_rows(self, text: bytes, width: int) -> np.ndarray:
        rows = self._decode(text, width, f"rows of {width} whole numbers")
        return rows.reshape(-1, width)

    def _decode(self, text: bytes, width: int, what: str) -> np.ndarray:
        """The numbers of `[text]`, flat."""
        try:
            values = _decoder(width).decode(b"[" + text + b"]")
        except msgspec.DecodeError as exc:
            self._fail(f"not a JSON list of {what}: {exc}")
        flat = chain.from_iterable(values) if width else values
        try:
            return np.fromiter(flat, dtype=np.int64, count=len(values) * (width or 1))
        except OverflowError:  # a number past int64
            self._fail(f"not a JSON list of {what}: a number out of range")

    def _take(self, token: bytes) -> None:
        if self.peek() != token:
            text = self._buffer[:20].decode("ascii", "replace")
            found = repr(text) if text else "the end of the file"
            self._fail(f"'{token.decode()}' expected, found {found}")
        self._buffer = self._buffer[1:]

    def _fill(self) -> bool:
        """Read on; False at the end of the content."""
        if self._ended:
            return False
        chunk = self._content.read(self._chunk_bytes)
        if not chunk:
            self._ended = True
            return False
        self._buffer += chunk
        return True

    def _need_more(self, inside: str) -> None:
        """Read on, for want of a place to cut `inside` (a row, a list of numbers)."""
        if len(self._buffer) > self._most_bytes:
            from advisor.formats.files import size_setting  # only to word this error

            self._fail(f"{inside} longer than {size_setting(self._most_bytes)} bytes")
        if not self._fill():
            self._fail(f"the file ends inside {inside}")

    def _fail(self, problem: str) -> NoReturn:
        raise NotNumberLists(problem)
