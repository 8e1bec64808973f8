"""Rule message templates: Jinja2 in an immutable sandbox, with number-formatting filters.

Rule files come from other teams, so their templates are untrusted: the sandbox blocks
attribute walks and format-string tricks, and only plain dicts and numbers are passed in. The
sandbox does not bound time or memory, so loading also refuses what a message never needs and
could make rendering slow or huge: calls, macros, imports, `*`, `**`, `%`, `~`, nested or
recursive loops, list or dict literals holding variables (`{% set b = [a, a, a] %}` nested
ten times is 3**10 elements in one `{{ }}`), and filters other than a few harmless ones. At
render time every printed value, every value `string` or `join` turns into text and every
`round` precision is bounded too.
HTML escaping happens later, in the HTML renderer, because messages also go to JSON and text.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Collection
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Literal

from jinja2 import StrictUndefined, Template, TemplateError, meta, nodes
from jinja2.filters import do_round
from jinja2.runtime import Context
from jinja2.sandbox import ImmutableSandboxedEnvironment

from advisor import units
from advisor.engine import rule_cache
from advisor.lazy import lazy_module

if TYPE_CHECKING:
    import numpy as np
else:
    np = lazy_module("numpy")

MAX_MESSAGE_CHARS = 4000
SAFE_FILTERS = (
    "abs",
    "capitalize",
    "count",
    "d",
    "default",
    "first",
    "float",
    "int",
    "join",
    "last",
    "length",
    "lower",
    "round",
    "string",
    "title",
    "trim",
    "upper",
)
"""Jinja's filters that take time and memory in proportion to their input: `center(10**9)`,
`format('%1000000000s')`, chained `replace('', ...)` or `attr` are not available."""
_REFUSED: dict[type[nodes.Node], str] = {
    nodes.Call: "calls",
    nodes.Macro: "macros",
    nodes.CallBlock: "call blocks",
    nodes.Import: "imports",
    nodes.FromImport: "imports",
    nodes.Include: "includes",
    nodes.Extends: "extends",
    nodes.Block: "blocks",
    nodes.FilterBlock: "filter blocks",
    nodes.Mul: "'*'",
    nodes.Pow: "'**'",
    nodes.Mod: "'%'",
    nodes.Concat: "'~'",
}
_LITERALS = (nodes.List, nodes.Tuple, nodes.Dict)


NOT_A_NUMBER = "n/a"
"""What a number filter writes for a missing value: in a sentence "n/a" reads better than the
reports' en dash."""


def _number(value: Any) -> float | int | None:
    """A real number as a Python int or float (numpy scalars included); None otherwise."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return None
    if isinstance(value, np.generic):
        value = value.item()
    number = value if isinstance(value, int) else float(value)
    return None if isinstance(number, float) and math.isnan(number) else number


def _digits(digits: Any) -> int:
    if not _fair_precision(digits):
        raise TemplateError(f"digits must be a whole number within ±{MAX_ROUND_DIGITS}")
    return int(digits)


def _pct(value: Any, digits: Any = 1) -> str:
    number = _number(value)
    return NOT_A_NUMBER if number is None else units.fmt_pct(float(number), _digits(digits))


def _us(value: Any) -> str:
    number = _number(value)
    return NOT_A_NUMBER if number is None else units.fmt_us(number)


def _bytes(value: Any) -> str:
    number = _number(value)
    return NOT_A_NUMBER if number is None else units.fmt_bytes(number)


MAX_ROUND_DIGITS = 20
"""`round(10, -10**16)` builds 10**(10**16): a message never needs more than this."""


def _bounded(value: Any) -> Any:
    """`value`, after checking that its text would fit a message: nested containers are
    walked with a budget, so a structure of shared references is refused before str()."""
    budget = MAX_MESSAGE_CHARS
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, (list, tuple, set, frozenset)):
            budget -= len(item) + 2
            stack.extend(item)
        elif isinstance(item, dict):
            budget -= 2 * len(item) + 2
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, str):
            budget -= len(item)
        else:
            budget -= 1
        if budget < 0:
            raise TemplateError(f"a value longer than {MAX_MESSAGE_CHARS} characters")
    return value


def _fair_precision(precision: Any) -> bool:
    return isinstance(precision, int) and abs(precision) <= MAX_ROUND_DIGITS


def _round(
    value: Any, precision: Any = 0, method: Literal["common", "ceil", "floor"] = "common"
) -> Any:
    if not _fair_precision(precision):
        raise TemplateError(f"round precision must be a whole number within ±{MAX_ROUND_DIGITS}")
    return do_round(value, precision, method)


def _num(value: Any, digits: Any = None) -> str:
    number = _number(value)
    if number is None:
        return NOT_A_NUMBER
    return units.fmt_num(number, None if digits is None else _digits(digits))


class _Sandbox(ImmutableSandboxedEnvironment):
    """The immutable sandbox with `+` of texts and lists kept to the size of a message."""

    intercepted_binops = frozenset({"+"})

    def call_binop(self, context: Context, operator: str, left: Any, right: Any) -> Any:
        if (
            isinstance(left, (str, list, tuple))
            and isinstance(right, (str, list, tuple))
            and len(left) + len(right) > MAX_MESSAGE_CHARS
        ):
            raise TemplateError(f"'+' result longer than {MAX_MESSAGE_CHARS}")
        return super().call_binop(context, operator, left, right)


def _env() -> ImmutableSandboxedEnvironment:
    env = _Sandbox(undefined=StrictUndefined, autoescape=False, finalize=_bounded)
    env.filters = {name: env.filters[name] for name in SAFE_FILTERS}
    for name in ("string", "join"):  # both turn whole structures into text
        env.filters[name] = _checked_first(env.filters[name])
    env.filters.update(pct=_pct, us=_us, bytes=_bytes, num=_num, round=_round)
    env.globals.clear()  # range, lipsum, cycler, joiner, namespace, dict
    return env


def _checked_first(fn: Any) -> Any:
    """A filter that first checks its input with `_bounded` (keeping Jinja's pass_* marks)."""

    def checked(*args: Any, **kwargs: Any) -> Any:
        # the value is the first argument after an optional eval context / environment
        for arg in args[:2]:
            if not hasattr(arg, "environment") and not hasattr(arg, "autoescape"):
                _bounded(arg)
                break
        return fn(*args, **kwargs)

    for mark in ("jinja_pass_arg",):
        if hasattr(fn, mark):
            setattr(checked, mark, getattr(fn, mark))
    return checked


ENV = _env()


def check_template(text: str, names: Collection[str] | None = None) -> str | None:
    """Return a problem of a template, or None when it is valid; given `names`, a variable
    it reads that is none of them is a problem too.

    Parsing plus a check of the filter and test names finds what compiling would find, at a
    seventh of the cost: every new or changed rule file is checked, most templates never render.
    The variables are found in the same parse (a rule file's first check parses each of its
    hundreds of templates once).
    """
    if "{" not in text:  # no tag, variable or comment can start: plain text (most suggestions)
        return None
    try:
        tree = ENV.parse(text)
    except TemplateError as exc:
        return f"invalid template: {exc}"
    every = list(tree.find_all(nodes.Node))  # walked once, read by both checks
    for node in every:
        if isinstance(node, (nodes.Filter, nodes.Test)):
            known = ENV.filters if isinstance(node, nodes.Filter) else ENV.tests
            if node.name not in known:
                kind = "filter" if isinstance(node, nodes.Filter) else "test"
                return f"invalid template: no {kind} named {node.name!r}"
    problem = _unsafe(every)
    if problem is None and names is not None and not _reads_only(every, names):
        unknown = sorted(meta.find_undeclared_variables(tree) - set(names))
        if unknown:
            return f"unknown variable {unknown[0]!r} (use the params and lets of the rule)"
    return problem


def _reads_only(every: list[nodes.Node], names: Collection[str]) -> bool:
    """Whether every name the template loads is one of `names`: then so is each variable it
    reads from outside (those are loaded names too), without Jinja's analysis of its scopes,
    which costs as much as parsing it."""
    return all(
        node.name in names for node in every if isinstance(node, nodes.Name) and node.ctx == "load"
    )


def _unsafe(every: list[nodes.Node]) -> str | None:
    """What a template may not use, as load-time problem text; None when it is plain.
    `every`: the template's nodes (its tree's find_all)."""
    for node in every:
        if type(node) in _REFUSED:
            return f"template may not use {_REFUSED[type(node)]}"
        name = (
            node.attr
            if isinstance(node, nodes.Getattr)
            else node.arg.value
            if isinstance(node, nodes.Getitem) and isinstance(node.arg, nodes.Const)
            else None
        )
        if isinstance(name, str) and name.startswith("_"):
            return f"template may not use {name!r} (names starting with '_' are never allowed)"
        if isinstance(node, nodes.Name) and node.name == "self":
            return "template may not use 'self'"
        if (
            isinstance(node, nodes.Filter)
            and node.name == "round"
            and not all(
                _fair_precision(v)
                for v in _constants(
                    [*node.args[:1], *(k.value for k in node.kwargs if k.key == "precision")]
                )
            )
        ):
            return f"template may not round to more than {MAX_ROUND_DIGITS} digits"
        if isinstance(node, _LITERALS) and any(True for _ in node.find_all(nodes.Name)):
            return "template may not use list or dict literals holding variables"
        if isinstance(node, nodes.For) and (
            node.recursive or any(True for _ in node.find_all(nodes.For))
        ):
            return "template may not use nested or recursive loops"
    return None


def _constants(exprs: list[nodes.Expr]) -> list[Any]:
    """The values of the arguments that are constant where the template is parsed (`-3` is
    a Neg node, not a Const)."""
    values = []
    for expr in exprs:
        try:
            values.append(expr.as_const())
        except nodes.Impossible:
            continue
    return values


@lru_cache(maxsize=512)
def _compiled(text: str) -> Template:
    """The template of `text`, its code compiled by this sandbox once and then taken from the
    rule cache (what Environment.from_string does, with the compiling step cached)."""
    code = rule_cache.load_template_code(text)
    if code is None:
        code = ENV.compile(text)
        rule_cache.store_template_code(text, code)
    return ENV.template_class.from_code(ENV, code, ENV.make_globals(None), None)


def render(text: str, context: dict[str, Any]) -> str:
    """Render a rule template; errors and oversize output become a plain notice.

    Output is collected only up to the size limit: a loop cannot build a huge text first.
    """
    parts: list[str] = []
    size = 0
    try:
        for part in _compiled(text).generate(**context):
            parts.append(part)
            size += len(part)
            if size > MAX_MESSAGE_CHARS:
                break
    except Exception as exc:  # e.g. TypeError of `1 - 'a'`: never a crash of the whole run
        return f"[message template error: {type(exc).__name__}: {exc}]"
    out = "".join(parts)
    return out if len(out) <= MAX_MESSAGE_CHARS else out[:MAX_MESSAGE_CHARS] + "…"
