"""Malicious rule files are refused when loaded, quickly, and nothing in them ever runs.

Each file under tests/malicious_rules/ tries one escape or resource attack (Python through the
expression language, YAML tags and aliases, Jinja injection, catastrophic regexes, huge values).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from advisor.api import analyze
from advisor.cli import main
from advisor.engine.functions import BUILTIN_FUNCTIONS
from advisor.engine.rules import load_rules

HERE = Path(__file__).parent
MALICIOUS = sorted((HERE / "malicious_rules").glob("*.yaml"))
DEMO = HERE.parent / "advisor" / "examples" / "PROF_000001_20260105100000000_DEMO"
SECONDS = 5.0  # a refused file must not cost more than this

_DANGEROUS_EVENTS = (
    "subprocess.",
    "os.system",
    "os.exec",
    "os.spawn",
    "os.posix_spawn",
    "os.fork",
    "os.remove",
    "os.unlink",
    "os.rename",
    "os.rmdir",
    "os.mkdir",
    "shutil.",
    "socket.",
    "ctypes.",
    "pty.",
    "webbrowser.",
    "urllib.",
)
_DANGEROUS_MODULES = {
    "subprocess",
    "ctypes",
    "socket",
    "pty",
    "shutil",
    "pickle",
    "marshal",
    "webbrowser",
    "urllib.request",
    "http.client",
}
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
_recording: list[bool] = [False]
_events: list[tuple[str, Any]] = []


def _audit(event: str, args: tuple[Any, ...]) -> None:
    """Record what a rule must never cause; an audit hook cannot be removed, so it idles."""
    if not _recording[0]:
        return
    if event == "open":
        mode, flags = args[1], args[2]
        writes = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
            isinstance(flags, int) and flags & _WRITE_FLAGS
        )
        if writes:
            _events.append((event, args[0]))
    elif event == "import":
        if args[0] in _DANGEROUS_MODULES:
            _events.append((event, args[0]))
    elif event.startswith(_DANGEROUS_EVENTS):
        _events.append((event, args[:1]))


sys.addaudithook(_audit)


def _rule_id(path: Path) -> str | None:
    """The id the file declares, read by line: the file itself may not even parse."""
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("id: "):
            return line[4:].strip()
    return None


def test_there_are_enough_malicious_files():
    assert len(MALICIOUS) >= 30


@pytest.mark.parametrize("path", MALICIOUS, ids=lambda p: p.stem)
def test_malicious_file_is_refused_at_load_time(path: Path):
    start = time.perf_counter()
    ruleset, errors = load_rules([path], BUILTIN_FUNCTIONS)
    assert time.perf_counter() - start < SECONDS
    assert ruleset.rules == {} and len(errors) == 1
    message = str(errors[0])
    assert "\n" not in message and len(message) < 400, message
    assert message.startswith(str(path)), message
    if path.stem.split("_", 2)[1] in ("expr", "tmpl", "lets", "params"):  # the YAML is fine
        assert errors[0].rule_id == _rule_id(path) and f"[{_rule_id(path)}]" in message


@pytest.mark.parametrize("path", MALICIOUS, ids=lambda p: p.stem)
def test_rules_validate_refuses_with_one_line(path: Path):
    start = time.perf_counter()
    result = CliRunner().invoke(main, ["rules", "validate", str(path)])
    assert time.perf_counter() - start < SECONDS
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    problems = [line for line in result.output.splitlines() if line.startswith("advisor: ")]
    assert len(problems) == 1 and str(path) in problems[0], result.output


def test_run_refuses_every_malicious_file(tmp_path: Path):
    result = CliRunner().invoke(
        main,
        [
            "run",
            str(DEMO),
            "--rules",
            str(HERE / "malicious_rules"),
            "-o",
            str(tmp_path / "out"),
            "-q",
        ],
    )
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    for path in MALICIOUS:
        assert f"rule file {path}" in result.output, path
    assert not (tmp_path / "out").exists()


def test_nothing_runs_while_loading_and_evaluating(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    sentinel = tmp_path / "sentinel"
    sentinel.mkdir()
    monkeypatch.chdir(sentinel)  # where relative names such as 'pwned' would be created
    _events.clear()
    _recording[0] = True
    try:
        results = [analyze(DEMO, rules=[path]) for path in MALICIOUS[:3]]
        results.append(analyze(DEMO, rules=[HERE / "malicious_rules"]))
    finally:
        _recording[0] = False
    assert _events == []
    assert list(sentinel.iterdir()) == []
    assert len(results[-1].rule_errors) == len(MALICIOUS)
    for result in results:
        assert not any(r.id.startswith("EVIL-") for r in result.rules)
        assert not any(f.rule.id.startswith("EVIL-") for f in result.findings)


def test_template_errors_at_render_time_never_crash():
    from advisor.engine.templates import render

    assert render("{{ total_us - 'a' }}", {"total_us": 1}).startswith(
        "[message template error: TypeError"
    )
    assert "longer than" in render("{{ s + s }}", {"s": "a" * 3000})
    assert (
        len(
            render(
                "{% for r in evidence %}{{ s }}{% endfor %}",
                {"evidence": list(range(1000)), "s": "a" * 10_000},
            )
        )
        <= 4001
    )


def test_values_a_template_builds_are_bounded_before_they_become_text():
    from advisor.engine.templates import render

    nested = {"a": [["x" * 10] * 10] * 10}  # shared references: small in memory, huge as text
    for _ in range(6):
        nested = {"a": [nested["a"]] * 10}
    for template in ("{{ a }}", "{{ a|string }}", "{{ a|join(',') }}"):
        start = time.perf_counter()
        out = render(template, nested)
        assert time.perf_counter() - start < SECONDS
        assert out.startswith("[message template error") and "longer than" in out, template
    assert "round precision" in render("{{ 12|round(p) }}", {"p": -(10**16)})
    assert render("{{ 3.14159|round(2) }}", {}) == "3.14"


def _write_rule(path: Path, lets: dict[str, str], when: str) -> Path:
    lines = [
        "id: TEAM-100",
        "name: squares",
        "title: Squares",
        "type: Test",
        "docs: a chain of lets that square the one before.",
        "let:",
        *(f"  {k}: {v}" for k, v in lets.items()),
        f"when: {when}",
        "message: '{{ x12 }}'",
        "suggestions: [none]",
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_integer_arithmetic_is_bounded(tmp_path: Path):
    """Each let squares the one before: unchecked, x12 has 2**12 times the digits of x0 and
    the next few lets hang; bounded, the rule fails with a one-line error at once."""
    lets = {"x0": "rows(steps) + 99999"}
    lets.update({f"x{i}": f"x{i - 1} * x{i - 1}" for i in range(1, 40)})
    rule = _write_rule(tmp_path / "squares.yaml", lets, "x39 > 0")
    start = time.perf_counter()
    result = analyze(DEMO, rules=[rule], select=["TEAM-100"])
    assert time.perf_counter() - start < 4 * SECONDS
    (analysis,) = result.analyses
    ((failed, problem),) = analysis.evaluation.errors
    assert failed.id == "TEAM-100" and "4096 bits" in problem, problem
    assert "\n" not in problem and len(problem) < 400


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs are POSIX")
def test_special_files_named_like_rules_are_refused_without_blocking(tmp_path: Path):
    """A shared rule folder may hold `evil.yaml -> /dev/zero` or a FIFO: stat says size 0, so
    a size check alone would read forever (or block on the FIFO with no writer)."""
    folder = tmp_path / "shared_rules"
    folder.mkdir()
    os.mkfifo(folder / "fifo.yaml")
    (folder / "zero.yaml").symlink_to("/dev/zero")
    (folder / "dir.yaml").mkdir()
    (folder / "good.yaml").write_text(
        "id: TEAM-001\nname: good\ntitle: Good\ntype: Test\ndocs: a harmless rule file.\n"
        "when: rows(steps) > 0\nmessage: fine\nsuggestions: [none]\n",
        encoding="utf-8",
    )
    start = time.perf_counter()
    ruleset, errors = load_rules([folder], BUILTIN_FUNCTIONS)
    assert time.perf_counter() - start < SECONDS
    problems = {Path(e.source).name: str(e) for e in errors}
    assert "not a regular file (a FIFO)" in problems["fifo.yaml"]
    assert "not a regular file (a character device)" in problems["zero.yaml"]
    assert all("\n" not in p for p in problems.values())
    assert "TEAM-001" in ruleset.rules  # the good file beside them still loads
