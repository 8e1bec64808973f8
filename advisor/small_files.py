"""Reading the small text files a user or a shared folder supplies: rules, rule cases, config.

Kept apart from advisor.formats (the profile readers' helpers, with pandas and pyarrow) so
that loading rules stays cheap.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any


def read_small_text(path: str | Path, limit: int) -> str:
    """The UTF-8 text of a regular file of at most `limit` bytes.

    A rule folder or config may come from someone else: `evil.yaml -> /dev/zero` or a FIFO
    reports size 0, so a size check alone passes it and reading blocks or never ends. Only a
    regular file is opened, and never more than `limit` + 1 bytes are read. Raises OSError
    (not a regular file, unreadable), ValueError (too large) or UnicodeDecodeError."""
    info = os.stat(path)  # follows symlinks: what would be opened
    if not stat.S_ISREG(info.st_mode):
        raise OSError(f"not a regular file ({_file_kind(info.st_mode)})")
    with open(path, "rb") as handle:
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise ValueError(f"file larger than {limit:,} bytes")
    return data.decode("utf-8")


def _file_kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISDIR, "a directory"),
    ):
        if test(mode):
            return name
    return "not a file"


PARSED_SUFFIX = ".parsed.json"
"""A package's parsed copy of its YAML data file NAME is NAME + this, beside it."""


def package_yaml(package: str, name: str) -> Any:
    """The YAML data file `name` shipped in `package` (a plugin's catalogue), parsed.

    A run reads two catalogues, and importing PyYAML and parsing them cost about 25 ms. A
    package may ship the parsed data beside the file (`parsed_copy_json`; `python -m
    advisor.docgen` writes the built-in plugins'), used while it was made from the file's
    text as it is. Otherwise the parsed data is kept as JSON in the user's cache
    (advisor.user_cache), under a hash of the file's text and PyYAML's version, and later runs
    read that instead. A first run parses with LibYAML when PyYAML was built with it (4 ms
    against 32 ms for the pure-Python parser; shipped files only: user files keep the
    pure-Python parser, whose error messages the tests and docs quote). Data JSON would not
    give back exactly as parsed (a YAML date, a number key) is not cached. With the cache
    turned off the file is parsed, the shipped copy left aside too."""
    from importlib import resources

    files = resources.files(package)
    text = files.joinpath(name).read_text(encoding="utf-8")
    shipped = _shipped_copy(files.joinpath(name + PARSED_SUFFIX), text)
    if shipped is not None:
        return shipped["data"]
    entry = _parsed_copy_path(package, name, text)
    if entry is not None:
        try:
            return json.loads(entry.read_bytes())["data"]
        except (OSError, ValueError, RecursionError, TypeError, KeyError):
            pass  # absent, unreadable, torn or of another shape: parse and write it again
    data = _parse_shipped_yaml(text)
    if entry is not None:
        from advisor.user_cache import store_json

        store_json(entry, {"data": data})
    return data


def _parse_shipped_yaml(text: str) -> Any:
    """A package's own YAML data file parsed, with LibYAML where PyYAML has it (a user's
    files keep the pure-Python parser, whose error messages the docs quote)."""
    import yaml

    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def _text_digest(text: str) -> str:
    from advisor.user_cache import entry_hash

    return entry_hash(text.encode("utf-8", "surrogatepass")).hexdigest()


def parsed_copy_json(text: str) -> str | None:
    """The parsed copy a package ships of a YAML data file with `text` (package_yaml reads
    it): the data with a hash of the text; None when JSON would not give the data back as
    parsed."""
    data = _parse_shipped_yaml(text)
    try:
        copy = json.dumps({"text": _text_digest(text), "data": data}, ensure_ascii=False)
    except (TypeError, ValueError):
        return None
    return copy + "\n" if json.loads(copy)["data"] == data else None


def _shipped_copy(path: Any, text: str) -> dict[str, Any] | None:
    """The shipped parsed copy at `path` (a Traversable) when it was made from `text`; None
    when there is none, it is damaged or stale, or the cache is turned off."""
    from advisor.user_cache import cache_off

    if cache_off():
        return None
    try:
        copy = json.loads(path.read_bytes())
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(copy, dict) or "data" not in copy or copy.get("text") != _text_digest(text):
        return None
    return copy


def _parsed_copy_path(package: str, name: str, text: str) -> Path | None:
    from advisor.user_cache import cache_dir, entry_hash

    root = cache_dir()
    if root is None:
        return None
    digest = entry_hash(f"{_yaml_version()}\0{package}\0{name}\0".encode())
    digest.update(text.encode("utf-8", "surrogatepass"))
    return root / "data" / f"{digest.hexdigest()}.json"


def _yaml_version() -> str:
    from advisor import distributions

    try:
        return distributions.version("PyYAML")
    except distributions.PackageNotFoundError:  # vendored or frozen: the text alone keys it
        return "?"
