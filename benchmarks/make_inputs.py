"""Builds large benchmark inputs by tiling a real profile along its time axis.

Two inputs, each made of N time-shifted copies of a real fixture from ../shared/fixtures:

* ``ascend``: the torch_npu folder ``ascend_pt/rank0_ascend_pt``. ``trace_view.json`` (a bare
  JSON list, ``ts`` as strings such as ``"1704161511420306.491"``) is written N times, copy k
  shifted by k * (trace span + gap); ``ts`` stay strings with the same number of decimals,
  metadata events (``ph: M``) are written once, flow ids, ``connection_id``, ``correlation_id``
  and autograd sequence numbers are made unique, ``torch_to_npu`` ids (which are the ns time of
  the flow end) move with the time shift, ``HostToDevice<id>`` names follow their ids and
  ``ProfilerStep#n`` is renumbered. ``kernel_details.csv`` is tiled the same way, shifted by its
  own span + gap (in the fixture it comes from another run, with another time base), with
  ``Step Id`` renumbered. N = 400 gives a 254 MB ``trace_view.json`` (307 MB with the CSV).
* ``kineto``: the largest GPU Kineto trace with NCCL kernels (``nccl_parser_config__nccl_data``,
  9.8 MB of JSON, A100, 2-rank NCCL). ``ts`` shifted by k * (span + gap), metadata events, the
  ``Trace`` span and the instant events written once (the span stretched over all copies, the
  "Record Window End" moved to the end), top-level keys (``deviceProperties``,
  ``distributedInfo``, ``baseTimeNanoseconds`` ...) kept as they are, ``ProfilerStep#n``
  renumbered, ``External id`` / ``correlation`` / ``Record function id`` / ``Ev Idx`` /
  ``Sequence number`` and flow ids made unique. The copy count is chosen to reach ``--kineto-mb``
  (400 MB by default) unless ``--kineto-copies`` is given.

Output is streamed copy by copy (only the fixture is held in memory) and written under ``--out``
(default ``/tmp/advisor-bench``), never into the repository:

    <out>/ascend_x<N>/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/{trace_view.json,kernel_details.csv}
    <out>/kineto_x<N>/bench_rank0.pt.trace.json
    <out>/manifests/{ascend,kineto}_x<N>.json      (what was built; kept out of the input folders)

An input whose manifest matches the request is not rebuilt. Only the standard library is used.

    python benchmarks/make_inputs.py                       # ascend x400 and kineto ~400 MB
    python benchmarks/make_inputs.py --ascend-copies 50 --kineto-copies 5
"""

from __future__ import annotations

import argparse
import csv
import gzip
import io
import json
import math
import os
import re
import shutil
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIXTURES = Path(os.environ.get("ADVISOR_FIXTURES", REPO.parent / "shared" / "fixtures"))
ASCEND_FIXTURE = FIXTURES / "ascend_pt" / "rank0_ascend_pt"
KINETO_FIXTURE = FIXTURES / "kineto" / "nccl_parser_config__nccl_data.json.gz"
DEFAULT_OUT = Path("/tmp/advisor-bench")
FORMAT_VERSION = 1  # bump when the tiling changes, so cached inputs are rebuilt

STEP_RE = re.compile(r"^ProfilerStep#(\d+)$")
NUM_RE = re.compile(r"^(\s*)(\d+)(\.\d*)?(\s*)$")


# ---------------------------------------------------------------- helpers


def _shift_number_text(text: str, shift_us: int) -> str:
    """Adds a whole number of µs to a decimal written as text, keeping its exact format."""
    m = NUM_RE.match(text)
    if not m:
        return text
    lead, whole, frac, trail = m.groups()
    return f"{lead}{int(whole) + shift_us}{frac or ''}{trail}"


def _step_span(numbers: list[int]) -> int:
    return (max(numbers) - min(numbers) + 1) if numbers else 0


def _renumber_step(name: str, k: int, n_steps: int) -> str:
    m = STEP_RE.match(name)
    if not m or k == 0:
        return name
    return f"ProfilerStep#{int(m.group(1)) + k * n_steps}"


def _is_repo_path(path: Path) -> bool:
    try:
        path.resolve().relative_to(REPO)
        return True
    except ValueError:
        return False


def _manifest_ok(manifest: Path, expected: dict) -> bool:
    try:
        have = json.loads(manifest.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return all(have.get(k) == v for k, v in expected.items()) and all(
        Path(p).exists() for p in have.get("files", [])
    )


def _write_manifest(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


# ---------------------------------------------------------------- Ascend (torch_npu)


class AscendTiler:
    """Time-tiles one ``trace_view.json`` event list."""

    def __init__(self, events: list[dict], gap_us: int):
        self.events = events
        timed = [e for e in events if e.get("ph") != "M" and e.get("ts") is not None]
        starts = [float(e["ts"]) for e in timed]
        ends = [float(e["ts"]) + float(e.get("dur") or 0) for e in timed]
        self.span_us = max(ends) - min(starts)
        self.period_us = int(math.ceil(self.span_us)) + gap_us
        steps = [int(m.group(1)) for e in events if (m := STEP_RE.match(str(e.get("name", ""))))]
        self.n_steps = _step_span(steps)
        small_ids = [
            e["id"]
            for e in events
            if e.get("ph") in ("s", "f", "t")
            and isinstance(e.get("id"), int)
            and e.get("name") != "torch_to_npu"
        ]
        small_ids += [
            e["args"]["correlation_id"]
            for e in events
            if isinstance(e.get("args", {}).get("correlation_id"), int)
        ]
        self.small_id_offset = max(small_ids, default=0) + 1
        conn = [
            e["args"]["connection_id"]
            for e in events
            if isinstance(e.get("args", {}).get("connection_id"), int)
        ]
        self.conn_offset = max(conn, default=0) + 1
        seq = [
            e["args"]["Sequence number"]
            for e in events
            if isinstance(e.get("args", {}).get("Sequence number"), int)
        ]
        self.seq_offset = max(seq, default=0) + 1

    def copy(self, k: int) -> list[dict]:
        """Events of copy k (metadata only in copy 0)."""
        if k == 0:
            return self.events
        shift_us = k * self.period_us
        out = []
        for e in self.events:
            ph = e.get("ph")
            if ph == "M":
                continue
            e = dict(e)
            if isinstance(e.get("ts"), str):
                e["ts"] = _shift_number_text(e["ts"], shift_us)
            elif isinstance(e.get("ts"), (int, float)):
                e["ts"] = round(e["ts"] + shift_us, 3)
            if "name" in e:
                e["name"] = _renumber_step(e["name"], k, self.n_steps)
            if ph in ("s", "f", "t") and "id" in e:
                e.update(self._flow_id(e, k, shift_us))
            args = e.get("args")
            if args:
                args = dict(args)
                if isinstance(args.get("connection_id"), int):
                    args["connection_id"] += k * self.conn_offset
                if isinstance(args.get("correlation_id"), int):
                    args["correlation_id"] += k * self.small_id_offset
                seq = args.get("Sequence number")
                if isinstance(seq, int) and seq >= 0:
                    args["Sequence number"] = seq + k * self.seq_offset
                e["args"] = args
            out.append(e)
        return out

    def _flow_id(self, e: dict, k: int, shift_us: int) -> dict:
        fid, name = e["id"], str(e.get("name", ""))
        if name == "torch_to_npu":  # id is the flow end's time in ns
            return {"id": type(fid)(int(fid) + shift_us * 1000)}
        if name.startswith("HostToDevice"):  # (connection_id << 32) | low bits
            new = int(fid) + ((k * self.conn_offset) << 32)
            return {"id": str(new) if isinstance(fid, str) else new, "name": f"HostToDevice{new}"}
        if isinstance(fid, int):
            return {"id": fid + k * self.small_id_offset}
        return {}


def _tile_kernel_details(src: Path, dst: Path, copies: int, gap_us: int) -> int:
    raw = src.read_bytes().decode("utf-8-sig")
    newline = "\r\n" if "\r\n" in raw[:4096] else "\n"
    rows = list(csv.reader(io.StringIO(raw, newline="")))
    header, body = rows[0], rows[1:]
    col = {name.strip(): i for i, name in enumerate(header)}
    start_i = next((col[c] for c in ("Start Time(us)", "Start Time") if c in col), None)
    dur_i = next((col[c] for c in ("Duration(us)", "Duration") if c in col), None)
    step_i = col.get("Step Id")
    period = 0
    if start_i is not None:
        starts = [float(r[start_i]) for r in body if NUM_RE.match(r[start_i])]
        ends = [
            float(r[start_i])
            + float(r[dur_i] if dur_i is not None and NUM_RE.match(r[dur_i]) else 0)
            for r in body
            if NUM_RE.match(r[start_i])
        ]
        period = int(math.ceil(max(ends) - min(starts))) + gap_us if starts else 0
    steps = [int(r[step_i]) for r in body if step_i is not None and r[step_i].strip().isdigit()]
    n_steps = _step_span(steps)
    with open(dst, "w", encoding="utf-8", newline="") as fh:
        writer = csv.writer(fh, lineterminator=newline)
        writer.writerow(header)
        for k in range(copies):
            for r in body:
                if k:
                    r = list(r)
                    if start_i is not None:
                        r[start_i] = _shift_number_text(r[start_i], k * period)
                    if step_i is not None and r[step_i].strip().isdigit():
                        r[step_i] = str(int(r[step_i]) + k * n_steps)
                writer.writerow(r)
    return len(body) * copies


def build_ascend(
    copies: int,
    out: Path = DEFAULT_OUT,
    gap_us: int = 100,
    fixture: Path = ASCEND_FIXTURE,
    force: bool = False,
) -> dict:
    """Builds ``<out>/ascend_x<copies>/rank0_ascend_pt``; returns its manifest."""
    src = fixture / "ASCEND_PROFILER_OUTPUT"
    root = out / f"ascend_x{copies}" / fixture.name
    manifest_path = out / "manifests" / f"ascend_x{copies}.json"
    expected = {
        "format_version": FORMAT_VERSION,
        "kind": "ascend",
        "copies": copies,
        "gap_us": gap_us,
        "source": str(fixture),
    }
    if not force and _manifest_ok(manifest_path, expected):
        return json.loads(manifest_path.read_text(encoding="utf-8"))
    t0 = time.perf_counter()
    if root.parent.exists():
        shutil.rmtree(root.parent)
    dst = root / "ASCEND_PROFILER_OUTPUT"
    dst.mkdir(parents=True)
    events = json.loads((src / "trace_view.json").read_text(encoding="utf-8"))
    tiler = AscendTiler(events, gap_us)
    n_events = 0
    trace = dst / "trace_view.json"
    with open(trace, "w", encoding="utf-8") as fh:
        fh.write("[")
        first = True
        for k in range(copies):
            chunk = tiler.copy(k)
            if not chunk:
                continue
            text = json.dumps(chunk, ensure_ascii=False)[1:-1]
            fh.write(text if first else ", " + text)
            first = False
            n_events += len(chunk)
        fh.write("]")
    files = [str(trace)]
    csv_rows = 0
    if (src / "kernel_details.csv").exists():
        csv_rows = _tile_kernel_details(
            src / "kernel_details.csv", dst / "kernel_details.csv", copies, gap_us
        )
        files.append(str(dst / "kernel_details.csv"))
    for extra in sorted(src.iterdir()):  # anything else in the fixture is copied once
        if extra.name not in ("trace_view.json", "kernel_details.csv") and extra.is_file():
            shutil.copy2(extra, dst / extra.name)
    manifest = dict(
        expected,
        path=str(root),
        files=files,
        events=n_events,
        kernel_rows=csv_rows,
        period_us=tiler.period_us,
        bytes=sum(Path(f).stat().st_size for f in files),
        build_s=round(time.perf_counter() - t0, 2),
    )
    _write_manifest(manifest_path, manifest)
    return manifest


# ---------------------------------------------------------------- Kineto


class KinetoTiler:
    """Time-tiles one Kineto trace (dict with ``traceEvents``)."""

    ID_ARGS = ("External id", "Record function id", "Ev Idx")

    def __init__(self, trace: dict, gap_us: int):
        self.trace = trace
        self.events = trace["traceEvents"]
        timed = [e for e in self.events if self._is_tiled(e) and "ts" in e]
        starts = [float(e["ts"]) for e in timed]
        ends = [float(e["ts"]) + float(e.get("dur") or 0) for e in timed]
        self.t0, self.t1 = min(starts), max(ends)
        self.period_us = int(math.ceil(self.t1 - self.t0)) + gap_us
        steps = [
            int(m.group(1)) for e in self.events if (m := STEP_RE.match(str(e.get("name", ""))))
        ]
        self.n_steps = _step_span(steps)
        self.offsets = {}
        for key in self.ID_ARGS + ("Sequence number",):
            vals = [
                e["args"][key] for e in self.events if isinstance(e.get("args", {}).get(key), int)
            ]
            self.offsets[key] = max(vals, default=0) + 1
        corr = [
            e["args"]["correlation"]
            for e in self.events
            if isinstance(e.get("args", {}).get("correlation"), int)
        ]
        corr += [e["id"] for e in self.events if e.get("cat") == "ac2g" and "id" in e]
        self.offsets["correlation"] = max(corr, default=0) + 1
        flows = [
            e["id"]
            for e in self.events
            if e.get("ph") in ("s", "f", "t")
            and e.get("cat") != "ac2g"
            and isinstance(e.get("id"), int)
        ]
        self.offsets["flow"] = max(flows, default=0) + 1

    @staticmethod
    def _is_tiled(e: dict) -> bool:
        """Events repeated in every copy: not metadata, not the trace span, not instants."""
        return e.get("ph") not in ("M", "i", "I") and e.get("cat") != "Trace"

    def copy(self, k: int, copies: int) -> list[dict]:
        shift = k * self.period_us
        out = []
        for e in self.events:
            if not self._is_tiled(e):
                out.extend(self._once(e, k, copies))
                continue
            if k == 0:
                out.append(e)
                continue
            e = dict(e)
            if isinstance(e.get("ts"), (int, float)):
                e["ts"] = round(e["ts"] + shift, 3)
            if "name" in e:
                e["name"] = _renumber_step(e["name"], k, self.n_steps)
            if e.get("ph") in ("s", "f", "t") and isinstance(e.get("id"), int):
                key = "correlation" if e.get("cat") == "ac2g" else "flow"
                e["id"] += k * self.offsets[key]
            args = e.get("args")
            if args:
                args = dict(args)
                for key in self.ID_ARGS + ("correlation",):
                    if isinstance(args.get(key), int) and args[key] >= 0:
                        args[key] += k * self.offsets[key]
                seq = args.get("Sequence number")
                if isinstance(seq, int) and seq >= 0:
                    args["Sequence number"] = seq + k * self.offsets["Sequence number"]
                e["args"] = args
            out.append(e)
        return out

    def _once(self, e: dict, k: int, copies: int) -> list[dict]:
        last = copies - 1
        if e.get("ph") in ("i", "I") and "end" in str(e.get("name", "")).lower():
            if k != last:
                return []
            e = dict(e)
            e["ts"] = round(e["ts"] + last * self.period_us, 3)
            return [e]
        if k != 0:
            return []
        if e.get("cat") == "Trace" and e.get("ph") == "X" and "dur" in e:
            e = dict(e)
            end = max(e["ts"] + e["dur"], self.t1 + last * self.period_us)
            e["dur"] = round(end - e["ts"], 3)
        return [e]


def build_kineto(
    copies: int | None = None,
    out: Path = DEFAULT_OUT,
    target_mb: float = 400,
    gap_us: int = 100,
    fixture: Path = KINETO_FIXTURE,
    force: bool = False,
) -> dict:
    """Builds ``<out>/kineto_x<copies>/bench_rank0.pt.trace.json``; returns its manifest."""
    opener = gzip.open if fixture.suffix == ".gz" else open
    with opener(fixture, "rt", encoding="utf-8") as fh:
        trace = json.load(fh)
    tiler = KinetoTiler(trace, gap_us)
    if copies is None:  # size one copy as it will be written
        one = sum(len(json.dumps(e)) + 2 for e in tiler.copy(1, 2))
        copies = max(1, round(target_mb * 1e6 / one))
    folder = out / f"kineto_x{copies}"
    manifest_path = out / "manifests" / f"kineto_x{copies}.json"
    expected = {
        "format_version": FORMAT_VERSION,
        "kind": "kineto",
        "copies": copies,
        "gap_us": gap_us,
        "source": str(fixture),
    }
    if not force and _manifest_ok(manifest_path, expected):
        return json.loads(manifest_path.read_text(encoding="utf-8"))
    t0 = time.perf_counter()
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    path = folder / "bench_rank0.pt.trace.json"
    keys = list(trace)
    split = keys.index("traceEvents")
    n_events = 0
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("{\n")
        for key in keys[:split]:
            fh.write(f"  {json.dumps(key)}: {json.dumps(trace[key])},\n")
        fh.write('  "traceEvents": [\n')
        first = True
        for k in range(copies):
            for e in tiler.copy(k, copies):
                fh.write(("  " if first else ",\n  ") + json.dumps(e))
                first = False
                n_events += 1
        fh.write("\n  ]")
        for key in keys[split + 1 :]:
            fh.write(f",\n  {json.dumps(key)}: {json.dumps(trace[key])}")
        fh.write("\n}\n")
    manifest = dict(
        expected,
        path=str(folder),
        files=[str(path)],
        events=n_events,
        period_us=tiler.period_us,
        bytes=path.stat().st_size,
        build_s=round(time.perf_counter() - t0, 2),
    )
    _write_manifest(manifest_path, manifest)
    return manifest


# ---------------------------------------------------------------- command line


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_OUT,
        help=f"where inputs go (default {DEFAULT_OUT}; never inside the repository)",
    )
    ap.add_argument(
        "--ascend-copies",
        type=int,
        default=400,
        help="copies of rank0_ascend_pt (default 400, ~250 MB; 0 skips it)",
    )
    ap.add_argument(
        "--kineto-copies",
        type=int,
        default=None,
        help="copies of the Kineto trace (default: enough for --kineto-mb; 0 skips)",
    )
    ap.add_argument("--kineto-mb", type=float, default=400, help="target size (default 400)")
    ap.add_argument("--gap-us", type=int, default=100, help="idle gap between copies (µs)")
    ap.add_argument("--force", action="store_true", help="rebuild even if a matching one exists")
    args = ap.parse_args(argv)
    if _is_repo_path(args.out):
        ap.error(f"--out {args.out} is inside the repository; use a folder such as /tmp/...")
    built = []
    if args.ascend_copies:
        built.append(build_ascend(args.ascend_copies, args.out, args.gap_us, force=args.force))
    if args.kineto_copies != 0:
        built.append(
            build_kineto(
                args.kineto_copies, args.out, args.kineto_mb, args.gap_us, force=args.force
            )
        )
    for m in built:
        print(
            f"{m['kind']:7} x{m['copies']:<4} {m['bytes'] / 1e6:9.1f} MB "
            f"{m['events']:>10,} events  built in {m.get('build_s', 0):6.1f} s  {m['path']}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
