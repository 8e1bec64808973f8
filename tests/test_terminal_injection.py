"""Names from someone else's profile never drive the reader's terminal.

Kernel, operator and file names are data: `\\x1b]52;c;...\\x07` in one would set the clipboard,
`\\x1b]0;...` the window title, `\\x1b]8;;URL` a hidden link, `\\x1b[2J` clear the screen and the
one-byte C1 CSI `\\x9b` start any sequence. Every command that prints them (`run`, `top`,
`inspect`, `compare`, error and warning lines) shows them as U+FFFD instead.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from clirunner import separate_runner

from advisor.cli import main
from advisor.render.format import terminal_json, terminal_safe

HOSTILE = [
    "\x1b]52;c;cm0gLXJmIH4=\x07clip",
    "\x1b]0;pwned\x07title",
    "\x1b[2Jclear",
    "\x1b]8;;http://evil.invalid/\x07link\x1b]8;;\x07",
    "\x9b31mcsi",
    "\u202eoverride",
]
RAW = ("\x1b", "\x07", "\x9b", "\u202e")


def hostile_trace(folder: Path) -> Path:
    """A Kineto trace whose kernels and operators are named with escape sequences."""
    events = [
        {
            "ph": "X",
            "cat": "user_annotation",
            "name": "ProfilerStep#1",
            "pid": 1,
            "tid": 1,
            "ts": 0,
            "dur": 10_000,
        }
    ]
    for i, name in enumerate(HOSTILE):
        events.append(
            {
                "ph": "X",
                "cat": "cpu_op",
                "name": f"aten::{name}",
                "pid": 1,
                "tid": 1,
                "ts": 100 + i * 1000,
                "dur": 500,
            }
        )
        events.append(
            {
                "ph": "X",
                "cat": "kernel",
                "name": name,
                "pid": 0,
                "tid": 7,
                "ts": 200 + i * 1000,
                "dur": 800 - i,
                "args": {"stream": 7, "device": 0, "correlation": i + 1},
            }
        )
    path = folder / "hostile.pt.trace.json"
    path.write_text(json.dumps({"traceEvents": events}), encoding="utf-8")
    return path


def no_raw_controls(text: str) -> bool:
    return not any(c in text for c in RAW)


@pytest.mark.parametrize(
    "args",
    [
        ["run", "{trace}", "-o", "{out}", "--format", "text"],
        ["run", "{trace}", "-o", "-"],
        ["top", "{trace}", "-k", "10"],
        ["top", "{trace}", "-k", "10", "--format", "csv"],
        ["top", "{trace}", "-k", "10", "--format", "json"],
        ["inspect", "{trace}"],
    ],
    ids=["run-text", "run-json", "top", "top-csv", "top-json", "inspect"],
)
def test_commands_never_print_escape_sequences(tmp_path: Path, args: list[str]) -> None:
    trace = hostile_trace(tmp_path)
    argv = [a.format(trace=trace, out=tmp_path / "out") for a in args]
    result = separate_runner().invoke(main, argv)
    assert result.exit_code in (0, 1), result.stderr
    assert no_raw_controls(result.stdout), repr(result.stdout[:500])
    assert no_raw_controls(result.stderr), repr(result.stderr[:500])
    if "json" in argv or "-" in argv:
        json.loads(result.stdout)  # still valid JSON, the names escaped inside it
    elif argv[0] == "top":  # the ranking lists the kernels by name: shown, made harmless
        assert result.stdout.count("\N{REPLACEMENT CHARACTER}") >= len(HOSTILE)


def test_an_unreadable_file_with_escapes_in_its_name_is_named_safely(tmp_path: Path) -> None:
    bad = tmp_path / "\x1b]0;pwned\x07.pt.trace.json"
    bad.write_text("{not json", encoding="utf-8")
    result = separate_runner().invoke(main, ["run", str(bad), "-o", str(tmp_path / "o")])
    assert result.exit_code != 0
    assert no_raw_controls(result.stderr) and "pwned" in result.stderr


def test_terminal_json_is_the_same_json() -> None:
    document = {"name": "".join(HOSTILE) + " 中文", "n": 1}
    text = terminal_json(document, indent=2)
    assert no_raw_controls(text) and "中文" in text
    assert json.loads(text) == document
    assert terminal_safe("a\tb\nc\x1b[2J") == "a\tb\nc\N{REPLACEMENT CHARACTER}[2J"
    # text about to be wrapped: whitespace controls become spaces, the others still U+FFFD
    assert (
        terminal_safe("a\tb\r\nc\x1b[2J\x85", flatten=True) == "a b  c\N{REPLACEMENT CHARACTER}[2J "
    )
