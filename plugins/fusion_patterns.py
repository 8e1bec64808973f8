"""`fusion_candidates`: operator sequences that one fused operator could replace.

Three searches, one table (the FUSE-* rules read it):

- affinity_api: the framework operators each host thread calls (top-level aten ops, in call
  order) against the catalogue's sequences of torch_npu / CANN fused APIs (RMSNorm, rotary
  embedding, SwiGLU, fused attention ...);
- graph_fusion: on graph-mode profiles (no framework operators recorded) of Ascend or an
  unknown device, the op types each device stream runs against the GE fusion passes'
  sequences, plus Cast / TransData / element-wise chains (a GPU or CPU graph never meets GE,
  nor does a torch_npu run's eager operators, whose kernels are aclnn's);
- kernel_sequence: after HTA's frequent CUDA kernel sequences, the kernels each top-level
  framework operator launches, grouped by (operator, kernel names).

The sequences are data (`fusion_patterns.yaml`, shipped beside this module). Time saved by a
fused operator is estimated as the matched time minus the longest single operator of each
occurrence: the fused operator still does at least the work of its largest part, so the
estimate never exceeds the matched time and is conservative where the fused kernel also beats
that part (flash attention).
"""

from __future__ import annotations

import itertools
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

from advisor import intervals, op_classes
from advisor.formats.metadata import rows_recording
from advisor.formats.torch_records import TORCH_COMPILED
from advisor.hookspecs import MetricProvider, hookimpl
from advisor.kernel_names import kernel_op_type
from advisor.lazy import lazy_module
from advisor.model import Profile, conform_records
from advisor.small_files import package_yaml
from advisor.text_codes import isin_mask, passing_mask

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
else:
    np = lazy_module("numpy")
    pd = lazy_module("pandas")

CATALOGUE = "fusion_patterns.yaml"
MIN_KERNELS = 3  # HTA get_frequent_cuda_kernel_sequences: min_pattern_len = 3
_PREFIXES = re.compile(r"^(?:aten|npu)::")
_STEP = re.compile(r"^(?P<names>[A-Za-z0-9_.|]+?)(?P<quant>\?|\{\d+,\d+\})?$")
_EXAMPLE_CHARS = 1000
_FIRST_SYMBOL = 0x100  # the catalogue's names as characters from here on (no regex syntax)
_OTHER = " "  # a name no sequence holds
_COPY_SUFFIX = re.compile(r"_\d+$")
_MULTI_PASS = re.compile(
    r"\bcub::|\bthrust::|radix_?sort|DeviceScan|DeviceSegmented|\bcudnn::fusion::|fbgemm_gpu::",
    re.I,
)
"""Kernels of a library's multi-pass algorithm (CUB's and Thrust's sorts and scans, which
an embedding's backward runs; the helper kernels of cuDNN's fused attention; fbgemm_gpu's
embedding and quantisation kernels): passes by design, not a chain one fused kernel
replaces."""
_ORIGINAL_SEPARATOR = re.compile(r"[;,]")
NOT_APPLICABLE = "n/a"  # availability of rows no CANN version concerns (never missing, so
_NO_VERSION = {"availability": NOT_APPLICABLE}  # rules may read the column on any profile)


@dataclass(frozen=True)
class Pattern:
    """One catalogue entry: where it is matched, what replaces it, and its compiled regex."""

    family: str  # affinity or graph
    id: str
    api: str
    gpu_api: str | None
    cann: str | None
    text: str  # the entry's label, else its sequences: the table's `pattern` column
    regex: re.Pattern[str]


Steps = list[tuple[list[str], str]]
"""A sequence's steps: (names, quantifier) each."""


def _steps(sequence: str) -> Steps:
    """The steps of one sequence (separated by spaces): (names, quantifier) each."""
    steps = []
    for step in str(sequence).split():
        match = _STEP.match(step)
        if match is None:
            raise ValueError(f"{CATALOGUE}: bad step {step!r}")
        steps.append((match["names"].split("|"), match["quant"] or ""))
    return steps


def _compile(sequences: list[Steps], symbols: dict[str, str]) -> re.Pattern[str]:
    """The sequences as one regex over text with one symbol per token (`symbols`)."""
    alternatives = [
        "".join(f"[{''.join(symbols[n] for n in names)}]{quant}" for names, quant in steps)
        for steps in sequences
    ]
    return re.compile("|".join(alternatives))


@cache
def _compiled() -> tuple[tuple[Pattern, ...], dict[str, str]]:
    """The shipped catalogue, checked and compiled once, and the character that stands for
    each operator name its sequences hold: a token sequence is matched as a string of these
    (every other name one character that no step takes), so a regex scans a character per
    operator rather than its name."""
    data = package_yaml(__package__, CATALOGUE)  # read on first use: listing rules never does
    entries = []
    for family in ("affinity", "graph"):
        for entry in data[family]:
            if not {"id", "api", "sequences"} <= set(entry):
                raise ValueError(f"{CATALOGUE}: bad entry {entry.get('id')!r}")
            entries.append((family, entry, [_steps(q) for q in entry["sequences"]]))
    names = sorted(
        {n for _, _, sequences in entries for steps in sequences for ns, _ in steps for n in ns}
    )
    symbols = {name: chr(_FIRST_SYMBOL + i) for i, name in enumerate(names)}
    patterns = tuple(
        Pattern(
            family,
            str(entry["id"]),
            str(entry["api"]),
            entry.get("gpu_api"),
            None if entry.get("cann") is None else str(entry["cann"]),
            entry.get("label") or " / ".join("-".join(str(q).split()) for q in entry["sequences"]),
            _compile(sequences, symbols),
        )
        for family, entry, sequences in entries
    )
    return patterns, symbols


def catalogue() -> tuple[Pattern, ...]:
    """The shipped catalogue's patterns (see _compiled)."""
    return _compiled()[0]


def find(tokens: Sequence[str], patterns: Iterable[Pattern]) -> list[tuple[Pattern, int, int]]:
    """Matches (pattern, first token, one past the last) of consecutive tokens (each matched
    whole), tried in catalogue order; a token belongs to one match at most."""
    symbols = _compiled()[1]
    text = "".join([symbols.get(token, _OTHER) for token in tokens])
    claimed = np.zeros(len(tokens), dtype=bool)
    found = []
    for pattern in patterns:
        for match in pattern.regex.finditer(text):
            first, last = match.span()
            if last == first or claimed[first:last].any():
                continue
            claimed[first:last] = True
            found.append((pattern, first, last))
    return found


# -- versions -------------------------------------------------------------------------------


def version_key(text: str | None) -> tuple[int, int, int, int] | None:
    """A CANN version as a sortable key: 8.0.RC1 < 8.0.RC3 < 8.0.0 < 8.0.1 (a release
    follows its release candidates); None for text that is no CANN version."""
    match = re.search(r"(\d+)\.(\d+)\.(?:RC(\d+)|(\d+))", text or "", re.IGNORECASE)
    if match is None:
        return None
    major, minor, rc, patch = match.groups()
    return (int(major), int(minor), 0 if rc else 1, int(rc or patch))


def cann_version(profile: Profile) -> str | None:
    """The profile's CANN version: the metadata table's `version.cann`, else the reader's."""
    metadata = profile.tables.get("metadata")
    if metadata is not None and {"key", "value"} <= set(metadata):
        values = metadata["value"].iloc[rows_recording(metadata, "version.cann")].dropna()
        if len(values) and str(values.iloc[0]).strip():
            return str(values.iloc[0]).strip()
    for key, value in profile.meta.versions.items():
        if key.lower() in ("cann", "cann_version", "version.cann") and str(value).strip():
            return str(value).strip()
    return None


def availability(need: str | None, have: str | None) -> str:
    """available / upgrade / unknown: whether the profile's CANN has the fused API."""
    need_key, have_key = version_key(need), version_key(have)
    if need_key is None or have_key is None:
        return "unknown"
    return "available" if have_key >= need_key else "upgrade"


# -- the three searches ---------------------------------------------------------------------


def _short(name: str) -> str:
    """A kernel name without its return type and template / argument lists; a generic
    element-wise or reduction launcher keeps what it computes, as its operator type does
    (`at::native::vectorized_elementwise_kernel<bfloat16_copy_kernel_cuda>`: a cast to
    bfloat16; `<MulFunctor>`, `reduce_kernel<sum_functor>`), or every one of them reads alike."""
    name = re.sub(r"^void\s+|\(anonymous namespace\)::", "", name.strip())
    base = re.split(r"[<(]", name, maxsplit=1)[0] or name
    op_type = kernel_op_type(name)
    template = op_type.split("<", 1)[0]
    if template and template != op_type and base.endswith(template):
        return base[: len(base) - len(template)] + op_type
    return base


def _collapsed(names: Sequence[str]) -> list[str]:
    """Consecutive repeats of one kernel written once with their count (`k ×15`): HTA's sample
    trace's binary_cross_entropy_with_logits ran 15 element-wise kernels in a row, which read
    as one name fifteen times in the finding."""
    return [
        name if count == 1 else f"{name} ×{count}"
        for name, count in ((name, len(list(run))) for name, run in itertools.groupby(names))
    ]


def _example(names: Sequence[str]) -> str:
    """Operator names joined in order, whole names only, cut after _EXAMPLE_CHARS."""
    text = ""
    for i, name in enumerate(names):
        joined = f"{text} -> {name}" if i else name
        if len(joined) > _EXAMPLE_CHARS:
            return f"{text} -> ... ({len(names) - i} more)"
        text = joined
    return text


def _row(kind: str, pattern: str, occurrences: list[dict[str, Any]], **extra: Any) -> dict:
    first = min(occurrences, key=lambda o: o["start"] if o["start"] == o["start"] else np.inf)
    total = float(sum(o["total"] for o in occurrences))
    fused = float(sum(o["fused"] for o in occurrences))
    ops = sum(o["ops"] for o in occurrences)
    return {
        "kind": kind,
        "pattern": pattern,
        "occurrences": len(occurrences),
        "ops": first["ops"],
        "total_us": total,
        "fused_us": fused,
        "saving_us": max(total - fused, 0.0),
        "avg_op_us": total / ops if ops else np.nan,
        "first_start_us": first["start"],
        "step": first["step"],
        "example": _example(first["names"]),
        **extra,
    }


def _top_level(profile: Profile) -> pd.DataFrame | None:
    """Top-level framework operators (aten calls not inside another aten call of their
    thread), outside optimizer steps (HOST-004's), sorted by thread and start.

    The rows are chosen and ordered on arrays and the frame taken once: each selection of a
    frame copies its text columns (a million host operators in a large trace)."""
    host = profile.tables.get("host_ops")
    if host is None or "start_us" not in host or "kind" not in host:
        return None
    kind = host["kind"]
    start = host["start_us"].to_numpy("float64", na_value=np.nan)
    duration = host["duration_us"].to_numpy("float64", na_value=0.0)
    threads = (
        host["thread"].to_numpy("int64", na_value=-1)
        if "thread" in host
        else np.full(len(host), -1, dtype=np.int64)
    )
    placed = ~np.isnan(start)
    aten = np.flatnonzero(isin_mask(kind, ("aten",)) & placed)
    if not len(aten):
        return None
    aten = aten[~intervals.nested(start[aten], start[aten] + duration[aten], threads[aten])]
    in_optimizer = np.zeros(len(aten), dtype=bool)
    optimizer = np.flatnonzero(isin_mask(kind, ("optimizer",)) & placed)
    for thread in np.unique(threads[optimizer]):
        steps = optimizer[threads[optimizer] == thread]
        merged = intervals.merge(start[steps], start[steps] + duration[steps])
        in_optimizer |= (threads[aten] == thread) & _inside(merged, start[aten])
    order = np.lexsort((start[aten], threads[aten]))
    aten, in_optimizer = aten[order], in_optimizer[order]
    read = [c for c in ("kind", "start_us", "duration_us", "name", "thread", "step") if c in host]
    top = host[read].take(aten)
    return top.assign(
        thread=pd.array(threads[aten], dtype="Int64"),
        end_us=start[aten] + duration[aten],
        in_optimizer=in_optimizer,
    )


def _inside(merged: intervals.Intervals, points: np.ndarray) -> np.ndarray:
    """Which points lie in one of the merged intervals."""
    starts, ends = merged
    if starts.size == 0:
        return np.zeros(len(points), dtype=bool)
    i = np.searchsorted(starts, points, side="right") - 1
    return (i >= 0) & (points < ends[np.clip(i, 0, None)])


def _launched(top: pd.DataFrame, device: pd.DataFrame) -> pd.DataFrame:
    """The compute kernels each top-level operator launched (device row index, top row
    label), from device_ops.launch_thread / launch_us; empty without launch links."""
    if not {"launch_thread", "launch_us"} <= set(device):
        return pd.DataFrame(columns=["device", "top"])
    kernels = device[["launch_thread", "launch_us"]][
        (device["category"] == "compute").fillna(False)
        & device["launch_us"].notna()
        & device["launch_thread"].notna()
    ]
    links = []
    for thread, calls in top.groupby("thread", dropna=False, sort=False):
        mine = kernels[(kernels["launch_thread"] == thread).fillna(False)]
        if mine.empty:
            continue
        starts = calls["start_us"].to_numpy("float64")
        ends = calls["end_us"].to_numpy("float64")
        at = mine["launch_us"].to_numpy("float64")
        i = np.searchsorted(starts, at, side="right") - 1
        ok = (i >= 0) & (at <= ends[np.clip(i, 0, None)])
        links.append(pd.DataFrame({"device": mine.index[ok], "top": calls.index[i[ok]]}))
    return pd.concat(links) if links else pd.DataFrame(columns=["device", "top"])


def _op_times(
    top: pd.DataFrame, device: pd.DataFrame | None, links: pd.DataFrame | None = None
) -> tuple[pd.DataFrame, str]:
    """Per top-level operator: its time and its longest part, on the device when kernels
    are linked to the host calls that launched them (`links`, from _launched), else on the
    host."""
    if links is None:
        links = _launched(top, device) if device is not None else pd.DataFrame()
    if links.empty or device is None:
        duration = top["duration_us"].astype("float64")
        return pd.DataFrame({"total": duration, "longest": duration}), "host"
    durations = device.loc[links["device"], "duration_us"].to_numpy("float64", na_value=0.0)
    per_op = (
        pd.DataFrame({"top": links["top"].to_numpy(), "d": durations})
        .groupby("top")["d"]
        .agg(total="sum", longest="max")
    )
    return per_op.reindex(top.index, fill_value=0.0), "device"


def _step(steps: pd.Series | None, label: Any) -> Any:
    """A row's step from the step column, if any (a column's .at costs a fifth of the
    frame's)."""
    return pd.NA if steps is None else steps.at[label]


def affinity_rows(
    profile: Profile, top: pd.DataFrame, times: pd.DataFrame, basis: str
) -> tuple[list[dict[str, Any]], set[Any]]:
    """Rows of the affinity-API matches, and the top-level operators they claimed."""
    gpu = profile.meta.device_kind == "GPU"
    patterns = [p for p in catalogue() if p.family == "affinity" and (p.gpu_api or not gpu)]
    have = cann_version(profile)
    matches: dict[Pattern, list[dict[str, Any]]] = defaultdict(list)
    claimed: set[Any] = set()
    candidates = top[~top["in_optimizer"]]
    steps = top.get("step")  # the calls' labels are top's
    bare: dict[Any, str] = {}  # each distinct name without its prefix, made once
    for _, calls in candidates.groupby("thread", dropna=False, sort=False):
        labels = list(calls.index)
        names = [
            bare.get(n) or bare.setdefault(n, _PREFIXES.sub("", str(n)))
            for n in calls["name"].tolist()  # not element by element from arrow
        ]
        for pattern, first, last in find(names, patterns):
            part = labels[first:last]
            claimed.update(part)
            matches[pattern].append(
                {
                    "start": float(calls.at[part[0], "start_us"]),
                    "step": _step(steps, part[0]),
                    "names": names[first:last],
                    "ops": len(part),
                    "total": float(times.loc[part, "total"].sum()),
                    "fused": float(times.loc[part, "longest"].max()),
                }
            )
    rows = [
        _row(
            "affinity_api",
            p.text,
            occ,
            fused_api=p.gpu_api if gpu else p.api,
            source="host_ops",
            time_basis=basis,
            min_cann=None if gpu else p.cann,
            cann_version=None if gpu else have,
            availability=NOT_APPLICABLE if gpu else availability(p.cann, have),
        )
        for p, occ in matches.items()
    ]
    return rows, claimed


def kernel_sequence_rows(
    top: pd.DataFrame,
    device: pd.DataFrame,
    claimed: set[Any],
    links: pd.DataFrame | None = None,
) -> tuple[list[dict[str, Any]], int]:
    """HTA's frequent kernel sequences with the top-level operators as roots: the kernels
    one call launched, grouped by (operator, kernel names), for calls launching at least
    MIN_KERNELS kernels outside affinity matches and optimizer steps, and neither running
    torch.compile's code (TORCH_COMPILED), a library's multi-pass algorithm (_MULTI_PASS) nor
    more than one library operation (op_classes.library_operation: kernels that are each a
    whole matrix multiplication, convolution or attention; a transformer layer's forward,
    recomputed in the backward under activation checkpointing, is no chain one fused kernel
    replaces, one of them with the element-wise kernels around it is, as an epilogue)."""
    if links is None:
        links = _launched(top, device)
    if links.empty:
        return [], 0
    free = top.index[~top["in_optimizer"] & ~top.index.isin(list(claimed))]
    links = links[links["top"].isin(free)]
    # The kernels in start order (ties in link order, missing starts last, as a stable
    # sort_values gives), as positions in device: arrays, never a frame of names sorted
    rows = device.index.get_indexer(links["device"])
    all_starts = device["start_us"].to_numpy("float64", na_value=np.nan)[rows]
    by_start = np.argsort(all_starts, kind="stable")
    rows, all_starts = rows[by_start], all_starts[by_start]
    # The calls in order of their first kernel, each call's kernels in start order (what a
    # groupby by call gives, without a frame per call: a trace has tens of thousands)
    codes, labels = pd.factorize(links["top"].to_numpy()[by_start], sort=False)
    order = np.argsort(codes, kind="stable")
    ends = np.cumsum(np.bincount(codes, minlength=len(labels)))
    firsts = ends - np.bincount(codes, minlength=len(labels))
    calls = np.flatnonzero(ends - firsts >= MIN_KERNELS)
    if not len(calls):
        return [], len(rows)
    kernel_rows = rows[order]
    durations = device["duration_us"].to_numpy("float64", na_value=0.0)[kernel_rows]
    longest = np.maximum.reduceat(durations, firsts)[calls].tolist()
    # Names as codes of their text (str() of each, as the key is written), so that a call's
    # key is a tuple of small integers. The whole column is coded, not the kernels' rows
    # taken first: a take copies the names, hundreds of bytes each
    name_codes, uniques = pd.factorize(device["name"].array, sort=False, use_na_sentinel=False)
    texts = [str(n) for n in uniques]  # a missing name is "<NA>", as str() writes it
    text_codes = {t: i for i, t in reversed(list(enumerate(texts)))}  # first code of a text
    canonical = np.array([text_codes[t] for t in texts], dtype=np.int64)
    name_codes = canonical[name_codes[kernel_rows]].tolist()
    at = top.index.get_indexer(labels[calls])  # each call's row in top
    roots = [_PREFIXES.sub("", str(n)) for n in top["name"].take(at).tolist()]
    steps = top["step"].take(at).tolist() if "step" in top else None
    starts = all_starts[order][firsts[calls]].tolist()
    groups: dict[tuple[Any, ...], list[int]] = {}
    totals = []  # each call's sum as ndarray.sum gives it (reduceat adds in another order)
    for k, (first, end) in enumerate(zip(firsts[calls].tolist(), ends[calls].tolist())):
        groups.setdefault((roots[k], *name_codes[first:end]), []).append(k)
        totals.append(float(durations[first:end].sum()))
    # each distinct kernel name searched once, not once per sequence holding it
    used = {c for key in groups for c in key[1:]}
    multi_pass = {c for c in used if _MULTI_PASS.search(texts[c])}
    library = {c for c in used if op_classes.library_operation(texts[c])}
    short: dict[str, str] = {}
    out = []
    for key, members in groups.items():
        codes_of_key = key[1:]
        if (
            TORCH_COMPILED.match(key[0])  # Inductor fused its kernels already
            or any(c in multi_pass for c in codes_of_key)
            or sum(c in library for c in codes_of_key) > 1
        ):
            continue
        names = [texts[c] for c in codes_of_key]
        brief = [short.get(n) or short.setdefault(n, _short(n)) for n in names]
        occurrences = [
            {
                "start": starts[k],
                "step": pd.NA if steps is None else steps[k],
                "names": brief,
                "ops": len(names),
                "total": totals[k],
                "fused": longest[k],
            }
            for k in members
        ]
        out.append(
            _row(
                "kernel_sequence",
                f"{key[0]}: " + " | ".join(_collapsed(brief)),
                occurrences,
                fused_api=None,
                source="device_ops",
                time_basis="device",
                **_NO_VERSION,
            )
        )
    return out, len(rows)


def _op_type_of(name: str) -> str:
    """The op type a graph node's name carries: its last path part without a `_N` copy
    suffix (`model/dense/MatMul_1` → `MatMul`), how TensorFlow and GE name nodes."""
    return _COPY_SUFFIX.sub("", name.strip().rsplit("/", 1)[-1])


def fused_elsewhere(pattern: Pattern, fusions: pd.DataFrame) -> int:
    """How many fusions the graph compiler applied (fusion_op_*.csv) replaced operators
    whose types, in the file's order, contain the pattern."""
    return sum(
        bool(find([_op_type_of(n) for n in _ORIGINAL_SEPARATOR.split(ops) if n.strip()], [pattern]))
        for ops in fusions["original_ops"].dropna()
    )


def graph_rows(
    device: pd.DataFrame, fusions: pd.DataFrame | None = None
) -> tuple[list[dict[str, Any]], int]:
    """Rows of the graph-fusion matches: consecutive compute tasks of one stream, and the
    number of tasks searched. With the fusions the compiler applied (`fusions`), each row
    says how often the same pattern was fused elsewhere: then the pass works on this model
    and something local keeps these occurrences apart."""
    if "op_type" not in device:
        return [], 0
    tasks = np.flatnonzero(
        ((device["category"] == "compute").fillna(False) & device["op_type"].notna()).to_numpy(bool)
    )
    for column in ("start_us", "task_id"):
        if column in device:
            key = device[column].to_numpy("float64", na_value=np.nan)[tasks]
            if not np.isnan(key).all():  # stable, missing last: as sort_values
                tasks = tasks[np.argsort(key, kind="stable")]
                break
    if "stream" in device:
        streams = pd.factorize(device["stream"].iloc[tasks], use_na_sentinel=False)[0]
    else:
        streams = np.zeros(len(tasks), dtype="int64")
    op_types = device["op_type"].to_numpy(object)[tasks]
    durations = device["duration_us"].to_numpy("float64", na_value=0.0)[tasks]
    starts = (
        device["start_us"].to_numpy("float64", na_value=np.nan)[tasks]
        if "start_us" in device
        else np.full(len(tasks), np.nan)
    )
    steps = device["step"].to_numpy(object)[tasks] if "step" in device else None
    names = device["name"].to_numpy(object)[tasks]
    patterns = [p for p in catalogue() if p.family == "graph"]
    matches: dict[Pattern, list[dict[str, Any]]] = defaultdict(list)
    for stream in range(int(streams.max(initial=-1)) + 1):  # in order of appearance
        run = np.flatnonzero(streams == stream)
        found = find([str(t) for t in op_types[run].tolist()], patterns)
        for pattern, first, last in found:
            taken = run[first:last]
            matches[pattern].append(
                {
                    "start": float(starts[taken[0]]),
                    "step": pd.NA if steps is None else steps[taken[0]],
                    "names": [str(n) for n in names[taken]],
                    "ops": last - first,
                    "total": float(durations[taken].sum()),
                    "fused": float(durations[taken].max()),
                }
            )
    rows = [
        _row(
            "graph_fusion",
            p.text,
            occ,
            fused_api=p.api,
            source="device_ops",
            time_basis="device",
            fused_elsewhere=pd.NA if fusions is None else fused_elsewhere(p, fusions),
            **_NO_VERSION,
        )
        for p, occ in matches.items()
    ]
    return rows, len(tasks)


def _scan(search: str, scanned: int) -> dict[str, Any]:
    """The row saying a search ran over `scanned` operators, so that a profile where nothing
    matched reads as searched (rules stay quiet) rather than as lacking the table."""
    zero = {"occurrences": 0, "total_us": 0.0, "fused_us": 0.0, "saving_us": 0.0}
    return {"kind": "scan", "pattern": search, "ops": scanned, **zero, **_NO_VERSION}


_WITHOUT_GE = ("GPU", "CPU")
"""Devices whose graphs GE's fusion passes never see (MindSpore on GPU fuses with its own
graph kernels): their graph-mode profiles are not searched for the passes' sequences."""


def _eager(device: pd.DataFrame) -> bool:
    """Whether most device tasks are aclnn kernels: an eager torch_npu run whose host trace
    is missing (kernel_details.csv alone), not a graph (MindStudio Insight's level-2 run:
    2,056 of its 2,463 kernels), so GE's fusion passes never ran on them."""
    if "name" not in device or device.empty:
        return False
    aclnn = passing_mask(device["name"], lambda name: name.startswith(op_classes.ACLNN_PREFIX))
    return bool(aclnn.mean() >= 0.5)


def fusion_candidates(profile: Profile) -> None:
    """Build the fusion_candidates table: the matches, and a scan row for each search that ran,
    so that a profile where nothing matched keeps the rules quiet instead of not applicable;
    a GPU or CPU graph runs no search (_WITHOUT_GE), nor does an eager torch_npu run
    (_eager), and there the rules do not apply."""
    device = profile.tables.get("device_ops")
    top = _top_level(profile)
    rows: list[dict[str, Any]] = []
    if top is not None:
        links = _launched(top, device) if device is not None else pd.DataFrame()
        times, basis = _op_times(top, device, links)
        found, claimed = affinity_rows(profile, top, times, basis)
        rows += found + [_scan("affinity_api", int((~top["in_optimizer"]).sum()))]
        if device is not None and "start_us" in device:
            found, scanned = kernel_sequence_rows(top, device, claimed, links)
            rows += found + [_scan("kernel_sequence", scanned)]
    elif device is not None and profile.meta.device_kind not in _WITHOUT_GE and not _eager(device):
        found, scanned = graph_rows(device, profile.tables.get("graph_fusions"))
        rows += found + [_scan("graph_fusion", scanned)]
    frame = conform_records("fusion_candidates", rows, _COLUMNS)
    profile.tables["fusion_candidates"] = frame.sort_values(
        ["saving_us", "pattern"], ascending=[False, True], kind="stable", ignore_index=True
    )


_COLUMNS = (
    "kind",
    "pattern",
    "fused_api",
    "source",
    "occurrences",
    "ops",
    "total_us",
    "time_basis",
    "fused_us",
    "saving_us",
    "avg_op_us",
    "first_start_us",
    "step",
    "example",
    "min_cann",
    "cann_version",
    "availability",
    "fused_elsewhere",
)

PROVIDERS = [
    MetricProvider(
        "fusion_candidates",
        ("device_ops.duration_us",),
        ("fusion_candidates",) + tuple(f"fusion_candidates.{c}" for c in _COLUMNS),
        fusion_candidates,
        "fusion_candidates: operator sequences a fused operator could replace",
    )
]


@hookimpl
def advisor_metrics() -> list[MetricProvider]:
    return PROVIDERS
