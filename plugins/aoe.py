"""Reader for AOE (Ascend Optimization Engine) tuning results, `aoe_result_opat_*.json`.

One file holds one or more tuning tasks. AOE has written them in several shapes over the CANN
releases, all accepted here:

- an object of `report_{timestamp}_{tid}` keys, each a list of `{"basic"}`, `{"OPAT"}` or
  `{"SGAT"}` sections; the documentation's own sample repeats the same key, so keys are
  collected with `object_pairs_hook` (a plain parser keeps only the last task);
- a top-level list of sections (6.x offline inference);
- `repo_modified_operators` as a dict of `add_repo_operators`/`update_repo_operators` (6.0-6.2)
  or as a list with a `tune_performance` per Format/Schedule/Impl mode (6.3+);
- `opat_tuning_result`/"tuning successful" and the 6.0 `opat_tune_result`/"tune success".

Every task, operator and subgraph becomes a row of the `tuning` table. Published samples are
not always valid JSON (missing commas, stray brackets, `....` placeholders): a missing comma is
read as if it were there, and otherwise every section that still parses is kept; both are
reported as one warning naming the file and the position of the first error.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from advisor.errors import UnreadableInput
from advisor.hookspecs import hookimpl
from advisor.lazy import lazy_module
from advisor.model import Profile, ProfileMeta, conform

if TYPE_CHECKING:
    import pandas as pd
else:
    pd = lazy_module("pandas")

READER = "aoe"
FILE_NAME = re.compile(r"aoe_result_.*\.json", re.IGNORECASE)
PEEK_BYTES = 4096
CONTENT_MARKERS = (b'"report_', b'"basic"', b'"OPAT"', b'"SGAT"', b'"repo_summary"')
MAX_COMMA_REPAIRS = 50
SECTIONS = ("basic", "OPAT", "SGAT")
DATA_SUFFIXES = (".json", ".gz", ".csv", ".db")
_SECTION_KEY = re.compile(r'"(report_[^"]*|basic|OPAT|SGAT)"\s*:\s*')
FAILED = {"tuning failed", "tune failed"}
INCOMPLETE = {"tuning incomplete", "tune incomplete"}


def is_aoe_file(path: Path) -> bool:
    """An AOE result by its documented name, or any JSON whose first bytes show AOE sections."""
    if not path.is_file() or path.suffix.lower() != ".json":
        return False
    try:
        with open(path, "rb") as handle:
            head = handle.read(PEEK_BYTES)
    except OSError:
        return False
    if FILE_NAME.fullmatch(path.name):
        return not head.strip() or head.lstrip()[:1] in (b"{", b"[", b'"')
    lower = head.lower()
    return any(m in head for m in CONTENT_MARKERS) and (b"opat" in lower or b"sgat" in lower)


class AoeReader:
    """Reads one AOE result file, or a folder holding only AOE result files."""

    name = "aoe"
    formats = ("AOE tuning results (aoe_result_opat_*.json)",)

    def detect(self, path: Path) -> bool:
        """A result file; or a flat folder whose data files are all AOE results (a folder
        with sub-folders or other data may hold a profile too, so it is left to be searched
        and each file claimed on its own)."""
        path = Path(path)
        if path.is_file():
            return is_aoe_file(path)
        if not path.is_dir():
            return False
        try:
            entries = [p for p in path.iterdir() if not p.name.startswith(".")]
        except OSError:
            return False
        data = [p for p in entries if p.suffix.lower() in DATA_SUFFIXES]
        return (
            not any(p.is_dir() for p in entries)
            and bool(data)
            and all(FILE_NAME.fullmatch(p.name) for p in data)
        )

    def read(self, path: Path) -> list[Profile]:
        path = Path(path)
        # a folder is claimed by its file names: a named file that is no JSON gets a warning
        files = (
            sorted(
                p
                for p in path.iterdir()
                if is_aoe_file(p) or (p.is_file() and FILE_NAME.fullmatch(p.name))
            )
            if path.is_dir()
            else [path]
        )
        meta = ProfileMeta(source_format="aoe", path=str(path), framework="CANN", device_kind="NPU")
        profile = Profile(meta)
        rows: list[dict[str, Any]] = []
        errors: list[str] = []
        for file in files:
            try:
                found = _FileReader(file, profile).rows()
            except UnreadableInput as exc:
                if len(files) == 1:
                    raise
                errors.append(exc.problem)
                profile.warn(file.name, exc.problem, reader=READER)
                continue
            rows += found
            meta.files_read.append(file.name)
        if not rows:
            raise UnreadableInput(
                path, "no AOE tuning result could be read" + (f" ({errors[0]})" if errors else "")
            )
        profile.tables["tuning"] = conform("tuning", pd.DataFrame(rows))
        return [profile]


@hookimpl
def advisor_readers() -> list[AoeReader]:
    return [AoeReader()]


# ---------------------------------------------------------------------------------------------
# Decoding: duplicate keys kept, known sample defects survived


class _Pairs(list):
    """A JSON object whose keys repeat, kept as its (key, value) pairs in file order."""


class _Salvaged(_Pairs):
    """The sections of an invalid file that parse, as (report key, [sections]) pairs."""


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any] | _Pairs:
    keys = [k for k, _ in pairs]
    return dict(pairs) if len(set(keys)) == len(keys) else _Pairs(pairs)


def _items(obj: Any) -> list[tuple[str, Any]]:
    """Key/value pairs of an object, repeated keys included; none for anything else."""
    if isinstance(obj, _Pairs):
        return list(obj)
    return list(obj.items()) if isinstance(obj, dict) else []


def _get(obj: Any, key: str) -> Any:
    """The first value of a key (a repeated inner key is a writer slip, not a second task)."""
    return next((v for k, v in _items(obj) if k == key), None)


_DECODER = json.JSONDecoder(object_pairs_hook=_object)


def _where(text: str, exc: json.JSONDecodeError) -> str:
    return f"line {exc.lineno} column {exc.colno} ({exc.msg})"


def _decode(text: str, start: int = 0) -> tuple[Any, int, int]:
    """Decode the value at `start`, inserting the commas a sample left out.

    Returns the value, the index after it and how many commas were inserted; raises the
    first JSONDecodeError when something other than a missing comma is wrong.
    """
    first: json.JSONDecodeError | None = None
    for repairs in range(MAX_COMMA_REPAIRS + 1):
        try:
            value, end = _DECODER.raw_decode(text, start)
            return value, end, repairs
        except json.JSONDecodeError as exc:
            first = first or exc
            if exc.msg != "Expecting ',' delimiter" or exc.pos >= len(text.rstrip()):
                break
            text = text[: exc.pos] + "," + text[exc.pos :]
    assert first is not None
    raise first


def _document(path: Path, profile: Profile) -> Any:
    """The file's JSON, repaired or salvaged section by section, with one warning if needed."""
    from advisor.formats.files import read_bytes  # loads when a file is read

    data = read_bytes(path)
    if not data.strip():
        raise UnreadableInput(path, "empty file")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise UnreadableInput(path, "not UTF-8 text") from None
    body = text.strip()
    if body.startswith('"'):  # the subgraph sample leaves out the outer braces
        body = "{" + body.rstrip(",") + "}"
    try:
        return json.loads(body, object_pairs_hook=_object)
    except json.JSONDecodeError as exc:
        error = exc
    except RecursionError:  # the stdlib parser recurses per nesting level
        raise UnreadableInput(path, "JSON nested too deeply") from None
    try:
        value, end, repairs = _decode(body)
        if not body[end:].strip():
            profile.warn(
                path.name,
                f"invalid JSON at {_where(body, error)}: {repairs} missing "
                "comma(s) assumed, all tasks read",
                reader=READER,
            )
            return value
    except json.JSONDecodeError:
        pass
    salvaged, total = _salvage(body)
    if not salvaged:
        raise UnreadableInput(
            path, f"invalid JSON at {_where(body, error)}; no AOE section could be read"
        )
    read = sum(len(sections) for _, sections in salvaged)
    profile.warn(
        path.name,
        f"invalid JSON at {_where(body, error)}: kept the {read} of "
        f"{total} AOE sections that parse on their own; a task without its "
        "result section is counted incomplete",
        reader=READER,
    )
    return _Salvaged(salvaged)


def _salvage(text: str) -> tuple[list[tuple[str, Any]], int]:
    """Each `basic`/`OPAT`/`SGAT` section that decodes on its own, under its `report_*` key.

    Returns (report key, [sections]) pairs and the number of sections seen.
    """
    reports: list[tuple[str, list[dict[str, Any]]]] = []
    total = 0
    for match in _SECTION_KEY.finditer(text):
        key = match.group(1)
        if key.startswith("report_"):
            reports.append((key, []))
            continue
        total += 1
        try:
            value, _, _ = _decode(text, match.end())
        except json.JSONDecodeError:
            continue
        if not reports:
            reports.append(("", []))
        reports[-1][1].append({key: value})
    return [(k, v) for k, v in reports if v], total


# ---------------------------------------------------------------------------------------------
# From the document to rows


class _FileReader:
    """The tuning rows of one file; problems go to the profile as warnings."""

    def __init__(self, path: Path, profile: Profile) -> None:
        self.path = path
        self.profile = profile

    def warn(self, problem: str) -> None:
        self.profile.warn(self.path.name, problem, reader=READER)

    def rows(self) -> list[dict[str, Any]]:
        doc = _document(self.path, self.profile)
        salvaged = isinstance(doc, _Salvaged)
        rows = [
            row for key, sections in self._tasks(doc) for row in self._task(key, sections, salvaged)
        ]
        if not rows:
            raise UnreadableInput(
                self.path,
                "no AOE tuning task found (expected report_* keys or basic/OPAT/SGAT sections)",
            )
        return rows

    def _tasks(self, doc: Any) -> Iterator[tuple[str, dict[str, Any]]]:
        """(report key, merged sections) for every task in any documented top-level shape."""
        pairs = _items(doc)
        if isinstance(doc, list) and not isinstance(doc, _Pairs):
            if any(k.startswith("report_") for item in doc for k, _ in _items(item)):
                pairs = [p for item in doc for p in _items(item)]
            else:
                sections = _sections(doc)
                if sections:  # a list without a section ([], numbers) holds no task
                    yield "", sections
                return
        if any(k in SECTIONS for k, _ in pairs):
            yield "", _sections([dict(pairs)])
            return
        for key, value in pairs:
            if key and not key.startswith("report_"):
                self.warn(f"unexpected top-level key {key!r} ignored")
                continue
            items = value if isinstance(value, list) else [value]
            yield key, _sections(items)

    def _task(self, key: str, sections: dict[str, Any], salvaged: bool) -> list[dict[str, Any]]:
        """The task row, then its operator and subgraph rows."""
        basic = sections.get("basic")
        name = str(_get(basic, "tuning_name") or key or self.path.stem)
        where = key or name
        task: dict[str, Any] = {"kind": "task", "name": name, "task": key or name}
        rows: list[dict[str, Any]] = []
        status = "completed"
        modes = []
        if basic is not None and _get(basic, "tuning_time(s)") is None:
            status = "incomplete"  # AOE leaves the time out when tuning was interrupted
        for mode in ("OPAT", "SGAT"):
            section = sections.get(mode)
            if section is None:
                continue
            modes.append(mode)
            result = (
                str(_get(section, "opat_tuning_result") or _get(section, "opat_tune_result") or "")
                .strip()
                .lower()
            )
            if result in FAILED:
                status = "failed"
            elif result in INCOMPLETE and status != "failed":
                status = "incomplete"
            rows += self._operators(section, key or name, where)
            rows += self._subgraphs(section, key or name, where)
            self._model(section, task, where)
            summary = _get(section, "repo_summary")
            for column, field in (
                ("repo_total", "total_num"),
                ("repo_unsatisfied", "repo_unsatisfied_num"),
            ):
                number = self._number(_get(summary, field), f"{where} repo_summary.{field}")
                if not math.isnan(number):
                    task[column] = task.get(column, 0) + int(number)
        task["mode"] = "+".join(modes) or None
        if salvaged and not modes:
            status = "incomplete"  # its result section was lost with the broken part
        if status == "completed" and not math.isnan(task.get("after_us", math.nan)):
            status = _outcome(task["before_us"], task["after_us"], math.nan)
        task["status"] = status
        return [task, *rows]

    def _model(self, section: Any, task: dict[str, Any], where: str) -> None:
        """Whole-model times (SGAT, OPAT offline inference), in ms in the file."""
        before = (
            self._number(
                _get(section, "model_baseline_performance(ms)"),
                f"{where} model_baseline_performance(ms)",
            )
            * 1000
        )
        after = (
            self._number(
                _get(section, "model_result_performance(ms)"),
                f"{where} model_result_performance(ms)",
            )
            * 1000
        )
        if math.isnan(before) and math.isnan(after):
            return
        task.update(
            before_us=before,
            after_us=after,
            improvement_pct=self._percent(
                _get(section, "model_performance_improvement"), before, after, where
            ),
        )

    def _operators(self, section: Any, task: str, where: str) -> list[dict[str, Any]]:
        rows = []
        modified = _get(section, "repo_modified_operators")
        if isinstance(modified, list):  # 6.3+: one entry per operator, times per mode
            for op in modified:
                performance = _get(op, "tune_performance")
                for mode, numbers in _items(performance) or [(None, op)]:
                    rows.append(self._entry("op", op, numbers, mode, None, task, where))
        else:  # 6.0-6.2: lists by how the repository changed
            for list_key, update in (
                ("add_repo_operators", "add"),
                ("update_repo_operators", "update"),
            ):
                for op in _get(modified, list_key) or []:
                    rows.append(self._entry("op", op, op, None, update, task, where))
        failed = (
            _get(section, "tuning_failed_operators") or _get(section, "tune_failed_operators") or []
        )
        for op_name in failed if isinstance(failed, list) else [failed]:
            rows.append({"kind": "op", "name": str(op_name), "status": "failed", "task": task})
        return rows

    def _subgraphs(self, section: Any, task: str, where: str) -> list[dict[str, Any]]:
        modified = _get(section, "repo_modified_subgraphs")
        return [
            self._entry("subgraph", graph, graph, "SGAT", update, task, where, scale=1000)
            for list_key, update in (
                ("add_repo_subgraphs", "add"),
                ("update_repo_subgraphs", "update"),
            )
            for graph in _get(modified, list_key) or []
        ]

    def _entry(
        self,
        kind: str,
        item: Any,
        numbers: Any,
        mode: str | None,
        update: str | None,
        task: str,
        where: str,
        scale: float = 1.0,
    ) -> dict[str, Any]:
        """One tuned operator (times in µs) or subgraph (times in ms, scaled to µs)."""
        unit = "(us)" if scale == 1 else "(ms)"
        name = str(_get(item, "op_name") or _get(item, "repo_key") or "?")
        label = f"{where} {name}"
        before = (
            self._number(
                _get(numbers, f"performance_before_tune{unit}"),
                f"{label} performance_before_tune{unit}",
            )
            * scale
        )
        after = (
            self._number(
                _get(numbers, f"performance_after_tune{unit}"),
                f"{label} performance_after_tune{unit}",
            )
            * scale
        )
        improvement = self._percent(_get(numbers, "performance_improvement"), before, after, label)
        op_type = _get(item, "op_type")
        if isinstance(op_type, list):
            op_type = ",".join(str(t) for t in op_type)
        return {
            "kind": kind,
            "name": name,
            "op_type": op_type,
            "mode": mode,
            "before_us": before,
            "after_us": after,
            "improvement_pct": improvement,
            "update_mode": _get(numbers, "update_mode") or update,
            "status": _outcome(before, after, improvement),
            "task": task,
        }

    def _number(self, value: Any, what: str) -> float:
        """A number as written (a string holding one is accepted); NaN and a warning else."""
        if value is None:
            return math.nan
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        try:
            number = float(str(value).strip())
        except ValueError:
            number = math.nan
        if not math.isfinite(number):
            if str(value).strip().lower() not in ("", "n/a", "na", "nan", "null", "-"):
                self.warn(f"{what} is not a number ({value!r}); left empty")
            return math.nan
        return number

    def _percent(self, value: Any, before: float, after: float, what: str) -> float:
        """AOE's "118.71%", or (before / after - 1) x 100 when the file lacks it."""
        if value is not None:
            text = str(value).strip().rstrip("%")
            return self._number(text, f"{what} performance_improvement")
        if after > 0 and not math.isnan(before):
            return (before / after - 1) * 100
        return math.nan


def _sections(items: list[Any]) -> dict[str, Any]:
    """basic/OPAT/SGAT of one task, whether each sits in its own object or all in one."""
    found: dict[str, Any] = {}
    for item in items:
        for key, value in _items(item):
            if key in SECTIONS:
                found.setdefault(key, value)
    return found


def _outcome(before: float, after: float, improvement: float) -> str:
    """regressed when tuning made it slower, by the times or, lacking them, AOE's percentage;
    incomplete when the file gives neither."""
    if not (math.isnan(before) or math.isnan(after)):
        return "regressed" if after > before else "improved"
    if math.isnan(improvement):
        return "incomplete"
    return "regressed" if improvement < 0 else "improved"
