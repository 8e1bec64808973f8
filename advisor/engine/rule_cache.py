"""A per-user cache of validated rule files, so that each run does not re-check every rule.

Checking a rule file (YAML, JSON Schema, every message template parsed and its variables
worked out, regex patterns vetted) costs far more than reading it: about 0.4 s for the
built-in rules, on every run. What the checks conclude depends only on the file's text and on
the checker (advisor's code, the Python version, the versions of PyYAML, jsonschema and
Jinja2, the expression functions and tables plugins register), so a file that passed is
remembered under a hash of all of these and later runs skip the checks.

An entry is JSON that advisor wrote itself, in the user's cache directory: it is written to a
temporary file and renamed into place, so two runs racing see either no entry or a whole one,
and an entry that cannot be read or parsed, or has the wrong shape, is ignored (and rewritten).
A file that failed its checks is never cached: it is checked again and fails the same way.

The compiled code of each rule template that rendered is kept beside (`templates/`, marshal
files under the same fingerprint): a rule that fires renders without compiling its message
again. Only advisor writes these files, in the user's own cache directory, as Jinja2's own
bytecode cache does; a file of the wrong shape is ignored.

The built-in rule files come checked (`builtin_checks.json` beside this module, written by
`python -m advisor.docgen` and compared with a fresh check by the tests): a first run after
installing advisor, or a CI job starting with an empty cache directory, takes them as they
were checked and parsed then, without parsing their YAML or checking them again, and so does
every later run: they take no room in the user's cache. Each record is keyed like an entry,
by the file's text, the checker's code and the functions and tables of the built-in plugins,
less the versions of Python and of the checking libraries, which the tests cover on every
Python the project supports; an edited file or checker, or another plugin's tables or
functions, finds no record and is checked (and then cached).

Where: advisor.user_cache.cache_dir (ADVISOR_NO_CACHE=1 turns the cache off, the shipped
records too: every rule file is then checked).
"""

from __future__ import annotations

import json
import marshal
import sys
from collections.abc import Iterable
from functools import cache, lru_cache
from pathlib import Path
from types import CodeType
from typing import TYPE_CHECKING, Any

from advisor import distributions
from advisor.user_cache import cache_dir, cache_off, entry_hash, store_json, write_atomically
from advisor.version import __version__

if TYPE_CHECKING:
    from jinja2 import BytecodeCache

FORMAT = 2
"""Bumped when what an entry holds changes (2: what each expression reads)."""
_CHECKER_FILES = (
    "engine/rules.py",
    "engine/templates.py",
    "engine/expr.py",
    "engine/functions.py",
    "engine/rule_cache.py",
    "engine/wording.py",
    "schemas/rule.schema.json",
)
"""advisor's files whose content decides whether a rule passes: an edited checker in a
development checkout (same version number) must not trust what the old one concluded."""


_CHECKER_LIBRARIES = ("PyYAML", "jsonschema", "Jinja2")
"""The libraries that parse rule files and check them: another version may conclude
otherwise (a YAML scalar read differently, a template syntax added)."""


@cache
def _code_fingerprint() -> str:
    """A hash of the entry format and the checker's own files: what a shipped record
    (builtin_checks.json) is keyed by besides the rule file and its context."""
    digest = entry_hash(f"{FORMAT}".encode())
    package = Path(__file__).resolve().parent.parent
    for name in _CHECKER_FILES:
        try:
            digest.update((package / name).read_bytes())
        except OSError:  # run from a zip: the names stand in (no shipped record matches)
            digest.update(name.encode())
    return digest.hexdigest()


@cache
def _checker_fingerprint() -> str:
    """A hash of the checker's files, advisor's version, Python's and the checking
    libraries'."""
    digest = entry_hash(f"{_code_fingerprint()}\0{__version__}\0{sys.version}".encode())
    for library in _CHECKER_LIBRARIES:
        try:
            digest.update(f"\0{library} {distributions.version(library)}".encode())
        except distributions.PackageNotFoundError:  # vendored or frozen: the files still count
            digest.update(f"\0{library} ?".encode())
    return digest.hexdigest()


def entry_key(text: str, context: Iterable[str]) -> str:
    """The cache key of a rule file's text checked in `context` (the names of the expression
    functions and the table contract, as text): any change to either is another key."""
    return _key(_checker_fingerprint(), text, context)


def shipped_key(text: str, context: Iterable[str]) -> str:
    """The key of a rule file's record in builtin_checks.json (entry_key less the versions)."""
    return _key(_code_fingerprint(), text, context)


def _key(fingerprint: str, text: str, context: Iterable[str]) -> str:
    digest = _context_digest(fingerprint, tuple(context)).copy()
    digest.update(b"\1" + text.encode("utf-8", "surrogatepass"))
    key: str = digest.hexdigest()
    return key


@lru_cache(maxsize=8)
def _context_digest(fingerprint: str, context: tuple[str, ...]) -> Any:
    """The key's hash up to the rule file's text: the same for every file loaded against one
    set of functions and tables (the contract is the longer part of what is hashed)."""
    digest = entry_hash(fingerprint.encode())
    for part in context:
        digest.update(b"\0" + part.encode())
    return digest


def _entry_path(root: Path, key: str) -> Path:
    return root / "rules" / f"{key}.json"


def load_entry(key: str) -> tuple[list[dict[str, Any]], dict[str, Any]] | None:
    """The validated rule mappings stored under `key` and what their expressions read (by
    rule id; empty when the entry has none); None when there are none usable."""
    root = cache_dir()
    if root is None:
        return None
    try:
        entry = json.loads(_entry_path(root, key).read_bytes())
    except (OSError, ValueError, RecursionError):  # absent, unreadable, torn or not JSON
        return None
    if (
        not isinstance(entry, dict)
        or entry.get("key") != key
        or not isinstance(entry.get("rules"), list)
        or not all(isinstance(r, dict) for r in entry["rules"])
    ):
        return None
    refs = entry.get("refs")
    return entry["rules"], refs if isinstance(refs, dict) else {}


def load(key: str) -> list[dict[str, Any]] | None:
    """The validated rule mappings stored under `key`; None when there are none usable."""
    entry = load_entry(key)
    return None if entry is None else entry[0]


def store(key: str, raws: list[dict[str, Any]], refs: dict[str, Any] | None = None) -> None:
    """Remember that the rule mappings `raws` passed every check, and what their expressions
    read (`refs`, by rule id); nothing is stored when they would not come back from JSON
    exactly as they are (a YAML date, a number key, a NaN) or when the cache directory cannot
    be written: the next run checks them again."""
    root = cache_dir()
    if root is None:
        return
    store_json(_entry_path(root, key), {"key": key, "rules": raws, "refs": refs or {}})


SHIPPED_CHECKS = Path(__file__).with_name("builtin_checks.json")


def shipped_record(text: str, context: Iterable[str]) -> tuple[dict[str, Any], list[Any]] | None:
    """What builtin_checks.json holds of a built-in rule file checked when advisor was built,
    when `text` in `context` is one: what each rule's expressions read (by rule id) and the
    file's rule mappings as they were parsed then; None otherwise, for a record of another
    shape, and when the cache is turned off. The mappings are shared by every call: they are
    read, never changed."""
    if cache_off():
        return None
    record = _shipped_records().get(shipped_key(text, context))
    if not isinstance(record, dict):
        return None
    refs, rules = record.get("refs"), record.get("rules")
    return (refs, rules) if isinstance(refs, dict) and isinstance(rules, list) else None


@cache
def _shipped_records() -> dict[str, Any]:
    try:
        records = json.loads(SHIPPED_CHECKS.read_bytes()).get("files")
    except (OSError, ValueError, AttributeError):  # absent (a trimmed install) or damaged
        return {}
    return records if isinstance(records, dict) else {}


def _template_path(root: Path, text: str) -> Path:
    digest = entry_hash(_checker_fingerprint().encode() + b"\2")
    digest.update(text.encode("utf-8", "surrogatepass"))
    return root / "templates" / f"{digest.hexdigest()}.code"


def load_template_code(text: str) -> CodeType | None:
    """The compiled code of the rule template `text`, when an earlier run cached it.

    Compiling a template costs about a millisecond, loading its code a hundredth of that; a
    report renders dozens. The key holds Python's version (marshal's format is Python's own),
    Jinja2's and the sandbox's source (engine/templates.py is a checker file), so code is only
    ever reused by the same interpreter and sandbox that compiled it. An entry that cannot be
    read or is not code is ignored and written again."""
    root = cache_dir()
    if root is None:
        return None
    try:
        code = marshal.loads(_template_path(root, text).read_bytes())
    except (OSError, ValueError, EOFError, TypeError):
        return None
    return code if isinstance(code, CodeType) else None


def store_template_code(text: str, code: CodeType) -> None:
    """Keep the compiled code of the rule template `text` for later runs."""
    root = cache_dir()
    if root is not None:
        write_atomically(_template_path(root, text), marshal.dumps(code))


def page_bytecode_cache() -> BytecodeCache | None:
    """Jinja2's own cache of the report pages' compiled templates, in the same directory (the
    report and compare pages take longer to compile than to render); None when the cache is
    off."""
    root = cache_dir()
    if root is None:
        return None
    from jinja2 import FileSystemBytecodeCache

    folder = root / "pages"
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return FileSystemBytecodeCache(str(folder))
