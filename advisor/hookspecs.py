"""Plugin hooks: everything a third party implements to extend advisor.

Hooks are coarse and registration-style: each returns objects (readers, metric providers,
rule folders, functions, report sections); the core decides when to use them. A plugin is a
module (or object) with functions decorated by `advisor.hookimpl`, registered through the
`advisor` entry-point group, exactly as the built-in plugins are.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import pluggy

if TYPE_CHECKING:
    from advisor.model import Profile, TableSpec

hookspec = pluggy.HookspecMarker("advisor")
hookimpl = pluggy.HookimplMarker("advisor")


@runtime_checkable
class Reader(Protocol):
    """Turns files on disk into normalized profiles.

    `detect` must be cheap (names and a few bytes, never a full parse) because every reader is
    asked about every path. `read` returns one Profile per device/rank found under the path and
    reports what it could not read through `Profile.warn`; it raises `advisor.errors.
    UnreadableInput` only when nothing at all could be read.

    A reader may also have `collect`, a mapping of "table" or "table.column" to how to make
    the profiler record it (e.g. {"memory": "profile_memory=True"}): a rule lacking such data is
    reported with that hint, and a rule lacking data no hint covers is counted as one this
    format never records. `collect_zh`, also optional, gives the Chinese text of each hint by
    its English text (reports in Chinese show the English one where it has none).

    A reader that folds trace files with `advisor.formats.parallel.read_in_parts` may also
    have `trace_folds(path)`, returning an `advisor.formats.read_ahead.TraceFold` for each
    file `read(path)` will fold (path, decode, fold, chunk_bytes, the very arguments it passes
    to read_in_parts). It must be as cheap as `detect`: the command line asks before it
    prepares, and forks a child that folds those files from the back meanwhile.
    """

    name: str
    formats: tuple[str, ...]

    def detect(self, path: Path) -> bool: ...

    def read(self, path: Path) -> list[Profile]: ...


@dataclass(frozen=True)
class MetricProvider:
    """Derives tables or columns no file holds (overlap, breakdowns, statistics).

    `inputs` and `outputs` are "table" or "table.column" names. A provider runs only when a rule
    requires one of its outputs that the profile lacks and all its inputs are present; `compute`
    adds its outputs to `profile.tables` in place.
    """

    name: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    compute: Callable[[Profile], None]
    doc: str = ""


@dataclass(frozen=True)
class ReportSection:
    """An extra HTML section contributed by a plugin (trusted code, so its HTML is kept as is)."""

    title: str
    html: str


@hookspec
def advisor_readers() -> Sequence[Reader]:
    """Return reader objects for the formats this plugin understands."""


@hookspec
def advisor_metrics() -> Sequence[MetricProvider]:
    """Return metric providers that derive tables/columns for rules."""


@hookspec
def advisor_rule_paths() -> Sequence[Path]:
    """Return YAML rule files or folders this plugin ships."""


@hookspec
def advisor_tables() -> Sequence[TableSpec]:
    """Return the specifications (advisor.model.TableSpec) of tables this plugin's readers or
    providers produce and its rules read, beyond the built-in ones (docs/tables.md). A rule
    may name them like any table; the core conforms readers' frames to them."""


@hookspec
def advisor_functions() -> dict[str, Callable[..., Any]]:
    """Return extra pure functions (name -> callable) the rule expression language may call."""


@hookspec
def advisor_report_sections(analysis: Any) -> Sequence[ReportSection]:
    """Return extra HTML sections for the report of one analysed profile."""
