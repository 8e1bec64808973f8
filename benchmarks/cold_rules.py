"""A session opened with the rule cache off, for instructions.py --script: the checks every
built-in rule file gets on a first run (round 36 of benchmarks/README.md).

    .venv/bin/python benchmarks/instructions.py --before HEAD~1 --script benchmarks/cold_rules.py
"""

from __future__ import annotations

import os

os.environ["ADVISOR_NO_CACHE"] = "1"  # before advisor reads it: every rule file is checked

from advisor.session import Session  # noqa: E402

if __name__ == "__main__":
    Session.open()
