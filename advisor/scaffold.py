"""Scaffolding a new rule: a rule file that is valid as written, with TODOs to edit, and a case
file that tests it (`advisor rules new`).

A team starts from something that loads, runs and passes its own test, so every later edit is
checked by `advisor rules validate` and `advisor rules test` from the first minute.

    >>> from advisor.scaffold import new_rule
    >>> new_rule("slow-casts", "team_rules", table="device_ops")
    NewRule(rule_file=PosixPath('team_rules/slow-casts.yaml'), ...)
"""

from __future__ import annotations

import re
from collections.abc import Container, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from advisor.engine.rules import rule_schema
from advisor.errors import AdvisorError
from advisor.model import TABLES
from advisor.plugin_manager import PluginHost
from advisor.ruleset import load_ruleset

ID_PREFIX = "TEAM"
"""New rules get the first free id TEAM-001 ... TEAM-999."""
MAX_NUMBER = 999


class ScaffoldError(AdvisorError):
    """A rule that cannot be scaffolded: a bad name or table, or files that already exist."""


@dataclass(frozen=True)
class NewRule:
    """What new_rule wrote: the rule file, its case file and the id the rule got."""

    rule_file: Path
    case_file: Path
    rule_id: str


def _example_rows(table: str, count: int) -> list[dict[str, Any]]:
    """`count` rows holding a value for every required column of `table`, for a new case."""

    def value(dtype: str, column: str, i: int) -> Any:
        if dtype == "string":
            return f"{column}-{i}"
        if dtype == "bool":
            return True
        return float(10 * (i + 1)) if dtype == "float64" else i

    return [
        {c.name: value(c.dtype, c.name, i) for c in TABLES[table].columns if c.required}
        for i in range(count)
    ]


def _texts(
    name: str, rule_id: str, table: str, rule_file: Path, case_file: Path
) -> tuple[str, str]:
    """The text of a new rule (valid as written, TODOs to edit) and of its test cases, which
    name the files they are written to so that their comments give the commands to run."""
    rule = f"""\
# {name}: scaffolded by `advisor rules new`. Edit every TODO, then check and test it:
#   advisor rules validate {rule_file}
#   advisor rules test {case_file} --rules {rule_file}
# Keys and expressions: docs/rule-authoring.md; tables and columns: docs/tables.md.
id: {rule_id}                   # TODO: your team's prefix and number (change the case file too)
name: {name}
title: "TODO: one line saying what {name} found"
group: Model Summary            # or Op Summary, Op Parallel, Data Pipeline, Communication, Tuning
type: Computation               # TODO: prof_rule's "Rule Type"
tags: [team]
params:
  min_rows: 2                   # TODO: thresholds; override with --set {rule_id}.min_rows=5
let:
  row_count: rows({table})      # TODO: what to measure in {table}
when: row_count >= min_rows     # TODO: when the rule fires
# impact_us: ...                # TODO: µs at stake; ranks the finding and derives its severity
message: >-
  TODO: {{{{ row_count|num }}}} rows in {table} (limit {{{{ min_rows|num }}}}).
suggestions:
  - "TODO: what to do about it."
docs: |
  TODO: what it checks, why it matters, when it fires (params and their defaults) and where
  the thresholds come from.
"""
    import yaml  # imported where used: listing rules reads no YAML

    cases = yaml.safe_dump(
        {
            "rule": rule_id,
            "cases": [
                {
                    "name": "fires on three rows",
                    "tables": {table: _example_rows(table, 3)},
                    "expect": {"fires": True, "values": {"row_count": 3}},
                },
                {
                    "name": "silent on one row",
                    "tables": {table: _example_rows(table, 1)},
                    "expect": {"fires": False},
                },
            ],
        },
        sort_keys=False,
        default_flow_style=None,
        allow_unicode=True,
    )
    header = (
        f"# Test cases of {rule_id} ({rule_file.name}). TODO: rows that make the rule fire "
        f"and rows that must not.\n#   advisor rules test {case_file} --rules {rule_file}\n"
    )
    return rule, header + cases


def _free_rule_id(taken: Container[str]) -> str:
    """The first TEAM-NNN id no rule in effect uses, so a new rule replaces none by accident."""
    for number in range(1, MAX_NUMBER + 1):
        rule_id = f"{ID_PREFIX}-{number:03d}"
        if rule_id not in taken:
            return rule_id
    raise ScaffoldError(f"every id {ID_PREFIX}-001 to {ID_PREFIX}-{MAX_NUMBER} is taken")


def new_rule(
    name: str,
    folder: str | Path = ".",
    table: str = "device_ops",
    *,
    rule_paths: Sequence[Path] = (),
    host: PluginHost | None = None,
) -> NewRule:
    """Write NAME.yaml, a valid rule with TODOs reading `table`, and NAME.case.yaml, its test
    cases, into `folder` (created when missing). The rule gets the first id free among the
    built-in rules, the plugins' rules, `rule_paths` and the rules already in `folder`.
    Existing files are never overwritten: ScaffoldError instead, as for a bad name or table."""
    folder = Path(folder)
    if not re.fullmatch(rule_schema()["properties"]["name"]["pattern"], name):
        raise ScaffoldError(
            f"rule name {name!r}: use 3-64 lower-case letters, digits and '-', "
            "starting with a letter (e.g. slow-casts)"
        )
    if table not in TABLES:
        raise ScaffoldError(f"unknown table {table!r} (choose from {', '.join(sorted(TABLES))})")
    rule_file, case_file = folder / f"{name}.yaml", folder / f"{name}.case.yaml"
    for path in (rule_file, case_file):
        if path.exists():
            raise ScaffoldError(f"{path}: already exists; not overwritten")
    ruleset, _ = load_ruleset(
        host or PluginHost(), [*rule_paths, *([folder] if folder.is_dir() else [])]
    )
    rule_id = _free_rule_id(ruleset.rules)
    rule_text, case_text = _texts(name, rule_id, table, rule_file, case_file)
    folder.mkdir(parents=True, exist_ok=True)
    for path, text in ((rule_file, rule_text), (case_file, case_text)):
        with path.open("x", encoding="utf-8") as handle:
            handle.write(text)
    return NewRule(rule_file, case_file, rule_id)
