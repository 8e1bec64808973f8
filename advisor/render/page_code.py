"""The report pages' templates shipped compiled, so that a first run does not compile them.

Jinja2 turns a template into Python source and that into code. For the report pages the
first step is most of the work (about 0.1 s of the bundled demo's first run, against 0.015 s
for Python's compile of the result), which every first run (after installing or upgrading
advisor, every CI job with an empty cache) would otherwise pay. `page_code.json`, written by
`python -m advisor.docgen` beside the generated docs, holds each page's generated Python
source, keyed by the checksum of the template's text, Jinja2's version and what the
environment's settings change in the generated code (`environment_key`): a page whose text,
Jinja2 or settings differ from those it was generated with is compiled as before. The user's
cache of compiled pages (rule_cache.page_bytecode_cache) is still tried first and is filled
from the shipped source, so a later run loads code without compiling anything. With the cache
turned off (ADVISOR_NO_CACHE=1) nothing compiled before the run is used, the shipped source
included, as for the built-in rule files' shipped checks.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from functools import cache
from pathlib import Path
from typing import Any

import jinja2
from jinja2 import BytecodeCache, Environment
from jinja2.bccache import Bucket

from advisor.engine import rule_cache
from advisor.user_cache import cache_off

SHIPPED_PAGES = Path(__file__).with_name("page_code.json")
PAGE_SUFFIX = ".j2"  # report.js, beside them, is no template


def environment_key(env: Environment) -> str:
    """What a template's generated code depends on besides its text: Jinja2's version, the
    syntax and compile settings and the names of the filters and tests (a missing filter is
    an error found while compiling)."""
    settings = (
        jinja2.__version__,
        type(env).__qualname__,
        env.code_generator_class.__qualname__,
        env.block_start_string,
        env.block_end_string,
        env.variable_start_string,
        env.variable_end_string,
        env.comment_start_string,
        env.comment_end_string,
        env.line_statement_prefix,
        env.line_comment_prefix,
        env.trim_blocks,
        env.lstrip_blocks,
        env.newline_sequence,
        env.keep_trailing_newline,
        env.optimized,
        repr(env.autoescape),
        env.finalize is None,
        env.is_async,
        sorted(env.extensions),
        sorted(env.filters),
        sorted(env.tests),
    )
    return hashlib.sha256(repr(settings).encode()).hexdigest()


def page_code_json(env: Environment) -> str:
    """advisor/render/page_code.json: the generated Python source of every page template of
    `env`'s loader, with its text's checksum (Jinja2's own, as a bytecode cache keys it)."""
    assert env.loader is not None
    pages = {}
    for name in env.list_templates(filter_func=lambda n: n.endswith(PAGE_SUFFIX)):
        source, filename, _ = env.loader.get_source(env, name)
        pages[name] = {
            "checksum": BytecodeCache().get_source_checksum(source),
            "code": env.compile(source, name, filename, raw=True),
        }
    lines = [f"  {json.dumps(name)}: {json.dumps(page)}" for name, page in pages.items()]
    return (
        f'{{"jinja2": {json.dumps(jinja2.__version__)}, '
        f'"environment": {json.dumps(environment_key(env))}, "pages": {{\n'
        + ",\n".join(lines)
        + "\n}}\n"
    )


@cache
def _shipped() -> dict[str, Any]:
    try:
        shipped = json.loads(SHIPPED_PAGES.read_bytes())
    except (OSError, ValueError):  # absent (a trimmed install) or damaged
        return {}
    return shipped if isinstance(shipped, dict) else {}


def shipped_source(env: Environment, name: str, checksum: str) -> str | None:
    """The shipped generated source of page `name`, when it was generated from the text with
    `checksum` by this Jinja2 with `env`'s settings."""
    shipped = _shipped()
    if shipped.get("environment") != environment_key(env):
        return None
    pages = shipped.get("pages")
    page = pages.get(name) if isinstance(pages, dict) else None
    if not isinstance(page, dict) or page.get("checksum") != checksum:
        return None
    code = page.get("code")
    return code if isinstance(code, str) else None


class ShippedPages(BytecodeCache):
    """A bytecode cache for the pages: the user's cache (`user`; None where no cache folder
    can be made), else the shipped source compiled (and kept in the user's cache), else
    nothing, and Jinja2 compiles the template. A cache that cannot be written (a read-only
    or full disk) only costs the next run the compiling."""

    def __init__(self, user: BytecodeCache | None) -> None:
        self.user = user

    def load_bytecode(self, bucket: Bucket) -> None:
        if self.user is not None:
            self.user.load_bytecode(bucket)

    def dump_bytecode(self, bucket: Bucket) -> None:
        if self.user is not None:
            with contextlib.suppress(OSError):
                self.user.dump_bytecode(bucket)

    def get_bucket(
        self, environment: Environment, name: str, filename: str | None, source: str
    ) -> Bucket:
        bucket = super().get_bucket(environment, name, filename, source)
        if bucket.code is None:
            python = shipped_source(environment, name, bucket.checksum)
            if python is not None:  # without this module's __future__ flags, as Jinja2 does
                bucket.code = compile(python, filename or "<template>", "exec", dont_inherit=True)
                self.dump_bytecode(bucket)
        return bucket


def page_cache() -> ShippedPages | None:
    """The pages' bytecode cache: ShippedPages over the user's cache; None when the cache is
    turned off."""
    return None if cache_off() else ShippedPages(rule_cache.page_bytecode_cache())
