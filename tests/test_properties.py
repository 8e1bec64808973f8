"""Properties of the parsers every input goes through, on generated input (hypothesis).

CSV cells (advisor.formats.csv_text and .numbers), trace JSON cut anywhere
(advisor.formats.stream) and rule expressions (advisor.engine.expr): whatever the input, the
only failure is the project's own error type. Evidence rows are ordered as pandas orders
them (advisor.engine.row_order.stable_order).
"""

from __future__ import annotations

import contextlib
import math
import operator
import struct
from pathlib import Path

import numpy as np
import orjson
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from advisor.compat import zip_strict
from advisor.engine.expr import ExprError, Scope, compile_expression
from advisor.engine.row_order import stable_order
from advisor.errors import UnreadableInput
from advisor.formats import csv_text
from advisor.formats.cann_csv import SummaryCsv
from advisor.formats.csv_text import read_csv_strings
from advisor.formats.numbers import decimal_cells, to_numbers
from advisor.formats.stream import EventStream
from advisor.model import conform, conform_records

SETTINGS = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)

# ---------------------------------------------------------------------------------------------
# CSV normalisation

finite = st.floats(allow_nan=False, allow_infinity=False, width=64)


class Warnings:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str | None]] = []

    def __call__(self, file, problem, *, line=None, column=None) -> None:  # noqa: ANN001
        self.calls.append((problem, column))


@SETTINGS
@given(st.lists(st.text(max_size=12), max_size=30))
def test_to_numbers_never_raises(cells: list[str]) -> None:
    warn = Warnings()
    out = to_numbers(pd.Series(cells, dtype=object), file="f.csv", column="c", warn=warn)
    assert out.dtype == "float64" and len(out) == len(cells)
    assert len(warn.calls) <= 1  # one warning per column at most
    assert all(math.isfinite(v) or math.isnan(v) for v in out)


@SETTINGS
@given(st.lists(finite, min_size=1, max_size=30))
def test_numbers_round_trip(values: list[float]) -> None:
    warn = Warnings()
    out = to_numbers(pd.Series([repr(v) for v in values]), file="f.csv", column="c", warn=warn)
    assert list(out) == values and not warn.calls


@SETTINGS
@given(
    st.lists(
        st.one_of(finite.map(repr), st.sampled_from(["abc", "inf", "1e999", "x1"])),
        min_size=1,
        max_size=30,
    )
)
def test_bad_cells_become_nan_with_one_warning(cells: list[str]) -> None:
    warn = Warnings()
    out = to_numbers(pd.Series(cells), file="f.csv", column="c", warn=warn)
    bad = [not math.isfinite(float(c)) if c not in ("abc", "x1") else True for c in cells]
    assert [math.isnan(v) for v in out] == bad
    assert len(warn.calls) == (1 if any(bad) else 0)
    if any(bad):
        assert warn.calls[0][1] == "c" and f"{sum(bad)} cell" in warn.calls[0][0]


@SETTINGS
@given(
    st.lists(st.lists(st.text(max_size=8), min_size=1, max_size=4), min_size=0, max_size=6),
    st.binary(max_size=40),
)
def test_read_csv_strings_only_unreadable(
    tmp_path: Path, rows: list[list[str]], noise: bytes
) -> None:
    path = tmp_path / "t.csv"
    path.write_bytes("\n".join(",".join(r) for r in rows).encode("utf-8", "replace") + noise)
    try:
        names, df = read_csv_strings(path, warn=Warnings())
    except UnreadableInput as exc:
        assert "t.csv" in str(exc) and "\n" not in str(exc).strip()
        return
    assert len(df.columns) == len(names)


csv_piece = st.sampled_from(
    ["a", "1.5", " 2\t", ",", '"', '""', '"x,y"', "\n", "\r\n", "", "é", " "]
)


def _read_both(path: Path, monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """What read_csv_strings gives for `path` (frame or error, and warnings) by the small-file
    path where it takes the file, and by pyarrow."""
    outcomes = []
    for limit in (csv_text.SMALL_CSV_BYTES, -1):
        monkeypatch.setattr(csv_text, "SMALL_CSV_BYTES", limit)
        warn = Warnings()
        try:
            names, frame = read_csv_strings(path, warn=warn)
            outcomes.append((names, frame, warn.calls))
        except UnreadableInput as exc:
            outcomes.append(str(exc))
    return outcomes


@SETTINGS
@given(st.lists(st.lists(csv_piece, max_size=6).map("".join), min_size=1, max_size=8))
def test_small_csv_read_as_pyarrow_reads_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lines: list[str]
) -> None:
    """Regular or not (ragged rows, quotes, cells across lines, empty lines, CRLF), a small
    file reads the same by the csv module's path as by pyarrow's, warnings included."""
    path = tmp_path / "t.csv"
    path.write_bytes(("h1,h2\n" + "\n".join(lines)).encode())
    small, arrow = _read_both(path, monkeypatch)
    if isinstance(arrow, str) or isinstance(small, str):
        assert small == arrow
        return
    assert small[0] == arrow[0] and small[2] == arrow[2]
    pd.testing.assert_frame_equal(small[1], arrow[1])


def test_small_csv_path_takes_regular_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The property above holds for files the small path declines too: here it takes them."""
    path = tmp_path / "t.csv"
    path.write_bytes(b'ID,Shape,Note\r\n1,"8,128"," a ""b"" "\r\n\r\n2,\t3 ,\r\n')
    columns = ["ID", "Shape", "Note"]
    assert csv_text._read_small(path, columns) == {
        "ID": ["1", "2"],
        "Shape": ["8,128", "3"],
        "Note": ['a "b"', ""],
    }
    small, arrow = _read_both(path, monkeypatch)
    pd.testing.assert_frame_equal(small[1], arrow[1])
    for irregular in (b"ID,Shape,Note\n1,2\n", b'ID,Shape,Note\n1,"a\nb",3\n', b"ID,Shape,Note\n"):
        path.write_bytes(irregular)
        assert csv_text._read_small(path, columns) is None


decimal_text = st.one_of(
    finite.map(repr),
    st.from_regex(
        r"[+-]?(?:[0-9]{1,25}\.?[0-9]{0,25}|\.[0-9]{1,25})(?:[eE][+-]?[0-9]{1,3})?",
        fullmatch=True,
    ),
)
number_cell = st.one_of(
    decimal_text,
    st.sampled_from(["N/A", "na", "-", "NULL", "", "nan", "inf", "1_0", "0x1", "1e", "١", "+-1"]),
    st.text(max_size=4),
)


@SETTINGS
@given(st.lists(number_cell, min_size=1, max_size=30))
def test_decimal_cells_read_as_to_numbers(cells: list[str]) -> None:
    """A small file's numbers read without arrow are to_numbers' figures to the bit; any
    cell they cannot vouch for sends the column to to_numbers."""
    cells = [cell.strip() for cell in cells]
    fast = decimal_cells(cells)
    warn = Warnings()
    slow = to_numbers(pd.Series(cells, dtype=object), file="f.csv", column="c", warn=warn)
    if fast is not None:
        assert not warn.calls
        assert [struct.pack("<d", v) for v in fast] == [struct.pack("<d", v) for v in slow]


def test_decimal_cells_decline_what_they_cannot_vouch_for() -> None:
    assert decimal_cells(["1.", ".5", "-0", "1E+05", "N/A", "007"]) is not None
    for odd in ("1_0", " 1", "0x10", "1e400", "١", "inf", "1e"):
        assert decimal_cells(["1", odd]) is None, odd


def test_summary_csv_keeps_a_small_file_as_cells(tmp_path: Path) -> None:
    """The property below compares the two paths: here a small file takes the cells' path."""
    path = tmp_path / "t.csv"
    path.write_text("Value,Name\n1.5,a\nN/A,N/A\nabc,b\n", encoding="utf-8")
    warn = Warnings()
    csv = SummaryCsv(path, "t.csv", warn)
    assert csv.rows == 3 and csv._text.cells is not None and csv._text._frame is None
    assert csv.number("Value").tolist()[0] == 1.5 and warn.calls == [
        ("1 cell is not numbers (first: 'abc')", "Value")
    ]
    assert csv.text("Name").isna().tolist() == [False, True, False]
    assert csv._text._frame is None  # no column read needed the whole frame


@SETTINGS
@given(
    st.lists(
        st.tuples(number_cell, st.sampled_from(["a", "N/A", "é", "", "-", "x y"])),
        min_size=1,
        max_size=8,
    )
)
def test_summary_csv_small_path_reads_as_frame_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rows: list[tuple[str, str]]
) -> None:
    """A summary CSV kept as cells gives the text, numbers, cells and warnings that the same
    file read into a frame gives."""
    path = tmp_path / "t.csv"
    lines = ["Value,Name,Name"] + [f'"{n.replace(chr(34), "")}",{t},{t}' for n, t in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    seen = []
    for limit in (csv_text.SMALL_CSV_BYTES, -1):
        monkeypatch.setattr(csv_text, "SMALL_CSV_BYTES", limit)
        warn = Warnings()
        try:
            csv = SummaryCsv(path, "t.csv", warn)
        except UnreadableInput as exc:
            seen.append(str(exc))
            continue
        csv.rename({"Name#2": "Label"})
        seen.append(
            (
                csv.rows,
                csv.written,
                [csv.text(c) for c in ("Value", "Name", "Label")],
                [csv.number(c) for c in ("Value", "Name", "Label")],
                csv.cells("Value"),
                csv.df,
                warn.calls,
            )
        )
    small, frame = seen
    if isinstance(small, str) or isinstance(frame, str):
        assert small == frame
        return
    assert small[:2] == frame[:2] and small[6] == frame[6]
    for got, want in zip_strict([*small[2], *small[3], small[4]], [*frame[2], *frame[3], frame[4]]):
        pd.testing.assert_series_equal(got, want, check_exact=True)
    pd.testing.assert_frame_equal(small[5], frame[5], check_exact=True)


# ---------------------------------------------------------------------------------------------
# trace decoding

scalar = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**53), 2**53),
    finite,
    st.text(alphabet=st.characters(codec="utf-8"), max_size=8),
)
event = st.dictionaries(
    st.sampled_from(["ph", "name", "ts", "dur", "pid", "tid", "args"]),
    st.one_of(scalar, st.dictionaries(st.text(max_size=4), scalar, max_size=3)),
    max_size=7,
)
events = st.lists(event, max_size=40)


def decode_all(path: Path, chunk: int) -> list:
    stream = EventStream(path, chunk_bytes=chunk)
    return [e for batch in stream for e in batch]


@SETTINGS
@given(events, st.booleans(), st.sampled_from([16, 64, 257, 1 << 20]))
def test_batch_size_does_not_change_events(
    tmp_path: Path, items: list, wrapped: bool, chunk: int
) -> None:
    doc = {"traceEvents": items, "x": 1} if wrapped else items
    path = tmp_path / "t.json"
    path.write_bytes(orjson.dumps(doc))
    assert decode_all(path, chunk) == items == decode_all(path, 1 << 20)


@SETTINGS
@given(events, st.booleans(), st.floats(0, 1), st.sampled_from([16, 64, 1 << 20]))
def test_cut_anywhere_only_unreadable(
    tmp_path: Path, items: list, wrapped: bool, where: float, chunk: int
) -> None:
    data = orjson.dumps({"traceEvents": items} if wrapped else items)
    path = tmp_path / "t.json"
    path.write_bytes(data[: int(len(data) * where)])
    try:
        got = decode_all(path, chunk)
    except UnreadableInput as exc:
        assert "t.json" in str(exc)
        return
    assert got == items[: len(got)]  # a prefix of the events, never invented ones


@SETTINGS
@given(st.binary(max_size=200), st.sampled_from([16, 1 << 20]))
def test_random_bytes_only_unreadable(tmp_path: Path, data: bytes, chunk: int) -> None:
    path = tmp_path / "t.json"
    path.write_bytes(data)
    with contextlib.suppress(UnreadableInput):
        decode_all(path, chunk)


# ---------------------------------------------------------------------------------------------
# expression language

TABLE = pd.DataFrame({"a": [1.0, -2.5, 3.0, 0.0], "b": [4.0, 5.0, -6.0, 0.5]})
SCOPE = Scope(tables={"t": TABLE}, values={"x": 3.0, "y": -1.5}, functions={})
OPS = {"+": operator.add, "-": operator.sub, "*": operator.mul}
CMPS = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
    "==": operator.eq,
    "!=": operator.ne,
}


def terms(depth: int) -> st.SearchStrategy[tuple[str, object]]:
    """(expression text, reference value: float or list of floats per row)."""
    leaf = st.one_of(
        st.integers(-20, 20).map(lambda n: (f"({n})", float(n))),
        st.sampled_from(["x", "y"]).map(lambda n: (n, SCOPE.values[n])),
        st.sampled_from(["a", "b"]).map(lambda c: (f"t.{c}", list(TABLE[c]))),
    )
    if depth == 0:
        return leaf
    sub = terms(depth - 1)
    return st.one_of(
        leaf,
        st.tuples(sub, st.sampled_from(sorted(OPS)), sub).map(
            lambda t: (f"({t[0][0]} {t[1]} {t[2][0]})", _apply(OPS[t[1]], t[0][1], t[2][1]))
        ),
    )


def _apply(op, left, right):  # noqa: ANN001, ANN202 (scalars or per-row lists)
    if isinstance(left, list) or isinstance(right, list):
        lefts = left if isinstance(left, list) else [left] * len(TABLE)
        rights = right if isinstance(right, list) else [right] * len(TABLE)
        return [op(a, b) for a, b in zip_strict(lefts, rights)]
    return op(left, right)


def evaluate(text: str):  # noqa: ANN201
    expr = compile_expression(text, functions=(), tables={"t": ("a", "b")}, names=("x", "y"))
    value = expr.evaluate(SCOPE)
    return list(value) if isinstance(value, pd.Series) else value


@SETTINGS
@given(terms(3))
def test_arithmetic_matches_python(term: tuple[str, object]) -> None:
    text, expected = term
    assert evaluate(text) == pytest.approx(expected)


@SETTINGS
@given(terms(2), st.sampled_from(sorted(CMPS)), terms(2))
def test_comparisons_match_python(left: tuple, cmp: str, right: tuple) -> None:
    expected = _apply(CMPS[cmp], left[1], right[1])
    got = evaluate(f"{left[0]} {cmp} {right[0]}")
    assert (list(map(bool, got)) if isinstance(got, list) else bool(got)) == expected


@settings(max_examples=100, deadline=None)
@given(
    st.one_of(
        st.text(max_size=60),
        st.text(alphabet="t.abxy()+-*/%<>=! 0123456789[]'\"_andortin", max_size=40),
    )
)
def test_random_text_only_expr_error(text: str) -> None:
    with contextlib.suppress(ExprError):
        evaluate(text)


# ---------------------------------------------------------------------------------------------
# Evidence order

KEY_COLUMNS = {
    "float": (st.one_of(st.none(), st.sampled_from([-1.5, -0.0, 0.0, 2.0, 7.25])), "float64"),
    "text": (st.one_of(st.none(), st.sampled_from(["", "a", "B", "b", "é", "aa"])), "string"),
    "int": (st.one_of(st.none(), st.integers(-3, 3)), "Int64"),
    "flag": (st.booleans(), "bool"),
}


@SETTINGS
@given(
    st.integers(0, 12).flatmap(
        lambda n: st.lists(
            st.sampled_from(sorted(KEY_COLUMNS)).flatmap(
                lambda kind: st.tuples(
                    st.just(kind),
                    st.lists(KEY_COLUMNS[kind][0], min_size=n, max_size=n),
                    st.booleans(),
                )
            ),
            min_size=1,
            max_size=3,
        )
    )
)
def test_evidence_order_is_pandas_stable_sort(keys: list[tuple[str, list, bool]]) -> None:
    columns = {
        f"k{i}": pd.array(values, dtype=KEY_COLUMNS[kind][1])
        for i, (kind, values, _) in enumerate(keys)
    }
    frame = pd.DataFrame(columns)
    expected = frame.sort_values(
        list(columns), ascending=[a for _, _, a in keys], kind="stable", na_position="last"
    ).index.to_numpy()
    got = stable_order([(frame[c].array, a) for c, (_, _, a) in zip_strict(columns, keys)])
    assert got.tolist() == expected.tolist()


# ---------------------------------------------------------------------------------------------
# A provider's rows built in the contract's dtypes

RECORD_VALUES = st.one_of(
    st.none(),
    st.just(pd.NA),
    st.sampled_from(["", "a", "é", "1", "2.5", "x y"]),
    st.integers(-(2**40), 2**40),
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(-5, 5).map(np.int64),
    st.floats(-1e6, 1e6).map(np.float64),
    st.booleans(),
)
RECORD_COLUMNS = ("kind", "pattern", "occurrences", "total_us", "step", "fused_elsewhere")


@SETTINGS
@given(
    st.lists(
        st.dictionaries(
            st.sampled_from(RECORD_COLUMNS), RECORD_VALUES, max_size=len(RECORD_COLUMNS)
        ),
        max_size=5,
    )
)
def test_conform_records_is_conform_of_the_frame(rows: list[dict]) -> None:
    """Columns built typed where their values are plain, cast otherwise: the table conform
    makes of the rows' frame, to the bit and dtype, whatever the values."""
    expected = conform("fusion_candidates", pd.DataFrame(rows, columns=list(RECORD_COLUMNS)))
    got = conform_records("fusion_candidates", rows, RECORD_COLUMNS)
    pd.testing.assert_frame_equal(got, expected, check_exact=True)
    assert got.columns.dtype == object


# ---------------------------------------------------------------------------------------------
# A trace's number columns (advisor.formats.trace_columns.floats)

TRACE_NUMBERS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**64), 2**64),  # past float64's exact integers and int64's range
    st.sampled_from([2**53, 2**53 + 1, -(2**63), 2**63 - 1, 0]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["12", "2.5", "x", "", "nan"]),
)


def _numpy_floats(values: list) -> np.ndarray:
    """What floats gave before it asked arrow first: NumPy's conversion, then pandas'."""
    try:
        return np.array(values, dtype="float64")
    except (TypeError, ValueError):
        pass
    return pd.to_numeric(pd.Series(values, dtype="object"), errors="coerce").to_numpy(
        "float64", na_value=np.nan
    )


@SETTINGS
@given(st.lists(TRACE_NUMBERS, max_size=40))
def test_trace_number_columns_are_numpys_conversion(values: list) -> None:
    """floats: arrow's conversion where it takes the values, NumPy's where it refuses, the
    same float64 values to the bit either way (an integer a float64 cannot hold exactly is
    NumPy's rounding; text is parsed or NaN)."""
    from advisor.formats.trace_columns import floats

    got = floats(values)
    expected = _numpy_floats(values)
    assert got.dtype == np.float64
    assert got.tobytes() == expected.tobytes() or np.array_equal(got, expected, equal_nan=True)
    assert np.array_equal(np.signbit(got), np.signbit(expected))


def test_a_column_of_none_and_integers_converts_without_numpy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """floats takes a host call's stream, task id and size (None but for device tasks) by
    arrow, where NumPy calls Python once per None: the point of asking arrow first. The
    array can be written to, as NumPy's was."""
    from advisor.formats import trace_columns

    values = [None, 3, None, 2**40, None]

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("NumPy converted a column arrow takes")

    monkeypatch.setattr(trace_columns.np, "array", refuse)
    got = trace_columns.floats(values)
    assert got[1] == 3 and got[3] == 2**40 and np.isnan(got[[0, 2, 4]]).all()
    assert got.flags.writeable
