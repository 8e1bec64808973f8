"""Instructions executed by advisor on one input, before and after a change (valgrind).

On a shared virtual machine the same run varies by 30-40% in wall and CPU time between
minutes, so a change worth a few percent cannot be told from noise by timing it. The
number of instructions a run executes barely varies: this runs `advisor ARGS` (and, with
--script, any Python script instead) under valgrind's callgrind for advisor as of git
--before REF (exported as many_ranks.py exports it) and for the working tree (copied the same
way, so that both are imported alike), each --repeat times, and prints the counts and their
ratio. It measures work, not time: a change that trades instructions for waiting (I/O,
processes) is for run.py and many_ranks.py.

Both trees are byte-compiled first and each version runs once unmeasured to warm its own
rule cache, so neither pays for compiling; PYTHONHASHSEED is fixed. With --cold every
measured run starts from an empty cache instead: what a first run executes (after installing
or upgrading advisor, or in a CI job). A run takes about 30x its normal time (the bundled
demo: about 1.5 minutes).

    .venv/bin/python benchmarks/instructions.py --before HEAD~1 -- \\
        run advisor/examples/PROF_000001_20260105100000000_DEMO -o /tmp/out --quiet
    .venv/bin/python benchmarks/instructions.py --before HEAD~1 \\
        --script benchmarks/stage_ranks.py /tmp/advisor-many-ranks/tiny_x300 22
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
from many_ranks import Version, export_tree  # noqa: E402

_COLLECTED = re.compile(r"Collected\s*:\s*(\d+)")


def copy_working_tree(work: Path) -> Path:
    """The working tree's advisor, copied as export_tree exports a commit: both versions are
    then found the same way (PYTHONPATH, one more folder each import looks in), which alone
    costs a few million instructions."""
    tree = work / "trees" / "working"
    shutil.rmtree(tree, ignore_errors=True)
    skip = shutil.ignore_patterns("__pycache__")
    for package in ("advisor", "plugins", "rules"):
        shutil.copytree(REPO / package, tree / package, ignore=skip)
    (tree / "advisor_plugins").symlink_to("plugins")
    (tree / "advisor_rules").symlink_to("rules")
    return tree


def compile_tree(tree: Path) -> None:
    """Byte-code for every module, so that no measured run compiles (PYTHONDONTWRITEBYTECODE
    would otherwise make every run compile what changed)."""
    for package in ("advisor", "plugins", "rules"):
        subprocess.run(
            [sys.executable, "-m", "compileall", "-q", str(tree / package)],
            env={k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"},
            stdout=subprocess.DEVNULL,
            check=True,
        )


def instructions(command: list[str], env: dict[str, str]) -> int:
    """Instructions callgrind counted for `command`."""
    done = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *command],
        env={**env, "PYTHONHASHSEED": "0"},
        capture_output=True,
        text=True,
    )
    found = _COLLECTED.findall(done.stderr)
    if done.returncode != 0 or not found:
        raise SystemExit(f"{' '.join(command)} failed under valgrind:\n{done.stderr[-2000:]}")
    return int(found[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", metavar="REF", required=True, help="git ref to compare with")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each version (median)")
    ap.add_argument("--script", type=Path, help="run this Python script instead of advisor")
    ap.add_argument("--cold", action="store_true", help="every run with an empty cache")
    ap.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "advisor-instr")
    ap.add_argument("args", nargs=argparse.REMAINDER, help="advisor's (or the script's) arguments")
    args = ap.parse_args(argv)
    if shutil.which("valgrind") is None:
        ap.error("valgrind is not installed")
    if sys.version_info < (3, 11):
        ap.error("needs Python 3.11 or later (python -P)")
    rest = args.args[1:] if args.args[:1] == ["--"] else args.args
    commit, tree = export_tree(args.work, args.before)
    working = copy_working_tree(args.work)
    compile_tree(tree)
    compile_tree(working)
    versions = [Version("before", args.work, tree), Version("after", args.work, working)]
    counts: dict[str, list[int]] = {v.label: [] for v in versions}
    for version in [] if args.cold else versions:  # warm each rule cache, unmeasured
        subprocess.run(_command(args.script, rest), env=version.env, capture_output=True)
    for _ in range(args.repeat):
        for version in versions:
            env = version.env
            if args.cold:
                env = {**env, "ADVISOR_CACHE_DIR": tempfile.mkdtemp(dir=args.work)}
            count = instructions(_command(args.script, rest), env)
            counts[version.label].append(count)
            print(f"{version.label:6s} {count:>15,d}", flush=True)
    before, after = (statistics.median(counts[v.label]) for v in versions)
    print(f"before ({args.before} = {commit[:12]}): {before:,.0f} instructions")
    print(f"after (working tree): {after:,.0f} instructions, {after / before:.4f}x before")
    return 0


def _command(script: Path | None, rest: list[str]) -> list[str]:
    """The same command for both versions (`python -m advisor`, not the console script,
    which only the working tree has): which advisor runs is PYTHONPATH's choice. `-P` keeps
    Python from putting the current folder first on sys.path (as -m does): run from the
    repository, both versions would import the working tree's advisor (until 2026-11-28 the
    counts of `-m advisor` runs from the repository compared the working tree with itself;
    --script runs were right)."""
    return [sys.executable, "-P", *(["-m", "advisor"] if script is None else [str(script)]), *rest]


if __name__ == "__main__":
    sys.exit(main())
