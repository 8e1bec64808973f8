"""What a run keeps of each rank for its outputs, written to a temporary file until used.

A run over many ranks drops each rank's tables once it is evaluated, but keeps, until the
outputs are written, its findings (about 27 KB as objects for a rank of a 10 MB trace) and
its packed report (14 KB): 1,024 ranks grew the `advisor` process by 52 MB. Written to a
spool, they take 21 KB of disk a rank and a few hundred bytes of memory; each output reads
a rank's back when it comes to that rank, and lets it go.

The spool is an anonymous temporary file in the system's temporary folder (never beside
the profiles), deleted when the run's result is let go or the process ends. Values are
pickled by the function the spool is given (Session.ship: rules travel as references) and
read back only by this process.
"""

from __future__ import annotations

import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import IO, Any, Generic, TypeVar, overload

_T = TypeVar("_T")


class Spool:
    """Values appended to one temporary file, each read back whole on demand."""

    def __init__(self, dump: Callable[[Any], bytes], load: Callable[[bytes], Any]) -> None:
        self._dump = dump
        self._load = load
        self._file: IO[bytes] | None = None
        self._end = 0
        self._lock = threading.Lock()  # a notebook may read two ranks' reports at once

    def put(self, value: _T) -> Spooled[_T]:
        """Write `value` and return what reads it back; OSError when the temporary folder
        cannot take it."""
        data = self._dump(value)
        with self._lock:
            if self._file is None:
                # open as long as the spool: closed (and so deleted) when it is let go
                self._file = tempfile.TemporaryFile(prefix="advisor-spool-")  # noqa: SIM115
            self._file.seek(self._end)
            self._file.write(data)
            self._file.flush()  # a full disk fails here (OSError), not in a later read
            offset, self._end = self._end, self._end + len(data)
        return Spooled(self, offset, len(data))

    def read(self, offset: int, length: int) -> Any:
        """The value written at `offset`."""
        with self._lock:
            assert self._file is not None  # put() wrote it
            self._file.seek(offset)
            data = self._file.read(length)
        return self._load(data)


class Spooled(Generic[_T]):
    """One value in a spool: read anew on each `load`, never held."""

    __slots__ = ("_length", "_offset", "_spool")

    def __init__(self, spool: Spool, offset: int, length: int) -> None:
        self._spool = spool
        self._offset = offset
        self._length = length

    def load(self) -> _T:
        value: _T = self._spool.read(self._offset, self._length)
        return value


class SpooledList(Sequence[_T]):
    """A list kept in a spool: its length at hand, its items read back on each use (a loop
    over it reads the spool once)."""

    __slots__ = ("_items", "_length")

    def __init__(self, spool: Spool, items: Sequence[_T]) -> None:
        self._items: Spooled[list[_T]] = spool.put(list(items))
        self._length = len(items)

    def __len__(self) -> int:
        return self._length

    def __iter__(self) -> Iterator[_T]:
        return iter(self._items.load() if self._length else ())

    @overload
    def __getitem__(self, index: int) -> _T: ...

    @overload
    def __getitem__(self, index: slice) -> list[_T]: ...

    def __getitem__(self, index: int | slice) -> _T | list[_T]:
        return self._items.load()[index]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]  # equal to a list, so unhashable like one

    def __repr__(self) -> str:
        return f"SpooledList({list(self)!r})"
