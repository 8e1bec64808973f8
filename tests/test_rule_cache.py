"""The rule cache: rules and reports are the same with it off, cold and warm; a broken,
stale or racing entry is never trusted; a broken rule file is never cached."""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import DEMO, FIXTURE_DIR, REAL, ROOT

from advisor import user_cache
from advisor.cli import main
from advisor.engine import rule_cache, templates
from advisor.engine import rules as rules_module
from advisor.engine.expr import (
    ExprError,
    Expression,
    Scope,
    compile_expression,
    deferred_expression,
)
from advisor.engine.functions import BUILTIN_FUNCTIONS
from advisor.engine.rules import Rule, load_rule_file
from advisor.model import TABLES
from advisor.plugin_manager import PluginHost
from advisor.ruleset import expression_functions, load_ruleset

HOST_RULE = ROOT / "rules" / "host.yaml"
BROKEN = """\
id: TEAM-001
name: team-broken
title: Broken
type: Host
when: "steps.duration_us >"
message: never
suggestions: [nothing]
docs: a rule with a syntax error
"""


@pytest.fixture
def cache(user_cache: Path) -> Path:
    return user_cache


def entries(folder: Path) -> list[Path]:
    return sorted((folder / "rules").glob("*.json")) if (folder / "rules").exists() else []


def full(rule: Rule) -> tuple[Rule, object, object]:
    """What a rule is, including the fields its == leaves out."""
    return rule, rule.raw, [(e.source, e.names, e.columns, e.tables) for e in rule.let.values()]


@pytest.fixture
def no_shipped(monkeypatch: pytest.MonkeyPatch) -> None:
    """builtin_checks.json left out, so that the built-in files go through the user's cache
    as any other rule file does."""
    monkeypatch.setattr(rule_cache, "_shipped_records", dict)


def test_every_builtin_rule_is_the_same_off_cold_warm_and_shipped(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    host = PluginHost()
    monkeypatch.setenv("ADVISOR_NO_CACHE", "1")
    off, off_errors = load_ruleset(host, [])
    assert not entries(cache)  # turned off: nothing written
    monkeypatch.delenv("ADVISOR_NO_CACHE")
    shipped, shipped_errors = load_ruleset(host, [])
    assert not entries(cache)  # the built-in files' records ship with advisor
    with monkeypatch.context() as without_records:
        without_records.setattr(rule_cache, "_shipped_records", dict)
        cold, cold_errors = load_ruleset(host, [])
        files = {r.source for r in cold.rules.values()}
        assert len(entries(cache)) == len(files) > 10
        warm, warm_errors = load_ruleset(host, [])
    assert off_errors == shipped_errors == cold_errors == warm_errors == []
    assert list(off.rules) == list(shipped.rules) == list(cold.rules) == list(warm.rules)
    assert len(off.rules) > 50
    for rule_id, rule in off.rules.items():
        assert (
            full(rule)
            == full(shipped.rules[rule_id])
            == full(cold.rules[rule_id])
            == full(warm.rules[rule_id])
        ), rule_id
        assert rule.scope == shipped.rules[rule_id].scope == warm.rules[rule_id].scope
    assert off.origins == shipped.origins == warm.origins


def test_a_warm_load_checks_no_template_and_no_schema(
    cache: Path, no_shipped: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the cache saves is real: warm, no template is parsed and no schema walked (a
    template is compiled only when its rule fires)."""
    cold, _ = load_rule_file(HOST_RULE, BUILTIN_FUNCTIONS)

    def refuse(*_: object) -> None:
        raise AssertionError("checked again")

    monkeypatch.setattr(rules_module, "_template_problem", refuse)
    monkeypatch.setattr(rules_module, "_schema_problem", refuse)
    warm, errors = load_rule_file(HOST_RULE, BUILTIN_FUNCTIONS)
    assert errors == [] and [full(r) for r in warm] == [full(r) for r in cold]
    # the cache off, the same file is checked: the patched checks are reached
    monkeypatch.setenv("ADVISOR_NO_CACHE", "1")
    with pytest.raises(AssertionError, match="checked again"):
        load_rule_file(HOST_RULE, BUILTIN_FUNCTIONS)


def _refuse(*_: object, **__: object) -> None:
    raise AssertionError("checked again")


def _refuse_checks(monkeypatch: pytest.MonkeyPatch) -> None:
    for check in ("_template_problem", "_schema_problem", "_check_nesting", "_structure_problem"):
        monkeypatch.setattr(rules_module, check, _refuse)


def _host_contract() -> tuple[dict[str, object], dict[str, object]]:
    """The functions and tables a run checks rule files against (the installed plugins')."""
    host = PluginHost()
    return expression_functions(host), host.tables()


def test_a_first_run_takes_the_builtin_files_as_checked_when_advisor_was_built(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An empty cache (a first run, a CI job): the built-in files are neither parsed nor
    checked again (builtin_checks.json holds their rules as parsed and checked when advisor
    was built), give the rules a full check gives, and take no room in the cache."""
    host = PluginHost()
    monkeypatch.setenv("ADVISOR_NO_CACHE", "1")
    off, _ = load_ruleset(host, [])
    monkeypatch.delenv("ADVISOR_NO_CACHE")
    _refuse_checks(monkeypatch)
    monkeypatch.setattr(rules_module, "parse_rule_documents", _refuse)
    first, errors = load_ruleset(host, [])
    assert errors == [] and list(first.rules) == list(off.rules)
    for rule_id, rule in off.rules.items():
        assert full(rule) == full(first.rules[rule_id]), rule_id
    assert entries(cache) == []


def test_a_builtin_file_is_known_by_its_text_not_its_place(
    cache: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A copy of a built-in file, as it is, needs no check; one character more, and it is
    checked as any rule file is."""
    functions, tables = _host_contract()
    copy = tmp_path / "team" / "host.yaml"
    copy.parent.mkdir()
    copy.write_bytes(HOST_RULE.read_bytes())
    _refuse_checks(monkeypatch)
    rules, errors = load_rule_file(copy, functions, tables)
    assert errors == [] and len(rules) > 3
    copy.write_bytes(HOST_RULE.read_bytes() + b"\n# a comment\n")
    with pytest.raises(AssertionError, match="checked again"):
        load_rule_file(copy, functions, tables)


def test_no_shipped_record_serves_other_plugins_or_a_cache_turned_off(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    functions, tables = _host_contract()
    _refuse_checks(monkeypatch)
    load_rule_file(HOST_RULE, functions, tables)  # the record is found
    with pytest.raises(AssertionError, match="checked again"):  # a plugin's function more
        load_rule_file(HOST_RULE, {**functions, "team_fn": len}, tables)
    for path in entries(cache):
        path.unlink()
    monkeypatch.setenv("ADVISOR_NO_CACHE", "1")
    with pytest.raises(AssertionError, match="checked again"):
        load_rule_file(HOST_RULE, functions, tables)


@pytest.mark.parametrize(
    "record",
    [
        lambda refs, raws: ({k: v for k, v in list(refs.items())[1:]}, raws),  # a rule less
        lambda refs, raws: ({**refs, "HOST-999": next(iter(refs.values()))}, raws),  # more
        lambda refs, raws: (refs, raws[1:]),  # a rule mapping left out
        lambda refs, raws: (refs, [*raws[1:], "not a mapping"]),
        lambda refs, raws: ("not a mapping", raws),
    ],
    ids=["fewer-refs", "more-refs", "fewer-rules", "not-a-rule", "refs-not-a-mapping"],
)
def test_a_shipped_record_that_does_not_fit_the_file_is_not_trusted(
    cache: Path, monkeypatch: pytest.MonkeyPatch, record: Callable[[dict, list], object]
) -> None:
    functions, tables = _host_contract()
    shipped = rule_cache.shipped_record(
        HOST_RULE.read_text(encoding="utf-8"), rules_module.rule_contract(functions, tables)
    )
    assert shipped is not None
    refs, raws = shipped
    assert isinstance(raws, list) and len(refs) == len(raws) > 3
    monkeypatch.setattr(rule_cache, "shipped_record", lambda text, context: record(refs, raws))
    _refuse_checks(monkeypatch)
    with pytest.raises(AssertionError, match="checked again"):
        load_rule_file(HOST_RULE, functions, tables)


@pytest.mark.parametrize("damage", ["rules", "refs"])
def test_a_shipped_record_of_another_shape_is_not_trusted(
    cache: Path, monkeypatch: pytest.MonkeyPatch, damage: str
) -> None:
    """A record without the file's rules or without what they read has the file checked,
    and a load never changes the records it shares."""
    functions, tables = _host_contract()
    records = rule_cache._shipped_records()
    before = json.dumps(records)
    load_rule_file(HOST_RULE, functions, tables)
    assert json.dumps(records) == before
    damaged = {key: {k: v for k, v in r.items() if k != damage} for key, r in records.items()}
    monkeypatch.setattr(rule_cache, "_shipped_records", lambda: damaged)
    _refuse_checks(monkeypatch)
    with pytest.raises(AssertionError, match="checked again"):
        load_rule_file(HOST_RULE, functions, tables)


def test_the_shipped_key_follows_the_checker_not_the_libraries(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """builtin_checks.json serves every Python and library version the tests run on (each
    checks it against a fresh check: test_docs), but no edited checker."""
    before = rule_cache.shipped_key("id: X", ["f"])
    real = rule_cache.distributions.version
    monkeypatch.setattr(
        rule_cache.distributions, "version", lambda n: "99.0" if n == "Jinja2" else real(n)
    )
    monkeypatch.setattr(rule_cache.sys, "version", "3.99.0")
    rule_cache._checker_fingerprint.cache_clear()
    try:
        assert rule_cache.shipped_key("id: X", ["f"]) == before
        assert rule_cache.entry_key("id: X", ["f"]) != rule_cache.shipped_key("id: X", ["f"])
        monkeypatch.setattr(rule_cache, "_CHECKER_FILES", ("engine/rules.py",))
        rule_cache._code_fingerprint.cache_clear()
        assert rule_cache.shipped_key("id: X", ["f"]) != before
    finally:
        monkeypatch.undo()
        rule_cache._checker_fingerprint.cache_clear()
        rule_cache._code_fingerprint.cache_clear()
    assert rule_cache.shipped_key("id: X", ["f"]) == before


@pytest.mark.parametrize(
    "damage",
    [
        lambda key: b"",
        lambda key: b'{"key": "' + key.encode() + b'", "rules": [{"id": "HO',
        lambda key: b'{"key": "another", "rules": []}',
        lambda key: b"[1, 2]",
        lambda key: json.dumps({"key": key, "rules": [{"id": "HOST-001"}]}).encode(),
        lambda key: json.dumps({"key": key, "rules": [[]]}).encode(),
    ],
    ids=["empty", "torn", "other-key", "not-a-mapping", "wrong-shape", "not-rules"],
)
def test_a_damaged_entry_is_ignored_and_rewritten(
    cache: Path, no_shipped: None, damage: Callable[[str], bytes]
) -> None:
    cold, _ = load_rule_file(HOST_RULE, BUILTIN_FUNCTIONS)
    (entry,) = entries(cache)
    good = entry.read_bytes()
    entry.write_bytes(damage(entry.stem))
    again, errors = load_rule_file(HOST_RULE, BUILTIN_FUNCTIONS)
    assert errors == [] and [full(r) for r in again] == [full(r) for r in cold]
    assert entry.read_bytes() == good


def test_an_unreadable_cache_folder_only_costs_time(blocked_cache: Path) -> None:
    off = load_rule_file(HOST_RULE, BUILTIN_FUNCTIONS)
    assert off[1] == [] and len(off[0]) > 3
    assert blocked_cache.read_text() == "not a folder"


def test_the_key_follows_the_text_functions_and_tables(
    cache: Path, no_shipped: None, tmp_path: Path
) -> None:
    """A stale entry is never found: another text, function set or table contract (plugins
    add both) is another key."""
    copy = tmp_path / "host.yaml"
    copy.write_bytes(HOST_RULE.read_bytes())
    load_rule_file(copy, BUILTIN_FUNCTIONS)
    load_rule_file(copy, BUILTIN_FUNCTIONS)
    assert len(entries(cache)) == 1
    load_rule_file(copy, {**BUILTIN_FUNCTIONS, "team_fn": len})
    assert len(entries(cache)) == 2
    spec = TABLES["steps"]
    fewer = {**TABLES, "steps": dataclasses.replace(spec, columns=spec.columns[:-1])}
    load_rule_file(copy, BUILTIN_FUNCTIONS, fewer)
    assert len(entries(cache)) == 3
    copy.write_bytes(HOST_RULE.read_bytes() + b"\n# a comment\n")
    load_rule_file(copy, BUILTIN_FUNCTIONS)
    assert len(entries(cache)) == 4


def test_the_key_follows_the_checking_libraries(monkeypatch: pytest.MonkeyPatch) -> None:
    """Another PyYAML, jsonschema or Jinja2 may read or check a rule differently."""
    before = rule_cache.entry_key("id: X", ["f"])
    real = rule_cache.distributions.version
    monkeypatch.setattr(
        rule_cache.distributions, "version", lambda n: "99.0" if n == "Jinja2" else real(n)
    )
    rule_cache._checker_fingerprint.cache_clear()
    try:
        assert rule_cache.entry_key("id: X", ["f"]) != before
    finally:
        monkeypatch.undo()
        rule_cache._checker_fingerprint.cache_clear()
    assert rule_cache.entry_key("id: X", ["f"]) == before


def test_a_broken_rule_file_is_never_cached_and_fails_the_same(cache: Path, tmp_path: Path) -> None:
    team = tmp_path / "team.yaml"
    team.write_text(BROKEN)
    first = CliRunner().invoke(main, ["rules", "validate", str(team)])
    second = CliRunner().invoke(main, ["rules", "validate", str(team)])
    assert first.exit_code == second.exit_code != 0
    assert first.output == second.output
    assert "TEAM-001" in first.output and "syntax error" in first.output
    assert not entries(cache)


def test_a_value_json_cannot_hold_as_it_is_is_not_cached(cache: Path) -> None:
    """A YAML date, NaN or number key would come back from JSON changed: such rules are
    checked on every run instead of being cached changed."""
    rule_cache.store("n" * 64, [{"params": {"x": float("nan")}}])
    rule_cache.store("d" * 64, [{"params": {"since": datetime.date(2026, 1, 5)}}])
    rule_cache.store("i" * 64, [{"params": {1: "number key"}}])
    rule_cache.store("s" * 64, [{"message": "\ud800"}])
    assert not entries(cache)
    rule_cache.store("o" * 64, [{"params": {"x": 1.0, "y": 1, "z": True, "t": "ü"}}])
    assert rule_cache.load("o" * 64) == [{"params": {"x": 1.0, "y": 1, "z": True, "t": "ü"}}]


def test_racing_writers_and_readers_see_whole_entries_only(cache: Path) -> None:
    raws = [{"id": f"R-{i}", "text": "x" * 5000} for i in range(50)]
    seen: list[object] = []
    stop = threading.Event()

    def write() -> None:
        for _ in range(30):
            rule_cache.store("r" * 64, raws)

    def read() -> None:
        while not stop.is_set():
            seen.append(rule_cache.load("r" * 64))

    readers = [threading.Thread(target=read) for _ in range(2)]
    writers = [threading.Thread(target=write) for _ in range(3)]
    for t in readers + writers:
        t.start()
    for t in writers:
        t.join()
    stop.set()
    for t in readers:
        t.join()
    assert rule_cache.load("r" * 64) == raws
    assert all(s is None or s == raws for s in seen) and any(s == raws for s in seen)
    assert [p.name for p in (cache / "rules").iterdir()] == [f"{'r' * 64}.json"]


def test_processes_racing_on_a_cold_cache(cache: Path) -> None:
    """Two runs loading every rule at once on an empty cache both succeed, with one entry per
    file left, each whole."""
    code = (
        "from advisor.plugin_manager import PluginHost; from advisor.ruleset import "
        "load_ruleset; rs, errors = load_ruleset(PluginHost(), []); "
        "print(len(rs.rules), len(errors))"
    )
    env = {**os.environ, "ADVISOR_CACHE_DIR": str(cache)}
    procs = [
        subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, env=env, text=True)
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=120)[0].split() for p in procs]
    assert outs[0] == outs[1] and outs[0][1] == "0"
    for entry in entries(cache):
        assert json.loads(entry.read_text())["key"] == entry.stem
    assert not list((cache / "rules").glob(".*.tmp"))


def test_the_cache_location(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("ADVISOR_CACHE_DIR", "ADVISOR_NO_CACHE", "XDG_CACHE_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    if sys.platform != "win32":
        assert user_cache.cache_dir() == tmp_path / ".cache" / "advisor"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert user_cache.cache_dir() == tmp_path / "xdg" / "advisor"
    monkeypatch.setenv("ADVISOR_CACHE_DIR", str(tmp_path / "mine"))
    assert user_cache.cache_dir() == tmp_path / "mine"
    monkeypatch.setenv("ADVISOR_NO_CACHE", "0")
    assert user_cache.cache_dir() == tmp_path / "mine"
    monkeypatch.setenv("ADVISOR_NO_CACHE", "1")
    assert user_cache.cache_dir() is None
    for name in ("ADVISOR_CACHE_DIR", "ADVISOR_NO_CACHE", "XDG_CACHE_HOME", "LOCALAPPDATA"):
        monkeypatch.delenv(name, raising=False)

    def homeless() -> Path:
        raise RuntimeError("Could not determine home directory.")

    monkeypatch.setattr(Path, "home", staticmethod(homeless))
    assert user_cache.cache_dir() is None
    assert load_rule_file(HOST_RULE, BUILTIN_FUNCTIONS)[1] == []


REPORTED = [
    ("run", DEMO),
    ("run", DEMO, "--lang", "zh"),
    ("run", FIXTURE_DIR / "msprof" / "PROF_000002_20250610120000456_MULTIDEV"),
    ("run", FIXTURE_DIR / "ascend_db" / "rank0_ascend_pt"),
    ("run", FIXTURE_DIR / "kineto_own" / "dataloader_bound.pt.trace.json.gz"),
    ("run", FIXTURE_DIR / "kineto_own" / "ddp_rank0.pt.trace.json.gz"),
    ("run", FIXTURE_DIR / "megengine" / "static"),
    ("run", FIXTURE_DIR / "aoe" / "good"),
    ("run", REAL / "mindspore_cluster_4rank"),
    (
        "compare",
        FIXTURE_DIR / "kineto_own" / "compare_base.pt.trace.json.gz",
        FIXTURE_DIR / "kineto_own" / "compare_slow.pt.trace.json.gz",
    ),
]


def _report(args: tuple[object, ...], env: dict[str, str]) -> tuple[int, object]:
    result = CliRunner().invoke(main, [*map(str, args), "-o", "-", "-q"], env=env)
    assert result.exit_code in (0, 1, 3), result.output
    data = json.loads(result.stdout)

    def scrub(value: object) -> object:  # the only field that differs between two runs
        if isinstance(value, dict):
            return {k: scrub(v) for k, v in value.items() if k != "generated_at"}
        if isinstance(value, list):
            return [scrub(v) for v in value]
        return value

    return result.exit_code, scrub(data)


@pytest.mark.slow
@pytest.mark.parametrize("args", REPORTED, ids=lambda a: f"{a[0]}-{Path(str(a[1])).name}")
def test_reports_are_the_same_off_shipped_cold_and_warm(
    args: tuple[object, ...], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cache off, the built-in files from their shipped records, and (the records left
    out) from a cold and a warm user's cache: the same report."""
    folder = str(tmp_path / "cache")
    off = _report(args, {"ADVISOR_NO_CACHE": "1", "ADVISOR_CACHE_DIR": folder})
    assert not Path(folder).exists()
    shipped = _report(args, {"ADVISOR_CACHE_DIR": folder, "ADVISOR_NO_CACHE": ""})
    assert not entries(Path(folder))
    monkeypatch.setattr(rule_cache, "_shipped_records", dict)
    cold = _report(args, {"ADVISOR_CACHE_DIR": folder, "ADVISOR_NO_CACHE": ""})
    assert entries(Path(folder))
    warm = _report(args, {"ADVISOR_CACHE_DIR": folder, "ADVISOR_NO_CACHE": ""})
    assert off == shipped == cold == warm
    assert off[1]  # a report was written


def test_only_the_templates_of_firing_rules_are_compiled(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Loading compiles no template (cold or warm); a run compiles those of the rules that
    fire, when it renders their findings."""
    from advisor import analyze
    from advisor.engine import templates

    compiled: list[str] = []
    real = templates._compiled

    def recording(text: str) -> object:
        compiled.append(text)
        return real(text)

    monkeypatch.setattr(templates, "_compiled", recording)
    result = analyze(DEMO)
    fired = {f.rule.id for f in result.findings}
    assert fired and len(fired) < len(result.rules)
    texts = {
        text
        for rule in result.rules
        if rule.id in fired
        for lang in ("en", "zh")
        for text in (
            rule.text(lang).message,
            *rule.text(lang).suggestions,
            rule.text(lang).impact_note,
        )
    }
    assert compiled and set(compiled) <= texts


def test_template_code_is_cached_and_renders_the_same(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A template compiled once is taken from the cache afterwards (not compiled again) and
    renders exactly what a fresh compile renders; a damaged entry is compiled again."""
    text = "{{ name }} took {{ value | us }} ({{ share | pct }})"
    context = {"name": "MatMul", "value": 1234.5, "share": 0.25}
    templates._compiled.cache_clear()
    fresh = templates.render(text, context)
    assert list((cache / "templates").glob("*.code"))
    templates._compiled.cache_clear()

    def refuse(*_: object) -> None:
        raise AssertionError("compiled again")

    monkeypatch.setattr(templates.ENV, "compile", refuse)
    assert templates.render(text, context) == fresh
    templates._compiled.cache_clear()
    for entry in (cache / "templates").glob("*.code"):
        entry.write_bytes(b"not marshal data")
    with pytest.raises(AssertionError, match="compiled again"):
        templates._compiled(text)
    templates._compiled.cache_clear()


def test_report_pages_compile_once_and_read_the_same(tmp_path: Path) -> None:
    """report.html's templates are compiled into the cache's pages/ folder on the first run;
    later runs (other processes, so no in-memory copy helps) and a run without the cache
    write the same page."""
    folder = tmp_path / "cache"

    def page(name: str, **env: str) -> str:
        out = tmp_path / name
        argv = [sys.executable, "-m", "advisor", "run", str(DEMO), "-o", str(out)]
        subprocess.run(
            [*argv, "--format", "html", "-q"],
            env={**os.environ, "ADVISOR_CACHE_DIR": str(folder), "ADVISOR_NO_CACHE": "", **env},
            check=False,
        )
        html = (out / "report.html").read_text(encoding="utf-8")
        return re.sub(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d[^<\s]*", "", html)

    cold = page("cold")
    compiled = sorted((folder / "pages").glob("*.cache"))
    assert compiled
    warm = page("warm")
    assert sorted((folder / "pages").glob("*.cache")) == compiled
    assert cold == warm == page("off", ADVISOR_NO_CACHE="1")


def test_a_warm_load_compiles_each_expression_on_first_use(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Warm, a rule's expressions are compiled when first evaluated (rules list and rules
    that do not apply never pay for them), once, and reference what the cold build found."""
    cold, _ = load_rule_file(HOST_RULE, BUILTIN_FUNCTIONS)
    compiled: list[str] = []
    real = rules_module.compile_expression

    def recording(text: str, **kwargs: object) -> Expression:
        compiled.append(text)
        return real(text, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(rules_module, "compile_expression", recording)
    warm, errors = load_rule_file(HOST_RULE, BUILTIN_FUNCTIONS)
    assert errors == [] and compiled == []
    assert [full(r) for r in warm] == [full(r) for r in cold]
    when = warm[0].when
    scope = Scope({}, dict(warm[0].params), BUILTIN_FUNCTIONS)
    for _ in range(2):
        with contextlib.suppress(ExprError):
            when.evaluate(scope)
    assert compiled == [when.source]


def test_a_deferred_expression_that_reads_otherwise_fails() -> None:
    """A cache record that does not match the expression's text is never trusted."""

    def compile_now() -> Expression:
        return compile_expression("x + 1", functions=(), tables={}, names={"x"})

    liar = deferred_expression("x + 1", frozenset({"y"}), frozenset(), frozenset(), compile_now)
    with pytest.raises(ExprError, match="out of date"):
        liar.evaluate(Scope({}, {"x": 1, "y": 1}, {}))
    honest = deferred_expression("x + 1", frozenset({"x"}), frozenset(), frozenset(), compile_now)
    assert honest.evaluate(Scope({}, {"x": 1}, {})) == 2
