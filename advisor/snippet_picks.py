"""The events a trace snippet keeps for one window, and the names of their lanes.

Shared by the two sources of a snippet's events: the original trace file
(advisor/trace_cuts.py) and the normalized tables (advisor/traces.py).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Collection, Iterator
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
    offered: Offered | None = None
    """Where the window's events are when it keeps them all (Offered.close); else None,
    and `named` and `longest` hold the choice."""
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
            if self.offered is not None:
                self.kept = self.offered.events_for(self.window.names)
            else:
                room = MAX_EVENTS - len(self.named)
                others = [e for _, _, e in heapq.nlargest(room, self.longest)] if room > 0 else []
                self.kept = self.lanes.with_metadata(_by_start(self.named, others))
        return self.kept


def _by_start(named: list[dict[str, Any]], others: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`named` then `others` by start, the longer first at one start, events equal in both
    in the order given: two stable sorts, since a key tuple per event cost more than the
    sorting (about 4 µs an event)."""
    return sorted(sorted([*named, *others], key=_DUR, reverse=True), key=_TS)


@dataclass
class Offered:
    """The events offered to the windows of one time span (windows that differ only in the
    names they put first), kept once in the order offered while they are at most MAX_EVENTS:
    each window then keeps them all and only orders them (Pick.events), where offering each
    event to each window cost as much again as cutting it (findings on one step share a
    span: six windows took every event of a trace's step in turn). Past MAX_EVENTS they are
    offered to every window, the kept ones first, so memory stays bounded by MAX_EVENTS a
    window and each window chooses as if offered every event itself."""

    picks: list[Pick]
    events: list[dict[str, Any]] = field(default_factory=list)
    orders: list[int] = field(default_factory=list)
    spilled: bool = False
    unnamed: list[dict[str, Any]] | None = None
    """events_for a window naming none of the events, once made (shared by such windows)."""

    def offer(self, event: dict[str, Any], order: int) -> None:
        if not self.spilled:
            if len(self.events) < MAX_EVENTS:
                self.events.append(event)
                self.orders.append(order)
                return
            self.spilled = True
            for pick in self.picks:
                for kept, kept_order in zip(self.events, self.orders):
                    pick.offer(kept, kept_order)
            self.events, self.orders = [], []
        for pick in self.picks:
            pick.offer(event, order)

    def close(self) -> None:
        """Hand the events to the windows, once none is left to offer."""
        if not self.spilled:
            for pick in self.picks:
                pick.offered, pick.seen = self, len(self.events)

    def events_for(self, names: Collection[str]) -> list[dict[str, Any]]:
        """Pick.events of a window keeping every event: those it names in the order
        offered, then the others the latest first (as Pick.offer's heap gives them)."""
        named = [e for e in self.events if e["name"] in names]
        if named:
            others = [e for e in reversed(self.events) if e["name"] not in names]
            return self.picks[0].lanes.with_metadata(_by_start(named, others))
        if self.unnamed is None:
            self.unnamed = self.picks[0].lanes.with_metadata(_by_start([], self.events[::-1]))
        return self.unnamed


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

    def with_metadata(self, kept: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Metadata events naming the lanes of `kept`, then `kept`."""
        used: dict[int, dict[int, None]] = {}
        for event in kept:
            used.setdefault(event["pid"], {})[event["tid"]] = None
        return [*self.describe(used), *kept]

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
