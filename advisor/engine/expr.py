"""The rule expression language: a small whitelisting interpreter over Python's `ast`.

Rule files are data that users write and share, so their conditions must not be able to run
code. Python's `eval` (and pandas `query`/`eval`, numexpr) resolve attributes and call whatever
they reach, which is how escapes such as `().__class__.__bases__[0].__subclasses__()` work.
Here the text is parsed with `ast.parse(mode="eval")` and each node is checked against a short
allowlist while it is turned into a tree of closures: nothing outside the allowlist can be
expressed, and the closures only touch the tables, values and functions a `Scope` hands them.

Values are scalars or pandas Series. Operators broadcast like pandas; `and`/`or`/`not` become
elementwise as soon as a Series is involved, with missing values counting as false.
"""

from __future__ import annotations

import ast
import io
import math
import operator
import re
import tokenize
import warnings
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NoReturn

from advisor.compat import zip_strict
from advisor.lazy import lazy_module
from advisor.text_codes import coded, nullable_arrow_text, spread

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
else:
    np = lazy_module("numpy")
    pd = lazy_module("pandas")

MAX_LENGTH = 2000  # characters of expression text
MAX_DEPTH = 40  # nested sub-expressions, and nested brackets
MAX_EXPONENT = 100  # |exponent| of **
MAX_STRING = 10_000  # characters of a string result
MAX_INT_BITS = 4096  # size of any integer a rule computes, checked before computing it
_FRAGMENT = 60  # characters of an offending fragment quoted in messages


class ExprError(ValueError):
    """Invalid or unsafe expression; the message says what and where (quoting the fragment)."""


class MissingData(ExprError):
    """A table, column or value the expression reads is absent from the scope.

    Not a mistake in the rule: the engine reports the rule as "not applicable".
    """

    def __init__(self, ref: str) -> None:
        self.ref = ref
        super().__init__(f"no data for {ref!r}")


@dataclass
class Scope:
    """What an expression may read while it is evaluated."""

    tables: Mapping[str, pd.DataFrame]  # table name -> DataFrame
    values: Mapping[str, Any]  # params, let values, bare column Series in evidence filters
    functions: Mapping[str, Callable[..., Any]]  # callable functions
    memo: dict[bytes, Any] | None = None
    """Values of the sub-expressions that read only tables and constants (no param, let value
    or bare column), by source text, for scopes over the same unchanging tables: the rules of
    one profile share many (`device_ops.category == "compute"`, a `shape_dim` of a column),
    and each costs several pandas operations. None: nothing is kept."""
    blank: Callable[[str, str], pd.Series | None] | None = None
    """What a `table.column` the tables lack reads as: a column of missing values where the
    rule declares it optional (evaluate.BlankColumns), None (or no `blank`) where it is
    missing data."""


Run = Callable[[Scope], Any]


@dataclass(frozen=True)
class Expression:
    """A validated expression and what it references, ready to evaluate over any `Scope`."""

    source: str
    names: frozenset[str]  # bare names referenced (params, let values, filter columns)
    columns: frozenset[tuple[str, str]]  # (table, column) references like steps.duration_us
    tables: frozenset[str]  # bare table names referenced, e.g. rows(device_ops)
    _run: Run = field(repr=False, compare=False)

    def evaluate(self, scope: Scope) -> Any:
        """The value over `scope`: a plain scalar or a pandas Series; ExprError on failure."""
        try:
            with np.errstate(all="ignore"):
                return plain(self._run(scope))
        except MissingData:
            raise
        except ExprError as exc:
            raise ExprError(f"cannot evaluate {self.source!r}: {exc}") from exc
        except Exception as exc:  # a bug in a value or function must not reach the user raw
            raise ExprError(
                f"cannot evaluate {self.source!r}: {type(exc).__name__}: {exc}"
            ) from exc


def compile_expression(
    text: str,
    *,
    functions: Collection[str],
    tables: Mapping[str, Collection[str]],
    names: Collection[str],
    checked: bool = False,
) -> Expression:
    """Validate `text` and return an Expression, or raise ExprError.

    `tables` maps each known table to its allowed column names; `names` are the allowed bare
    names; `functions` the callable names. `checked`: the same text passed with the same
    names before (the rule cache says so), so the checks of its text alone (length, nesting,
    private names) are skipped; every node is still checked against the allowlist as its
    closure is built.
    """
    if not isinstance(text, str):
        raise ExprError(f"an expression must be text, not {type(text).__name__}")
    text = text.strip()
    if len(text) > MAX_LENGTH:
        raise ExprError(f"expression is too long ({len(text)} characters, at most {MAX_LENGTH})")
    tree = _parse(text, checked)
    compiler = _Compiler(text, functions, tables, names)
    if not checked:
        compiler.check_private_names(tree)
    compiler.mark_name_readers(tree.body)
    run = compiler.build(tree.body)
    return Expression(
        text,
        frozenset(compiler.used_names),
        frozenset(compiler.used_columns),
        frozenset(compiler.used_tables),
        run,
    )


def deferred_expression(
    source: str,
    names: frozenset[str],
    columns: frozenset[tuple[str, str]],
    tables: frozenset[str],
    compile_now: Callable[[], Expression],
) -> Expression:
    """An Expression whose references are known (from the rule cache) and whose closures are
    built on its first evaluation: listing rules, or a run where a rule does not apply, never
    pays for compiling it. The compiled expression must reference exactly what was recorded;
    otherwise the record was not this text's, and evaluating fails rather than guess."""
    compiled: list[Run] = []

    def run(scope: Scope) -> Any:
        if not compiled:
            expression = compile_now()
            if (expression.names, expression.columns, expression.tables) != (
                names,
                columns,
                tables,
            ):
                raise ExprError("the rule cache's record of this expression is out of date")
            compiled.append(expression._run)
        return compiled[0](scope)

    return Expression(source, names, columns, tables, run)


# --- values ------------------------------------------------------------------------------------


def is_missing(value: Any) -> bool:
    """True for None, NaN, pd.NA and NaT: the scalars a rule treats as "no value"."""
    if value is None or value is pd.NA or value is pd.NaT:
        return True
    return isinstance(value, (float, np.floating)) and math.isnan(value)


def truthy(value: Any) -> bool:
    """Truth of a scalar, with missing values false (Python would call NaN true)."""
    return False if is_missing(value) else bool(value)


def as_mask(series: pd.Series) -> pd.Series:
    """Elementwise truth of a Series as plain bool, missing values false."""
    dtype = series.dtype
    if isinstance(dtype, np.dtype) and dtype.kind == "b":
        return series  # NumPy bools (most comparisons) have no missing values to turn false
    if pd.api.types.is_bool_dtype(dtype):
        return series.fillna(False).astype(bool)
    if pd.api.types.is_numeric_dtype(dtype):
        return (series.fillna(0) != 0).astype(bool)
    if isinstance(dtype, pd.StringDtype):
        return (series.fillna("") != "").astype(bool)
    return series.map(truthy).astype(bool)


def plain(value: Any) -> Any:
    """NumPy scalars as Python numbers and pd.NA as NaN, so results serialise to JSON."""
    if isinstance(value, np.generic):
        return value.item()
    if value is pd.NA:
        return math.nan
    return value


def _is_text(value: Any) -> bool:
    return isinstance(value, str) or (
        isinstance(value, pd.Series) and pd.api.types.is_string_dtype(value)
    )


def _check_operand(value: Any) -> None:
    """Arithmetic only on numbers, text and numeric Series: no containers, no tables."""
    if isinstance(value, pd.Series):
        if _is_text(value):
            raise ExprError("arithmetic on text columns is not allowed")
        return
    if not (
        isinstance(value, (bool, int, float, str, np.number, np.bool_))
        or value is None
        or value is pd.NA
    ):
        raise ExprError(f"arithmetic on a {type(value).__name__} is not allowed")


def _check_int(value: Any, what: str = "result") -> None:
    """Refuse Python integers beyond MAX_INT_BITS: a chain of lets squaring each other would
    otherwise grow without bound (each step doubles the digits) and reach the writers."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > MAX_INT_BITS:
        raise ExprError(f"integer {what} exceeds {MAX_INT_BITS} bits")


def _check_product(left: Any, right: Any) -> None:
    """Refuse an integer product that would exceed MAX_INT_BITS, before computing it."""
    if (
        isinstance(left, int)
        and isinstance(right, int)
        and left.bit_length() + right.bit_length() > MAX_INT_BITS + 1
    ):
        raise ExprError(f"integer result of * would exceed {MAX_INT_BITS} bits")


def _check_repeat(left: Any, right: Any) -> None:
    """Refuse `text * n` whose result would be too long, before it is built."""
    text, count = (left, right) if isinstance(left, str) else (right, left)
    if not isinstance(text, str):
        return
    if not isinstance(count, (int, np.integer)):
        raise ExprError("text can only be repeated by a whole number")
    size = len(text) * max(int(count), 0)
    if size > MAX_STRING:
        raise ExprError(f"text result would have {size} characters (at most {MAX_STRING})")


def _check_power(base: Any, exponent: Any) -> None:
    """Refuse exponents that would take long or use much memory, before computing."""
    if isinstance(exponent, pd.Series):
        largest = plain(exponent.abs().max())
    elif isinstance(exponent, (int, float, np.number)):
        largest = abs(exponent)
    else:
        return
    if not is_missing(largest) and largest > MAX_EXPONENT:
        raise ExprError(f"exponent {largest!r} is too large (at most {MAX_EXPONENT})")
    if (
        isinstance(base, (int, np.integer))
        and isinstance(exponent, (int, np.integer))
        and abs(int(base)).bit_length() * int(exponent) > MAX_INT_BITS
    ):
        raise ExprError(f"result of ** would exceed {MAX_INT_BITS} bits")


_ARITHMETIC: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}


def _arithmetic(op: type[ast.operator], left: Any, right: Any) -> Any:
    _check_operand(left)
    _check_operand(right)
    _check_int(left, "operand")
    _check_int(right, "operand")
    if op is ast.Mult:
        _check_repeat(left, right)
        _check_product(left, right)
    elif op is ast.Mod and isinstance(left, str):
        raise ExprError("text formatting with '%' is not allowed")
    elif op is ast.Pow:
        _check_power(left, right)
    fn = _ARITHMETIC[op]
    if isinstance(left, pd.Series) or isinstance(right, pd.Series):
        if op in _ELEMENTWISE:
            pair = _numeric_pair(left, right, "iuf")
            if pair is not None:
                return pair.wrap(fn(pair.left, pair.right))
        return fn(left, right)
    try:
        result = fn(left, right)
    except ZeroDivisionError:
        return math.nan
    if isinstance(result, complex):  # (-8) ** 0.5: no complex numbers in rules
        return math.nan
    if isinstance(result, str) and len(result) > MAX_STRING:
        raise ExprError(f"text result would have {len(result)} characters (at most {MAX_STRING})")
    _check_int(result)
    return result


_COMPARE: dict[type[ast.cmpop], Callable[[Any, Any], Any]] = {
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
}


def _member(left: Any, right: Any) -> bool | pd.Series:
    """`left in right`: isin for Series, Python membership for scalars."""
    if isinstance(right, (list, tuple, set, frozenset, pd.Series)):
        options = right.dropna() if isinstance(right, pd.Series) else list(right)
        if isinstance(left, pd.Series):
            return as_mask(left.isin(options))
        if is_missing(left):
            return False
        return bool((options == left).any()) if isinstance(options, pd.Series) else left in options
    if isinstance(right, str):
        if isinstance(left, str):
            return left in right
        raise ExprError("'in' text needs text on the left; use contains(column, text) for columns")
    raise ExprError(
        f"the right side of 'in' must be a tuple, list, column or text, not {type(right).__name__}"
    )


def _compare(op: type[ast.cmpop], left: Any, right: Any) -> bool | pd.Series:
    if op is ast.In or op is ast.NotIn:
        result = _member(left, right)
        if op is ast.NotIn:
            return ~result if isinstance(result, pd.Series) else not result
        return result
    pair = _numeric_pair(left, right, "biuf")
    if pair is not None:  # NumPy compares as pandas does, NaN false (true for !=)
        return pair.wrap(_COMPARE[op](pair.left, pair.right))
    same_text = _text_equality(op, left, right)
    if same_text is not None:
        return same_text
    result = _COMPARE[op](left, right)
    return as_mask(result) if isinstance(result, pd.Series) else truthy(result)


def _text_equality(op: type[ast.cmpop], left: Any, right: Any) -> pd.Series | None:
    """`column == "text"` (or `!=`) for an arrow text column with NA missing values, answered
    once per distinct value (advisor.text_codes): rules compare category and op_type
    with a name dozens of times a profile, and pandas' comparison and the mask made of its
    missing values cost several times that. Missing rows are false for both operators, as
    `as_mask` makes the missing results of pandas' comparison. None: any other comparison."""
    if op is not ast.Eq and op is not ast.NotEq:
        return None
    column, text = (left, right) if isinstance(left, pd.Series) else (right, left)
    if not isinstance(column, pd.Series) or not isinstance(text, str):
        return None
    if not nullable_arrow_text(column):
        return None
    codes, distinct = coded(column)
    hits = distinct.to_numpy(object) == text
    return spread(codes, hits if op is ast.Eq else ~hits, column.index, column.name)


def _both(acc: bool | pd.Series, value: bool | pd.Series) -> bool | pd.Series:
    if acc is True and _is_mask(value):
        return value  # what `True & value` gives, without a pandas operation
    if isinstance(acc, pd.Series) or isinstance(value, pd.Series):
        pair = _numeric_pair(acc, value, "b")
        return pair.wrap(pair.left & pair.right) if pair is not None else acc & value
    return acc and value


def _any_of(acc: bool | pd.Series, value: bool | pd.Series) -> bool | pd.Series:
    if acc is False and _is_mask(value):
        return value
    if isinstance(acc, pd.Series) or isinstance(value, pd.Series):
        pair = _numeric_pair(acc, value, "b")
        return pair.wrap(pair.left | pair.right) if pair is not None else acc | value
    return acc or value


_ELEMENTWISE = frozenset({ast.Add, ast.Sub, ast.Mult, ast.Div})
"""Operators whose pandas result on plain NumPy columns is NumPy's, to the bit (pandas
rewrites the zeros of `//` and `%`)."""


def _is_mask(value: Any) -> bool:
    return isinstance(value, pd.Series) and value.dtype == np.bool_


@dataclass(frozen=True)
class _NumericPair:
    """Two operands as NumPy values, and how to make a Series of their result as pandas
    names it: a Series and a scalar keep the Series' name, two Series a name they share."""

    left: Any
    right: Any
    index: pd.Index
    name: Any

    def wrap(self, values: np.ndarray) -> pd.Series:
        return pd.Series(values, index=self.index, name=self.name, copy=False)


def _numeric_pair(left: Any, right: Any, kinds: str) -> _NumericPair | None:
    """The operands as NumPy values when pandas would combine them element by element,
    neither aligning nor converting anything: Series of NumPy dtypes of `kinds` on equal
    indexes (the columns of one table), or such a Series and a number (not a bool, which
    pandas treats apart). On tables of hundreds of rows a pandas operation costs several
    times NumPy's; None sends any other pair to pandas."""
    series = [v for v in (left, right) if isinstance(v, pd.Series)]
    if not series or not all(
        isinstance(s.dtype, np.dtype) and s.dtype.kind in kinds for s in series
    ):
        return None
    if len(series) == 2:
        if left.index is not right.index and not left.index.equals(right.index):
            return None  # pandas aligns them by label
        name = left.name if _same_name(left.name, right.name) else None
        return _NumericPair(left.to_numpy(), right.to_numpy(), left.index, name)
    column = series[0]
    scalar = right if column is left else left
    if kinds == "b":
        if not isinstance(scalar, (bool, np.bool_)):
            return None
    elif isinstance(scalar, (bool, np.bool_)) or not isinstance(scalar, (int, float, np.number)):
        return None
    values = column.to_numpy()
    if column is left:
        return _NumericPair(values, scalar, column.index, column.name)
    return _NumericPair(scalar, values, column.index, column.name)


def _same_name(a: Any, b: Any) -> bool:
    """Whether pandas gives the result of two Series the first one's name."""
    try:
        return bool(a == b)
    except (TypeError, ValueError):
        return False


def _truth(value: Any) -> bool | pd.Series:
    return as_mask(value) if isinstance(value, pd.Series) else truthy(value)


def _negate(value: Any) -> bool | pd.Series:
    truth = _truth(value)
    return ~truth if isinstance(truth, pd.Series) else not truth


# --- validation and compilation -----------------------------------------------------------------


def _parse(text: str, checked: bool = False) -> ast.Expression:
    try:
        with warnings.catch_warnings():  # e.g. "invalid escape sequence" in regex literals
            warnings.simplefilter("ignore")
            tree = ast.parse(text, mode="eval")
    except SyntaxError as exc:
        line, col = exc.lineno or 1, max(exc.offset or 1, 1)
        where = f"col {col}" if line == 1 else f"line {line} col {col}"
        lines = text.splitlines() or [""]
        near = lines[min(line, len(lines)) - 1][col - 1 : col + 19]
        quoted = f" near {near!r}" if near else ""
        raise ExprError(f"syntax error at {where}: {exc.msg}{quoted}") from None
    except (ValueError, RecursionError, MemoryError) as exc:
        raise ExprError(f"cannot parse expression: {exc}") from None
    if not checked and (_brackets_too_deep(text) or _ast_depth(tree) > MAX_DEPTH):
        raise ExprError(f"expression is nested too deeply (at most {MAX_DEPTH} levels)")
    return tree


def _brackets_too_deep(text: str) -> bool:
    """Whether brackets nest deeper than MAX_DEPTH; tokenized only when the text holds more
    opening brackets than that (they bound the depth), which almost no expression does."""
    openers = text.count("(") + text.count("[") + text.count("{")
    return openers > MAX_DEPTH and _bracket_depth(text) > MAX_DEPTH


def _bracket_depth(text: str) -> int:
    """Deepest bracket nesting: `((((x))))` leaves no trace in the tree but costs the parser."""
    depth = deepest = 0
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.OP and token.string in ("(", "[", "{"):
                depth += 1
                deepest = max(deepest, depth)
            elif token.type == tokenize.OP and token.string in (")", "]", "}"):
                depth -= 1
    except (tokenize.TokenError, SyntaxError) as exc:
        raise ExprError(f"cannot parse expression: {exc}") from None
    return deepest


def _ast_depth(tree: ast.Expression) -> int:
    """Deepest chain of nested sub-expressions, found without recursion."""
    deepest = 0
    stack: list[tuple[ast.AST, int]] = [(tree.body, 1)]
    while stack and deepest <= MAX_DEPTH:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        stack.extend(
            (child, depth + isinstance(child, ast.expr)) for child in ast.iter_child_nodes(node)
        )
    return deepest


_FORBIDDEN: dict[type[ast.AST], str] = {
    ast.Subscript: "subscripts are not allowed",
    ast.Slice: "slices are not allowed",
    ast.Lambda: "lambda is not allowed",
    ast.ListComp: "comprehensions are not allowed",
    ast.SetComp: "comprehensions are not allowed",
    ast.DictComp: "comprehensions are not allowed",
    ast.GeneratorExp: "generator expressions are not allowed",
    ast.IfExp: "conditional expressions ('a if c else b') are not allowed; use where(c, a, b)",
    ast.Dict: "dict literals are not allowed",
    ast.Set: "set literals are not allowed",
    ast.NamedExpr: "assignment expressions (':=') are not allowed",
    ast.Starred: "star expressions are not allowed",
    ast.Await: "await is not allowed",
    ast.Yield: "yield is not allowed",
    ast.YieldFrom: "yield is not allowed",
    ast.JoinedStr: "f-strings are not allowed",
    ast.FormattedValue: "f-strings are not allowed",
    ast.Tuple: "tuples are only allowed right of 'in' or as function arguments",
    ast.List: "lists are only allowed right of 'in' or as function arguments",
}

_FORBIDDEN_OPERATORS: dict[type[ast.AST], str] = {
    ast.BitOr: "'|' is not allowed; use 'or'",
    ast.BitAnd: "'&' is not allowed; use 'and'",
    ast.BitXor: "'^' is not allowed",
    ast.LShift: "'<<' is not allowed",
    ast.RShift: "'>>' is not allowed",
    ast.MatMult: "'@' is not allowed",
    ast.Invert: "'~' is not allowed; use 'not'",
    ast.Is: "'is' is not allowed; use '=='",
    ast.IsNot: "'is not' is not allowed; use '!='",
}

_PRIVATE_START = re.compile(r"(?<!\w)_")
"""Where a name starting with '_' may begin in ASCII text."""
_CONSTANT_TYPES = (bool, int, float, str, type(None))
_LITERAL_NODES = (ast.Constant, ast.BinOp, ast.UnaryOp, ast.operator, ast.unaryop)
"""Nodes of arithmetic on constants, which is tried while compiling to check its limits."""
_NO_DATA = Scope({}, {}, {})
_SHARED_NODES = (ast.Attribute, ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare, ast.Call)
"""Nodes whose values Scope.memo keeps (constants, names and tables cost nothing to read)."""


@dataclass(frozen=True)
class FusedCall:
    """`outer(inner(x, y))` computed by `fast(x, y)` without the inner value built:
    `sum(filter(column, mask))` is most of the rules' filters, and on a small table pandas
    builds the filtered column in more time than the sum takes. `fast` returns NOT_FUSED for
    operands it does not take; what it returns otherwise equals the two calls' value."""

    outer: Callable[..., Any]
    inner: Callable[..., Any]
    inner_name: str
    fast: Callable[[Any, Any], Any]


NOT_FUSED = object()
FUSED_CALLS: dict[str, FusedCall] = {}
"""By the outer function's name; the expression functions register theirs
(engine/functions.py)."""


def _checked_result(result: Any) -> Any:
    if isinstance(result, str) and len(result) > MAX_STRING:
        raise ExprError(f"text result has {len(result)} characters (at most {MAX_STRING})")
    return result


def _memoized(key: bytes, run: Run) -> Run:
    """`run`, its value kept in the scope's memo under `key` (its source text): expression
    functions are pure (hookspecs.advisor_functions) and no operator changes its operands."""

    def shared(scope: Scope) -> Any:
        memo = scope.memo
        if memo is None:
            return run(scope)
        if key in memo:
            return memo[key]
        value = memo[key] = run(scope)
        return value

    return shared


def _hint(word: str, options: Collection[str]) -> str:
    import difflib  # only when an expression names something unknown

    close = difflib.get_close_matches(word, list(options), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


class _Compiler:
    """Checks each node against the allowlist while building its closure."""

    def __init__(
        self,
        text: str,
        functions: Collection[str],
        tables: Mapping[str, Collection[str]],
        names: Collection[str],
    ) -> None:
        self.text = text
        self.functions = set(functions)
        self.tables = tables  # not copied: one expression reads a few of ~100 tables
        self.names = set(names)
        self.used_names: set[str] = set()
        self.used_columns: set[tuple[str, str]] = set()
        self.used_tables: set[str] = set()
        self._lines: list[bytes] | None = None
        self.name_readers: set[int] = set()  # ids of nodes: mark_name_readers
        self.builders: dict[type[ast.AST], Callable[[Any], Run]] = {
            ast.Constant: self.constant,
            ast.Name: self.name,
            ast.Attribute: self.column,
            ast.BinOp: self.binop,
            ast.UnaryOp: self.unaryop,
            ast.BoolOp: self.boolop,
            ast.Compare: self.compare,
            ast.Call: self.call,
        }

    # messages

    def fragment(self, node: ast.AST) -> str:
        text = ast.get_source_segment(self.text, node) or ast.unparse(node)
        return text if len(text) <= _FRAGMENT else text[: _FRAGMENT - 1] + "…"

    def fail(self, node: ast.AST, problem: str, detail: str = "") -> NoReturn:
        raise ExprError(f"{problem}: {self.fragment(node)!r}{detail}")

    def guard(self, node: ast.AST, run: Run) -> Run:
        """Turn any exception of an operator or function into an ExprError naming the node
        (quoted only when it fails: finding the text of every node costs more than building
        the whole expression)."""

        def guarded(scope: Scope) -> Any:
            try:
                return run(scope)
            except ExprError:
                raise
            except Exception as exc:
                raise self.failure(node, exc) from exc

        return guarded

    def failure(self, node: ast.AST, exc: Exception) -> ExprError:
        fragment = self.fragment(node)
        where = "" if fragment == self.text else f" in {fragment!r}"
        return ExprError(f"{type(exc).__name__}{where}: {exc}")

    # checks over the whole tree

    def check_private_names(self, tree: ast.AST) -> None:
        """Dunder and private names are the usual first step of a sandbox escape. The tree
        is walked unless the text is ASCII and no word in it starts with '_' (the parser
        folds non-ASCII names by NFKC, which the text does not show)."""
        if self.text.isascii() and not _PRIVATE_START.search(self.text):
            return
        private = " (names starting with '_' are never allowed)"
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and node.id.startswith("_"):
                self.fail(node, "name is not allowed", private)
            if isinstance(node, ast.Attribute) and node.attr.startswith("_"):
                self.fail(node, "attribute access is not allowed", private)
            if isinstance(node, ast.keyword) and (node.arg or "").startswith("_"):
                self.fail(node, "keyword is not allowed", private)

    # nodes

    def build(self, node: ast.expr) -> Run:
        builder = self.builders.get(type(node))
        if builder is None:
            self.fail(node, _FORBIDDEN.get(type(node), f"{type(node).__name__} is not allowed"))
        run = builder(node)
        if isinstance(node, _SHARED_NODES) and id(node) not in self.name_readers:
            return _memoized(self.source_key(node), run)
        return run

    def mark_name_readers(self, root: ast.AST) -> None:
        """Record the nodes whose value depends on a param, let value or bare column (the
        others depend only on the tables, and may be shared between expressions:
        Scope.memo), in one pass over the tree."""

        names, readers = self.names, self.name_readers

        def visit(node: ast.AST) -> bool:
            # ast.iter_child_nodes, without its generators: this walk is a third of compiling
            reads = node.__class__ is ast.Name and node.id in names
            for attribute in node._fields:
                value = getattr(node, attribute, None)
                if value.__class__ is list:
                    for item in value:
                        if isinstance(item, ast.AST) and visit(item):  # every child visited
                            reads = True
                elif isinstance(value, ast.AST) and visit(value):
                    reads = True
            if reads:
                readers.add(id(node))
            return reads

        visit(root)

    def source_key(self, node: ast.expr) -> bytes:
        """The source text of `node` (ast offsets count UTF-8 bytes)."""
        if self._lines is None:
            self._lines = self.text.encode("utf-8").splitlines(keepends=True)
        lines = self._lines[node.lineno - 1 : (node.end_lineno or node.lineno)]
        if len(lines) == 1:
            return lines[0][node.col_offset : node.end_col_offset]
        return b"".join(
            [lines[0][node.col_offset :], *lines[1:-1], lines[-1][: node.end_col_offset]]
        )

    def constant_value(self, node: ast.Constant) -> Any:
        value = node.value
        if isinstance(value, bytes):
            self.fail(node, "bytes are not allowed")
        if isinstance(value, complex):
            self.fail(node, "complex numbers are not allowed")
        if not isinstance(value, _CONSTANT_TYPES):
            self.fail(node, f"constant {value!r} is not allowed")
        if (
            isinstance(value, int)
            and not isinstance(value, bool)
            and value.bit_length() > MAX_INT_BITS
        ):
            self.fail(node, f"integer constant exceeds {MAX_INT_BITS} bits")
        return value

    def constant(self, node: ast.Constant) -> Run:
        value = self.constant_value(node)
        return lambda scope: value

    def name(self, node: ast.Name) -> Run:
        name = node.id
        if name in self.names:
            self.used_names.add(name)

            def run(scope: Scope) -> Any:
                try:
                    return scope.values[name]
                except KeyError:
                    raise MissingData(name) from None

            return run
        if name in self.tables:
            self.fail(
                node,
                "a table can only be a function argument",
                f"; use rows({name}) or {name}.<column>",
            )
        if name in self.functions:
            self.fail(node, "a function must be called", f"; write {name}(...)")
        self.fail(node, "unknown name", _hint(name, self.names | set(self.tables)))

    def table(self, node: ast.Name) -> Run:
        name = node.id
        self.used_tables.add(name)

        def run(scope: Scope) -> pd.DataFrame:
            try:
                return scope.tables[name]
            except KeyError:
                raise MissingData(name) from None

        return run

    def column(self, node: ast.Attribute) -> Run:
        owner = node.value
        if not isinstance(owner, ast.Name):
            self.fail(node, "attribute access is not allowed", " (only <table>.<column>)")
        table, column = owner.id, node.attr
        if table not in self.tables:
            self.fail(node, "attribute access is not allowed", f" ({table!r} is not a table)")
        if column not in self.tables[table]:
            self.fail(node, f"unknown column of table {table!r}", _hint(column, self.tables[table]))
        self.used_columns.add((table, column))

        def run(scope: Scope) -> pd.Series:
            frame = scope.tables.get(table)
            if frame is not None and column in frame.columns:
                return frame[column]
            blank = None if scope.blank is None else scope.blank(table, column)
            if blank is None:
                raise MissingData(f"{table}.{column}")
            return blank

        return run

    def check_operator(self, node: ast.AST, op: ast.AST) -> None:
        if type(op) in _FORBIDDEN_OPERATORS:
            self.fail(node, _FORBIDDEN_OPERATORS[type(op)])

    def binop(self, node: ast.BinOp) -> Run:
        self.check_operator(node, node.op)
        op = type(node.op)
        if op is ast.Pow:
            exponent = self.literal_number(node.right)
            if exponent is not None and abs(exponent) > MAX_EXPONENT:
                self.fail(node, f"exponent is too large (at most {MAX_EXPONENT})")
        left, right = self.build(node.left), self.build(node.right)
        run = self.guard(node, lambda scope: _arithmetic(op, left(scope), right(scope)))
        if all(isinstance(n, _LITERAL_NODES) for n in ast.walk(node)):
            try:  # `'a' * 10 ** 9`, `10 ** 10 ** 10`: refused now, not at every run
                run(_NO_DATA)
            except ExprError as exc:
                self.fail(node, str(exc))
        return run

    def literal_number(self, node: ast.expr) -> float | None:
        """The value of `3`, `-3` or `+3.5`, else None."""
        sign = 1
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            sign = -1 if isinstance(node.op, ast.USub) else 1
            node = node.operand
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, (int, float))
            and not isinstance(node.value, bool)
        ):
            return sign * node.value
        return None

    def unaryop(self, node: ast.UnaryOp) -> Run:
        self.check_operator(node, node.op)
        operand = self.build(node.operand)
        if isinstance(node.op, ast.Not):
            return self.guard(node, lambda scope: _negate(operand(scope)))
        fn = operator.neg if isinstance(node.op, ast.USub) else operator.pos

        def run(scope: Scope) -> Any:
            value = operand(scope)
            _check_operand(value)
            return fn(value)

        return self.guard(node, run)

    def boolop(self, node: ast.BoolOp) -> Run:
        operands = [self.build(value) for value in node.values]
        conjunction = isinstance(node.op, ast.And)
        combine = _both if conjunction else _any_of

        def run(scope: Scope) -> bool | pd.Series:
            acc: bool | pd.Series = conjunction
            for operand in operands:
                acc = combine(acc, _truth(operand(scope)))
                if acc is (not conjunction):  # a scalar decides it: short-circuit
                    return acc
            return acc

        return self.guard(node, run)

    def compare(self, node: ast.Compare) -> Run:
        for op in node.ops:
            self.check_operator(node, op)
        first = self.build(node.left)
        rights = [
            self.literal_sequence(right)
            if isinstance(op, (ast.In, ast.NotIn)) and isinstance(right, (ast.Tuple, ast.List))
            else self.build(right)
            for op, right in zip_strict(node.ops, node.comparators)
        ]
        ops = [type(op) for op in node.ops]

        def run(scope: Scope) -> bool | pd.Series:
            left = first(scope)
            acc: bool | pd.Series = True
            for op, right_run in zip_strict(ops, rights):
                right = right_run(scope)
                acc = _both(acc, _compare(op, left, right))
                if acc is False:  # a < b < c stops at the first false link, like Python
                    return False
                left = right
            return acc

        return self.guard(node, run)

    def literal_sequence(self, node: ast.Tuple | ast.List) -> Run:
        values = []
        for element in node.elts:
            number = self.literal_number(element)
            if number is not None:
                values.append(number)
            elif isinstance(element, ast.Constant):
                values.append(self.constant_value(element))
            else:
                self.fail(element, "only constants are allowed in a tuple or list")
        frozen = tuple(values)
        return lambda scope: frozen

    def argument(self, node: ast.expr) -> Run:
        if isinstance(node, (ast.Tuple, ast.List)):
            return self.literal_sequence(node)
        if isinstance(node, ast.Starred):
            self.fail(node, "star-arguments ('*x') are not allowed")
        if isinstance(node, ast.Name) and node.id in self.tables and node.id not in self.names:
            return self.table(node)
        return self.build(node)

    def function_name(self, node: ast.Call) -> str:
        func = node.func
        if isinstance(func, ast.Attribute):
            self.fail(node, "method calls are not allowed", "; use a function such as sum(x)")
        if not isinstance(func, ast.Name):
            self.fail(node, "only named functions can be called")
        if func.id not in self.functions:
            self.fail(func, "unknown function", _hint(func.id, self.functions))
        return func.id

    def call(self, node: ast.Call) -> Run:
        name = self.function_name(node)
        fused = self.fused_call(node, name)
        if fused is not None:
            return fused
        args = [self.argument(arg) for arg in node.args]
        kwargs: list[tuple[str, Run]] = []
        for keyword in node.keywords:
            if keyword.arg is None:
                self.fail(keyword, "'**' arguments are not allowed")
            kwargs.append((keyword.arg, self.argument(keyword.value)))
        return self.call_run(node, name, args, kwargs)

    def call_run(
        self, node: ast.Call, name: str, args: list[Run], kwargs: list[tuple[str, Run]]
    ) -> Run:
        def run(scope: Scope) -> Any:
            fn = scope.functions.get(name)
            if fn is None:
                raise ExprError(f"function {name!r} is not available")
            return _checked_result(
                fn(*(arg(scope) for arg in args), **{k: v(scope) for k, v in kwargs})
            )

        return self.guard(node, run)

    def fused_call(self, node: ast.Call, name: str) -> Run | None:
        """`outer(inner(x, y))` of a FUSED_CALLS pair: run as `fast(x, y)` while the scope's
        functions are the registered ones and `fast` takes its operands, else call by call
        (the inner call's value reused, its errors quoting it as ever). None: not a pair."""
        fusion = FUSED_CALLS.get(name)
        inner = node.args[0] if len(node.args) == 1 and not node.keywords else None
        if (
            fusion is None
            or not isinstance(inner, ast.Call)
            or not isinstance(inner.func, ast.Name)
            or inner.func.id != fusion.inner_name
            or len(inner.args) != 2
            or inner.keywords
        ):
            return None
        self.function_name(inner)
        first, second = (self.argument(arg) for arg in inner.args)
        inner_run = self.call_run(inner, fusion.inner_name, [first, second], [])
        if id(inner) not in self.name_readers:  # as build() shares it
            inner_run = _memoized(self.source_key(inner), inner_run)
        by_call = self.call_run(node, name, [inner_run], [])

        def run(scope: Scope) -> Any:
            outer_fn, inner_fn = scope.functions.get(name), scope.functions.get(fusion.inner_name)
            if outer_fn is not fusion.outer or inner_fn is not fusion.inner:
                return by_call(scope)
            x, y = first(scope), second(scope)
            value = fusion.fast(x, y)
            if value is NOT_FUSED:
                try:
                    inner_value = inner_fn(x, y)
                except ExprError:
                    raise
                except Exception as exc:
                    raise self.failure(inner, exc) from exc
                value = outer_fn(inner_value)
            return _checked_result(value)

        return self.guard(node, run)
