"""The rule expression language: semantics, built-in functions, and what it refuses."""

from __future__ import annotations

import contextlib
import math
import re
import tracemalloc
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from advisor.engine import expr as expr_module
from advisor.engine import functions as functions_module
from advisor.engine.expr import (
    ExprError,
    Expression,
    MissingData,
    Scope,
    compile_expression,
)
from advisor.engine.functions import BUILTIN_FUNCTIONS
from advisor.model import TABLES

TABLE_COLUMNS = {name: spec.column_names for name, spec in TABLES.items()}
NAMES = ("x", "y", "z", "ops", "a", "b", "c")


def _steps() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "step": pd.Series([1, 2, 3, 4], dtype="int64"),
            "duration_us": [100.0, 200.0, np.nan, 300.0],
            "free_us": [10.0, 0.0, 5.0, np.nan],
            "bubble_us": [np.nan, 1.0, np.nan, 2.0],
            "model_id": pd.Series([1, None, 1, 2], dtype="Int64"),
        }
    )


def _device_ops() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "name": pd.Series(["MatMulV2", "Cast", None, "aclnnAdd", "TransData"], dtype="string"),
            "op_type": pd.Series(["MatMulV2", "Cast", "Cast", "Add", "TransData"], dtype="string"),
            "duration_us": [50.0, 1.0, 2.0, 3.0, 4.0],
            "category": pd.Series(
                ["compute", "memcpy", "compute", None, "compute"], dtype="string"
            ),
        }
    )


def scope(**values: Any) -> Scope:
    tables = {"steps": _steps(), "device_ops": _device_ops()}
    return Scope(
        tables, {"x": 2, "y": 0, "ops": ["Cast", "TransData"], **values}, BUILTIN_FUNCTIONS
    )


def comp(text: str, names: tuple[str, ...] = NAMES) -> Expression:
    return compile_expression(text, functions=BUILTIN_FUNCTIONS, tables=TABLE_COLUMNS, names=names)


def ev(text: str, **values: Any) -> Any:
    return comp(text).evaluate(scope(**values))


def as_list(value: pd.Series) -> list[Any]:
    assert isinstance(value, pd.Series)
    return [None if pd.isna(v) else v for v in value.tolist()]


def same(actual: Any, expected: Any) -> bool:
    if isinstance(expected, float) and math.isnan(expected):
        return isinstance(actual, float) and math.isnan(actual)
    return actual == pytest.approx(expected) and type(actual) is type(expected)


# --- built-in functions: values ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("sum(steps.duration_us)", 600.0),
        ("sum(filter(steps.duration_us, steps.step > 9))", 0.0),
        ("sum(steps.duration_us > 150)", 2.0),
        ("mean(steps.duration_us)", 200.0),
        ("mean(filter(steps.duration_us, steps.step > 9))", math.nan),
        ("median(steps.free_us)", 5.0),
        ("median(filter(steps.free_us, steps.step > 9))", math.nan),
        ("min(steps.duration_us)", 100.0),
        ("max(steps.duration_us)", 300.0),
        ("min(steps.model_id)", 1),
        ("max(filter(steps.duration_us, steps.step > 9))", math.nan),
        ("min(x, 5, -1.5)", -1.5),
        ("max(x, 5, y)", 5),
        ("max((1, 7, 3))", 7),
        ("count(steps.duration_us > 150)", 2),
        ("count(steps.duration_us)", 3),
        ("count(x)", 1),
        ("count(x > 5)", 0),
        ("rows(device_ops)", 5),
        ("rows(steps)", 4),
        ("std(steps.duration_us)", 100.0),
        ("std(5)", math.nan),
        ("quantile(steps.duration_us, 0.5)", 200.0),
        ("quantile(steps.duration_us, 1)", 300.0),
        ("abs(-x)", 2),
        ("abs(y - 2.5)", 2.5),
        ("round(2.567, 1)", 2.6),
        ("round(2.5)", 2.0),
        ("share(sum(steps.free_us), sum(steps.duration_us))", 0.025),
        ("share(x, y)", 0.0),
        ("share(x, None)", 0.0),
        ("nunique(device_ops.op_type)", 4),
        ("nunique(device_ops.category)", 2),
        ("any(steps.free_us)", True),
        ("any(steps.free_us > 100)", False),
        ("all(steps.step > 0)", True),
        ("all(steps.duration_us > 50)", False),  # the missing duration compares false
        ("all(steps.bubble_us)", True),  # missing values are skipped
        ("all(steps.free_us)", False),
        ("sum(top(steps.duration_us, 2))", 500.0),
        ("coalesce(None, 3)", 3),
        ("coalesce(x, 3)", 2),
        ("clip(x, 3, 10)", 3),
        ("clip(x, None, 1)", 1),
        ("log10(1000)", 3.0),
        ("log10(0)", -math.inf),
        ("log10(-1)", math.nan),
        ("isin(x, 1, 2)", True),
        ("isin(x, (3, 4))", False),
        ("contains('MatMulV2', 'matmul')", True),
        ("contains('MatMulV2', 'matmul', case=True)", False),
        ("startswith('aclnnAdd', 'aclnn')", True),
        ("matches('MatMulV2', 'Mul(V2)?$')", True),
        ("isna(None)", True),
        ("notna(x)", True),
        ("where(x > 1, 'big', 'small')", "big"),
    ],
)
def test_function_values(text: str, expected: Any) -> None:
    assert same(ev(text), expected)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("abs(steps.duration_us - 200)", [100.0, 0.0, None, 100.0]),
        ("round(steps.duration_us / 3, 1)", [33.3, 66.7, None, 100.0]),
        ("share(steps.free_us, steps.duration_us)", [0.1, 0.0, 0.0, None]),
        ("share(steps.free_us, 0)", [0.0, 0.0, 0.0, 0.0]),
        ("where(steps.duration_us > 150, 1, 0)", [0, 1, 0, 1]),
        (
            "where(steps.duration_us > 150, steps.duration_us, steps.free_us)",
            [10.0, 200.0, 5.0, 300.0],
        ),
        ("filter(steps.free_us, steps.duration_us > 150)", [0.0, None]),
        ("isin(device_ops.op_type, 'Cast', 'Add')", [False, True, True, True, False]),
        ("isin(device_ops.name, ops)", [False, True, False, False, True]),
        ("contains(device_ops.name, 'add')", [False, False, False, True, False]),
        ("contains(device_ops.name, 'add', case=True)", [False, False, False, False, False]),
        ("contains(device_ops.name, '.')", [False, False, False, False, False]),
        ("startswith(device_ops.name, ('Mat', 'Cas'))", [True, True, False, False, False]),
        ("matches(device_ops.name, '^(MatMul|Trans)')", [True, False, False, False, True]),
        ("matches(device_ops.op_type, 'a$')", [False, False, False, False, True]),
        ("top(steps.duration_us, 2)", [300.0, 200.0]),
        ("coalesce(steps.bubble_us, 0)", [0.0, 1.0, 0.0, 2.0]),
        ("clip(steps.duration_us, 150, 250)", [150.0, 200.0, None, 250.0]),
        ("log10(steps.duration_us)", [2.0, math.log10(200), None, math.log10(300)]),
        ("log10(steps.free_us)", [1.0, -math.inf, math.log10(5), None]),
        ("min(steps.duration_us, 150)", [100.0, 150.0, 150.0, 150.0]),
        ("max(steps.duration_us, steps.free_us)", [100.0, 200.0, 5.0, 300.0]),
        ("isna(steps.bubble_us)", [True, False, True, False]),
        ("notna(steps.bubble_us)", [False, True, False, True]),
    ],
)
def test_function_series(text: str, expected: list[Any]) -> None:
    assert as_list(ev(text)) == pytest.approx(expected, nan_ok=True)


def test_filter_of_a_table_keeps_its_rows() -> None:
    assert ev("rows(filter(device_ops, device_ops.category == 'compute'))") == 3
    assert ev("rows(filter(device_ops, x > 5))") == 0
    assert ev("rows(filter(device_ops, x > 1))") == 5


def test_aggregations_return_plain_python_numbers() -> None:
    for text in (
        "sum(steps.model_id)",
        "min(steps.model_id)",
        "mean(steps.model_id)",
        "count(steps.step)",
        "nunique(steps.step)",
        "max(steps.step)",
    ):
        value = ev(text)
        assert type(value) in (int, float), text
    with warnings.catch_warnings():  # pandas 2 warned "Mean of empty slice" on a terminal
        warnings.simplefilter("error")
        assert BUILTIN_FUNCTIONS["sum"](pd.Series([], dtype="float64")) == 0.0
        for name in ("mean", "median", "std"):
            for values in ([], [np.nan], [np.nan, np.nan]):
                assert math.isnan(BUILTIN_FUNCTIONS[name](pd.Series(values, dtype="float64")))
        assert math.isnan(BUILTIN_FUNCTIONS["quantile"](pd.Series([np.nan]), 0.5))


def test_function_argument_errors_become_expr_errors() -> None:
    for text, problem in [
        ("quantile(steps.duration_us, 2)", "between 0 and 1"),
        ("sum(device_ops.name)", "needs numbers"),
        ("top(steps.duration_us, 1.5)", "whole number"),
        ("sum(x, 1)", "sum() takes 1 positional argument"),
        ("rows(x)", "rows() needs a table"),
        ("contains(device_ops.name, 3)", "needs text"),
        ("matches(device_ops.name, '(')", "invalid regex"),
        ("matches(device_ops.name, 'a' * 201)", "regex is too long"),
        ("sum(device_ops)", "not a table"),
    ]:
        with pytest.raises(ExprError, match=re.escape(problem)):
            ev(text)


@pytest.mark.parametrize(
    "pattern",
    [
        "(a+)+$",
        "(a*)*",
        "(a|a)*",
        "(a|aa)+b",
        "((ab)*)+",
        "(?:x+)*y",
        r"(\d+){2,}",
    ],
)
def test_regex_with_nested_quantifiers_is_refused(pattern: str) -> None:
    """Refused when the expression is checked, before any text is matched against it."""
    with pytest.raises(ExprError, match="nested quantifiers"):
        ev(f"matches(device_ops.name, {pattern!r})")


@pytest.mark.parametrize("pattern", [".*.*.*x", "a+b+c+", r"\w{2,}\d*x+", "(?:a*b+c*)"])
def test_regex_with_many_unbounded_repeats_is_refused(pattern: str) -> None:
    with pytest.raises(ExprError, match="unbounded repeats"):
        ev(f"matches(device_ops.name, {pattern!r})")


@pytest.mark.parametrize(
    "pattern",
    [
        r"^MatMul(V2)?$",
        r"[(a+)+]",
        r"\(a+\)+",
        r"(ab)+",
        "a+b*",
        r"^aclnn.*Grad\d{1,3}$",
    ],
)
def test_regex_without_nested_quantifiers_is_accepted(pattern: str) -> None:
    assert isinstance(ev(f"matches(device_ops.name, {pattern!r})"), pd.Series)


def test_regex_sees_only_the_first_1000_characters() -> None:
    long_name = pd.Series(["x" * 1000 + "needle"], dtype="string")
    assert not BUILTIN_FUNCTIONS["matches"](long_name, "needle").iloc[0]
    assert BUILTIN_FUNCTIONS["matches"](long_name, "^x+$").iloc[0]


def test_every_function_documents_itself_with_an_example_that_runs() -> None:
    tables = _all_documented_tables()
    sample = Scope(tables, {}, BUILTIN_FUNCTIONS)
    for name, fn in BUILTIN_FUNCTIONS.items():
        doc = fn.__doc__ or ""
        assert doc.strip().splitlines()[0].endswith("."), name
        found = re.search(r"^\s*Example: (.+)$", doc, re.MULTILINE)
        assert found, f"{name} has no Example: line"
        example = compile_expression(
            found.group(1), functions=BUILTIN_FUNCTIONS, tables=TABLE_COLUMNS, names=()
        )
        assert f"{name}(" in example.source
        result = example.evaluate(sample)
        assert isinstance(result, (bool, int, float)), (name, result)


def _all_documented_tables() -> dict[str, pd.DataFrame]:
    """Every documented column with a few plausible values, for running doc examples."""
    values = {
        "float64": [1.0, 250.0, 4000.0, 20000.0],
        "int64": [1, 2, 3, 4],
        "Int64": [1, 2, None, 4],
        "bool": [True, False, True, False],
        "string": ["MatMulV2", "aclnnTranspose", "Cast", "TransData"],
    }
    return {
        name: pd.DataFrame(
            {c.name: pd.Series(values[c.dtype], dtype=c.dtype) for c in spec.columns}
        )
        for name, spec in TABLES.items()
    }


# --- operators and logic -------------------------------------------------------------------------


_EDGES = [0.0, -0.0, 1.5, -2.0, np.nan, np.inf, -np.inf, 256.0]


def _edge_steps() -> pd.DataFrame:
    """Columns of each kind the operators meet: floats with zeros of both signs, NaN and
    infinities, integers, nullable integers with missing values."""
    return pd.DataFrame(
        {
            "step": np.arange(len(_EDGES), dtype="int64") - 2,
            "duration_us": _EDGES,
            "free_us": _EDGES[::-1],
            "model_id": pd.array([1, None, 0, 2, 3, None, -1, 4], dtype="Int64"),
        }
    )


@pytest.mark.parametrize(
    ("text", "direct"),
    [
        ("steps.duration_us + steps.free_us", lambda s: s.duration_us + s.free_us),
        ("steps.duration_us - steps.free_us", lambda s: s.duration_us - s.free_us),
        ("steps.duration_us * steps.free_us", lambda s: s.duration_us * s.free_us),
        ("steps.duration_us / steps.free_us", lambda s: s.duration_us / s.free_us),
        ("steps.duration_us // steps.free_us", lambda s: s.duration_us // s.free_us),
        ("steps.duration_us % 3", lambda s: s.duration_us % 3),
        ("-((-steps.duration_us) // 256) * 256", lambda s: -((-s.duration_us) // 256) * 256),
        ("steps.duration_us / 0", lambda s: s.duration_us / 0),
        ("steps.duration_us // 0", lambda s: s.duration_us // 0),
        ("steps.duration_us % -0.0", lambda s: s.duration_us % -0.0),
        ("2.5 * steps.duration_us - 1", lambda s: 2.5 * s.duration_us - 1),
        ("steps.step / 0", lambda s: s.step / 0),
        ("steps.step * 3 + steps.step", lambda s: s.step * 3 + s.step),
        ("steps.step / steps.duration_us", lambda s: s.step / s.duration_us),
        ("steps.model_id * 2", lambda s: s.model_id * 2),
        ("steps.duration_us < steps.free_us", lambda s: s.duration_us < s.free_us),
        ("steps.duration_us != 0", lambda s: s.duration_us != 0),
        ("steps.duration_us == steps.duration_us", lambda s: s.duration_us == s.duration_us),
        ("steps.step >= -1.5", lambda s: s.step >= -1.5),
        ("0 < steps.duration_us <= 256", lambda s: (s.duration_us > 0) & (s.duration_us <= 256)),
        ("steps.model_id > 0", lambda s: (s.model_id > 0).fillna(False).astype(bool)),
        (
            "steps.duration_us > 0 and steps.free_us > 0",
            lambda s: (s.duration_us > 0) & (s.free_us > 0),
        ),
        ("steps.duration_us > 0 or steps.step > 3", lambda s: (s.duration_us > 0) | (s.step > 3)),
        (
            "filter(steps.duration_us, steps.step > 0) + steps.free_us",  # aligned by labels
            lambda s: s.duration_us[s.step > 0] + s.free_us,
        ),
        (
            "where(steps.duration_us > 0, steps.duration_us, None)",
            lambda s: s.duration_us.where(s.duration_us > 0, None),
        ),
        (
            "where(steps.free_us > 0, steps.duration_us, 0)",
            lambda s: s.duration_us.where(s.free_us > 0, 0),
        ),
        (
            "where(steps.free_us >= 0, steps.duration_us, steps.free_us)",
            lambda s: s.duration_us.where(s.free_us >= 0, s.free_us),
        ),
        (
            "where(steps.model_id > 0, -0.0, steps.free_us)",
            lambda s: pd.Series(-0.0, index=s.index).where(
                (s.model_id > 0).fillna(False).astype(bool), s.free_us
            ),
        ),
        (
            "where(steps.step > 0, steps.model_id, None)",  # not float: pandas' own where
            lambda s: s.model_id.where(s.step > 0, None),
        ),
        (
            "where(steps.step > 0, steps.duration_us, filter(steps.free_us, steps.step > 1))",
            lambda s: s.duration_us.where(s.step > 0, s.free_us[s.step > 1]),
        ),
    ],
)
def test_column_operators_give_what_pandas_gives(text: str, direct: Any) -> None:
    """Operators on columns give pandas' result exactly: values, the sign of zeros, dtype,
    index and name (the engine computes plain NumPy columns with NumPy, the rest with
    pandas)."""
    steps = _edge_steps()
    got = comp(text).evaluate(Scope({"steps": steps}, {}, BUILTIN_FUNCTIONS))
    expected = direct(steps)
    pd.testing.assert_series_equal(got, expected, check_exact=True)
    if expected.dtype == "float64":
        assert np.signbit(got.to_numpy()).tolist() == np.signbit(expected.to_numpy()).tolist()


def test_whole_numbers_where_a_float_column_is_chosen_give_floats() -> None:
    """`where(cond, 1, a float column)`: pandas 2 turned such a result back into integers
    when every value was round (with a FutureWarning), pandas 3 keeps floats; the engine
    gives floats on both, and no warning."""
    steps = pd.DataFrame({"step": [1, 2, 3], "free_us": [2.0, 4.0, 6.5]})
    scope = Scope({"steps": steps}, {}, BUILTIN_FUNCTIONS)
    for free in ([2.0, 4.0, 6.5], [2.0, 4.0, 6.0]):
        steps["free_us"] = free
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            got = comp("where(steps.step > 1, 1, steps.free_us)").evaluate(scope)
        assert got.dtype == np.float64
        assert got.tolist() == [2.0, 1.0, 1.0]


@pytest.mark.parametrize("dtype", ["string", "string[python]", "str", "object"])
@pytest.mark.parametrize(
    "text",
    [
        'device_ops.category == "compute"',
        '"compute" == device_ops.category',
        'device_ops.category != "compute"',
        '"memcpy" != device_ops.category',
        'device_ops.category == "absent"',
        'device_ops.category == ""',
    ],
)
def test_text_equality_gives_what_pandas_gives(dtype: str, text: str) -> None:
    """`column == "text"` is answered per distinct value for arrow text columns: the rows,
    index and name are those of pandas' comparison with missing values false, for every
    text dtype a table may hold, and for the same column compared again (codes kept)."""
    ops = _device_ops().astype({"category": dtype})
    ops.index = pd.Index([10, 11, 12, 13, 14])
    column, op, value = text.partition(" == ") if " == " in text else text.partition(" != ")
    left, right = (
        (ops["category"], value.strip('"'))
        if "device_ops" in column
        else (
            column.strip('"'),
            ops["category"],
        )
    )
    direct = (left == right) if op == " == " else (left != right)
    expected = direct.fillna(False).astype(bool) if direct.dtype != bool else direct
    for _ in range(2):
        got = comp(text).evaluate(Scope({"device_ops": ops}, {}, BUILTIN_FUNCTIONS))
        pd.testing.assert_series_equal(got, expected, check_exact=True)


def test_and_or_not_are_elementwise_on_series() -> None:
    assert as_list(ev("steps.duration_us > 150 and steps.free_us >= 0")) == [
        False,
        True,
        False,
        False,
    ]
    assert as_list(ev("steps.duration_us > 250 or steps.free_us > 5")) == [True, False, False, True]
    assert as_list(ev("not steps.duration_us > 150")) == [True, False, True, False]
    assert as_list(ev("not steps.bubble_us")) == [True, False, True, False]


def test_and_or_mix_series_and_scalars() -> None:
    assert as_list(ev("steps.duration_us > 150 and x")) == [False, True, False, True]
    assert as_list(ev("steps.duration_us > 150 and y")) == [False, False, False, False]
    assert as_list(ev("steps.duration_us > 150 or x")) == [True, True, True, True]


def test_scalar_and_or_short_circuit_and_return_bool() -> None:
    assert ev("x and 5") is True
    assert comp("y and z").evaluate(scope()) is False  # z is never read: no MissingData
    assert comp("x or z").evaluate(scope()) is True
    with pytest.raises(MissingData):
        comp("x and z").evaluate(scope())
    assert ev("not y") is True
    assert ev("x or y") is True


def test_missing_values_are_false() -> None:
    assert ev("not a", a=float("nan")) is True
    assert ev("a or y", a=None) is False
    assert ev("a and x", a=pd.NA) is False


def test_chained_comparisons() -> None:
    assert ev("1 < x < 3") is True
    assert ev("1 < x < 2") is False
    assert ev("0 <= y == 0 < x") is True
    assert as_list(ev("150 < steps.duration_us <= 300")) == [False, True, False, True]
    assert as_list(ev("0 < steps.free_us < steps.duration_us")) == [True, False, False, False]


def test_chained_comparison_stops_at_first_false_link() -> None:
    assert comp("x > 5 > z").evaluate(scope()) is False  # z is never read


def test_in_on_series_and_scalars() -> None:
    assert as_list(ev("device_ops.op_type in ('Cast', 'Add')")) == [False, True, True, True, False]
    assert as_list(ev("device_ops.op_type not in ['Cast', 'Add']")) == [
        True,
        False,
        False,
        False,
        True,
    ]
    assert as_list(ev("device_ops.name in ops")) == [False, True, False, False, True]
    assert ev("'Cast' in device_ops.op_type") is True
    assert ev("'Conv2D' in device_ops.op_type") is False
    assert ev("x in (1, 2, -3)") is True
    assert ev("x not in (1, 2)") is False
    assert ev("'Mul' in 'MatMulV2'") is True
    assert ev("'Cast' in ops") is True


def test_division_by_zero() -> None:
    assert math.isnan(ev("x / y"))
    assert math.isnan(ev("x // y"))
    assert math.isnan(ev("x % y"))
    assert math.isnan(ev("y / 0"))
    assert math.isnan(ev("0 ** -1"))
    assert as_list(ev("steps.duration_us / y")) == [math.inf, math.inf, None, math.inf]


def test_arithmetic_broadcasts_over_series() -> None:
    assert as_list(ev("steps.duration_us * 2 + x")) == [202.0, 402.0, None, 602.0]
    assert as_list(ev("-steps.free_us ** 2")) == [-100.0, -0.0, -25.0, None]
    assert as_list(ev("steps.duration_us - steps.free_us")) == [90.0, 200.0, None, None]
    assert ev("7 // 2 + 7 % 2 + 2 ** 3") == 12
    assert math.isnan(ev("(-8) ** 0.5"))


def test_results_are_plain_python_scalars() -> None:
    assert type(ev("max(steps.step) * 2")) is int
    assert type(ev("sum(steps.duration_us) > 10")) is bool
    assert type(ev("a + 1", a=np.float32(1.5))) is float


def test_operator_errors_become_expr_errors_with_the_text() -> None:
    with pytest.raises(ExprError, match=re.escape("'x + ops'")):
        ev("x + ops")
    with pytest.raises(ExprError, match="TypeError in \"x < '1'\": '<' not supported"):
        ev("x < '1' and 1")
    with pytest.raises(ExprError, match="identically-labeled"):
        ev("steps.duration_us == device_ops.duration_us")


# --- references ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("table", "column"),
    [(table, column) for table, columns in TABLE_COLUMNS.items() for column in columns],
)
def test_every_documented_column_can_be_referenced(table: str, column: str) -> None:
    expression = comp(f"{table}.{column}")
    assert expression.columns == frozenset({(table, column)})
    assert expression.names == frozenset() and expression.tables == frozenset()
    frame = pd.DataFrame({column: [1, 2]})
    assert as_list(expression.evaluate(Scope({table: frame}, {}, {}))) == [1, 2]


def test_expression_lists_what_it_references() -> None:
    expression = comp("share(sum(steps.free_us), x) > y and rows(device_ops) > 0")
    assert expression.names == frozenset({"x", "y"})
    assert expression.columns == frozenset({("steps", "free_us")})
    assert expression.tables == frozenset({"device_ops"})
    assert expression.source == "share(sum(steps.free_us), x) > y and rows(device_ops) > 0"


def test_bare_names_may_be_filter_columns() -> None:
    names = ("duration_us", "category")
    expression = comp("duration_us > 3 and category == 'compute'", names)
    ops = _device_ops()
    values = {c: ops[c] for c in ops.columns}
    result = expression.evaluate(Scope({}, values, BUILTIN_FUNCTIONS))
    assert as_list(result) == [True, False, False, False, True]


@pytest.mark.parametrize(
    ("text", "ref"),
    [
        ("steps.fp_bp_us > 1", "steps.fp_bp_us"),
        ("sum(comm_ops.duration_us)", "comm_ops.duration_us"),
        ("rows(host_ops)", "host_ops"),
        ("z + 1", "z"),
    ],
)
def test_missing_data_at_evaluation_names_what_is_missing(text: str, ref: str) -> None:
    with pytest.raises(MissingData, match=re.escape(repr(ref))) as info:
        ev(text)
    assert info.value.ref == ref


def test_missing_function_at_evaluation_is_an_expr_error() -> None:
    expression = comp("sum(x)")
    with pytest.raises(ExprError, match="'sum' is not available"):
        expression.evaluate(Scope({}, {"x": 1}, {}))


# --- what is refused -----------------------------------------------------------------------------

REJECTED = [
    ("steps.__class__", "attribute access is not allowed: 'steps.__class__'"),
    ("().__class__.__bases__[0].__subclasses__()", "names starting with '_'"),
    ("__import__('os').system('id')", "'__import__'"),
    ("open('/etc/passwd')", "unknown function: 'open'"),
    ("getattr(steps, 'x')", "unknown function: 'getattr'"),
    ("eval('1')", "unknown function: 'eval'"),
    ("x[0]", "subscripts are not allowed"),
    ("x[1:2]", "subscripts are not allowed"),
    ("lambda: 1", "lambda is not allowed"),
    ("[a for a in b]", "comprehensions are not allowed"),
    ("(a for a in b)", "generator expressions are not allowed"),
    ('f"{x}"', "f-strings are not allowed"),
    ("@x", "syntax error at col 1"),
    ("x +", "syntax error at col"),
    ("steps.duration_us.sum()", "method calls are not allowed"),
    ("a if b else c", "conditional expressions"),
    ("{1: 2}", "dict literals are not allowed"),
    ("{1, 2}", "set literals are not allowed"),
    ("(x := 1)", "assignment expressions"),
    ("'a' * 10**9", "at most 10000"),
    ("'ab' * x * 10000", "at most 10000"),
    ("9**9**9", "exponent 387420489 is too large"),
    ("2 ** 1000", "exponent is too large"),
    ("((10**100)**100)**100", "would exceed"),
    ("1 + " * 2500 + "1", "too long"),
    ("(" * 100 + "x" + ")" * 100, "nested too deeply"),
    ("-(" * 45 + "x" + ")" * 45, "nested too deeply"),
    ("unknown_name", "unknown name: 'unknown_name'"),
    ("steps.no_such_column", "unknown column of table 'steps': 'steps.no_such_column'"),
    ("steps.duraton_us", "did you mean 'duration_us'"),
    ("nosuchtable.x", "'nosuchtable' is not a table"),
    ("x.real", "attribute access is not allowed: 'x.real'"),
    ("steps.duration_us.values", "attribute access is not allowed"),
    ("sum(*x)", "star-arguments"),
    ("sum(**x)", "'**' arguments are not allowed"),
    ("sum(x, _y=1)", "keyword is not allowed"),
    ("x +\\\n_y", "name is not allowed: '_y'"),  # after a line continuation
    ("1+_y", "name is not allowed: '_y'"),
    ("sum(x,_=1)", "keyword is not allowed: '_=1'"),
    ("steps.\\\n_x", "attribute access is not allowed"),
    ("x + \u00b5s._y", "attribute access is not allowed"),  # non-ASCII text: walked whole
    ("matches(device_ops.name, '(a+)+$')", "nested quantifiers"),
    ("x | y", "'|' is not allowed"),
    ("~x", "'~' is not allowed"),
    ("x << 100000", "'<<' is not allowed"),
    ("x is None", "'is' is not allowed"),
    ("b'abc'", "bytes are not allowed"),
    ("1j", "complex numbers are not allowed"),
    ("(1, 2)", "tuples are only allowed"),
    ("x in (y, 1)", "only constants are allowed"),
    ("sum", "a function must be called"),
    ("device_ops", "a table can only be a function argument"),
    ("(yield)", "yield is not allowed"),
    ("await x", "await is not allowed"),
    ("'%s' % x", "formatting with '%' is not allowed"),
    ("ops * 100000000", "arithmetic on a list is not allowed"),
    ("device_ops.name * 100000000", "arithmetic on text columns is not allowed"),
    ("x\x00", "null bytes"),
    ("round(x, -10**16)", "ndigits between -100 and 100"),
]


@pytest.mark.parametrize(("text", "problem"), REJECTED)
def test_rejected(text: str, problem: str) -> None:
    """Refused before the work is done: a refusal after building a 10**8-item list or a
    10**16-digit number would pass the message check but not the memory bound."""
    tracemalloc.start()
    try:
        with pytest.raises(ExprError) as info:
            comp(text).evaluate(scope())
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert not isinstance(info.value, MissingData)
    assert problem in str(info.value)
    assert peak < 32 * 1024 * 1024


def test_rejected_corpus_is_large() -> None:
    assert len(REJECTED) >= 25


def test_limits_at_compile_time() -> None:
    with pytest.raises(ExprError, match="too long"):
        comp("x" + " " * 1000 + "+ 1" * 400)
    with pytest.raises(ExprError, match="must be text"):
        compile_expression(3, functions=(), tables={}, names=())  # type: ignore[arg-type]
    assert comp("  x + 1\n").source == "x + 1"
    assert comp("(" * 40 + "x" + ")" * 40).evaluate(scope()) == 2


def test_syntax_error_quotes_the_place() -> None:
    with pytest.raises(ExprError, match=r"syntax error at col \d+: .*near"):
        comp("x > > 1")


def test_interpreter_never_calls_python_eval() -> None:
    """A regression guard: the safety argument rests on interpreting the tree ourselves."""
    for module in (expr_module, functions_module):
        source = Path(module.__file__ or "").read_text()
        assert not re.search(r"(?<![.\w])(eval|exec|compile|__import__)\(", source)
        assert not re.search(r"\.(query|eval)\(|import numexpr", source)


# --- properties ----------------------------------------------------------------------------------

EXPR_ALPHABET = "xyzabc0129.+-*/%<>=!()[],:'\" _notandrisumaxlj@{}"


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=60), st.text(alphabet=EXPR_ALPHABET, max_size=40)))
def test_any_text_compiles_or_raises_expr_error(text: str) -> None:
    try:
        expression = comp(text)
    except ExprError:
        return
    with contextlib.suppress(ExprError):
        expression.evaluate(scope(z=1.5, a=3, b=-2, c=0))


LEAVES = st.sampled_from(
    [
        "a",
        "b",
        "c",
        "steps.duration_us",
        "steps.free_us",
        "0",
        "1",
        "-1",
        "2.5",
        "1e308",
        "100",
        "True",
        "None",
        "'s'",
    ]
)
BINARY = ["+", "-", "*", "/", "//", "%", "**", "<", "<=", ">", ">=", "==", "!=", "and", "or"]
ONE_ARG = [
    "sum",
    "mean",
    "median",
    "min",
    "max",
    "std",
    "count",
    "abs",
    "round",
    "log10",
    "any",
    "all",
    "nunique",
    "isna",
    "notna",
]
TWO_ARGS = ["share", "max", "min", "coalesce", "quantile", "top", "round", "filter", "isin"]


def _call(parts: tuple[str, ...]) -> str:
    return f"{parts[0]}({', '.join(parts[1:])})"


def _group(parts: tuple[str, ...]) -> str:
    return f"({' '.join(parts)})"


EXPRESSIONS: st.SearchStrategy[str] = st.deferred(
    lambda: st.one_of(
        LEAVES,
        st.tuples(EXPRESSIONS, st.sampled_from(BINARY), EXPRESSIONS).map(_group),
        st.tuples(st.sampled_from(["-", "+", "not"]), EXPRESSIONS).map(_group),
        st.tuples(st.sampled_from(ONE_ARG), EXPRESSIONS).map(_call),
        st.tuples(st.sampled_from(TWO_ARGS), EXPRESSIONS, EXPRESSIONS).map(_call),
        st.tuples(st.just("where"), EXPRESSIONS, EXPRESSIONS, EXPRESSIONS).map(_call),
        st.tuples(EXPRESSIONS, st.just("in (1, 2.5, 's', None)")).map(_group),
        st.tuples(EXPRESSIONS, st.just("<"), EXPRESSIONS, st.just("<="), EXPRESSIONS).map(_group),
    )
)


NUMBERS = st.one_of(
    st.integers(-(10**6), 10**6), st.floats(allow_nan=True, allow_infinity=True), st.booleans()
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    EXPRESSIONS,
    NUMBERS,
    NUMBERS,
    NUMBERS,
    st.lists(st.floats(allow_nan=True, allow_infinity=True), max_size=4),
)
@pytest.mark.slow
def test_expressions_over_random_numbers_raise_only_expr_error(
    text: str, a: Any, b: Any, c: Any, durations: list[float]
) -> None:
    steps = pd.DataFrame(
        {
            "duration_us": pd.Series(durations, dtype="float64"),
            "free_us": pd.Series(durations[::-1], dtype="float64"),
        }
    )
    try:
        expression = comp(text)
    except ExprError as exc:
        # refused at load (too deep, too big, or constants that can only fail: `0 + 's'`),
        # always as one line
        assert str(exc) and "\n" not in str(exc)
        return
    try:
        result = expression.evaluate(
            Scope({"steps": steps}, {"a": a, "b": b, "c": c}, BUILTIN_FUNCTIONS)
        )
    except ExprError:
        return
    assert not isinstance(result, np.generic)


# --- sub-expressions shared through Scope.memo ----------------------------------------------


def _counting_scope(memo: dict[bytes, Any] | None, calls: list[str], **values: Any) -> Scope:
    """A scope whose `twice` function records each call (by the mean it was given)."""

    def twice(series: pd.Series) -> pd.Series:
        calls.append(f"{series.mean():.3f}")
        return series * 2

    base = scope(**values)
    functions = {**BUILTIN_FUNCTIONS, "twice": twice}
    return Scope(base.tables, base.values, functions, memo)


def _comp_with_twice(text: str) -> Expression:
    functions = [*BUILTIN_FUNCTIONS, "twice"]
    return compile_expression(text, functions=functions, tables=TABLE_COLUMNS, names=NAMES)


def test_a_table_only_sub_expression_is_computed_once_per_memo() -> None:
    first = _comp_with_twice("sum(twice(device_ops.duration_us))")
    second = _comp_with_twice("max(twice(device_ops.duration_us)) > x")
    calls: list[str] = []
    memo: dict[bytes, Any] = {}
    assert first.evaluate(_counting_scope(memo, calls)) == 120.0
    assert second.evaluate(_counting_scope(memo, calls)) is True
    assert calls == ["12.000"]  # the second expression read the first's value
    assert b"twice(device_ops.duration_us)" in memo
    calls.clear()
    first.evaluate(_counting_scope(None, calls))
    second.evaluate(_counting_scope(None, calls))
    assert calls == ["12.000", "12.000"]  # no memo: each computes its own


def test_sub_expressions_reading_params_or_lets_are_never_shared() -> None:
    scaled = _comp_with_twice("sum(twice(device_ops.duration_us * x))")
    calls: list[str] = []
    memo: dict[bytes, Any] = {}
    assert scaled.evaluate(_counting_scope(memo, calls, x=1)) == 120.0
    assert scaled.evaluate(_counting_scope(memo, calls, x=3)) == 360.0
    assert calls == ["12.000", "36.000"]
    assert all(b" x" not in key for key in memo)  # `device_ops.duration_us` alone is kept


def test_memo_keys_are_the_source_text_also_past_non_ascii_text() -> None:
    """ast's offsets count UTF-8 bytes: a key sliced by characters would cut the wrong text."""
    inner = 'contains(device_ops.name, "矩阵") or\n  twice(device_ops.duration_us) > 90'
    text = f"({inner})"
    memo: dict[bytes, Any] = {}
    result = _comp_with_twice(text).evaluate(_counting_scope(memo, []))
    assert as_list(result) == [True, False, False, False, False]
    assert {
        'contains(device_ops.name, "矩阵")'.encode(),
        b"twice(device_ops.duration_us)",
        b"twice(device_ops.duration_us) > 90",
        inner.encode(),  # spans two lines
    } <= set(memo)


# --- sum(filter(...)) fused ----------------------------------------------------------------------

floats = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True, width=64),
    st.sampled_from([0.1, 0.2, 0.3, -0.0, 1e16, -1e16, 1e-300]),
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(floats, st.booleans()), max_size=40), st.booleans())
def test_sum_of_a_filter_is_the_filtered_columns_sum(rows, labelled):
    """`sum(filter(column, mask))` runs without the filtered column built where it can (a float
    column, a bool mask of its rows); its value is always that of the two calls one by one,
    on float, nullable and text columns, masks with missing values and other labels."""
    index = pd.Index([10 * i for i in range(len(rows))]) if labelled else None
    values = [v for v, _ in rows]
    frame = pd.DataFrame(
        {
            "duration_us": pd.Series(values, dtype="float64", index=index),
            "free_us": pd.Series(values, dtype="Float64", index=index),
            "bubble_us": pd.Series([v if keep else np.nan for v, keep in rows], index=index),
        }
    )
    masks = {
        "plain": pd.Series([keep for _, keep in rows], dtype=bool, index=index),
        "nullable": pd.Series([keep or None for _, keep in rows], dtype="boolean", index=index),
        "other labels": pd.Series([keep for _, keep in rows], dtype=bool),
    }
    for column in ("duration_us", "free_us", "bubble_us"):
        for name, mask in masks.items():
            text = f"sum(filter(steps.{column}, m))"
            got = comp(text, names=("m",)).evaluate(
                Scope({"steps": frame}, {"m": mask}, BUILTIN_FUNCTIONS)
            )
            with np.errstate(all="ignore"):  # e.g. 1e308 + 1e308, as the fused sum has it
                by_call = functions_module.sum_(functions_module.filter_(frame[column], mask))
            assert same(got, by_call) and math.copysign(1, got) == math.copysign(1, by_call), (
                column,
                name,
            )


def test_sum_of_a_filter_runs_fused_only_with_the_built_in_functions(monkeypatch):
    calls = []
    original = functions_module._sum_of_rows

    def counted(x, mask):
        calls.append(1)
        return original(x, mask)

    monkeypatch.setitem(
        expr_module.FUSED_CALLS,
        "sum",
        expr_module.FusedCall(functions_module.sum_, functions_module.filter_, "filter", counted),
    )
    assert ev("sum(filter(steps.duration_us, steps.duration_us > 150))") == 500.0
    assert calls == [1]
    # a plugin's own filter (or sum) is called as written
    own = {**BUILTIN_FUNCTIONS, "filter": lambda x, m: x.iloc[0:1]}
    expression = comp("sum(filter(steps.duration_us, steps.duration_us > 150))")
    assert expression.evaluate(Scope({"steps": _steps()}, {}, own)) == 100.0
    assert calls == [1]
    # errors of the inner call still quote it
    with pytest.raises(ExprError, match=r"in 'filter\(1, steps.duration_us > 150\)'"):
        ev("sum(filter(1, steps.duration_us > 150))")


@settings(max_examples=100, deadline=None)
@given(
    st.lists(floats, max_size=20),
    st.sampled_from([0, 1.5, -1, float("nan"), 2**60, "x", True]),
    st.sampled_from(["float64", "Float64", "object"]),
)
@example([float("nan"), 1.0], "x", "float64")  # pandas 3.1 warns
@example([float("nan"), 1.0], "x", "Float64")  # pandas raises
@example([float("nan")], True, "Float64")
def test_coalesce_is_fillna(values, default, dtype):
    """pandas' fillna where the column holds the default as it is; a text or a flag in a
    number column gives the column's values as objects with the default where missing, as
    pandas 2-3.0 filled a NumPy column (a nullable one raised, and pandas 3.1 warns that
    fillna will): the same on every pandas, and quiet."""
    column = pd.Series(values, dtype=dtype, index=range(5, 5 + len(values)), name="c")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # quiet: pandas 2's downcast notice is not for users
        got = functions_module.coalesce(column, default)
    missing = column.isna()
    if isinstance(default, (str, bool)) and dtype != "object" and missing.any():
        filled = [default if m else v for v, m in zip(column.astype(object), missing)]
        expected = pd.Series(filled, index=column.index, dtype=object, name="c")
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            expected = column.fillna(default)
    pd.testing.assert_series_equal(got, expected)


def _frame_extreme(values, how):
    """min/max of columns and numbers row by row as a frame of them gives it (the general
    path of functions.min_/max_)."""
    index = next(v for v in values if isinstance(v, pd.Series)).index
    columns = [v if isinstance(v, pd.Series) else pd.Series(v, index=index) for v in values]
    return getattr(pd.concat(columns, axis=1, ignore_index=True), how)(axis=1)


def _ieee_extreme(operands, how):
    """The least (or greatest) of the numbers, NaN skipped; of zeros of both signs, -0 the
    least and +0 the greatest (IEEE 754's minimum and maximum)."""
    present = [float(v) for v in operands if not math.isnan(v)]
    if not present:
        return math.nan
    best = min(present) if how == "min" else max(present)
    if best == 0:
        signs = {math.copysign(1.0, v) for v in present if v == 0}
        sign = -1.0 if how == "min" else 1.0
        return math.copysign(0.0, sign if sign in signs else -sign)
    return best


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.lists(floats, min_size=3, max_size=3), min_size=1, max_size=3),
    st.lists(
        floats | st.integers(-(2**60), 2**60) | st.sampled_from([True, 2**53 + 1, 2**70]),
        max_size=2,
    ),
    st.sampled_from(["min", "max"]),
    st.booleans(),
)
@example([[0.0, -0.0, 0.0]], [-0.0], "min", False)
@example([[-0.0, 0.0, -0.0]], [0.0], "max", True)
def test_row_wise_min_and_max_are_the_frames(columns, numbers, how, labelled):
    """min(a, b, 3) of float columns and numbers, row by row: the values and dtype of the
    frame's min(axis=1), with NaN skipped, and of zeros of both signs -0 the min and +0 the
    max (the frame leaves that to NumPy's reduction, whose pick differs between NumPy
    versions and even between rows); other operands (nullable columns, bools, huge whole
    numbers, other labels) by the frame itself."""
    index = pd.Index([7, 3, 5]) if labelled else pd.RangeIndex(3)
    series = [pd.Series(c, index=index, dtype="float64") for c in columns]
    function = functions_module.min_ if how == "min" else functions_module.max_
    for values in (
        (*series, *numbers),
        (*numbers, *series),
        (series[0].astype("Float64"), *series[1:], *numbers),
        (series[0], pd.Series(columns[0], dtype="float64")),  # other labels when labelled
    ):
        if len(values) < 2:  # min(column) is the column's least value
            continue
        got, expected = function(*values), _frame_extreme(values, how)
        pd.testing.assert_series_equal(got, expected, check_exact=True)
        if functions_module._float_extreme(values, index, how) is None:
            continue  # the frame's own result, signs and all
        for row, value in enumerate(got.tolist()):
            operands = [v.iloc[row] if isinstance(v, pd.Series) else float(v) for v in values]
            wanted = _ieee_extreme(operands, how)
            if not math.isnan(wanted):  # a NaN's sign is never shown
                assert math.copysign(1.0, value) == math.copysign(1.0, wanted)
