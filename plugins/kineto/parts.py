"""The walk of a whole trace file, decoded on several cores when it is large
(`advisor.formats.parallel`) or batch by batch in this process."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .walk import EventWalk


def walk_events(batches: Iterable[list[Any]]) -> EventWalk:
    """One walk over batches of events (a stream of a whole file or of one part of it)."""
    walk = EventWalk()
    for batch in batches:
        walk.walk(batch)
        batch.clear()  # the stream still holds the list while it decodes the next batch
    return walk


def merge_walks(walks: list[EventWalk]) -> EventWalk:
    """The walks of consecutive parts of a file, in file order, as one walk of the whole."""
    first = walks[0]
    for later in walks[1:]:
        first.extend(later)
    return first
