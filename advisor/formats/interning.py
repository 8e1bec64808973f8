"""Columns of repeated values kept as codes into their distinct values.

A trace of millions of events names a few thousand operators, processes and threads. Readers
keep each row's code and build each distinct value's derived facts (kind, op type, category)
once, instead of once per row.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from advisor.lazy import lazy_module

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
    import pyarrow as pa
    import pyarrow.compute as pc
else:
    np = lazy_module("numpy")
    pd = lazy_module("pandas")
    pa = lazy_module("pyarrow")
    pc = lazy_module("pyarrow.compute")


def hashable(value: Any) -> Any:
    """A pid or tid usable as a dict key (a list or object, which no writer emits: its repr)."""
    try:
        hash(value)
    except TypeError:
        return repr(value)
    return value


class Codes:
    """Small integer codes of values (pids, tids), in order of first appearance."""

    def __init__(self) -> None:
        self.index: dict[Any, int] = {}
        self.values: list[Any] = []

    def encode(self, values: list[Any]) -> np.ndarray:
        index = self.index
        try:
            new = [v for v in dict.fromkeys(values) if v not in index]
        except TypeError:
            values = [hashable(v) for v in values]
            new = [v for v in dict.fromkeys(values) if v not in index]
        for value in new:
            index[value] = len(self.values)
            self.values.append(value)
        return np.fromiter(map(index.__getitem__, values), dtype=np.int32, count=len(values))


def utf8(text: str) -> str:
    """The text, with a lone surrogate (which only the lenient NaN parser lets through) as �."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")
    return text


def arrow_strings(values: list[Any]) -> pa.Array:
    """`str()` of each value as one arrow array (None is "None", as str() writes it)."""
    try:
        array = pa.array(values, type=pa.large_string())
        if array.null_count == 0:
            return array
    except (pa.ArrowTypeError, pa.ArrowInvalid, UnicodeEncodeError):
        pass
    return pa.array(
        [utf8(v if isinstance(v, str) else str(v)) for v in values], type=pa.large_string()
    )


def utf8_bytes(texts: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """(offsets, bytes) of an arrow string array: cell i is bytes[offsets[i]:offsets[i + 1]]
    (empty for a null). Views of the array's buffers where it is one chunk, so NumPy can
    test every cell's bytes at once, without a Python string per cell."""
    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks()
    if not pa.types.is_string(texts.type) and not pa.types.is_large_string(texts.type):
        texts = texts.cast(pa.large_string())
    width = np.int64 if pa.types.is_large_string(texts.type) else np.int32
    _, offsets_buffer, data_buffer = texts.buffers()
    first = texts.offset
    offsets = np.frombuffer(offsets_buffer, dtype=width)[first : first + len(texts) + 1]
    if data_buffer is None:  # every cell empty or null
        return np.zeros(len(texts) + 1, dtype=np.int64), np.zeros(0, dtype=np.uint8)
    start = int(offsets[0])
    data = np.frombuffer(data_buffer, dtype=np.uint8, count=int(offsets[-1]) - start, offset=start)
    return (offsets - start if start else offsets), data


def unique(texts: pa.Array) -> tuple[np.ndarray, list[str]]:
    """(code of each row, the distinct texts) of an arrow string array without nulls."""
    encoded = pc.dictionary_encode(texts)
    return (
        encoded.indices.to_numpy(zero_copy_only=False).astype(np.intp),
        encoded.dictionary.to_pylist(),
    )


def expand(codes: np.ndarray, values: list[Any]) -> np.ndarray:
    """values[code] of each row, as an object array (the distinct values shared)."""
    array = np.empty(len(values), dtype=object)
    array[:] = values
    return array[codes]


def per_row(texts: pa.Array, fn: Callable[[str], Any]) -> np.ndarray:
    """fn of each row's text, called once per distinct text."""
    codes, uniques = unique(texts)
    return expand(codes, [fn(text) for text in uniques])


def string_column(
    values: tuple[str | None, ...] | list[str | None], codes: np.ndarray
) -> pd.api.extensions.ExtensionArray:
    """A string column from its distinct values and each row's code into them."""
    return pd.array(list(values), dtype="string").take(codes)
