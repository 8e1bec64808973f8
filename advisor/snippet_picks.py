"""The events a trace snippet keeps for one window, and the names of their lanes.

Shared by the two sources of a snippet's events: the original trace file
(advisor/trace_cuts.py) and the normalized tables (advisor/traces.py).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

from advisor.engine.windows import Window

MAX_EVENTS = 10_000
"""Complete events a snippet keeps at most."""
MAX_METADATA = 10_000
"""Process and thread metadata events kept from a trace."""
_TS, _DUR = itemgetter("ts"), itemgetter("dur")
_SYNTHETIC_ID = 900_000_000
"""Where the integer ids of lanes a trace names by a string start (Perfetto wants integers)."""


@dataclass
class Pick:
    """The events kept for one window: the named ones first, then the longest others."""

    window: Window
    lanes: Lanes
    """The names of the trace's processes and threads (shared by a trace's windows)."""
    named: list[dict[str, Any]] = field(default_factory=list)
    longest: list[tuple[float, int, dict[str, Any]]] = field(default_factory=list)
    seen: int = 0
    kept: list[dict[str, Any]] | None = None
    """events(), once made (the findings sharing the window read the same list)."""

    def offer(self, event: dict[str, Any], order: int) -> None:
        self.seen += 1
        if event["name"] in self.window.names and len(self.named) < MAX_EVENTS:
            self.named.append(event)
            return
        item = (float(event["dur"]), order, event)
        if len(self.longest) < MAX_EVENTS:  # a list until full (events() takes the largest)
            self.longest.append(item)
            if len(self.longest) == MAX_EVENTS:
                heapq.heapify(self.longest)
        else:
            heapq.heappushpop(self.longest, item)

    def events(self) -> list[dict[str, Any]]:
        """The lanes' metadata, then the kept events in time order (at most MAX_EVENTS)."""
        if self.kept is None:
            room = MAX_EVENTS - len(self.named)
            others = [e for _, _, e in heapq.nlargest(room, self.longest)] if room > 0 else []
            # by start, the longer first at one start: two stable sorts, since a key tuple
            # per event cost more than the sorting (about 4 µs an event)
            by_length = sorted([*self.named, *others], key=_DUR, reverse=True)
            kept = sorted(by_length, key=_TS)
            used: dict[int, dict[int, None]] = {}
            for event in kept:
                used.setdefault(event["pid"], {})[event["tid"]] = None
            self.kept = [*self.lanes.describe(used), *kept]
        return self.kept


@dataclass
class Lanes:
    """Integer ids for the processes and threads a trace names by strings, and the
    metadata naming each lane."""

    ids: dict[Any, int] = field(default_factory=dict)
    names: dict[tuple[str, int, int], dict[str, Any]] = field(default_factory=dict)
    counter: Iterator[int] = field(default_factory=lambda: itertools.count(_SYNTHETIC_ID))

    def id(self, value: Any) -> int | None:
        if isinstance(value, bool):
            return None
        if isinstance(value, int):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str) and value:
            if value not in self.ids:
                self.ids[value] = next(self.counter)
                self.names[("label", self.ids[value], 0)] = {"name": value}
            return self.ids[value]
        return None

    def metadata(self, name: str, pid: Any, tid: Any, args: dict[str, Any] | None) -> None:
        """Remember a process or thread metadata event of the trace."""
        pid, tid = self.id(pid), self.id(tid) or 0
        if pid is not None and args is not None and len(self.names) < MAX_METADATA:
            self.names.setdefault((name, pid, tid), args)

    def describe(self, lanes: dict[int, dict[int, None]]) -> list[dict[str, Any]]:
        """Metadata events naming every process and thread in `lanes`."""
        out: list[dict[str, Any]] = []
        for pid, tids in sorted(lanes.items()):
            out.append(self._event("process_name", pid, 0, self._process(pid)))
            for kind in ("process_labels", "process_sort_index"):
                if (kind, pid, 0) in self.names:
                    out.append(self._event(kind, pid, 0, self.names[(kind, pid, 0)]))
            for tid in tids:
                out.append(self._event("thread_name", pid, tid, self._thread(pid, tid)))
                if ("thread_sort_index", pid, tid) in self.names:
                    args = self.names[("thread_sort_index", pid, tid)]
                    out.append(self._event("thread_sort_index", pid, tid, args))
        return out

    def _process(self, pid: int) -> dict[str, Any]:
        named = self.names.get(("process_name", pid, 0)) or self.names.get(("label", pid, 0))
        return named if named and "name" in named else {"name": f"process {pid}"}

    def _thread(self, pid: int, tid: int) -> dict[str, Any]:
        named = self.names.get(("thread_name", pid, tid)) or self.names.get(("label", tid, 0))
        return named if named and "name" in named else {"name": f"thread {tid}"}

    @staticmethod
    def _event(name: str, pid: int, tid: int, args: dict[str, Any]) -> dict[str, Any]:
        return {"name": name, "ph": "M", "ts": 0, "pid": pid, "tid": tid, "args": args}
