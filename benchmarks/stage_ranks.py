"""What a worker does for N ranks, in one process, for instructions.py --script.

Opens a session, locates every rank under a folder (one claim each), then reads, derives,
evaluates and reduces the first N of them as a worker process of `advisor run` does
(api._stage_claim). Two counts with different N give the cost of one more rank without the
start-up: (count(22) - count(2)) / 20.

    .venv/bin/python benchmarks/instructions.py --before HEAD~1 \\
        --script benchmarks/stage_ranks.py /tmp/advisor-many-ranks/tiny_x300 22
"""

from __future__ import annotations

import sys
from pathlib import Path

from advisor.api import _stage_claim
from advisor.reading import Reading, find_claims
from advisor.session import Session


def main(folder: str, ranks: str) -> None:
    session = Session.open()
    recipe = session.recipe
    if recipe is None:  # only with plugins of the caller's own, which a worker cannot load
        raise SystemExit("this session cannot be sent to a worker")
    claims = find_claims([Path(folder)], session.host, Reading())
    for claim in claims[: int(ranks)]:
        _stage_claim(claim, recipe, False)


if __name__ == "__main__":
    main(*sys.argv[1:3])
