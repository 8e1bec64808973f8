"""Times advisor against its peers on the same large inputs; writes a JSON of the results.

For every size of every input (built by benchmarks/make_inputs.py, cached under --work):

* ascend (torch_npu ``rank0_ascend_pt`` tiled N times):
  ``advisor run INPUT -o OUT --format json,html --quiet`` and
  ``msprof-analyze advisor all -d INPUT -o OUT -l en`` (from the --msprof-venv virtualenv);
* kineto (a GPU Kineto trace with NCCL tiled N times):
  ``advisor run INPUT -o OUT --format json,html --quiet`` and the Holistic Trace Analysis driver
  benchmarks/hta_driver.py (load + temporal breakdown + comm/comp overlap, --hta-venv).

Each command runs as a child process. Measured: wall time; user+sys CPU time of the child and
its descendants (from ``os.wait4``); peak memory, in MB (10^6 bytes), three ways:
``peak_pss_tree_mb``, the largest sum of PSS (proportional set size: a page shared by forked
workers is split between them, not counted twice) over the whole child process tree, sampled
from /proc/PID/smaps_rollup every --poll seconds (catches worker processes running side by
side); ``peak_rss_tree_mb``, the same with RSS (shared pages counted in every process); and
``max_rss_single_mb``, the kernel's exact high-water mark of the largest single process in the
tree (``ru_maxrss``), which sampling cannot miss. ``peak_mb`` = max(PSS tree, largest single
process), the figure used in the ratios. Every
tool first runs once on the smallest input, unrecorded, so that no measurement pays for
first-time byte-code compilation.

A run counts as done only when it exits 0 and leaves its output (advisor: prof_rule*.json;
msprof-analyze: its mstt_advisor_*.html; HTA: the driver's JSON line). Runs that fail (for
example because an advisor reader for the format has not landed yet) are recorded with their
error and left out of the ratios.

Results: a table on the terminal and JSON at --results (default /tmp/bench-results.json) with
per-run figures, ratios per input and size (peer time / advisor time, advisor peak / peer peak)
and scaling per tool (least-squares fit time = a + b*MB, log-log exponent between the two
largest sizes, peak memory growth), checked against the project's targets.

    .venv/bin/python benchmarks/run.py                      # quick: a few minutes on 2 cores
    .venv/bin/python benchmarks/run.py --full               # ascend 1,50,200,400; kineto to ~400 MB
    .venv/bin/python benchmarks/run.py --ascend 1,50 --kineto 0 --tools advisor,msprof-analyze
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
import make_inputs  # noqa: E402

PAGE = os.sysconf("SC_PAGE_SIZE")
MB = 1e6
TARGET_SPEEDUP = 15.0  # advisor at least 15x faster than each peer
TARGET_MEM_RATIO = 0.5  # advisor peak memory at most half the peer's
QUICK = {"ascend": [1, 10, 50], "kineto": [1, 3, 10]}
FULL_ASCEND = [1, 50, 200, 400]
FULL_KINETO_MB = 400
PEERS = {"ascend": "msprof-analyze", "kineto": "hta"}


# ---------------------------------------------------------------- measuring one command


def _children(pid: int) -> list[int]:
    """Child pids, from /proc/PID/task/*/children (cheap: no scan of all of /proc)."""
    kids: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return kids
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as fh:
                kids.extend(int(x) for x in fh.read().split())
        except (OSError, ValueError):
            pass
    return kids


def _pss(pid: int) -> int | None:
    """Proportional set size in bytes (shared pages split between their users)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as fh:
            for line in fh:
                if line.startswith(b"Pss:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _tree_memory(root: int) -> tuple[int, int]:
    """(sum of RSS, sum of PSS) over root and all its descendants, in bytes."""
    rss = pss = 0
    stack = [root]
    while stack:
        pid = stack.pop()
        try:
            with open(f"/proc/{pid}/statm", "rb") as fh:
                one = int(fh.read().split()[1]) * PAGE
        except (OSError, IndexError, ValueError):
            one = 0
        rss += one
        p = _pss(pid)
        pss += one if p is None else p
        stack.extend(_children(pid))
    return rss, pss


class _Sampler(threading.Thread):
    """Samples the memory of a process tree every `poll` seconds, and kills the tree past
    `timeout`, beside the thread that waits for the process: the wait returns the moment the
    process ends, so the wall time is exact (a loop that sampled, slept and then asked
    whether the process had ended added up to a period, about 0.05 s on average, to every
    run: 5% of a 1-s run, nothing of a peer's 15 s)."""

    def __init__(self, pid: int, poll: float, timeout: float, started: float) -> None:
        super().__init__(daemon=True)
        self.pid, self.poll, self.timeout, self.started = pid, poll, timeout, started
        self.done = threading.Event()
        self.peak_rss = self.peak_pss = 0
        self.timed_out = False

    def run(self) -> None:
        while not self.done.is_set():
            rss, pss = _tree_memory(self.pid)
            self.peak_rss, self.peak_pss = max(self.peak_rss, rss), max(self.peak_pss, pss)
            if time.perf_counter() - self.started > self.timeout:
                self.timed_out = True
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.pid, 9)
                return
            self.done.wait(self.poll)


def measure(
    cmd: list[str], *, cwd: Path, timeout: float, poll: float, env: dict | None = None
) -> dict:
    """Runs cmd; returns wall/cpu time, peak memory, exit status and output tails.

    PYTHONDONTWRITEBYTECODE is left out of the child's environment: with it, every run of a
    tool whose byte code is not written yet (an editable install, an exported tree) would
    compile its sources again, which an installed package never does."""
    load_before = os.getloadavg()[0]
    env = dict(os.environ if env is None else env)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    with tempfile.TemporaryFile() as out_f, tempfile.TemporaryFile() as err_f:
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            cmd, cwd=cwd, stdout=out_f, stderr=err_f, env=env, start_new_session=True
        )
        sampler = _Sampler(proc.pid, poll, timeout, t0)
        sampler.start()
        _, status, rusage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        sampler.done.set()
        sampler.join()
        proc.returncode = os.waitstatus_to_exitcode(status)
        stdout, stderr = _tail(out_f, 200_000), _tail(err_f, 1500)
    single = rusage.ru_maxrss * 1024  # KiB on Linux
    return {
        "cmd": cmd,
        "rc": proc.returncode,
        "timed_out": sampler.timed_out,
        "wall_s": round(wall, 3),
        "cpu_s": round(rusage.ru_utime + rusage.ru_stime, 3),
        "peak_rss_tree_mb": round(sampler.peak_rss / MB, 1),
        "peak_pss_tree_mb": round(sampler.peak_pss / MB, 1),
        "max_rss_single_mb": round(single / MB, 1),
        "peak_mb": round(max(sampler.peak_pss, single) / MB, 1),
        "loadavg_1m_before": round(load_before, 2),
        "loadavg_1m_after": round(os.getloadavg()[0], 2),
        "stdout_tail": stdout[-1500:],
        "stderr_tail": stderr,
        "_stdout": stdout,
    }


def _tail(fh, n: int) -> str:
    fh.seek(0, os.SEEK_END)
    fh.seek(max(0, fh.tell() - 4 * n))
    return fh.read().decode("utf-8", "replace")[-n:]


# ---------------------------------------------------------------- the tools


class Tool:
    name = ""

    def __init__(self, args):
        self.args = args

    def available(self) -> str | None:
        """None when runnable, else why not."""
        return None

    def command(self, input_path: Path, out: Path) -> list[str]:
        raise NotImplementedError

    def check(self, run: dict, out: Path) -> str | None:
        """None when the run produced its output, else what is missing."""
        return None

    def version(self) -> str | None:
        return None


def _venv_version(python: Path, dist: str) -> str | None:
    try:
        return (
            subprocess.run(
                [str(python), "-c", f"import importlib.metadata as m; print(m.version({dist!r}))"],
                capture_output=True,
                text=True,
                timeout=60,
            ).stdout.strip()
            or None
        )
    except (OSError, subprocess.SubprocessError):
        return None


class Advisor(Tool):
    name = "advisor"

    def exe(self) -> str | None:
        if self.args.advisor:
            return self.args.advisor
        venv = REPO / ".venv" / "bin" / "advisor"
        return str(venv) if venv.exists() else shutil.which("advisor")

    def available(self):
        return None if self.exe() else "advisor not found (pip install -e . or --advisor PATH)"

    def command(self, input_path, out):
        return [
            self.exe(),
            "run",
            str(input_path),
            "-o",
            str(out),
            "--format",
            "json,html",
            "--quiet",
        ]

    def check(self, run, out):
        reports = list(out.glob("prof_rule*.json")) if out.exists() else []
        if not reports:
            return "no prof_rule*.json written"
        findings = 0
        for path in reports:
            with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
                findings += json.loads(path.read_text())["summary"]["findings"]
        run["findings"] = findings
        return None

    def version(self):
        exe = self.exe()
        python = Path(exe).with_name("python") if exe else None
        return _venv_version(python, "dl-perf-advisor") if python and python.exists() else None


class MsprofAnalyze(Tool):
    name = "msprof-analyze"

    def exe(self) -> Path:
        return Path(self.args.msprof_venv) / "bin" / "msprof-analyze"

    def available(self):
        if self.exe().exists():
            return None
        return (
            f"{self.exe()} missing: python3 -m venv {self.args.msprof_venv} && "
            f"{self.args.msprof_venv}/bin/pip install msprof-analyze==26.2.0"
        )

    def command(self, input_path, out):
        return [
            str(self.exe()),
            "advisor",
            "all",
            "-d",
            str(input_path),
            "-o",
            str(out),
            "-l",
            "en",
        ]

    def check(self, run, out):
        if not list(out.glob("mstt_advisor_*.html")):
            return "no mstt_advisor_*.html written"
        cells = [
            line.split("|")
            for line in run["_stdout"].splitlines()
            if line.startswith("| ") and line[2:3].isdigit()
        ]
        run["categories"] = [c[2].strip() for c in cells if len(c) > 2]
        run["findings"] = len(cells)
        return None

    def version(self):
        return _venv_version(Path(self.args.msprof_venv) / "bin" / "python", "msprof-analyze")


class HTA(Tool):
    name = "hta"

    def python(self) -> Path:
        return Path(self.args.hta_venv) / "bin" / "python"

    def available(self):
        if self.python().exists() and _venv_version(self.python(), "HolisticTraceAnalysis"):
            return None
        return (
            f"HTA missing: python3 -m venv {self.args.hta_venv} && "
            f"{self.args.hta_venv}/bin/pip install HolisticTraceAnalysis"
        )

    def command(self, input_path, out):
        return [str(self.python()), str(HERE / "hta_driver.py"), str(input_path)]

    def check(self, run, out):
        for line in reversed(run["_stdout"].splitlines()):
            if line.startswith("{"):
                run["hta"] = json.loads(line)
                return None
        return "the driver printed no result"

    def version(self):
        return _venv_version(self.python(), "HolisticTraceAnalysis")


TOOLS = {"advisor": Advisor, "msprof-analyze": MsprofAnalyze, "hta": HTA}


# ---------------------------------------------------------------- analysis of the figures


def _fit(xs: list[float], ys: list[float]) -> dict | None:
    if len(xs) < 2 or len(set(xs)) < 2:
        return None
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    a = my - b * mx
    ss_tot = sum((y - my) ** 2 for y in ys)
    ss_res = sum((y - a - b * x) ** 2 for x, y in zip(xs, ys))
    return {
        "intercept": round(a, 4),
        "slope_per_mb": round(b, 6),
        "r2": round(1 - ss_res / ss_tot, 4) if ss_tot else 1.0,
    }


def scaling(points: list[dict]) -> dict:
    """Time and memory against input size for one tool on one input kind."""
    pts = sorted((p for p in points if p["ok"]), key=lambda p: p["input_mb"])
    if len(pts) < 2:
        return {"points": len(pts)}
    xs = [p["input_mb"] for p in pts]
    res = {
        "points": len(pts),
        "sizes_mb": xs,
        "time_fit": _fit(xs, [p["wall_s"] for p in pts]),
        "peak_fit": _fit(xs, [p["peak_mb"] for p in pts]),
        "s_per_mb": [round(p["wall_s"] / p["input_mb"], 4) for p in pts],
        "peak_over_input": [round(p["peak_mb"] / p["input_mb"], 3) for p in pts],
    }
    a, b = pts[-2], pts[-1]
    if a["input_mb"] > 0 and b["input_mb"] > a["input_mb"] and a["wall_s"] > 0:
        res["time_exponent_top2"] = round(
            math.log(b["wall_s"] / a["wall_s"]) / math.log(b["input_mb"] / a["input_mb"]), 3
        )
        res["peak_exponent_top2"] = round(
            math.log(b["peak_mb"] / a["peak_mb"]) / math.log(b["input_mb"] / a["input_mb"]), 3
        )
    return res


def compare(results: list[dict]) -> list[dict]:
    """Peer vs advisor on each input and size."""
    rows = []
    by_key = {(r["kind"], r["copies"], r["tool"]): r for r in results}
    for (kind, copies, tool), adv in sorted(by_key.items()):
        if tool != "advisor":
            continue
        peer = by_key.get((kind, copies, PEERS[kind]))
        row = {
            "kind": kind,
            "copies": copies,
            "input_mb": adv["input_mb"],
            "peer": PEERS[kind],
            "advisor_ok": adv["ok"],
            "peer_ok": bool(peer and peer["ok"]),
        }
        if adv["ok"] and peer and peer["ok"]:
            row["speedup"] = round(peer["wall_s"] / adv["wall_s"], 2)
            row["speedup_cpu"] = round(peer["cpu_s"] / adv["cpu_s"], 2) if adv["cpu_s"] else None
            row["mem_ratio"] = round(adv["peak_mb"] / peer["peak_mb"], 3)
            row["meets_speed"] = row["speedup"] >= TARGET_SPEEDUP
            row["meets_memory"] = row["mem_ratio"] <= TARGET_MEM_RATIO
        rows.append(row)
    return rows


# ---------------------------------------------------------------- main


def _sizes(text: str) -> list[int]:
    return sorted({int(x) for x in text.split(",") if x.strip() and int(x) > 0})


def machine() -> dict:
    mem = 0
    try:
        with open("/proc/meminfo") as fh:
            mem = int(next(line for line in fh if line.startswith("MemTotal")).split()[1]) * 1024
    except (OSError, StopIteration):
        pass
    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo") as fh:
            cpu = next(
                (line.split(":", 1)[1].strip() for line in fh if line.startswith("model name")), cpu
            )
    except OSError:
        pass
    return {
        "cpus": os.cpu_count(),
        "mem_gib": round(mem / 2**30, 1),
        "cpu_model": cpu,
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--ascend",
        default=None,
        help="copies of rank0_ascend_pt, comma-separated (quick default 1,10,50; 0 skips)",
    )
    ap.add_argument(
        "--kineto",
        default=None,
        help="copies of the Kineto trace, comma-separated (quick default 1,3,10; 0 skips)",
    )
    ap.add_argument(
        "--full",
        action="store_true",
        help="ascend 1,50,200,400 and kineto 1, 10, 25 and the ~400 MB count",
    )
    ap.add_argument("--tools", default="advisor,msprof-analyze,hta")
    ap.add_argument(
        "--work",
        type=Path,
        default=make_inputs.DEFAULT_OUT,
        help="where inputs and outputs go (default %(default)s)",
    )
    ap.add_argument("--results", type=Path, default=Path("/tmp/bench-results.json"))
    ap.add_argument("--repeat", type=int, default=1, help="runs per measurement (median)")
    ap.add_argument("--timeout", type=float, default=3600, help="seconds per run")
    ap.add_argument("--poll", type=float, default=0.1, help="memory sampling period (s)")
    ap.add_argument("--no-warmup", action="store_true")
    ap.add_argument(
        "--keep-outputs",
        action="store_true",
        help="keep each tool's output folder under WORK/outputs",
    )
    ap.add_argument("--advisor", help="advisor executable (default .venv/bin/advisor)")
    ap.add_argument("--msprof-venv", default="/tmp/peer-msprof")
    ap.add_argument("--hta-venv", default="/tmp/peer-hta")
    args = ap.parse_args(argv)
    if make_inputs._is_repo_path(args.work):
        ap.error("--work must be outside the repository")

    sizes = dict(QUICK)
    if args.full:
        one = make_inputs.build_kineto(1, args.work)
        full_n = max(1, round(FULL_KINETO_MB * MB / one["bytes"]))
        sizes = {"ascend": FULL_ASCEND, "kineto": sorted({1, 10, 25, full_n})}
    if args.ascend is not None:
        sizes["ascend"] = _sizes(args.ascend)
    if args.kineto is not None:
        sizes["kineto"] = _sizes(args.kineto)

    tools = {}
    skipped = {}
    names = [t.strip() for t in args.tools.split(",") if t.strip()]
    if unknown := [n for n in names if n not in TOOLS]:
        ap.error(f"unknown tool(s) {unknown}; choose from {sorted(TOOLS)}")
    for name in names:
        tool = TOOLS[name](args)
        why = tool.available()
        if why:
            skipped[name] = why
            print(f"skip {name}: {why}", file=sys.stderr)
        else:
            tools[name] = tool
    plan = [
        (kind, n, tool)
        for kind in ("ascend", "kineto")
        for n in sizes[kind]
        for tool in ("advisor", PEERS[kind])
        if tool in tools
    ]

    inputs = {}
    for kind, n, _ in plan:
        if (kind, n) not in inputs:
            print(f"building {kind} x{n} ...", file=sys.stderr, flush=True)
            inputs[kind, n] = (
                make_inputs.build_ascend(n, args.work)
                if kind == "ascend"
                else make_inputs.build_kineto(n, args.work)
            )

    outs = args.work / "outputs"
    cwd = args.work / "cwd"
    cwd.mkdir(parents=True, exist_ok=True)
    results = []

    def one_run(kind, n, name, tag):
        tool = tools[name]
        m = inputs[kind, n]
        out = outs / f"{name}_{kind}_x{n}_{tag}"
        shutil.rmtree(out, ignore_errors=True)
        if name == "hta":
            out.mkdir(parents=True)
        run = measure(
            tool.command(Path(m["path"]), out), cwd=cwd, timeout=args.timeout, poll=args.poll
        )
        problem = (
            "timed out"
            if run["timed_out"]
            else f"exit status {run['rc']}"
            if run["rc"]
            else tool.check(run, out)
        )
        run["ok"] = problem is None
        run["problem"] = problem
        run.pop("_stdout")
        if not args.keep_outputs:
            shutil.rmtree(out, ignore_errors=True)
        return run

    if not args.no_warmup:
        done = set()
        for kind, n, name in plan:
            if (kind, name) not in done:
                done.add((kind, name))
                print(f"warm-up {name} on {kind} x{n}", file=sys.stderr, flush=True)
                one_run(kind, n, name, "warmup")

    started = datetime.now(timezone.utc).isoformat(timespec="seconds")
    for kind, n, name in plan:
        m = inputs[kind, n]
        runs = [one_run(kind, n, name, str(i)) for i in range(args.repeat)]
        ok = [r for r in runs if r["ok"]]
        pick = sorted(ok, key=lambda r: r["wall_s"])[len(ok) // 2] if ok else runs[-1]
        rec = {
            "kind": kind,
            "copies": n,
            "tool": name,
            "input_mb": round(m["bytes"] / MB, 1),
            "events": m["events"],
            "ok": bool(ok),
            "problem": pick["problem"],
            "wall_s": pick["wall_s"],
            "cpu_s": pick["cpu_s"],
            "peak_mb": max((r["peak_mb"] for r in ok), default=pick["peak_mb"]),
            "peak_rss_tree_mb": max(r["peak_rss_tree_mb"] for r in runs),
            "peak_pss_tree_mb": max(r["peak_pss_tree_mb"] for r in runs),
            "max_rss_single_mb": max(r["max_rss_single_mb"] for r in runs),
            "findings": pick.get("findings"),
            "categories": pick.get("categories"),
            "loadavg_1m_before": pick["loadavg_1m_before"],
            "runs": runs,
        }
        if "hta" in pick:
            rec["hta"] = pick["hta"]
        results.append(rec)
        state = "ok" if rec["ok"] else f"FAILED: {rec['problem']}"
        print(
            f"{kind:7} x{n:<4} {rec['input_mb']:8.1f} MB  {name:15} {rec['wall_s']:9.2f} s "
            f"{rec['peak_mb']:9.1f} MB  {state}",
            file=sys.stderr,
            flush=True,
        )

    scal = {
        f"{name}/{kind}": scaling([r for r in results if r["tool"] == name and r["kind"] == kind])
        for name in tools
        for kind in ("ascend", "kineto")
        if any(r["tool"] == name and r["kind"] == kind for r in results)
    }
    comp = compare(results)
    report = {
        "started": started,
        "machine": machine(),
        "versions": {name: tool.version() for name, tool in tools.items()},
        "skipped_tools": skipped,
        "sizes": sizes,
        "targets": {
            "speedup_min": TARGET_SPEEDUP,
            "advisor_over_peer_peak_max": TARGET_MEM_RATIO,
            "time": "linear in input size",
            "memory": "does not grow with the full event count",
        },
        "memory_method": "peak_mb = max(peak PSS summed over the process tree, sampled every "
        f"{args.poll}s from /proc/PID/smaps_rollup; exact ru_maxrss of the "
        "largest single process from wait4). peak_rss_tree_mb: RSS sum "
        "(counts pages shared by forked workers twice).",
        "results": results,
        "comparison": comp,
        "scaling": scal,
    }
    args.results.parent.mkdir(parents=True, exist_ok=True)
    args.results.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print_table(results, comp, scal)
    print(f"\nresults: {args.results}")
    return 0


def print_table(results, comp, scal) -> None:
    print(
        f"\n{'input':8} {'copies':>6} {'MB':>8} {'events':>11}  {'tool':15} {'wall s':>9} "
        f"{'cpu s':>9} {'peak MB':>9} {'tree PSS':>9} {'tree RSS':>9} {'1-proc':>9}  status"
    )
    for r in results:
        status = "ok" if r["ok"] else f"failed: {r['problem']}"
        print(
            f"{r['kind']:8} {r['copies']:>6} {r['input_mb']:>8.1f} {r['events']:>11,}  "
            f"{r['tool']:15} {r['wall_s']:>9.2f} {r['cpu_s']:>9.2f} {r['peak_mb']:>9.1f} "
            f"{r['peak_pss_tree_mb']:>9.1f} {r['peak_rss_tree_mb']:>9.1f} "
            f"{r['max_rss_single_mb']:>9.1f}  {status}"
        )
    if comp:
        print(
            f"\n{'input':8} {'copies':>6} {'peer':15} {'speedup':>8} {'cpu sp.':>8} "
            f"{'mem ratio':>10}  targets (>= {TARGET_SPEEDUP:g}x, <= {TARGET_MEM_RATIO:g})"
        )
        for c in comp:
            if "speedup" in c:
                verdict = (
                    f"speed {'met' if c['meets_speed'] else 'MISSED'}, "
                    f"memory {'met' if c['meets_memory'] else 'MISSED'}"
                )
                cpu = f"{c['speedup_cpu']:>7.2f}x" if c.get("speedup_cpu") else f"{'-':>8}"
                print(
                    f"{c['kind']:8} {c['copies']:>6} {c['peer']:15} {c['speedup']:>7.2f}x "
                    f"{cpu} {c['mem_ratio']:>10.3f}  {verdict}"
                )
            else:
                why = "advisor failed" if not c["advisor_ok"] else "peer failed or not run"
                print(
                    f"{c['kind']:8} {c['copies']:>6} {c['peer']:15} {'-':>8} {'-':>8} "
                    f"{'-':>10}  {why}"
                )
    if scal:
        print(
            f"\n{'tool/input':26} {'s per MB (fit)':>15} {'R2':>7} {'time exp':>9} "
            f"{'peak MB/MB (fit)':>17} {'peak exp':>9}"
        )
        for key, s in scal.items():
            tf, pf = s.get("time_fit"), s.get("peak_fit")
            if not tf:
                print(f"{key:26} (fewer than 2 successful sizes)")
                continue
            print(
                f"{key:26} {tf['slope_per_mb']:>15.4f} {tf['r2']:>7.3f} "
                f"{s.get('time_exponent_top2', float('nan')):>9.2f} "
                f"{pf['slope_per_mb']:>17.3f} {s.get('peak_exponent_top2', float('nan')):>9.2f}"
            )


if __name__ == "__main__":
    sys.exit(main())
