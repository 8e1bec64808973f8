"""How many of the machine's CPUs are idle: what decides how many processes decode one large
trace (advisor.formats.parallel).

Measuring takes time: the kernel's CPU times (Linux /proc/stat, in 10 ms jiffies) read twice
SAMPLE_S apart. The command line marks its start (`mark`), so that a large trace read a few
hundred milliseconds later is measured over that stretch instead, without waiting: the
process's own CPU time in it, its imports and reading, counts as idle, since that CPU is the
one the process itself goes on using.
"""

from __future__ import annotations

import os
import time

SAMPLE_S = 0.05
"""How long the CPUs are watched when no mark is recent enough (only before a large file)."""
MARK_S = (SAMPLE_S, 30.0)
"""A mark measures only when it is this old: long enough for a few jiffies on each CPU, and
recent enough to tell what the machine does now."""

_mark: tuple[float, tuple[int, int, int], float] | None = None
"""(monotonic time, CPU times, this process's CPU seconds) when marked."""


def mark() -> None:
    """Remember the CPU times now, for a later `idle_cpus` to measure from."""
    global _mark
    times = _cpu_times()
    _mark = None if times is None else (time.monotonic(), times, _own_cpu_s())


def idle_cpus() -> float:
    """How many of the machine's CPUs are idle: since the mark (this process's own work
    counted as idle), else over SAMPLE_S from the kernel's CPU times where it has them
    (Linux), else the CPUs less the 1-minute load average, which still counts work that
    ended up to a minute ago (this process's own reading too)."""
    if _mark is not None:
        since, first, own = _mark
        elapsed = time.monotonic() - since
        second = _cpu_times() if MARK_S[0] <= elapsed <= MARK_S[1] else None
        if second is not None and second[0] > first[0]:
            idle = second[2] * (second[1] - first[1]) / (second[0] - first[0])
            return min(idle + (_own_cpu_s() - own) / elapsed, float(second[2]))
    first = _cpu_times()
    if first is not None:
        time.sleep(SAMPLE_S)
        second = _cpu_times()
        if second is not None and second[0] > first[0]:
            return second[2] * (second[1] - first[1]) / (second[0] - first[0])
    count = os.cpu_count() or 1
    try:
        return count - os.getloadavg()[0]
    except (AttributeError, OSError):  # not on Unix
        return float(count)


def _own_cpu_s() -> float:
    """CPU seconds this process (all its threads) has used."""
    times = os.times()
    return times.user + times.system


def _cpu_times() -> tuple[int, int, int] | None:
    """(all jiffies, idle and iowait jiffies) of the machine's CPUs together, and how many
    CPUs there are, from /proc/stat; None where it cannot be read."""
    try:
        with open("/proc/stat", "rb") as stat:
            text = stat.read(1 << 16)
    except OSError:
        return None
    lines = text.split(b"\n")
    try:
        fields = [int(v) for v in lines[0].split()[1:]]
    except ValueError:
        return None
    count = sum(1 for line in lines[1:] if line.startswith(b"cpu"))
    if len(fields) < 5 or not count:
        return None
    return sum(fields[:8]), fields[3] + fields[4], count
