"""Writing what a run produced: prof_rule JSON, the HTML report, SARIF and JUnit XML for CI,
the AOE tuning file, and the outputs of a comparison (compare.json, its report, the compare
page and spreadsheet).

Everything is rendered before anything is written, so a failing renderer leaves the folder as
it was; each file then replaces its earlier version atomically, so a full disk or another
write error (`OutputError`, one line naming the file) leaves the earlier file as it was. A
manifest in the folder (`.advisor-manifest.json`) records what advisor wrote there, so the
next run into the same folder removes the outputs of the earlier run that it does not
rewrite (the report of a rank that is no longer analysed, a tuning file no operator needs any
more), and nothing else: a file advisor did not write is never touched, and a manifest that
is missing, corrupt or names anything but a plain file of that folder is ignored for those
entries. The findings' trace snippets (advisor/traces.py) are the one exception to "plain
file": they go into the folder's `traces/` folder (never through a link), listed and removed
the same way.

    >>> import advisor
    >>> from advisor.compare import compare
    >>> from advisor.outputs import write_compare_outputs, write_outputs
    >>> result = advisor.analyze("PROF_000001")
    >>> write_outputs(result, "report", ["json", "html"])
    [PosixPath('report/prof_rule_0.json'), PosixPath('report/report.html'), ...]
    >>> write_compare_outputs(compare("old_run", "new_run"), "cmp")
    [PosixPath('cmp/compare.json'), PosixPath('cmp/prof_rule_compare.json'), ...]
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import stat
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Union

from advisor.compat import zip_strict
from advisor.errors import AdvisorError
from advisor.version import __version__

if TYPE_CHECKING:
    from advisor.api import AnalysisResult, ProfileAnalysis
    from advisor.compare import CompareResult
    from advisor.plugin_manager import PluginHost

MANIFEST = ".advisor-manifest.json"
"""The file, in an output folder, naming the files advisor wrote there (per command)."""
MAX_MANIFEST_BYTES = 4 * 1024 * 1024
MAX_LABEL = 64  # characters of a profile-derived label in an output file name
TRACES = "traces"
"""The format of the findings' trace snippets, and the folder they are written into."""
FILE_FORMATS = ("json", "html", "sarif", "junit", TRACES)
"""The formats of a run that are files; `text` is the terminal summary."""
REPORT_FORMATS = ("json", "html", TRACES)
"""What write_outputs writes when no formats are named: the reports people read."""
COMPARE_FILE_FORMATS = ("json", "html", "xlsx")
"""The formats of a comparison that are files."""
HTML_REPORT = "report.html"
SARIF_FILE = "advisor.sarif"
JUNIT_FILE = "advisor-junit.xml"
TUNE_OPS_FILE = "operator_tuning_file.cfg"
"""The operators to tune, in the form AOE accepts as --tune_ops_file."""
COMPARE_JSON = "compare.json"
COMPARE_REPORT = "prof_rule_compare.json"
COMPARE_HTML = "compare.html"
COMPARE_XLSX = "performance_comparison_result.xlsx"
_OWN_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,254}")
"""What an output's name looks like: one plain name in the folder (no separator, no leading
dot, no `..`). A manifest entry of any other shape is not advisor's and never removed."""


class OutputFolderError(AdvisorError):
    """An output folder advisor must not write into (one inside a profile it reads)."""


class OutputError(AdvisorError):
    """An output could not be written (a full disk, no permission, a read-only file system):
    not a bug, and the earlier version of the file, if any, is left as it was."""

    def __init__(self, path: str | Path, problem: str) -> None:
        self.path = str(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")


def _cannot(action: str, path: Path, exc: OSError) -> OutputError:
    """The OutputError for an OSError while doing `action` to `path`."""
    return OutputError(path, f"cannot {action}: {exc.strerror or exc}")


def is_inside(child: Path, parent: Path) -> bool:
    """True when `child` is `parent` or below it, links resolved: a folder reached through a
    link is still inside."""
    child, parent = child.resolve(), parent.resolve()
    return child == parent or parent in child.parents


def timestamped(prefix: str) -> str:
    """A default output folder's name, `PREFIX-YYYYMMDD-HHMMSS`: a new one each run, sorted by
    time, so a run never mixes its outputs into an earlier run's folder by default."""
    return f"{prefix}-{datetime.now():%Y%m%d-%H%M%S}"


def output_dir(out: str | Path, inputs: Sequence[Path]) -> Path:
    """`out` as the folder to write outputs into (not created yet). Raises OutputFolderError
    when it lies inside one of the `inputs`: advisor never writes into a profile, where its
    files could be read back as profile data by the next run."""
    path = Path(out)
    for src in inputs:
        if src.is_dir() and is_inside(path, src):
            raise OutputFolderError(
                f"output folder {path} is inside the input {src}; "
                "advisor never writes into a profile (choose another -o)"
            )
    return path


Content = Union[str, bytes, Callable[[], str]]
"""A file's content, or what renders it when the file is written: the JSON report of each of
many ranks is then held as text one at a time, not all together."""


def write_atomic(path: Path, data: str | bytes) -> None:
    """Write via a temp file and rename, so an interrupted run leaves the previous file or none,
    never half of one. The temp file is created like any new file (mkstemp's would be 0600), so
    reports get the umask's permissions and stay readable by the people they are shared with.
    Raises OutputError when the file cannot be written (the earlier one is then intact).

    The data is not forced to disk (fsync) before the rename: a stopped or killed run cannot
    leave half a file either way, only a crash of the whole machine could, and reports are
    made again by running again. Forcing cost about 1.3 ms a file here (15 ms of the demo's
    12 files) and far more on network file systems."""
    import secrets  # imported when a file is written: commands that only print never do

    tmp = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
    try:
        raw = data.encode("utf-8") if isinstance(data, str) else data
        with tmp.open("xb") as handle:
            handle.write(raw)
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):  # a full disk must not hide the first error
            tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError):
            kept = "the earlier file is unchanged" if path.exists() else "nothing was written"
            raise OutputError(path, f"cannot write: {exc.strerror or exc}; {kept}") from exc
        raise


def safe_label(text: str) -> str:
    """A file-name part from profile content (device id, file name): no path separators,
    control characters or leading dots, and short enough for any file system's name limit."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text)[:MAX_LABEL].strip("._") or "profile"


def _stem(path: Path) -> str:
    """A file's name without its profile extensions (`x.pt.trace.json.gz` -> `x`); a folder's
    name as it is."""
    name = path.name
    if path.is_dir():
        return name
    for suffix in (".gz", ".json", ".trace", ".pt", ".chrome_timeline", ".csv", ".txt"):
        name = name.removesuffix(suffix)
    return name or path.name


def report_names(result: AnalysisResult) -> list[str]:
    """prof_rule_{device}.json like msprof, made unique when several inputs share devices:
    by the rank where the profiles know theirs (prof_rule_0_rank10.json), else by a counter.
    A profile that knows its rank but not its device is prof_rule_rank{rank}.json, so a
    bare number always names a device and never a rank."""
    names: list[str] = []
    for analysis in result.analyses:
        meta = analysis.profile.meta
        key = (
            meta.device_id
            if meta.device_id is not None
            else (
                f"rank{meta.rank}"
                if meta.rank is not None
                else "cluster"
                if meta.source_format == "cluster"
                else _stem(Path(meta.path))
            )
        )
        base = f"prof_rule_{safe_label(str(key))}"
        name = f"{base}.json"
        if name in names and meta.rank is not None and meta.device_id is not None:
            name = f"{base}_rank{safe_label(str(meta.rank))}.json"
        n = 2
        while name in names:
            name = f"{base}_{n}.json"
            n += 1
        names.append(name)
    return names


def render_outputs(
    result: AnalysisResult,
    formats: Sequence[str],
    host: PluginHost | None = None,
    fail_on: str | None = None,
) -> dict[str, Content]:
    """Every output file of `formats` (json, html, sarif, junit; others are ignored), by file
    name; each profile's JSON report is rendered when written (Content), the other files
    now. The AOE tuning file comes with them when a finding names operators to tune.
    `fail_on` is the severity from which a JUnit test case fails (junit.DEFAULT_FAIL_ON when
    None)."""
    from advisor.render.html import render_html

    outputs: dict[str, Content] = {}
    snippets, links = trace_outputs(result) if TRACES in formats else ({}, [])
    if "json" in formats:
        for name, analysis in zip_strict(report_names(result), result.analyses):
            outputs[name] = partial(_report_json, analysis, result.notes)
    if "html" in formats:
        sections = (
            [
                s
                for a in result.analyses
                for s in (host.report_sections(a) if a.sections is None else a.sections)
            ]
            if host
            else []
        )
        outputs[HTML_REPORT] = render_html(
            result.report_sequence, sections=sections, traces=links, notes=result.notes
        )
    if "sarif" in formats:
        from advisor.render.sarif import render_sarif

        outputs[SARIF_FILE] = render_sarif(result)
    if "junit" in formats:
        from advisor.render.junit import render_junit

        outputs[JUNIT_FILE] = render_junit(result, fail_on)
    outputs.update(snippets)
    tune_ops = tune_ops_file(result)
    if tune_ops is not None and any(f in formats for f in FILE_FORMATS):
        outputs[TUNE_OPS_FILE] = tune_ops
    return outputs


def _report_json(analysis: ProfileAnalysis, notes: Sequence[str]) -> str:
    """A prof_rule report with the run's `notes`, indented. orjson, not json.dumps: with an
    indent the standard library encodes in Python, 7 ms a report, the largest part of writing
    300 ranks' reports. The values are json.dumps' to the bit; only numbers below 1e-4 or
    from 1e16 are spelled otherwise (6.2e-7 for 6.2e-07, 0.0000658 for 6.58e-05). NumPy
    scalars (a plugin's figures in profile.extra) are written as the numbers they hold, which
    json.dumps did for numpy.float64 and orjson does only when asked."""
    import orjson

    options = orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY
    return orjson.dumps(with_run_notes(analysis.report, notes), option=options).decode("utf-8")


def with_run_notes(report: dict[str, Any], notes: Sequence[str]) -> dict[str, Any]:
    """`report` as written: with `run_notes` when the run has notes (AnalysisResult.notes),
    so that a reader of the JSON alone learns them too (a CI job finding no cluster report
    is told why)."""
    return {**report, "run_notes": list(notes)} if notes else report


def trace_outputs(result: AnalysisResult) -> tuple[dict[str, Content], list[dict[int, str]]]:
    """The findings' trace snippets (`traces/finding-....json` -> what renders it, advisor/
    traces.py) and, per report, the relative link of each finding's snippet by its number,
    which the HTML report shows. A run of several profiles names each snippet after its
    report: `prof_rule_rank3.json`'s finding 2 is `traces/finding-rank3-2.json`."""
    from advisor.traces import snippet_name, snippet_numbers

    labels = (
        [None]
        if len(result.analyses) == 1
        else [n.removeprefix("prof_rule_").removesuffix(".json") for n in report_names(result)]
    )
    files: dict[str, Content] = {}
    links: list[dict[int, str]] = []
    for label, analysis, numbers in zip_strict(labels, result.analyses, snippet_numbers(result)):
        snippets = _ProfileSnippets(analysis)
        mine: dict[int, str] = {}
        for number in numbers:
            mine[number] = f"{TRACES}/{snippet_name(label, number)}"
            files[mine[number]] = partial(snippets.render, number)
        links.append(mine)
    return files, links


class _ProfileSnippets:
    """One profile's snippets, cut from its trace when the first of them is written, each let
    go once rendered: the files are written profile after profile, so a run holds one
    profile's snippets at a time (each keeps up to 10,000 events with their args: those of
    16 ranks of a 10 MB trace, held together, took the `advisor` process to 649 MB, one
    profile at a time to 191 MB)."""

    def __init__(self, analysis: ProfileAnalysis) -> None:
        self._analysis = analysis
        self._documents: dict[int, dict[str, Any]] | None = None

    def render(self, number: int) -> str:
        import orjson  # several MB of events: a few times faster than json.dumps

        from advisor.traces import profile_snippets

        if self._documents is None:
            self._documents = profile_snippets(self._analysis)
        return orjson.dumps(self._documents.pop(number)).decode("utf-8")


def tune_ops_file(result: AnalysisResult) -> str | None:
    """The content of TUNE_OPS_FILE for the operators the findings name, so AOE tunes exactly
    what the advice points at (`aoe --tune_ops_file=...`); None when no finding names one."""
    ops = result.tune_ops()
    if not ops:
        return None
    return json.dumps({"tune_ops_name": ops}, indent=2, ensure_ascii=False)


def stdout_document(result: AnalysisResult) -> dict[str, Any]:
    """What `-o -` prints: the prof_rule report of a single profile as it is, or
    {"reports": [...]} (one per profile, the cluster's last) for several."""
    reports = [with_run_notes(report, result.notes) for report in result.reports]
    if len(reports) == 1:
        return reports[0]
    return {"reports": reports}


def write_outputs(
    result: AnalysisResult,
    out_dir: str | Path,
    formats: Sequence[str] = REPORT_FORMATS,
    host: PluginHost | None = None,
    fail_on: str | None = None,
) -> list[Path]:
    """Render the outputs of `formats` and write them into `out_dir` (created when missing),
    removing the outputs an earlier run wrote there that this one does not rewrite. Returns
    the paths written; nothing (and no folder) when no format is a file. `fail_on`: the
    --fail-on the JUnit file's failures follow."""
    outputs = render_outputs(result, formats, host, fail_on)
    return write_files(Path(out_dir), outputs, command="run")


def _compare_document(result: CompareResult) -> dict[str, Any]:
    """compare.json's content, validated against its schema."""
    from advisor.render.compare_outputs import compare_document

    return compare_document(result.tables, result.report["profile"], result.report["advisor"])


def render_compare_outputs(result: CompareResult, formats: Sequence[str]) -> dict[str, str | bytes]:
    """Every output file of a comparison in `formats` (json, html, xlsx; others are ignored),
    by file name, all rendered before any is written."""
    from advisor.render.compare_html import render_compare_html
    from advisor.render.compare_outputs import spreadsheet

    outputs: dict[str, str | bytes] = {}
    document = _compare_document(result) if {"json", "html"} & set(formats) else None
    if document is not None and "json" in formats:
        outputs[COMPARE_JSON] = json.dumps(document, indent=2, ensure_ascii=False)
        outputs[COMPARE_REPORT] = json.dumps(result.report, indent=2, ensure_ascii=False)
    if document is not None and "html" in formats:
        outputs[COMPARE_HTML] = render_compare_html(result.report, document)
    if "xlsx" in formats:
        outputs[COMPARE_XLSX] = spreadsheet(result.tables)
    return outputs


def compare_stdout_document(result: CompareResult) -> dict[str, Any]:
    """What `advisor compare -o -` prints: compare.json and prof_rule_compare.json as one
    document, {"compare": ..., "report": ...}."""
    return {"compare": _compare_document(result), "report": result.report}


def write_compare_outputs(
    result: CompareResult, out_dir: str | Path, formats: Sequence[str] = COMPARE_FILE_FORMATS
) -> list[Path]:
    """Write a comparison's outputs of `formats` into `out_dir` like write_outputs does a
    run's (atomically, an earlier comparison's stale outputs removed; a run's kept). Returns
    the paths written; nothing (and no folder) when no format is a file."""
    return write_files(Path(out_dir), render_compare_outputs(result, formats), command="compare")


def read_manifest(out_dir: Path) -> dict[str, list[str]]:
    """The files each command recorded writing into `out_dir`, keeping only entries that are
    plain names of that folder; {} when the manifest is missing, unreadable or malformed."""
    path = out_dir / MANIFEST
    try:
        info = path.lstat()
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_MANIFEST_BYTES:
            return {}  # a link or a device is not what advisor wrote
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        return {}
    outputs = document.get("outputs") if isinstance(document, dict) else None
    if not isinstance(outputs, dict):
        return {}
    return {
        command: list(dict.fromkeys(n for n in names if _own_name(n)))
        for command, names in outputs.items()
        if isinstance(command, str) and isinstance(names, list)
    }


def _own_name(name: Any) -> bool:
    """A plain name of the folder, or of its TRACES folder (`traces/finding-1.json`)."""
    if not isinstance(name, str):
        return False
    folder, _, base = name.rpartition("/")
    return (
        folder in ("", TRACES)
        and name != MANIFEST
        and _OWN_NAME.fullmatch(base) is not None
        and ".." not in base
    )


def _write_manifest(out_dir: Path, outputs: Mapping[str, Sequence[str]]) -> None:
    document = {
        "advisor": __version__,
        "about": "Files advisor wrote into this folder, per command. The next run into this "
        "folder removes those it does not write again; other files are never touched.",
        "outputs": {command: list(names) for command, names in outputs.items() if names},
    }
    write_atomic(out_dir / MANIFEST, json.dumps(document, indent=2, ensure_ascii=False) + "\n")


def _is_file(path: Path) -> bool:
    """A regular file, not a link to one."""
    try:
        return stat.S_ISREG(path.lstat().st_mode)
    except OSError:
        return False


def _remove_own(out_dir: Path, name: str) -> None:
    """Remove an earlier output: a regular file directly in the folder or in its TRACES
    folder, nothing else (a link or folder under that name was not written by advisor)."""
    path = out_dir / name
    if _in_own_folder(out_dir, path) and _is_file(path):
        try:
            path.unlink(missing_ok=True)
        except OSError as exc:
            raise _cannot("remove this earlier output", path, exc) from exc


def _in_own_folder(out_dir: Path, path: Path) -> bool:
    """`path` lies directly in `out_dir`, or in its TRACES folder when that is a folder of
    its own (a link to another folder is not advisor's)."""
    parent = path.parent
    if parent == out_dir:
        return True
    return parent == out_dir / TRACES and not parent.is_symlink() and parent.is_dir()


def _traces_folder(out_dir: Path) -> None:
    """Create the TRACES folder, refusing a link or a file in its place (snippets written
    through a link would land outside the output folder)."""
    folder = out_dir / TRACES
    if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
        raise OutputError(folder, "not a folder advisor can write trace snippets into")
    try:
        folder.mkdir(exist_ok=True)
    except OSError as exc:
        raise _cannot("create the folder", folder, exc) from exc


def write_files(out_dir: Path, outputs: Mapping[str, Content], command: str = "run") -> list[Path]:
    """Write `outputs` (file name -> content, or what renders it) into `out_dir` atomically
    and record them in the folder's manifest under `command`; then remove the files the
    manifest listed for that command which this run did not write. No outputs: the folder is
    left alone (not even created).

    The manifest is written first when this run adds names, so that outputs of a run
    interrupted half-way are still known to the next one, and again last, listing exactly the
    files of this run."""
    if not outputs:
        return []
    names = list(outputs)
    for name in names:
        if not _own_name(name):
            raise ValueError(f"not a plain output file name: {name!r}")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _cannot("create the output folder", out_dir, exc) from exc
    previous = read_manifest(out_dir)
    before = previous.pop(command, [])
    # Other commands' outputs are kept, listed while they are there and not this run's now.
    previous = {
        c: [n for n in listed if n not in outputs and _is_file(out_dir / n)]
        for c, listed in previous.items()
    }
    if not set(names) <= set(before):
        _write_manifest(out_dir, {**previous, command: list(dict.fromkeys([*before, *names]))})
    if any("/" in name for name in names):
        _traces_folder(out_dir)
    for name, content in outputs.items():
        write_atomic(out_dir / name, content() if callable(content) else content)
    others = {n for listed in previous.values() for n in listed}
    for name in before:
        if name not in outputs and name not in others:
            _remove_own(out_dir, name)
    folder = out_dir / TRACES
    if any("/" in name for name in before) and folder.is_dir() and not folder.is_symlink():
        with contextlib.suppress(OSError):  # an emptied folder goes; one with other files stays
            folder.rmdir()
    _write_manifest(out_dir, {**previous, command: names})
    return [out_dir / name for name in names]
