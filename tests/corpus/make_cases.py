"""Malformed profiles, made at test time from the real fixtures (see README.md).

Every case copies one healthy profile (a genuine public sample or one of the project's own
fixtures) into a scratch folder and breaks one file of it in one way: cut, flipped, re-encoded,
columns moved, bad numbers, replaced by something that is no file at all. The generator is
deterministic (seeded), so a failing case id always names the same bytes.
"""

from __future__ import annotations

import gzip
import io
import os
import random
import re
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from conftest import DEMO, FIXTURE_DIR, REAL

SHARED = REAL
OWN = FIXTURE_DIR

Mutation = Callable[[bytes, random.Random], Optional[bytes]]  # no `|`: evaluated on 3.9
"""New content from old; None when the mutation does not apply to this file."""


@dataclass(frozen=True)
class Base:
    """A healthy profile to break: `source` copied as `name`, `root` is what advisor is given.

    `ranks` marks a folder of several independent profiles: breaking one leaves the others.
    """

    name: str
    sources: tuple[Path, ...]
    ranks: bool = False

    def copy(self, dest: Path) -> Path:
        dest.mkdir(parents=True)
        for source in self.sources:
            target = dest / source.name
            if source.is_dir():
                shutil.copytree(source, target)
            else:
                shutil.copyfile(source, target)
        return dest


BASES = {
    b.name: b
    for b in (
        Base("msprof", (OWN / "msprof/PROF_000001_20260105093000123_SMALLCASE",)),
        Base("msprof_demo", (DEMO,)),
        Base("msprof_queues", (OWN / "msprof_queues/PROF_000004_20260110080000000_QUEUES",)),
        Base(
            "cann_timeline",
            (SHARED / "cann_timeline/PROF_000001_20230818142704322_COJGGGCANRMICFBC",),
        ),
        Base("ascend_pt", (SHARED / "ascend_pt/rank0_ascend_pt",)),
        Base("kineto", (OWN / "kineto_own/healthy.pt.trace.json.gz",)),
        Base(
            "kineto_ranks",
            (
                OWN / "kineto_own/ddp_rank0.pt.trace.json.gz",
                OWN / "kineto_own/ddp_rank1.pt.trace.json.gz",
            ),
            ranks=True,
        ),
        Base(
            "kineto_cpu",
            (SHARED / "kineto/cpu_only__rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz",),
        ),
        Base("mindspore", (SHARED / "mindspore_legacy/run_2_profiler",)),
        Base("mindspore_ranks", (SHARED / "mindspore_legacy/profiler_misc",), ranks=True),
        Base("megengine_dynamic", (OWN / "megengine/dynamic",)),
        Base("megengine_static", (OWN / "megengine/static",)),
        Base("aoe", (OWN / "aoe/good",)),
        Base("memory_timeline", (OWN / "memory_timeline_own/mlp_adam_cpu.raw.json.gz",)),
        Base("memory_snapshot", (SHARED / "memory_snapshot/snapshot_expandable.pkl.gz",)),
    )
}


@dataclass(frozen=True)
class Case:
    """One broken profile: `target` (relative to the case folder) is the file broken.

    `loud` cases leave nothing usable in the target, so advisor must name it in a message;
    the others (a flipped byte may land in a name) may also pass silently.
    """

    id: str
    base: str
    target: str
    kind: str
    loud: bool
    mutate: Mutation | None = None
    tree: Callable[[Path], None] | None = None

    def build(self, scratch: Path) -> Path | None:
        """The case's folder (advisor's input) under `scratch`; None when it does not apply."""
        root = BASES[self.base].copy(scratch / self.id)
        path = root / self.target
        if self.tree is not None:
            self.tree(path)
            return root
        assert self.mutate is not None
        old = path.read_bytes()
        zipped = path.suffix == ".gz" and not self.kind.startswith("gz-")
        text = gzip.decompress(old) if zipped else old
        new = self.mutate(text, random.Random(self.id))
        if new is None or new == text:
            return None
        path.write_bytes(gzip.compress(new, mtime=0) if zipped else new)
        return root


# ---------------------------------------------------------------------------------------------
# content mutations


def truncate(fraction: float) -> Mutation:
    return lambda data, rng: data[: int(len(data) * fraction)]


def cut_last(data: bytes, rng: random.Random) -> bytes:
    return data[:-1]


def empty(data: bytes, rng: random.Random) -> bytes:
    return b""


def binary(data: bytes, rng: random.Random) -> bytes:
    return b"\x00\xff\xfe" + rng.randbytes(max(len(data) // 4, 64))


def flip(count: int) -> Mutation:
    def mutate(data: bytes, rng: random.Random) -> bytes:
        out = bytearray(data)
        for _ in range(count):
            at = rng.randrange(len(out))
            out[at] ^= 1 << rng.randrange(8)
        return bytes(out)

    return mutate


def zero_block(data: bytes, rng: random.Random) -> bytes:
    at = rng.randrange(len(data))
    return data[:at] + b"\x00" * 64 + data[at + 64 :]


def utf16(data: bytes, rng: random.Random) -> bytes | None:
    try:
        return data.decode("utf-8").encode("utf-16")
    except UnicodeDecodeError:
        return None


def latin1(data: bytes, rng: random.Random) -> bytes | None:
    """Non-ASCII names written in Latin-1 (invalid UTF-8) where the file has names."""
    text = data.decode("utf-8", errors="replace")
    new, n = re.subn(
        r"(?<=[A-Za-z])([A-Za-z]{3})(?=[A-Za-z_])", "\u00e9\u00fc\u00df", text, count=5
    )
    return new.encode("latin-1", errors="replace") if n else None


def huge_line(data: bytes, rng: random.Random) -> bytes:
    """A 4 MB line of one name in the middle of the file."""
    at = data.find(b"\n", len(data) // 2)
    at = len(data) // 2 if at < 0 else at
    return data[:at] + b"\n" + b"x" * (4 << 20) + data[at:]


def crlf_bom(data: bytes, rng: random.Random) -> bytes:
    return b"\xef\xbb\xbf" + data.replace(b"\n", b"\r\n")


# JSON ---------------------------------------------------------------------------------------

_NUMBER_FIELD = re.compile(
    rb'("(?:dur|ts|Duration|duration|time|cost|value)"\s*:\s*)'
    rb'(-?[0-9][0-9.eE+-]*|"-?[0-9][0-9.eE+-]*")'
)


def json_field(value: bytes, count: int = 20) -> Mutation:
    """Replace the first `count` numeric `dur`/`ts`/... values with `value`."""

    def mutate(data: bytes, rng: random.Random) -> bytes | None:
        new, n = _NUMBER_FIELD.subn(lambda m: m[1] + value, data, count=count)
        return new if n else None

    return mutate


def duplicate_keys(data: bytes, rng: random.Random) -> bytes | None:
    """Every matched numeric key written twice, the second time with a string."""
    new, n = _NUMBER_FIELD.subn(lambda m: m[1] + m[2] + b"," + m[1] + b'"dup"', data, count=50)
    return new if n else None


def deep_nesting(data: bytes, rng: random.Random) -> bytes:
    """The whole document replaced by 100 000 nested lists."""
    return b"[" * 100_000 + b"]" * 100_000


def deep_inside(data: bytes, rng: random.Random) -> bytes | None:
    """One value deep inside the document nested 5 000 levels (past every parser's limit)."""
    new, n = _NUMBER_FIELD.subn(lambda m: m[1] + b"[" * 5000 + b"1" + b"]" * 5000, data, count=1)
    return new if n else None


def json_shape(text: bytes) -> Mutation:
    return lambda data, rng: text


def huge_string(data: bytes, rng: random.Random) -> bytes | None:
    """A 4 MB name in one line (JSON keeps its events on one line here)."""
    new, n = re.subn(rb'("name"\s*:\s*")', lambda m: m[1] + b"y" * (4 << 20), data, count=1)
    return new if n else None


def boundary_string(data: bytes, rng: random.Random) -> bytes | None:
    """A 600 KB name made of `},{`: each one looks like a cut between two events."""
    new, n = re.subn(rb'("name"\s*:\s*")', lambda m: m[1] + b"},{" * 200_000, data, count=1)
    return new if n else None


def whitespace_bomb(data: bytes, rng: random.Random) -> bytes | None:
    """The trace with 300 MB of spaces after its first event, gzipped again: a few hundred
    KB on disk. Built chunk by chunk, so the test itself never holds the 300 MB."""
    try:
        text = gzip.decompress(data)
    except (OSError, EOFError):
        return None
    cut = text.find(b"},") + 2
    if cut < 2:
        return None
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", compresslevel=1) as packed:
        packed.write(text[:cut])
        blank = b" " * (1 << 20)
        for _ in range(300):
            packed.write(blank)
        packed.write(text[cut:])
    return out.getvalue()


def trailing_garbage(data: bytes, rng: random.Random) -> bytes:
    return data + b"\n}garbage{"


# CSV ----------------------------------------------------------------------------------------


def _rows(data: bytes) -> list[list[str]] | None:
    import csv

    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return None
    rows = list(csv.reader(io.StringIO(text)))
    return rows if len(rows) >= 2 and len(rows[0]) >= 2 else None


def _csv(rows: list[list[str]]) -> bytes:
    import csv

    out = io.StringIO()
    # NUL written bare, as Python 3.11+ does (3.10 refuses it, 3.9 quotes the cell)
    nul = "\ue000"
    csv.writer(out, lineterminator="\n").writerows(
        [[c.replace("\x00", nul) for c in row] for row in rows]
    )
    return out.getvalue().replace(nul, "\x00").encode()


def _numeric_columns(rows: list[list[str]]) -> list[int]:
    def number(text: str) -> bool:
        try:
            float(text)
        except ValueError:
            return False
        return True

    body = [r for r in rows[1:] if len(r) == len(rows[0])]
    return [i for i in range(len(rows[0])) if body and all(number(r[i]) for r in body[:20])]


def csv_rows(change: Callable[[list[list[str]], random.Random], bool]) -> Mutation:
    """A CSV mutation on parsed rows; `change` returns False when it cannot apply."""

    def mutate(data: bytes, rng: random.Random) -> bytes | None:
        rows = _rows(data)
        if rows is None or not change(rows, rng):
            return None
        return _csv(rows)

    return mutate


def _drop(rows: list[list[str]], index: int) -> None:
    for row in rows:
        if index < len(row):
            del row[index]


def drop_numeric(rows: list[list[str]], rng: random.Random) -> bool:
    columns = _numeric_columns(rows)
    for index in sorted(columns[:3], reverse=True):
        _drop(rows, index)
    return bool(columns)


def drop_first(rows: list[list[str]], rng: random.Random) -> bool:
    _drop(rows, 0)
    return True


def keep_first(rows: list[list[str]], rng: random.Random) -> bool:
    rows[:] = [row[:1] for row in rows]
    return True


def rename_all(rows: list[list[str]], rng: random.Random) -> bool:
    rows[0] = [f"renamed_{i}" for i in range(len(rows[0]))]
    return True


def shuffle_columns(rows: list[list[str]], rng: random.Random) -> bool:
    order = list(range(len(rows[0])))
    rng.shuffle(order)
    rows[:] = [[row[i] for i in order if i < len(row)] for row in rows]
    return True


def duplicate_header(rows: list[list[str]], rng: random.Random) -> bool:
    rows[0] = [rows[0][0]] * len(rows[0])
    return True


def header_only(rows: list[list[str]], rng: random.Random) -> bool:
    del rows[1:]
    return True


def ragged(rows: list[list[str]], rng: random.Random) -> bool:
    for i, row in enumerate(rows[1:], 1):
        rows[i] = row[: len(row) // 2] if i % 2 else row + ["extra", "cells"]
    return True


def cells(
    values: tuple[str, ...], numeric_only: bool = True
) -> Callable[[list[list[str]], random.Random], bool]:
    """Put `values` (cycled) into the numeric columns' cells (or every cell)."""

    def change(rows: list[list[str]], rng: random.Random) -> bool:
        columns = _numeric_columns(rows) if numeric_only else list(range(len(rows[0])))
        if not columns:
            return False
        n = 0
        for row in rows[1:]:
            for index in columns:
                if index < len(row):
                    row[index] = values[n % len(values)]
                    n += 1
        return True

    return change


def quote_break(data: bytes, rng: random.Random) -> bytes | None:
    """An opening quote that is never closed: the rest of the file is one cell."""
    at = data.find(b",", len(data) // 3)
    return data[: at + 1] + b'"' + data[at + 1 :] if at > 0 else None


# ---------------------------------------------------------------------------------------------
# whole-file replacements (no content)


def folder_loop(path: Path) -> None:
    """A symlink cycle beside the profile's files (`loop -> ..`) plus the broken file."""
    (path.parent / "loop").symlink_to("..", target_is_directory=True)
    path.unlink()
    path.symlink_to(path.name)


def dangling(path: Path) -> None:
    path.unlink()
    path.symlink_to("does-not-exist")


def folder_in_place(path: Path) -> None:
    path.unlink()
    path.mkdir()
    (path / "inner.txt").write_text("a folder where a file should be\n")


def unreadable(path: Path) -> None:
    path.chmod(0)


TREE: dict[str, Callable[[Path], None]] = {
    "symlink-loop-folder": folder_loop,
    "dangling-link": dangling,
    "folder-in-place": folder_in_place,
}
"""Tree changes every target gets (unreadable permissions are tested on their own: root);
each is named, as readers skip what is no regular file."""

COMMON: dict[str, tuple[Mutation, bool]] = {
    "empty": (empty, True),
    "binary": (binary, True),
    "utf16": (utf16, True),
    "cut-0.5": (truncate(0.5), False),
    "flip-16": (flip(16), False),
}
"""Mutations every target gets: name -> (mutation, loud)."""

FULL_JSON: dict[str, tuple[Mutation, bool]] = {
    "cut-0.1": (truncate(0.1), False),
    "cut-0.3": (truncate(0.3), False),
    "cut-0.7": (truncate(0.7), False),
    "cut-0.9": (truncate(0.9), False),
    "cut-0.99": (truncate(0.99), False),
    "cut-last": (cut_last, False),
    "flip-1": (flip(1), False),
    "flip-200": (flip(200), False),
    "zero-block": (zero_block, False),
    "latin1": (latin1, False),
    "bom-crlf": (crlf_bom, False),
    "huge-line": (huge_line, False),
    "huge-string": (huge_string, False),
    "trailing-garbage": (trailing_garbage, False),
    "boundary-string": (boundary_string, False),
    "far-timestamp": (json_field(b"-1e18", 1), False),
    "nan": (json_field(b"NaN"), False),
    "infinity": (json_field(b"Infinity"), False),
    "neg-infinity": (json_field(b"-Infinity"), False),
    "negative": (json_field(b"-123456"), False),
    "absurd": (json_field(b"1e300"), False),
    "overflow": (json_field(b"1e400"), False),
    "bigint": (json_field(b"9" * 40), False),
    "text-number": (json_field(b'"abc"'), False),
    "null-number": (json_field(b"null"), False),
    "object-number": (json_field(b'{"a": 1}'), False),
    "all-negative": (json_field(b"-1", 10_000_000), False),
    "duplicate-keys": (duplicate_keys, False),
    "deep-nesting": (deep_nesting, True),
    "deep-inside": (deep_inside, False),
    # valid JSON of another shape: whatever the file should hold, it is not there, so each
    # is named (a file recognised by its content is no longer claimed: its folder is named)
    "shape-object": (json_shape(b"{}"), True),
    "shape-list": (json_shape(b"[]"), True),
    "shape-null": (json_shape(b"null"), True),
    "shape-string": (json_shape(b'"trace"'), True),
    "shape-numbers": (json_shape(b"[1, 2, 3]"), True),
    "shape-events-null": (json_shape(b'{"traceEvents": null}'), True),
    "shape-events-scalars": (json_shape(b'{"traceEvents": [1, "a", null, []]}'), True),
}
EVERY_JSON = (
    "cut-0.9",
    "latin1",
    "text-number",
    "deep-nesting",
    "shape-object",
    "shape-list",
    "shape-numbers",
    "shape-events-scalars",
)
"""The JSON breaks every JSON target gets (the full set only some)."""
EVERY_CSV = ("cut-0.9", "latin1", "text-number")

FULL_CSV: dict[str, tuple[Mutation, bool]] = {
    "cut-0.1": (truncate(0.1), False),
    "cut-0.3": (truncate(0.3), False),
    "cut-0.7": (truncate(0.7), False),
    "cut-0.9": (truncate(0.9), False),
    "cut-last": (cut_last, False),
    "flip-1": (flip(1), False),
    "flip-200": (flip(200), False),
    "zero-block": (zero_block, False),
    "latin1": (latin1, False),
    "bom-crlf": (crlf_bom, False),
    "huge-line": (huge_line, False),
    "quote-break": (quote_break, False),
    "drop-numeric": (csv_rows(drop_numeric), False),
    "drop-first": (csv_rows(drop_first), False),
    "keep-first": (csv_rows(keep_first), False),
    "rename-all": (csv_rows(rename_all), False),
    "shuffle": (csv_rows(shuffle_columns), False),
    "duplicate-header": (csv_rows(duplicate_header), False),
    "header-only": (csv_rows(header_only), False),
    "ragged": (csv_rows(ragged), False),
    "text-number": (csv_rows(cells(("abc", "1,5", "12us", "0x1F"))), False),
    "nan": (csv_rows(cells(("nan", "NaN", "inf", "-inf", "Infinity"))), False),
    "negative": (csv_rows(cells(("-1", "-123456.5"))), False),
    "absurd": (csv_rows(cells(("1e300", "1e308", "1e400", "9" * 40))), False),
    "all-text": (csv_rows(cells(("\u00e9t\u00e9", "=cmd()", "\x00"), numeric_only=False)), False),
}

GZIP: dict[str, tuple[Mutation, bool]] = {
    "gz-cut-0.5": (truncate(0.5), False),
    "gz-cut-end": (lambda d, r: d[:-6], False),
    "gz-flip-8": (flip(8), False),
    "gz-not-gzip": (lambda d, r: b'{"traceEvents": []}', True),
    "gz-empty": (empty, True),
    "gz-garbage": (lambda d, r: gzip.compress(r.randbytes(4096)), True),
    "gz-whitespace-bomb": (whitespace_bomb, True),
}

# (base, file relative to the case folder, whether to apply the full set of mutations)
TARGETS: tuple[tuple[str, str, bool], ...] = (
    (
        "msprof",
        "PROF_000001_20260105093000123_SMALLCASE/mindstudio_profiler_output/"
        "op_summary_20260105093512.csv",
        True,
    ),
    (
        "msprof",
        "PROF_000001_20260105093000123_SMALLCASE/mindstudio_profiler_output/"
        "step_trace_20260105093512.csv",
        False,
    ),
    (
        "msprof",
        "PROF_000001_20260105093000123_SMALLCASE/mindstudio_profiler_output/"
        "api_statistic_20260105093512.csv",
        False,
    ),
    ("msprof", "PROF_000001_20260105093000123_SMALLCASE/device_0/info.json.0", False),
    (
        "msprof_demo",
        "PROF_000001_20260105100000000_DEMO/mindstudio_profiler_output/"
        "op_statistic_20260105100731.csv",
        False,
    ),
    (
        "msprof_queues",
        "PROF_000004_20260110080000000_QUEUES/mindstudio_profiler_output/dp_20260110081500.csv",
        False,
    ),
    (
        "cann_timeline",
        "PROF_000001_20230818142704322_COJGGGCANRMICFBC/device_0/timeline/task_time_0_2_1.json",
        False,
    ),
    (
        "cann_timeline",
        "PROF_000001_20230818142704322_COJGGGCANRMICFBC/device_0/timeline/step_trace_0_2_1.json",
        False,
    ),
    ("cann_timeline", "PROF_000001_20230818142704322_COJGGGCANRMICFBC/device_0/info.json.0", False),
    ("ascend_pt", "rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json", True),
    ("ascend_pt", "rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv", False),
    ("kineto", "healthy.pt.trace.json.gz", False),
    ("kineto_ranks", "ddp_rank1.pt.trace.json.gz", False),
    ("kineto_cpu", "cpu_only__rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz", False),
    ("mindspore", "run_2_profiler/step_trace_raw_1_detail_time.csv", False),
    ("mindspore", "run_2_profiler/framework_raw_1.csv", False),
    ("mindspore", "run_2_profiler/output_timeline_data_1.txt", False),
    ("mindspore", "run_2_profiler/minddata_cpu_utilization_1.json", False),
    ("mindspore", "run_2_profiler/device_queue_profiling_1.txt", False),
    ("mindspore_ranks", "profiler_misc/step_trace_raw_10_detail_time.csv", False),
    ("megengine_dynamic", "dynamic/4242.chrome_timeline.json", False),
    ("megengine_static", "static/profiling.json", False),
    ("aoe", "good/aoe_result_opat_20260105103000123_pid4242.json", False),
    ("memory_timeline", "mlp_adam_cpu.raw.json.gz", False),
    ("memory_snapshot", "snapshot_expandable.pkl.gz", False),
)


def _mutations(target: str, full: bool) -> Iterator[tuple[str, Mutation, bool]]:
    text = target.removesuffix(".gz")
    is_csv = text.endswith(".csv")
    is_json = text.endswith(".json") or ".json." in text
    extra = (FULL_CSV if is_csv else FULL_JSON if is_json else {}) if full else {}
    if not full and (is_csv or is_json):  # a few format-specific breaks for every file
        extra = {
            k: v
            for k, v in (FULL_CSV if is_csv else FULL_JSON).items()
            if k in (EVERY_CSV if is_csv else EVERY_JSON)
        }
    for name, (mutation, loud) in {**COMMON, **extra}.items():
        yield name, mutation, loud
    if target.endswith(".gz"):
        for name, (mutation, loud) in GZIP.items():
            yield name, mutation, loud


def cases() -> list[Case]:
    """Every case, in a stable order with unique ids."""
    out = []
    seen: set[str] = set()
    for base, target, full in TARGETS:
        stem = re.sub(r"[^A-Za-z0-9]+", "_", Path(target).name.split(".")[0])[:24]
        for kind, mutation, loud in _mutations(target, full):
            out.append(Case(f"{base}-{stem}-{kind}", base, target, kind, loud, mutate=mutation))
        if base in seen:  # files replaced by links or folders: once per profile
            continue
        seen.add(base)
        for kind, change in TREE.items():
            out.append(Case(f"{base}-{stem}-{kind}", base, target, kind, True, tree=change))
    return out


def unreadable_case(base: str, target: str) -> Case:
    return Case(f"{base}-unreadable", base, target, "unreadable", True, tree=unreadable)


def can_deny_reading() -> bool:
    """Whether chmod 0 stops this process reading (not for root, or with CAP_DAC_OVERRIDE)."""
    return os.geteuid() != 0
