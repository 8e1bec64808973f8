"""Rule message templates: Jinja2 in an immutable sandbox, with number-formatting filters.

Rule files come from other teams, so their templates are untrusted: the sandbox blocks
attribute walks and format-string tricks, and only plain dicts and numbers are passed in.
HTML escaping happens later, in the HTML renderer, because messages also go to JSON and text.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

from jinja2 import StrictUndefined, Template, TemplateError, nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment

MAX_MESSAGE_CHARS = 4000


def _pct(value: Any, digits: int = 1) -> str:
    if not isinstance(value, int | float) or math.isnan(value):
        return "n/a"
    return f"{value * 100:.{digits}f}%"


def _us(value: Any) -> str:
    if not isinstance(value, int | float) or math.isnan(value):
        return "n/a"
    if abs(value) >= 10_000:
        return f"{value / 1000:,.1f} ms"
    return f"{value:,.1f} µs"


def _num(value: Any, digits: int = 2) -> str:
    if not isinstance(value, int | float) or math.isnan(value):
        return "n/a"
    if float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:,.{digits}f}"


def _env() -> ImmutableSandboxedEnvironment:
    env = ImmutableSandboxedEnvironment(undefined=StrictUndefined, autoescape=False)
    env.filters.update(pct=_pct, us=_us, num=_num)
    return env


ENV = _env()


def check_template(text: str) -> str | None:
    """Return a problem of a template, or None when it is valid.

    Parsing plus a check of the filter and test names finds what compiling would find, at a
    seventh of the cost: every rule file is checked on every run, most templates never render.
    """
    try:
        tree = ENV.parse(text)
    except TemplateError as exc:
        return f"invalid template: {exc}"
    for node in tree.find_all((nodes.Filter, nodes.Test)):
        known = ENV.filters if isinstance(node, nodes.Filter) else ENV.tests
        if node.name not in known:
            kind = "filter" if isinstance(node, nodes.Filter) else "test"
            return f"invalid template: no {kind} named {node.name!r}"
    return None


@lru_cache(maxsize=512)
def _compiled(text: str) -> Template:
    return ENV.from_string(text)


def render(text: str, context: dict[str, Any]) -> str:
    """Render a rule template; errors and oversize output become a plain notice."""
    try:
        out = _compiled(text).render(**context)
    except TemplateError as exc:
        return f"[message template error: {exc}]"
    return out if len(out) <= MAX_MESSAGE_CHARS else out[:MAX_MESSAGE_CHARS] + "…"
