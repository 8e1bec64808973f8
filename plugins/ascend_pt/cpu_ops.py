"""MindSpore's host CPU operators, `FRAMEWORK/cpu_op_execute_timestamp_{rank}.txt`."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from advisor.formats.decimal_clock import Clock
from advisor.formats.warn import WarnFn
from advisor.lazy import lazy_module

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
else:
    np = lazy_module("numpy")
    pd = lazy_module("pandas")

CPU_KERNEL = "cpu_kernel"
CPU_OP_FILE = re.compile(r"^cpu_op_execute_timestamp_(\d+)\.txt$")
_NS_PER_US, _US_PER_MS = 1000, 1000.0


def read_cpu_op_timestamps(path: Path, rel: str, clock: Clock, warn: WarnFn) -> pd.DataFrame | None:
    """host_ops (kind cpu_kernel) from MindSpore's `FRAMEWORK/cpu_op_execute_timestamp_{rank}.txt`.

    Each line is `full op name;op type;start,duration,thread [start,duration,thread ...]`, one
    `start,duration,thread` per execution, start in ns since the epoch and duration in ms (as
    MindSpore's own timeline conversion reads it). Lines or executions that do not parse are
    counted and reported once, with the first one's line number.
    """
    names: list[str] = []
    whole: list[float] = []
    frac: list[float] = []
    durations: list[float] = []
    threads: list[float] = []
    bad, first_bad = 0, None
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            for number, line in enumerate(fh, 1):
                fields = line.strip().split(";")
                if fields == [""]:
                    continue
                runs = fields[-1].split() if len(fields) >= 3 else []
                if not runs:
                    bad, first_bad = bad + 1, first_bad or number
                    continue
                for run in runs:
                    parts = run.split(",")
                    try:
                        start_ns, duration_ms = int(parts[0]), float(parts[1])
                        thread = float(parts[2]) if len(parts) > 2 else np.nan
                    except (ValueError, IndexError):
                        bad, first_bad = bad + 1, first_bad or number
                        continue
                    if len(parts) > 3 or not np.isfinite(duration_ms) or duration_ms < 0:
                        bad, first_bad = bad + 1, first_bad or number
                        continue
                    names.append(fields[0])
                    whole.append(float(start_ns // _NS_PER_US))
                    frac.append((start_ns % _NS_PER_US) / _NS_PER_US)
                    durations.append(duration_ms * _US_PER_MS)
                    threads.append(thread)
    except OSError as exc:
        warn(rel, f"cannot read file: {exc.strerror or exc}")
        return None
    if bad:
        warn(
            rel,
            f"{bad} CPU operator executions not in the form start_ns,duration_ms,thread "
            f"ignored (first on line {first_bad})",
        )
    if not names:
        if not bad:
            warn(rel, "no CPU operator executions")
        return None
    return pd.DataFrame(
        {
            "name": names,
            "kind": CPU_KERNEL,
            "start_us": clock.from_parts(np.array(whole), np.array(frac)),
            "duration_us": durations,
            "thread": threads,
        }
    )
