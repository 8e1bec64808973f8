"""A page template rendered as a fragment for a notebook cell (Jupyter's `_repr_html_`).

A notebook shows HTML inside its own page, so the report cannot bring <html>, <head> or a
script, and its style sheet, written for a page of its own (`:root`, `body`, bare `table`),
would restyle the whole notebook. The page templates therefore mark what a fragment shows as
two blocks, "style" and "content"; this module renders just those, with every CSS selector
moved under the fragment's wrapper element. Page and fragment share one template, so anything
the report gains appears in both.
"""

from __future__ import annotations

import re
import secrets
from typing import Any

from jinja2 import Template

SCOPE = "advisor-report"
"""The class of the fragment's wrapper; every style rule of the fragment starts with it."""

PAGE_ROOTS = re.compile(r"^(?::root|html|body)(?![\w-])")
"""Selectors of the page as a whole: in a fragment they mean the wrapper itself."""
STYLE = re.compile(r"<style>(.*?)</style>", re.S)
COMMENT = re.compile(r"/\*.*?\*/", re.S)
NESTING_AT_RULES = ("@media", "@supports", "@container", "@layer")
"""At-rules holding style rules, scoped inside; other at-rules (@keyframes, @font-face) are
kept as they are."""


def anchor_prefix() -> str:
    """A fresh start for a fragment's anchors: a notebook shows several reports on one page,
    and each must link to its own findings."""
    return f"r{secrets.token_hex(4)}-"


def render_fragment(template: Template, context: dict[str, Any]) -> str:
    """The template's "style" and "content" blocks as one <div>, its styles scoped to it."""
    ctx = template.new_context(context)
    styles = "".join(template.blocks["style"](ctx))
    content = "".join(template.blocks["content"](ctx))
    css = "".join(scope_css(css, f".{SCOPE}") for css in STYLE.findall(styles))
    return f'<div class="{SCOPE}">\n<style>{css}</style>\n{content}</div>\n'


def scope_css(css: str, scope: str) -> str:
    """`css` with every style rule applying only inside `scope` (a selector): `table` becomes
    `scope table`, and `:root`, `html` and `body` become `scope` itself. Written for the
    report's own style sheet: no braces inside strings, no nested style rules."""
    text = COMMENT.sub("", css)
    out: list[str] = []
    _scope_rules(text, 0, len(text), scope, out)
    return "".join(out)


def _scope_rules(text: str, start: int, end: int, scope: str, out: list[str]) -> None:
    i = start
    while i < end:
        brace = text.find("{", i, end)
        if brace < 0:
            out.append(text[i:end])
            return
        close = _closing(text, brace)
        prelude = text[i:brace]
        head = prelude.strip()
        if head.startswith(NESTING_AT_RULES):
            out.append(prelude + "{")
            _scope_rules(text, brace + 1, close, scope, out)
            out.append("}")
        elif head.startswith("@"):
            out.append(text[i : close + 1])
        else:
            lead = prelude[: len(prelude) - len(prelude.lstrip())]
            selectors = ", ".join(_scope_selector(s, scope) for s in _split_selectors(head))
            out.append(f"{lead}{selectors} {{{text[brace + 1 : close]}}}")
        i = close + 1


def _closing(text: str, brace: int) -> int:
    """The index of the brace that closes the one at `brace`."""
    depth = 0
    for j in range(brace, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return j
    raise ValueError("unbalanced braces in the report's style sheet")


def _split_selectors(selectors: str) -> list[str]:
    """A selector list split at its top-level commas (not those inside `:is(a, b)`)."""
    parts, depth, start = [], 0, 0
    for j, c in enumerate(selectors):
        depth += (c in "([") - (c in ")]")
        if c == "," and depth == 0:
            parts.append(selectors[start:j])
            start = j + 1
    parts.append(selectors[start:])
    return [p.strip() for p in parts if p.strip()]


def _scope_selector(selector: str, scope: str) -> str:
    if PAGE_ROOTS.match(selector):
        return PAGE_ROOTS.sub(scope, selector, count=1)
    return f"{scope} {selector}"
