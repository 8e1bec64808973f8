"""Reading the small text files a user or a shared folder supplies: rules, rule cases, config.

Kept apart from advisor.formats (the profile readers' helpers, with pandas and pyarrow) so
that loading rules stays cheap.
"""

from __future__ import annotations

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


def package_yaml(package: str, name: str) -> Any:
    """The YAML data file `name` shipped in `package` (a plugin's catalogue), parsed by
    LibYAML when PyYAML was built with it: the two catalogues a run of an Ascend profile reads
    take 4 ms that way against 32 ms by the pure-Python parser. Shipped files only: user files
    keep the pure-Python parser, whose error messages the tests and docs quote."""
    from importlib import resources

    import yaml

    text = resources.files(package).joinpath(name).read_text(encoding="utf-8")
    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
