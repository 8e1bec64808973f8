"""AOE rules on the AOE reader's output. What each AOE rule does on given tuning results is tested
by rules/aoe.case.yaml; this file keeps the reader + rules check that needs code."""

from __future__ import annotations

import json

import pytest
from conftest import FIXTURE_DIR

from advisor.engine.evaluate import evaluate
from advisor.engine.functions import BUILTIN_FUNCTIONS
from advisor.engine.rules import load_rules
from advisor_plugins.aoe import AoeReader
from advisor_plugins.builtin_rules import advisor_rule_paths

RULES, ERRORS = load_rules(advisor_rule_paths(), BUILTIN_FUNCTIONS)
GOOD = FIXTURE_DIR / "aoe" / "good"


def test_rules_on_the_fixture_folder_match_an_independent_count():
    """End to end on the reader's output: numbers recomputed from the files with plain json,
    independently of the reader, for two rules on one profile; the fixture lives under tests/,
    which the wheel does not ship with the rules' case files."""
    improved = regressed_us = 0.0
    count = 0
    for path in GOOD.glob("*.json"):
        text = path.read_text(encoding="utf-8")
        # repeated report keys: pairs keep both tasks
        for before, after in _times(json.loads(text, object_pairs_hook=list)):
            if after > before * 1.01:
                regressed_us += after - before
            elif after < before:
                improved += before - after
                count += 1
    (profile,) = AoeReader().read(GOOD)
    result = evaluate(
        profile, [RULES.rules["AOE-001"], RULES.rules["AOE-005"]], functions=BUILTIN_FUNCTIONS
    )
    by_id = {f.rule.id: f for f in result.findings}
    assert by_id["AOE-001"].impact_us == pytest.approx(regressed_us)
    assert by_id["AOE-005"].values["saved_us"] == pytest.approx(improved)
    assert by_id["AOE-005"].values["improved"] == count


def _times(node) -> list[tuple[float, float]]:
    """(before, after) in µs of every operator/subgraph entry found anywhere in a pairs tree."""
    found = []
    if isinstance(node, list):
        pairs = [p for p in node if isinstance(p, tuple) and len(p) == 2]
        keys = dict(pairs) if len(pairs) == len(node) and pairs else {}
        for unit, scale in (("(us)", 1), ("(ms)", 1000)):
            if f"performance_before_tune{unit}" in keys and (
                "op_name" in keys or "repo_key" in keys or "update_mode" in keys
            ):
                found.append(
                    (
                        keys[f"performance_before_tune{unit}"] * scale,
                        keys[f"performance_after_tune{unit}"] * scale,
                    )
                )
        for item in node:
            found += _times(item)
    elif isinstance(node, tuple):
        found += _times(node[1])
    return found
