"""Rule message templates: Jinja2 in an immutable sandbox, with number-formatting filters.

Rule files come from other teams, so their templates are untrusted: the sandbox blocks
attribute walks and format-string tricks, and only plain dicts and numbers are passed in.
HTML escaping happens later, in the HTML renderer, because messages also go to JSON and text.
"""

from __future__ import annotations

import math
from typing import Any

from jinja2 import StrictUndefined, TemplateError
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
    """Return a syntax problem of a template, or None when it compiles."""
    try:
        ENV.from_string(text)
    except TemplateError as exc:
        return f"invalid template: {exc}"
    return None


def render(text: str, context: dict[str, Any]) -> str:
    """Render a rule template; errors and oversize output become a plain notice."""
    try:
        out = ENV.from_string(text).render(**context)
    except TemplateError as exc:
        return f"[message template error: {exc}]"
    return out if len(out) <= MAX_MESSAGE_CHARS else out[:MAX_MESSAGE_CHARS] + "…"
