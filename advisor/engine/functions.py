"""Built-in functions of the rule expression language.

Each is a pure function of scalars and pandas Series. The first docstring line is what the rule
documentation shows and the `Example:` line is an expression over the normalized tables.
Aggregations skip missing values and return plain Python numbers, so findings serialise to JSON.
Functions raise TypeError/ValueError with a plain message; the interpreter reports it as an
ExprError naming the call.
"""

from __future__ import annotations

import builtins
import math
import re
import sys
import warnings
from collections.abc import Callable
from functools import lru_cache, reduce
from typing import TYPE_CHECKING, Any

from advisor.engine.expr import (
    FUSED_CALLS,
    NOT_FUSED,
    FusedCall,
    as_mask,
    is_missing,
    plain,
    truthy,
)
from advisor.lazy import lazy_module
from advisor.text_codes import coded, isin_mask, spread

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
else:
    np = lazy_module("numpy")
    pd = lazy_module("pandas")

MAX_PATTERN = 200  # characters of a regex
MAX_SUBJECT = 1000  # characters of each string a regex is applied to
MAX_UNBOUNDED = 2  # '*', '+', '{n,}' and '{m,n}' with n > MAX_BOUNDED in a regex
MAX_BOUNDED = 10  # largest n of '{m,n}' that is not counted as unbounded
MAX_BRANCHES = 64  # ways optional parts ('a?': 2, 'a{1,3}': 3) can combine, / 8 per unbounded
MAX_NDIGITS = 100  # |ndigits| of round()

_SEQUENCES = (list, tuple, set, frozenset)


def _series(x: Any, fname: str) -> pd.Series:
    """A column, literal tuple or scalar as a Series, so aggregations treat them alike."""
    if isinstance(x, pd.Series):
        return x
    if isinstance(x, pd.DataFrame):
        raise TypeError(f"{fname}() needs a column, not a table")
    if isinstance(x, _SEQUENCES):
        return pd.Series(list(x))
    return pd.Series([x])


def _numbers(x: Any, fname: str) -> pd.Series:
    """`x` as a numeric Series (booleans count as 0/1); TypeError for text."""
    series = _series(x, fname)
    if pd.api.types.is_bool_dtype(series.dtype):
        return series.astype("float64")
    if pd.api.types.is_numeric_dtype(series.dtype):
        return series
    if series.dtype == object:
        converted = pd.to_numeric(series, errors="coerce")
        if converted.notna().sum() == series.notna().sum():
            return converted
    raise TypeError(f"{fname}() needs numbers, got a column of {series.dtype}")


def _float(value: Any) -> float:
    return math.nan if is_missing(value) else float(value)


def _number(value: Any) -> int | float:
    return math.nan if is_missing(value) else plain(value)


def _whole(value: Any, fname: str, what: str) -> int:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not float(value).is_integer()
    ):
        raise TypeError(f"{fname}() needs a whole number for {what}, got {value!r}")
    return int(value)


def _text(value: Any, fname: str, what: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{fname}() needs text for {what}, got {value!r}")
    return value


# --- aggregations --------------------------------------------------------------------------------


def sum_(x: Any) -> float:
    """Sum of the values, missing ones skipped; 0.0 when there are none.

    Example: sum(steps.free_us) > 1000
    """
    return float(_numbers(x, "sum").sum())


def mean(x: Any) -> float:
    """Mean of the values, missing ones skipped; NaN when there are none.

    Example: mean(steps.duration_us) > 100000
    """
    return _float(_numbers(x, "mean").mean())


def median(x: Any) -> float:
    """Median of the values, missing ones skipped; NaN when there are none.

    Example: max(steps.duration_us) > 2 * median(steps.duration_us)
    """
    values = _numbers(x, "median")
    if not values.notna().any():  # pandas 2 warns "Mean of empty slice" on a terminal
        return math.nan
    return _float(values.median())


def std(x: Any) -> float:
    """Sample standard deviation (n - 1), missing values skipped; NaN for fewer than two.

    Example: std(steps.duration_us) > 0.1 * mean(steps.duration_us)
    """
    return _float(_numbers(x, "std").std())


def quantile(x: Any, q: float) -> float:
    """The q-quantile (0 <= q <= 1) of the values, missing ones skipped.

    Example: quantile(device_ops.duration_us, 0.99) > 10 * median(device_ops.duration_us)
    """
    if isinstance(q, bool) or not isinstance(q, (int, float)) or not 0 <= q <= 1:
        raise ValueError(f"quantile() needs q between 0 and 1, got {q!r}")
    return _float(_numbers(x, "quantile").quantile(q))


def _extreme(values: tuple[Any, ...], how: str) -> Any:
    if not values:
        raise TypeError(f"{how}() needs at least one value")
    if len(values) == 1:
        return _number(getattr(_numbers(values[0], how), how)())
    series = [v for v in values if isinstance(v, pd.Series)]
    if not series:
        present = [v for v in values if not is_missing(v)]
        pick = builtins.min if how == "min" else builtins.max
        return plain(pick(present)) if present else math.nan
    index = series[0].index
    fast = _float_extreme(values, index, how)
    if fast is not None:
        return fast
    frame = pd.concat(
        [v if isinstance(v, pd.Series) else pd.Series(v, index=index) for v in values],
        axis=1,
        ignore_index=True,
    )
    return getattr(frame, how)(axis=1)


def _float_extreme(values: tuple[Any, ...], index: pd.Index, how: str) -> pd.Series | None:
    """The row-wise min or max of float64 columns on `index` and numbers, as pandas' frame of
    them gives it (missing values skipped), by NumPy's fmin or fmax without the frame (a
    tenth of its cost); None for other operands. Where zeros of both signs tie, the min is
    -0 and the max +0 (IEEE 754's minimum and maximum): NumPy's pick there depends on its
    version and code path, the frame's too."""
    arrays = [_float_values(value, index) for value in values]
    if builtins.any(a is None for a in arrays):
        return None
    pick = np.fmin if how == "min" else np.fmax
    result = np.asarray(reduce(pick, arrays), dtype=np.float64)  # new: two operands or more
    zero = result == 0
    if zero.any():
        sign = -1.0 if how == "min" else 1.0  # the sign that wins a tie of zeros
        wins = reduce(np.logical_or, [(a == 0) & (np.copysign(1.0, a) == sign) for a in arrays])
        result[zero] = np.where(np.broadcast_to(wins, result.shape)[zero], sign * 0.0, -sign * 0.0)
    return pd.Series(result, index=index)


def min_(*values: Any) -> Any:
    """Smallest value: of one column, or of several values (elementwise if any is a column).

    Example: min(steps.duration_us) < 0.5 * max(steps.duration_us)
    """
    return _extreme(values, "min")


def max_(*values: Any) -> Any:
    """Largest value: of one column, or of several values (elementwise if any is a column).

    Example: max(steps.duration_us) > 2 * median(steps.duration_us)
    """
    return _extreme(values, "max")


def count(x: Any) -> int:
    """Number of true values of a condition, or of present values of a column (1 for a scalar).

    Example: count(device_ops.duration_us > 1000) > 10
    """
    if isinstance(x, (bool, np.bool_)):
        return int(x)
    if isinstance(x, (pd.Series, pd.DataFrame, *_SEQUENCES)):
        series = _series(x, "count")
        if pd.api.types.is_bool_dtype(series.dtype):
            return int(np.count_nonzero(as_mask(series).to_numpy(dtype=bool)))
        return int(series.count())
    return 0 if is_missing(x) else 1


def rows(table: Any) -> int:
    """Number of rows of a table (or length of a column).

    Example: rows(device_ops) > 0
    """
    if not isinstance(table, (pd.DataFrame, pd.Series)):
        raise TypeError("rows() needs a table, e.g. rows(device_ops)")
    return len(table)


def nunique(x: Any) -> int:
    """Number of distinct present values.

    Example: nunique(device_ops.op_type) > 50
    """
    return int(_series(x, "nunique").nunique())


def any_(x: Any) -> bool:
    """True when at least one value is true (missing values are false).

    Example: any(device_ops.category == 'memcpy')
    """
    return bool(as_mask(_series(x, "any")).any())


def all_(x: Any) -> bool:
    """True when every present value is true; True when there are none.

    Example: all(steps.duration_us > 0)
    """
    return bool(as_mask(_series(x, "all").dropna()).all())


def top(x: Any, n: int) -> pd.Series:
    """The n largest values of a column (a column, to aggregate further).

    Example: sum(top(device_ops.duration_us, 10)) > 0.5 * sum(device_ops.duration_us)
    """
    n = _whole(n, "top", "n")
    if n < 0:
        raise ValueError(f"top() needs n >= 0, got {n}")
    return _numbers(x, "top").nlargest(n)


def argmax(labels: Any, values: Any) -> Any:
    """The label at the largest value (ties: the first); None when there are no values.

    Example: argmax(op_stats.op_type, op_stats.total_us) == 'MatMulV2'
    """
    numbers = _numbers(values, "argmax")
    if not isinstance(labels, pd.Series) or len(labels) != len(numbers):
        raise TypeError("argmax() needs a label column and a value column of the same table")
    if numbers.dropna().empty:
        return None
    # iloc, not to_numpy(): an integer column with missing values would give the rank as 5.0
    return plain(labels.iloc[int(np.nanargmax(numbers.to_numpy("float64")))])


def argmin(labels: Any, values: Any) -> Any:
    """The label at the smallest value (ties: the first); None when there are no values.

    Example: argmin(ranks.rank, ranks.communication_us) == 1
    """
    return argmax(labels, -_numbers(values, "argmin"))


# --- elementwise -------------------------------------------------------------------------------


def abs_(x: Any) -> Any:
    """Absolute value, elementwise for a column.

    Example: max(abs(steps.duration_us - mean(steps.duration_us))) > 1000
    """
    if isinstance(x, pd.Series):
        return x.abs()
    return math.nan if is_missing(x) else plain(builtins.abs(x))


def round_(x: Any, ndigits: int = 0) -> Any:
    """Round to ndigits decimals, elementwise for a column.

    Example: round(mean(steps.duration_us) / 1000, 1) > 100
    """
    ndigits = _whole(ndigits, "round", "ndigits")
    if abs(ndigits) > MAX_NDIGITS:  # round(1, -10**16) would build 10**(10**16)
        raise ValueError(f"round() needs ndigits between -{MAX_NDIGITS} and {MAX_NDIGITS}")
    if isinstance(x, pd.Series):
        return x.round(ndigits)
    return math.nan if is_missing(x) else plain(builtins.round(x, ndigits))


def share(part: Any, whole: Any) -> Any:
    """part / whole, and 0.0 where whole is 0 or missing (so empty profiles do not divide by 0).

    Example: share(sum(steps.free_us), sum(steps.duration_us)) > 0.1
    """
    if isinstance(whole, pd.Series):
        void = as_mask(whole.isna() | (whole == 0))
        return (part / whole.mask(void, 1)).mask(void, 0.0)
    if is_missing(whole) or whole == 0:
        return pd.Series(0.0, index=part.index) if isinstance(part, pd.Series) else 0.0
    return part / whole if isinstance(part, pd.Series) else _float(part) / float(whole)


def where(cond: Any, a: Any, b: Any) -> Any:
    """a where cond is true, else b; elementwise when cond is a column.

    Example: sum(where(device_ops.category == 'compute', device_ops.duration_us, 0)) > 0
    """
    if not isinstance(cond, pd.Series):
        return a if truthy(cond) else b
    mask = as_mask(cond)
    chosen = a if isinstance(a, pd.Series) else pd.Series(a, index=mask.index)
    other = np.nan if b is None else _float_values(b, chosen.index)
    if isinstance(b, pd.Series) and other is not None and pd.api.types.is_integer_dtype(chosen):
        # whole numbers where a float column's values are chosen: floats, as pandas 3 gives
        # (pandas 2 turned round results back into integers, with a FutureWarning)
        chosen = chosen.astype(np.float64)
    if chosen.dtype == np.float64 and other is not None and mask.index.equals(chosen.index):
        # what pandas' where gives for float columns, without its alignment and dtype checks
        values = np.where(mask.to_numpy(dtype=bool), chosen.to_numpy(), other)
        return pd.Series(values, index=chosen.index, name=chosen.name)
    return chosen.where(mask, b)


def _float_values(x: Any, index: pd.Index) -> Any:
    """`x` as float64 values on `index` (a number, or a float64 column on `index`) for the
    functions' NumPy paths; None for anything pandas must convert or align."""
    number = _float_number(x)
    return number if number is not None else float_column(x, index)


def _float_number(x: Any) -> float | None:
    """`x` as a float when pandas holds it as float64, or as int64 and rounds it to float64
    as float() does (not a bool); None for anything else."""
    if isinstance(x, float) or (
        isinstance(x, int) and not isinstance(x, bool) and -(2**63) <= x < 2**63
    ):
        return float(x)
    return None


def float_column(x: Any, index: pd.Index | None = None) -> np.ndarray | None:
    """The values of `x` when it is a float64 column (on `index`, when given): the columns
    the NumPy paths take, computing what pandas computes on them; None for anything else."""
    if (
        isinstance(x, pd.Series)
        and isinstance(x.dtype, np.dtype)
        and x.dtype == np.float64
        and (index is None or x.index is index or x.index.equals(index))
    ):
        return x.to_numpy()
    return None


def filter_(x: Any, mask: Any) -> Any:
    """The rows of a column or table where mask is true.

    Example: mean(filter(device_ops.duration_us, device_ops.category == 'compute')) > 50
    """
    if not isinstance(x, (pd.Series, pd.DataFrame)):
        raise TypeError("filter() needs a column or table to filter")
    if not isinstance(mask, pd.Series):
        return x if truthy(mask) else x.iloc[0:0]
    keep = as_mask(mask)
    if not keep.index.equals(x.index):  # a column of the same table (the usual case) lines up
        keep = keep.reindex(x.index, fill_value=False)
    rows = keep.to_numpy(dtype=bool)  # by position: half the cost of aligning labels again
    return x[rows] if isinstance(x, pd.Series) else x.loc[rows]


def _sum_of_rows(x: Any, mask: Any) -> Any:
    """sum(filter(x, mask)) for a float column and a mask of its rows, without the rows
    taken as a column: pandas sums float64 as NumPy does with missing values as 0 (pairwise),
    so the figure is the same. NOT_FUSED for any other operands."""
    bools = isinstance(mask, pd.Series) and isinstance(mask.dtype, np.dtype)
    values = float_column(x, mask.index) if bools and mask.dtype.kind == "b" else None
    if values is None:
        return NOT_FUSED
    return float_sum(values[mask.to_numpy()])


def float_sum(values: np.ndarray) -> float:
    """pandas' sum of float64 values (`Series.sum()`), without its checks: NumPy's pairwise
    sum with the missing values as 0."""
    return float(np.where(np.isnan(values), 0.0, values).sum())


def isin(x: Any, *values: Any) -> Any:
    """True where x equals one of the values (given one by one or as one tuple).

    Example: count(isin(device_ops.op_type, 'Cast', 'TransData')) > 100
    """
    given = (
        values[0]
        if len(values) == 1 and isinstance(values[0], (*_SEQUENCES, pd.Series))
        else values
    )
    options = list(given)
    if isinstance(x, pd.Series):
        if options and builtins.all(isinstance(o, str) for o in options):
            # each distinct text of arrow text looked up once, as `==` does
            return pd.Series(isin_mask(x, options), index=x.index, name=x.name)
        return as_mask(x.isin(options))
    return not is_missing(x) and x in options


def coalesce(x: Any, default: Any) -> Any:
    """x with missing values replaced by default.

    Example: sum(coalesce(steps.bubble_us, 0)) > 0
    """
    if isinstance(x, pd.Series):
        values, fill = float_column(x), _float_number(default)
        if values is not None and fill is not None:
            # what fillna gives, without its checks (a few times a profile, 60 against 15 us)
            return pd.Series(np.where(np.isnan(values), fill, values), x.index, name=x.name)
        if not _takes(x.dtype, default) and x.hasnans:
            # the values as objects, the default where missing: what pandas 2-3.0 made of a
            # NumPy column; a nullable one raised, and pandas 3.1 warns that fillna will
            values = x.to_numpy(object)
            values[x.isna().to_numpy(bool)] = default
            return pd.Series(values, x.index, dtype=object, name=x.name)
        with warnings.catch_warnings():
            # pandas 2.2-2.3 warn that they downcast an object column's result: not for users
            warnings.filterwarnings("ignore", "Downcasting object dtype", FutureWarning)
            return x.fillna(default)
    return default if is_missing(x) else x


def _takes(dtype: Any, value: Any) -> bool:
    """Whether a column of `dtype` takes `value` in place of a missing value without a change
    of type (a text in a text column, a flag in a flag column, a number in a numeric one);
    an object column takes anything, and other values are left to pandas."""
    types = pd.api.types
    if types.is_object_dtype(dtype):
        return True
    if isinstance(value, str):
        return bool(types.is_string_dtype(dtype))
    if isinstance(value, (bool, np.bool_)):
        return bool(types.is_bool_dtype(dtype))
    if isinstance(value, (int, float, np.number)):
        return bool(types.is_numeric_dtype(dtype)) and not types.is_bool_dtype(dtype)
    return True


def clip(x: Any, lo: Any = None, hi: Any = None) -> Any:
    """x limited to [lo, hi] (None for no bound), elementwise for a column.

    Example: mean(clip(steps.duration_us, 0, 1000000)) > 1000
    """
    if isinstance(x, pd.Series):
        return x.clip(lo, hi)
    if is_missing(x):
        return math.nan
    if not is_missing(lo) and x < lo:
        x = lo
    if not is_missing(hi) and x > hi:
        x = hi
    return plain(x)


def log10(x: Any) -> Any:
    """Base-10 logarithm (-inf for 0, NaN for negatives), elementwise for a column.

    Example: log10(max(device_ops.duration_us)) > 4
    """
    if isinstance(x, pd.Series):
        return _numbers(x, "log10").astype("float64").pipe(_log10)
    value = _float(x)
    if math.isnan(value) or value < 0:
        return math.nan
    return -math.inf if value == 0 else math.log10(value)


def _log10(series: pd.Series) -> pd.Series:
    with np.errstate(all="ignore"):
        return pd.Series(np.log10(series.where(series >= 0)), index=series.index)


def isna(x: Any) -> Any:
    """True where x is missing.

    Example: count(isna(device_ops.start_us)) > 0
    """
    return x.isna() if isinstance(x, pd.Series) else is_missing(x)


def notna(x: Any) -> Any:
    """True where x is present.

    Example: count(notna(steps.bubble_us)) > 0
    """
    return x.notna() if isinstance(x, pd.Series) else not is_missing(x)


# --- text ----------------------------------------------------------------------------------------


def contains(x: Any, substring: str, case: bool = False) -> Any:
    """True where x contains substring (literal text, not a regex); case-insensitive by default.

    Example: count(contains(device_ops.name, 'transpose')) > 0
    """
    substring = _text(substring, "contains", "the substring")
    if isinstance(x, pd.Series):
        codes, distinct = coded(x)
        hits = pd.Series(distinct).str.contains(substring, case=bool(case), regex=False, na=False)
        return spread(codes, hits, x.index)
    if is_missing(x):
        return False
    text = str(x)
    return substring in text if case else substring.casefold() in text.casefold()


def startswith(x: Any, prefix: str | tuple[str, ...]) -> Any:
    """True where x starts with prefix (or with one of a tuple of prefixes); case-sensitive.

    Example: count(startswith(device_ops.name, ('aclnn', 'Aten'))) > 0
    """
    prefixes = (prefix,) if isinstance(prefix, str) else prefix
    if not isinstance(prefixes, tuple) or not builtins.all(isinstance(p, str) for p in prefixes):
        raise TypeError(f"startswith() needs text or a tuple of texts, got {prefix!r}")
    if isinstance(x, pd.Series):
        codes, distinct = coded(x)
        return spread(codes, pd.Series(distinct).str.startswith(prefixes, na=False), x.index)
    return not is_missing(x) and str(x).startswith(prefixes)


def _regex_risk(pattern: str) -> str | None:
    """Why Python's backtracking `re` could spend very long on `pattern`, or None.

    A repeated group holding a quantifier or alternation (`(a+)+`, `(a|a)*`) can match a
    string in exponentially many ways, all tried on a near miss; several unbounded repeats
    (`.*.*.*x`, `a{1,300}a{1,300}a{1,300}`) cost a power of the string length, and optional
    atoms (`a?a?a?...aaa`) a power of two. Conservative: some safe patterns are refused.
    """
    risky = [False]  # per open group: holds a quantifier or alternation
    unbounded, branches = 0, 1
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            i += 2
            continue
        if char == "[":
            i = _skip_class(pattern, i)
            continue
        if char == "(":
            risky.append(False)
            i += 2 if pattern.startswith("(?", i) else 1
            continue
        i += 1
        if char == ")":
            inner = risky.pop() if len(risky) > 1 else False
            if inner and i < len(pattern) and pattern[i] in "*+{":
                return (
                    "nested quantifiers: a repeated group holds a quantifier or '|' "
                    "(like '(a+)+'), which can take exponential time"
                )
            risky[-1] = risky[-1] or inner
        elif char in "*+?{|":
            risky[-1] = True
            repeat = re.match(r"\d*,(\d*)}", pattern[i:]) if char == "{" else None
            if char in "*+" or (repeat and int(repeat[1] or MAX_BOUNDED + 1) > MAX_BOUNDED):
                unbounded += 1
            elif repeat:
                branches *= int(repeat[1]) - int(pattern[i:].partition(",")[0] or 0) + 1
            elif char == "?" and pattern[i - 2 : i - 1] not in ("*", "+", "?", "}"):
                branches *= 2  # a '?' after a quantifier only makes it lazy
    if unbounded > MAX_UNBOUNDED:
        return (
            f"more than {MAX_UNBOUNDED} unbounded repeats ('*', '+', '{{n,}}', "
            f"'{{m,n}}' with n > {MAX_BOUNDED}) can take very long; use several matches() "
            "joined with 'and'"
        )
    if branches * 8**unbounded > MAX_BRANCHES:
        return (
            f"optional parts ('?', '{{m,n}}') combine in {branches} ways, besides "
            f"{unbounded} unbounded repeats: can take exponential time"
        )
    return None


def _skip_class(pattern: str, start: int) -> int:
    """Index just past the character class `[...]` opening at `start`."""
    i = start + 1
    if pattern.startswith("^", i):
        i += 1
    if pattern.startswith("]", i):
        i += 1
    while i < len(pattern) and pattern[i] != "]":
        i += 2 if pattern[i] == "\\" else 1
    return i + 1


def regex_problem(pattern: str) -> str | None:
    """Why matches() refuses `pattern`, or None; rule loading checks literal patterns early."""
    if len(pattern) > MAX_PATTERN:
        return f"regex is too long ({len(pattern)} characters, at most {MAX_PATTERN})"
    risk = _regex_risk(pattern)
    if risk:
        return f"regex {pattern!r} is refused: {risk}"
    try:
        re.compile(pattern)
    except re.error as exc:
        return f"invalid regex {pattern!r}: {exc}"
    return None


@lru_cache(maxsize=256)
def _regex(pattern: str) -> re.Pattern[str]:
    problem = regex_problem(pattern)
    if problem:
        raise ValueError(problem)
    return re.compile(pattern)


def matches(x: Any, pattern: str) -> Any:
    """True where the regex pattern is found in x (re.search; anchor with ^ and $).

    Example: count(matches(device_ops.name, '^MatMul(V2)?$')) > 0
    """
    regex = _regex(_text(pattern, "matches", "the pattern"))
    if isinstance(x, pd.Series):
        codes, distinct = coded(x)  # each distinct text searched once
        return spread(codes, [regex.search(s[:MAX_SUBJECT]) is not None for s in distinct], x.index)
    return not is_missing(x) and regex.search(str(x)[:MAX_SUBJECT]) is not None


def number(x: Any) -> Any:
    """x as a number: numeric text (metadata values) parsed, anything else NaN; elementwise.

    Example: max(number(filter(metadata.value, metadata.key == 'device.ai_core_num'))) > 0
    """
    if isinstance(x, pd.Series):
        return pd.to_numeric(x.astype("object"), errors="coerce").astype("float64")
    if is_missing(x) or isinstance(x, bool):
        return math.nan
    try:
        return float(x)
    except (TypeError, ValueError):
        return math.nan


_SHAPE_NUMBER = re.compile(r"-?\d+")


def _tensor_dims(text: str) -> list[list[int]]:
    """The dims of each tensor of a shape text: `8,64;256,64` (CANN: tensors split by `;`,
    dims by `,`) or `[[8, 64], [256, 64]]` (JSON-like); `[]` or an empty part is a scalar."""
    text = text.strip()
    if text.startswith("["):
        inner = text[1:-1].strip() if text.endswith("]") else text[1:]
        if not inner.startswith("["):  # one tensor written as [8, 64]
            return [[int(n) for n in _SHAPE_NUMBER.findall(inner)]]
        parts = re.findall(r"\[([^\[\]]*)\]", inner)
    else:
        parts = text.strip('"').split(";")
    return [[int(n) for n in _SHAPE_NUMBER.findall(part)] for part in parts]


def _shape_dim(text: str, tensor: int, axis: int) -> float:
    try:
        dims = _tensor_dims(text[:MAX_SUBJECT])[tensor]
        return float(dims[axis])
    except (IndexError, ValueError):
        return math.nan


def shape_dim(shapes: Any, tensor: int, axis: int) -> Any:
    """Dimension `axis` (-1: the last) of input `tensor` (0: the first) of a shape text.

    Shape texts are written `8,64;256,64` (CANN) or `[[8, 64], [256, 64]]`; NaN where the
    tensor or dimension is not there.

    Example: count(shape_dim(device_ops.input_shapes, 0, -1) % 16 != 0) > 0
    """
    tensor = _whole(tensor, "shape_dim", "the tensor index")
    axis = _whole(axis, "shape_dim", "the axis")
    if isinstance(shapes, pd.Series):
        codes, uniques = coded(shapes)  # each distinct text parsed once, coded once a column
        values = np.array([_shape_dim(s, tensor, axis) for s in uniques], dtype="float64")
        out = np.full(len(codes), math.nan)
        found = codes >= 0
        out[found] = values[codes[found]]
        return pd.Series(out, index=shapes.index)
    return math.nan if is_missing(shapes) else _shape_dim(str(shapes), tensor, axis)


BUILTIN_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "sum": sum_,
    "mean": mean,
    "median": median,
    "min": min_,
    "max": max_,
    "std": std,
    "quantile": quantile,
    "count": count,
    "rows": rows,
    "nunique": nunique,
    "any": any_,
    "all": all_,
    "top": top,
    "argmax": argmax,
    "argmin": argmin,
    "abs": abs_,
    "round": round_,
    "share": share,
    "where": where,
    "filter": filter_,
    "isin": isin,
    "coalesce": coalesce,
    "clip": clip,
    "log10": log10,
    "isna": isna,
    "notna": notna,
    "contains": contains,
    "startswith": startswith,
    "matches": matches,
    "shape_dim": shape_dim,
    "number": number,
}

# Python names its own errors after these ("sum() takes 1 positional argument ..."), so the
# functions whose Python name dodges a builtin carry their rule name.
for _name, _fn in BUILTIN_FUNCTIONS.items():
    _fn.__name__ = _fn.__qualname__ = _name
    if sys.version_info < (3, 10):  # Python 3.9 names them after the code object
        _fn.__code__ = _fn.__code__.replace(co_name=_name)

FUSED_CALLS["sum"] = FusedCall(sum_, filter_, "filter", _sum_of_rows)
