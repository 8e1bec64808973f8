"""Rule loading (schema, YAML safety, expression checks) and evaluation semantics."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pandas as pd
import pytest

from advisor.engine.evaluate import BlankColumns, evaluate, severity_from_share
from advisor.engine.functions import BUILTIN_FUNCTIONS
from advisor.engine.rules import load_rule_file, load_rules
from advisor.model import TABLES, Profile, ProfileMeta, conform

GOOD_RULE = """
id: TEAM-001
name: long-steps
title: Steps are long
type: Model Bottleneck Analysis
requires: [steps.duration_us]
params:
  max_us: 100
let:
  mean_us: mean(steps.duration_us)
when: mean_us > max_us
impact_us: sum(steps.duration_us) - max_us * rows(steps)
evidence:
  from: steps
  where: duration_us > max_us
  sort: [-duration_us]
  columns: [step, duration_us]
message: "Mean step {{ mean_us|us }} above {{ max_us|num }} µs; worst step {{ evidence[0].step }}."
suggestions: ["Make steps shorter than {{ max_us }} µs."]
docs: Checks that the mean step time stays below a limit.
"""


def write_rule(tmp_path: Path, text: str, name: str = "rule.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def load_one(path: Path):
    rules, errors = load_rule_file(path, BUILTIN_FUNCTIONS)
    return rules, errors


def steps_profile(durations: list[float]) -> Profile:
    start = pd.Series(range(len(durations)), dtype="float64") * 1000.0
    df = pd.DataFrame(
        {
            "step": range(1, len(durations) + 1),
            "start_us": start,
            "end_us": start + durations,
            "duration_us": durations,
        }
    )
    return Profile(ProfileMeta("test", "mem"), {"steps": conform("steps", df)})


def test_good_rule_loads_and_fires_with_evidence_ranked(tmp_path):
    rules, errors = load_one(write_rule(tmp_path, GOOD_RULE))
    assert errors == [] and [r.id for r in rules] == ["TEAM-001"]
    result = evaluate(steps_profile([50, 400, 300]), rules, functions=BUILTIN_FUNCTIONS)
    (finding,) = result.findings
    assert finding.values["mean_us"] == pytest.approx(250.0)
    assert finding.impact_us == pytest.approx(750 - 300)
    assert finding.evidence["rows"] == [[2, 400.0], [3, 300.0]]
    assert finding.evidence["total_rows"] == 2
    assert "worst step 2" in finding.message
    assert finding.suggestions == ["Make steps shorter than 100 µs."]
    assert result.outcomes == {"TEAM-001": "fired"}


SCOPED_RULE = GOOD_RULE.replace(
    'suggestions: ["Make steps shorter than {{ max_us }} µs."]',
    """suggestions:
  - Make steps shorter.
  - {text: Use the MindSpore option., frameworks: [MindSpore]}
  - {text: Use the torch_npu option., frameworks: [PyTorch], devices: [NPU]}""",
)


@pytest.mark.parametrize(
    ("framework", "device", "shown"),
    [
        # the profile says its stack: only its advice, unlabelled, the most specific first
        ("MindSpore", "NPU", ["Use the MindSpore option.", "Make steps shorter."]),
        ("PyTorch", "NPU", ["Use the torch_npu option.", "Make steps shorter."]),
        ("PyTorch", "GPU", ["Make steps shorter."]),
        # a CANN export says its device, not its framework: framework advice kept, labelled
        # with the stacks the profile does not name
        (
            "unknown",
            "NPU",
            [
                "[PyTorch] Use the torch_npu option.",
                "Make steps shorter.",
                "[MindSpore] Use the MindSpore option.",
            ],
        ),
        (
            "unknown",
            "unknown",
            [
                "Make steps shorter.",
                "[MindSpore] Use the MindSpore option.",
                "[PyTorch, NPU] Use the torch_npu option.",
            ],
        ),
        ("PyTorch", "unknown", ["[NPU] Use the torch_npu option.", "Make steps shorter."]),
    ],
)
def test_scoped_suggestions_are_labelled_where_the_profile_does_not_say_its_stack(
    tmp_path, framework, device, shown
):
    rules, errors = load_one(write_rule(tmp_path, SCOPED_RULE))
    assert errors == []
    profile = steps_profile([50, 400, 300])
    profile.meta.framework, profile.meta.device_kind = framework, device
    (finding,) = evaluate(profile, rules, functions=BUILTIN_FUNCTIONS).findings
    assert finding.suggestions == shown


def test_a_suggestion_that_renders_to_nothing_is_left_out(tmp_path):
    """Advice can follow the measured values: each suggestion is a template, and one whose
    text is empty for this profile is not shown (nor an empty line in its place)."""
    text = GOOD_RULE.replace(
        'suggestions: ["Make steps shorter than {{ max_us }} µs."]',
        """suggestions:
  - "{% if mean_us > 1000 %}Split the step.{% endif %}"
  - "{% if mean_us <= 1000 %}Trim the slowest step.{% endif %}"
  - Keep steps even.""",
    )
    rules, errors = load_one(write_rule(tmp_path, text))
    assert errors == []
    for durations, first in (
        ([50, 400, 300], "Trim the slowest step."),
        ([5000], "Split the step."),
    ):
        (finding,) = evaluate(steps_profile(durations), rules, functions=BUILTIN_FUNCTIONS).findings
        assert finding.suggestions == [first, "Keep steps even."]


@pytest.mark.parametrize(
    ("value", "shown"),
    [(512, "512 B"), (1610612736, "1.50 GiB"), (1125899906842624, "1,024 TiB"), ("x", "n/a")],
)
def test_the_bytes_filter_picks_the_unit_a_size_needs(value, shown):
    from advisor.engine import templates

    assert templates.render("{{ v|bytes }}", {"v": value}) == shown


def test_templates_name_the_profiles_device_and_framework_and_a_let_of_that_name_wins(tmp_path):
    """A message may word itself for the hardware (a CPU-only run's idle time is no device's);
    a rule that defines its own `framework` keeps it."""
    text = GOOD_RULE.replace(
        'message: "Mean',
        "message: \"{{ 'host' if device_kind == 'CPU' else 'device' }} on {{ framework }}: Mean",
    )
    rules, errors = load_one(write_rule(tmp_path, text))
    assert errors == []
    profile = steps_profile([50, 400, 300])
    for device, word in (("CPU", "host"), ("GPU", "device"), ("unknown", "device")):
        profile.meta.framework, profile.meta.device_kind = "PyTorch", device
        (finding,) = evaluate(profile, rules, functions=BUILTIN_FUNCTIONS).findings
        assert finding.message.startswith(f"{word} on PyTorch: Mean step")
    own = text.replace(
        "  mean_us: mean(steps.duration_us)",
        "  mean_us: mean(steps.duration_us)\n  framework: \"'mine'\"",
    )
    rules, errors = load_one(write_rule(tmp_path, own, "own.yaml"))
    assert errors == []
    (finding,) = evaluate(profile, rules, functions=BUILTIN_FUNCTIONS).findings
    assert finding.message.startswith("device on mine: Mean step")


def test_expressions_read_the_profiles_device_and_framework_and_a_let_of_that_name_wins(
    tmp_path,
):
    """A rule that holds for one kind of run says so in `when` (STEP-007: CPU-only runs)."""
    text = GOOD_RULE.replace(
        "when: mean_us > max_us",
        "when: mean_us > max_us and device_kind == 'CPU' and framework != 'MindSpore'",
    )
    rules, errors = load_one(write_rule(tmp_path, text))
    assert errors == []
    profile = steps_profile([50, 400, 300])
    for device, framework, fires in (
        ("CPU", "PyTorch", True),
        ("GPU", "PyTorch", False),
        ("CPU", "MindSpore", False),
        ("unknown", "unknown", False),
    ):
        profile.meta.device_kind, profile.meta.framework = device, framework
        result = evaluate(profile, rules, functions=BUILTIN_FUNCTIONS)
        assert (result.outcomes["TEAM-001"] == "fired") is fires, (device, framework)
    own = text.replace(
        "  mean_us: mean(steps.duration_us)",
        "  mean_us: mean(steps.duration_us)\n  device_kind: \"'CPU'\"",
    )
    rules, errors = load_one(write_rule(tmp_path, own, "own.yaml"))
    assert errors == []
    profile.meta.device_kind, profile.meta.framework = "GPU", "PyTorch"
    assert evaluate(profile, rules, functions=BUILTIN_FUNCTIONS).outcomes["TEAM-001"] == "fired"


def test_rule_does_not_fire_below_threshold(tmp_path):
    rules, _ = load_one(write_rule(tmp_path, GOOD_RULE))
    result = evaluate(steps_profile([50, 60]), rules, functions=BUILTIN_FUNCTIONS)
    assert result.findings == [] and result.outcomes["TEAM-001"] == "passed"


def test_param_override_changes_outcome(tmp_path):
    rules, _ = load_one(write_rule(tmp_path, GOOD_RULE))
    result = evaluate(
        steps_profile([50, 400, 300]),
        rules,
        functions=BUILTIN_FUNCTIONS,
        overrides={"TEAM-001": {"max_us": 1000}},
    )
    assert result.findings == []
    assert result.params["TEAM-001"] == {"max_us": 1000}


def test_missing_table_is_not_applicable_with_name(tmp_path):
    rules, _ = load_one(write_rule(tmp_path, GOOD_RULE))
    profile = Profile(ProfileMeta("test", "mem"), {})
    result = evaluate(profile, rules, functions=BUILTIN_FUNCTIONS)
    ((rule, missing),) = result.not_applicable
    assert rule.id == "TEAM-001" and "steps.duration_us" in missing


def test_all_nan_column_counts_as_missing(tmp_path):
    rules, _ = load_one(write_rule(tmp_path, GOOD_RULE))
    profile = steps_profile([1.0, 2.0])
    profile.tables["steps"]["duration_us"] = float("nan")
    result = evaluate(profile, rules, functions=BUILTIN_FUNCTIONS)
    assert result.outcomes["TEAM-001"] == "not_applicable"


OPTIONAL_RULE = GOOD_RULE.replace(
    "requires: [steps.duration_us]",
    "requires: [steps.duration_us]\n"
    "optional: [steps.bubble_us, host_ops.startup, host_ops.duration_us]",
).replace(
    "  mean_us: mean(steps.duration_us)",
    "  mean_us: mean(steps.duration_us)\n"
    "  bubble_us: sum(coalesce(steps.bubble_us, 0))\n"
    "  startup_us: sum(filter(host_ops.duration_us, coalesce(host_ops.startup, False)))\n"
    "  has_bubble: any(notna(steps.bubble_us))",
)


def test_optional_columns_read_as_missing_where_absent(tmp_path):
    """A rule may read data some profiles lack without becoming not applicable on them: an
    absent optional column reads as missing values, an absent table as an empty one."""
    rules, errors = load_one(write_rule(tmp_path, OPTIONAL_RULE))
    assert errors == []
    (rule,) = rules
    assert "steps.bubble_us" in rule.needs() and "steps.bubble_us" not in rule.required()
    # neither steps.bubble_us nor host_ops: the rule still fires, on what is there
    result = evaluate(steps_profile([50, 400, 300]), rules, functions=BUILTIN_FUNCTIONS)
    (finding,) = result.findings
    assert finding.values["bubble_us"] == 0.0 and finding.values["startup_us"] == 0.0
    assert finding.values["has_bubble"] is False
    # where the profile has them, they are read
    profile = steps_profile([50, 400, 300])
    profile.tables["steps"]["bubble_us"] = [5.0, 20.0, None]
    profile.tables["host_ops"] = conform(
        "host_ops",
        pd.DataFrame(
            {
                "name": ["a", "b"],
                "kind": ["runtime"] * 2,
                "duration_us": [700.0, 9.0],
                "startup": [True, False],
            }
        ),
    )
    (finding,) = evaluate(profile, rules, functions=BUILTIN_FUNCTIONS).findings
    assert finding.values["bubble_us"] == 25.0 and finding.values["startup_us"] == 700.0
    assert finding.values["has_bubble"] is True
    # the required ones still decide applicability
    result = evaluate(Profile(ProfileMeta("test", "mem"), {}), rules, functions=BUILTIN_FUNCTIONS)
    ((_, missing),) = result.not_applicable
    assert missing == ["steps.duration_us", "steps"]


def test_optional_names_a_known_column_not_also_required(tmp_path):
    unknown = OPTIONAL_RULE.replace("optional: [steps.bubble_us,", "optional: [steps.nope,")
    _, errors = load_one(write_rule(tmp_path, unknown))
    assert "optional: unknown table or column 'steps.nope'" in str(errors[0])
    both = OPTIONAL_RULE.replace("optional: [steps.bubble_us,", "optional: [steps.duration_us,")
    _, errors = load_one(write_rule(tmp_path, both, "both.yaml"))
    assert "'steps.duration_us' is also in requires" in str(errors[0])


def test_severity_from_impact_share():
    assert severity_from_share(0.05) == "high"
    assert severity_from_share(0.049) == "medium"
    assert severity_from_share(0.03) == "medium"
    assert severity_from_share(0.029) == "low"
    assert severity_from_share(None) == "low"


def test_findings_ranked_by_impact(tmp_path):
    second = GOOD_RULE.replace("TEAM-001", "TEAM-002").replace("long-steps", "long-steps-b")
    second = second.replace("- max_us * rows(steps)", "- 10 * max_us * rows(steps) + 5000")
    path = write_rule(tmp_path, GOOD_RULE + "\n---\n" + second)
    rules, errors = load_one(path)
    assert errors == []
    result = evaluate(steps_profile([50, 400, 300]), rules, functions=BUILTIN_FUNCTIONS)
    assert [f.rule.id for f in result.findings] == ["TEAM-002", "TEAM-001"]
    assert [f.rank for f in result.findings] == [1, 2]


def test_runtime_error_is_isolated_to_its_rule(tmp_path):
    bad = GOOD_RULE.replace("TEAM-001", "TEAM-009").replace("long-steps", "bad-steps")
    bad = bad.replace("when: mean_us > max_us", "when: steps.duration_us > max_us")
    rules, _ = load_one(write_rule(tmp_path, GOOD_RULE + "\n---\n" + bad))
    result = evaluate(steps_profile([50, 400]), rules, functions=BUILTIN_FUNCTIONS)
    assert result.outcomes == {"TEAM-001": "fired", "TEAM-009": "error"}
    assert "any()" in result.errors[0][1]


def test_lets_only_the_message_reads_are_computed_once_the_rule_fires(tmp_path):
    """`when` reads mean_us, which reads total: those two are computed first; `late`, which
    only the message reads, waits for the rule to fire. Shown by a `late` that cannot be
    computed (a quantile beyond 1): the rule passes where it does not fire, and the error is
    its outcome where it does."""
    text = GOOD_RULE.replace(
        "  mean_us: mean(steps.duration_us)",
        "  total: sum(steps.duration_us)\n"
        "  late: quantile(steps.duration_us, 2)\n"
        "  mean_us: total / rows(steps)",
    )
    (rule,), errors = load_one(write_rule(tmp_path, text))
    assert not errors
    assert rule.lets_for_when == ("total", "mean_us")
    quiet = evaluate(steps_profile([50, 60]), [rule], functions=BUILTIN_FUNCTIONS)
    assert quiet.outcomes == {"TEAM-001": "passed"}
    loud = evaluate(steps_profile([50, 400]), [rule], functions=BUILTIN_FUNCTIONS)
    assert loud.outcomes == {"TEAM-001": "error"}
    assert "between 0 and 1" in loud.errors[0][1]


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (("docs:", "colour: red\ndocs:"), "Additional properties are not allowed ('colour'"),
        (("type: Model", "severity: critical\ntype: Model"), "severity: 'critical' is not one of"),
        (("when: mean_us > max_us", "when: steps.__class__"), "when:"),
        (("when: mean_us > max_us", "when: mean_us.real > 0"), "attribute access"),
        (("when: mean_us > max_us", "when: undefined_thing > 1"), "undefined_thing"),
        (("when: mean_us > max_us", "when: __import__('os')"), "when:"),
        (("columns: [step, duration_us]", "columns: [step, no_such]"), "no column 'no_such'"),
        (("requires: [steps.duration_us]", "requires: [steps.bogus]"), "steps.bogus"),
        (('message: "Mean', 'message: "{{ broken'), "message: invalid template"),
    ],
)
def test_invalid_rules_are_rejected_with_file_and_id(tmp_path, change, expected):
    path = write_rule(tmp_path, GOOD_RULE.replace(*change))
    rules, errors = load_one(path)
    assert rules == []
    (error,) = errors
    assert str(path) in str(error) and "TEAM-001" in str(error)
    assert expected in str(error)


def test_duplicate_yaml_keys_rejected(tmp_path):
    path = write_rule(tmp_path, GOOD_RULE + "title: again\n")
    _, (error,) = load_one(path)
    assert "duplicate key 'title'" in str(error)


def test_yaml_python_tags_never_construct_objects(tmp_path):
    marker = tmp_path / "pwned"
    path = write_rule(tmp_path, f"!!python/object/apply:os.system ['touch {marker}']\n")
    _, (error,) = load_one(path)
    assert "invalid YAML" in str(error)
    assert not marker.exists()


def test_one_bad_rule_does_not_hide_good_neighbours(tmp_path):
    bad = (
        GOOD_RULE.replace("TEAM-001", "TEAM-002")
        .replace("severity", "x")
        .replace("type: Model", "severity: nope\ntype: Model")
    )
    rules, errors = load_one(write_rule(tmp_path, GOOD_RULE + "\n---\n" + bad))
    assert [r.id for r in rules] == ["TEAM-001"] and len(errors) == 1


def test_later_rule_with_same_id_overrides(tmp_path):
    first = write_rule(tmp_path, GOOD_RULE, "a.yaml")
    second = write_rule(tmp_path, GOOD_RULE.replace("Steps are long", "Team version"), "b.yaml")
    ruleset, errors = load_rules([first, second], BUILTIN_FUNCTIONS)
    assert errors == []
    assert ruleset.rules["TEAM-001"].title == "Team version"
    assert "TEAM-001" in ruleset.overrides[0] and "b.yaml" in ruleset.overrides[0]


def test_message_template_cannot_reach_python_internals(tmp_path):
    text = GOOD_RULE.replace('message: "Mean', 'message: "{{ max_us.__class__.__mro__ }} Mean')
    rules, (error,) = load_one(write_rule(tmp_path, text))
    assert rules == [] and "names starting with '_' are never allowed" in str(error)


@pytest.mark.parametrize("text", ["Use fused operators.", "a }} b %} c #}", "x\n## y", "% y", ""])
def test_a_template_without_a_brace_is_plain_text_to_jinja_too(text: str):
    """check_template passes text holding no '{' without parsing it (most suggestions): no
    tag, variable or comment can start there, so Jinja reads it as data only."""
    from jinja2 import nodes

    from advisor.engine.templates import ENV, check_template

    assert check_template(text, names=()) is None
    kinds = {type(n) for n in ENV.parse(text).find_all(nodes.Node)}
    assert kinds <= {nodes.Output, nodes.TemplateData}


def test_the_rule_schema_with_its_references_inlined_judges_as_the_schema_does():
    """The validator checks rules against the schema with its $defs inlined (rules.
    inlined_refs): the same first error, path and message, on every built-in rule and on
    broken ones touching each reference."""
    import json

    import jsonschema
    import yaml

    from advisor.engine.rules import inlined_refs, rule_schema

    raws = [
        raw
        for path in sorted(Path(__file__).parents[1].joinpath("rules").glob("*.yaml"))
        if not path.name.endswith(".case.yaml")
        for raw in yaml.safe_load(path.read_text(encoding="utf-8"))
    ]
    base = raws[0]
    broken = [
        {**base, "when": ["x"]},
        {**base, "let": {"a": {"b": 1}}},
        {**base, "let": {"a": "x" * 2001}},
        {**base, "impact_us": None},
        {**base, "measured_us": []},
        {**base, "suggestions": [{"text": "t", "devices": ["TPU"]}]},
        {**base, "suggestions": [{"text": "t", "extra": 1}]},
        {**base, "suggestions": [""]},
        {**base, "evidence": {**base.get("evidence", {}), "where": {"x": 1}}},
        {**base, "unknown_key": 1},
    ]
    plain = jsonschema.Draft202012Validator(rule_schema())
    inlined = jsonschema.Draft202012Validator(inlined_refs(rule_schema()))
    assert "$ref" not in json.dumps(inlined.schema)

    def first(validator: jsonschema.Draft202012Validator, raw: dict) -> tuple | None:
        error = jsonschema.exceptions.best_match(validator.iter_errors(raw))
        return None if error is None else (list(error.absolute_path), error.message)

    assert len(raws) > 40 and all(first(inlined, raw) is None for raw in raws)
    for raw in broken:
        assert first(inlined, raw) is not None
        assert first(inlined, raw) == first(plain, raw), raw


def test_evidence_where_may_not_use_a_name_that_is_also_a_column(tmp_path):
    text = GOOD_RULE.replace(
        "  mean_us: mean(steps.duration_us)", "  mean_us: mean(steps.duration_us)\n  step: 3"
    )
    text = text.replace("where: duration_us > max_us", "where: step > 1")
    _, (error,) = load_one(write_rule(tmp_path, text))
    assert "'step' is both a param/let and a column of steps" in str(error)


def test_conform_aligns_rows_whatever_the_index():
    df = pd.DataFrame(
        {
            "step": [1, 2, 3],
            "start_us": [0.0, 10.0, 20.0],
            "end_us": [5.0, 15.0, 25.0],
            "duration_us": [5.0, 5.0, 5.0],
        }
    )
    filtered = df[df["step"] > 1]  # index 1, 2
    out = conform("steps", filtered)
    assert out["step"].tolist() == [2, 3] and out["start_us"].tolist() == [10.0, 20.0]


def test_blank_optional_columns_are_made_once_a_profile_and_only_for_the_rule_declaring_them():
    """BlankColumns: a rule's absent optional column reads as missing values of its contract
    dtype (nullable where the contract's is not), as long as its table; it is made once for
    all the rules of a profile, and what one rule does to it does not reach the next."""
    profile = steps_profile([50, 400, 300])
    blanks = BlankColumns(profile.tables)
    reads = blanks.for_rule(["steps.bubble_us", "host_ops.startup"])
    bubble = reads("steps", "bubble_us")
    assert bubble.isna().all() and len(bubble) == 3 and bubble.dtype == "float64"
    assert bubble.index.equals(profile.tables["steps"].index)
    startup = reads("host_ops", "startup")  # no host_ops at all: an empty column
    assert len(startup) == 0 and startup.dtype == "boolean"
    assert reads("steps", "comm_not_overlapped_us") is None  # not this rule's optional
    bubble.iloc[0] = 7.0  # a rule's value changed in place ...
    again = blanks.for_rule(["steps.bubble_us"])("steps", "bubble_us")
    assert again.isna().all()  # ... is not what the next rule reads
    assert list(blanks.made) == [("steps", "bubble_us"), ("host_ops", "startup")]


def test_a_blank_column_of_each_contract_dtype_is_what_pandas_makes_of_an_index() -> None:
    """A blank float column is built from a NaN array (cheaper than pandas filling an
    index): each blank column is the Series, dtype, index and name pandas makes of the
    index alone."""
    nullable = {"bool": "boolean", "int64": "Int64"}
    picked = {}  # one column of each contract dtype
    for table, spec in TABLES.items():
        for col in spec.columns:
            picked.setdefault(col.dtype, (table, col.name))
    assert sorted(picked) == ["Int64", "bool", "float64", "int64", "string"]
    index = pd.Index([5, 7, 9])
    blanks = BlankColumns({table: pd.DataFrame(index=index) for table, _ in picked.values()})
    for dtype, (table, column) in picked.items():
        expected = pd.Series(index=index, dtype=nullable.get(dtype, dtype), name=column)
        pd.testing.assert_series_equal(blanks.column(table, column), expected, check_exact=True)
