"""English and Chinese texts: zh blocks in rule files, --lang, and the locale default."""

from __future__ import annotations

import json
import re
import string
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import DEMO, ROOT

from advisor.api import analyze
from advisor.cases import CaseRunner, case_files, load_case_file
from advisor.cli import main
from advisor.compare.breakdown import METRICS
from advisor.engine.functions import BUILTIN_FUNCTIONS
from advisor.engine.outcome import SEVERITIES
from advisor.engine.rules import build_rule, load_rules
from advisor.errors import RuleError
from advisor.model import Profile, ProfileMeta
from advisor.plugin_manager import PluginHost
from advisor.render.format import column_format
from advisor.render.json_report import validate_report
from advisor.render.messages import CATALOG, LANGS, message
from advisor.ruleset import load_ruleset
from advisor.workload import WORKLOAD_WORDS
from advisor_plugins.memory_timeline import KINDS as MEMORY_KINDS

RULES = ROOT / "rules"
RENDER = ROOT / "advisor" / "render"
CJK = re.compile(r"[\u4e00-\u9fff]")
CODE_ONLY = re.compile(r"[\w.]+(=\w+|\([\w.=]*\))")  # profile_memory=True, Profiler(...)
LOCALE_VARS = ("LC_ALL", "LC_MESSAGES", "LANG")


def rule(**extra: object) -> dict:
    base = {
        "id": "TEST-001",
        "name": "slow-steps",
        "title": "Steps are slow",
        "type": "Step",
        "params": {"limit_us": 100},
        "let": {"worst_us": "max(steps.duration_us)"},
        "when": "worst_us > limit_us",
        "message": "The slowest step takes {{ worst_us|us }} (limit {{ limit_us|us }}).",
        "suggestions": ["Look at step {{ evidence_total }}.", "Profile again."],
        "docs": "What it checks: the slowest step against a limit.",
    }
    return {**base, **extra}


ZH = {
    "title": "迭代过慢",
    "message": "最慢的迭代耗时 {{ worst_us|us }}（阈值 {{ limit_us|us }}）。",
    "suggestions": ["查看第 {{ evidence_total }} 个迭代。", "重新采集性能数据。"],
}


def test_zh_block_is_loaded_and_english_stays_the_fallback():
    built = build_rule(rule(zh=ZH), "test.yaml", BUILTIN_FUNCTIONS)
    assert built.text("zh").title == "迭代过慢"
    assert built.text("zh").suggestions == tuple(ZH["suggestions"])
    assert built.text("en").message == built.message
    plain = build_rule(rule(), "test.yaml", BUILTIN_FUNCTIONS)
    assert plain.text("zh").title == "Steps are slow"


def test_folded_chinese_lines_join_without_a_space():
    """YAML's folded style joins lines with a space, which Chinese never has between two of
    its characters nor beside full-width punctuation; spaces between Chinese and Latin text,
    digits and template tags stay."""
    folded = {
        "title": "迭代 过慢",
        "message": "最慢的 stage 耗时 {{ worst_us|us }}， 阈值 {{ limit_us|us }}。 请 检查， "
        "{{ limit_us|num }} 个迭代 （共 {{ worst_us|num }} 次） 。",
        "suggestions": ["查看第 {{ evidence_total }} 个迭代， 再 采集。", "重新采集 Level1 数据。"],
    }
    text = build_rule(rule(zh=folded), "test.yaml", BUILTIN_FUNCTIONS).text("zh")
    assert text.title == "迭代过慢"
    assert text.message == (  # no space beside full-width punctuation, even before a tag
        "最慢的 stage 耗时 {{ worst_us|us }}，阈值 {{ limit_us|us }}。请检查，"
        "{{ limit_us|num }} 个迭代（共 {{ worst_us|num }} 次）。"
    )
    assert text.suggestions == (
        "查看第 {{ evidence_total }} 个迭代，再采集。",
        "重新采集 Level1 数据。",
    )


def test_no_builtin_chinese_text_has_a_space_between_chinese_characters():
    ruleset, errors = load_rules([RULES], BUILTIN_FUNCTIONS)
    assert errors == []
    between = re.compile(
        r"[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef] +[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]"
    )
    for r in ruleset.rules.values():
        zh = r.translations["zh"]
        for text in (zh.title, zh.message, *zh.suggestions, zh.impact_note or ""):
            assert not between.search(text), (r.id, text)


@pytest.mark.parametrize(
    "zh, problem",
    [
        ({**ZH, "suggestions": ZH["suggestions"][:1]}, "zh.suggestions: 1 given, the English"),
        ({**ZH, "message": "耗时 {{ worst_us|us "}, "zh.message: invalid template"),
        ({**ZH, "message": "耗时 {{ worst_time|us }}"}, "unknown variable 'worst_time'"),
        ({**ZH, "suggestions": ["{% for %}", "好"]}, "zh.suggestions[0]: invalid template"),
        ({k: v for k, v in ZH.items() if k != "title"}, "'title' is a required property"),
        ({**ZH, "docs": "不允许的键"}, "Additional properties are not allowed"),
    ],
)
def test_bad_zh_block_is_refused_naming_the_rule(zh: dict, problem: str):
    with pytest.raises(RuleError) as info:
        build_rule(rule(zh=zh), "test.yaml", BUILTIN_FUNCTIONS)
    assert problem in str(info.value)
    assert "TEST-001" in str(info.value)


@pytest.mark.parametrize(
    "message, unknown",
    [
        ("耗时 {% for row in evidence %}{{ row.step }}{% endfor %}", None),  # a loop's own
        ("{% set worst = worst_us %}耗时 {{ worst|us }}", None),  # set before it is read
        ("耗时 {{ worst|us }}{% set worst = worst_us %}", "worst"),  # read before it is set
        ("{% for row in evidence %}{% endfor %}{{ row }}", "row"),  # read after its loop
    ],
)
def test_zh_variables_set_inside_the_template_are_told_from_unknown_ones(
    message: str, unknown: str | None
):
    """A template loading a name the rule does not give is analysed by Jinja's scopes: a
    loop or set variable is the template's own where it is read, not otherwise."""
    raw = rule(zh={**ZH, "message": message})
    if unknown is None:
        assert build_rule(raw, "test.yaml", BUILTIN_FUNCTIONS).translations["zh"]
        return
    with pytest.raises(RuleError, match=f"unknown variable '{unknown}'"):
        build_rule(raw, "test.yaml", BUILTIN_FUNCTIONS)


def test_every_builtin_rule_has_a_complete_zh_block():
    ruleset, errors = load_rules([RULES], BUILTIN_FUNCTIONS)
    assert errors == []
    builtin = list(ruleset.rules.values())
    assert len(builtin) >= 30
    for r in builtin:
        zh = r.translations.get("zh")
        assert zh is not None, f"{r.id} has no zh block"
        assert CJK.search(zh.title) and CJK.search(zh.message), r.id
        assert len(zh.suggestions) == len(r.suggestions), r.id
        assert all(CJK.search(s) for s in zh.suggestions), r.id


def test_zh_findings_on_the_demo_are_chinese():
    result = analyze(DEMO, lang="zh")
    findings = result.findings
    assert findings
    for f in findings:
        assert CJK.search(f.title) and CJK.search(f.message), f.rule.id
        assert not f.message.startswith("[message template error"), f.message
        assert all(CJK.search(s) for s in f.suggestions), f.rule.id
    english = analyze(DEMO, lang="en").findings
    assert [f.rule.id for f in english] == [f.rule.id for f in findings]
    assert not any(CJK.search(f.message) for f in english)


def test_every_builtin_rule_renders_chinese_on_its_firing_cases():
    """The demo fires a few rules; the rules' own firing cases reach every one of them."""
    host = PluginHost()
    ruleset, errors = load_ruleset(host, [])
    assert errors == []
    runner = CaseRunner(ruleset, host, lang="zh")
    rendered = set()
    for path in case_files(RULES):
        for case in load_case_file(path):
            if not case.expect["fires"]:
                continue
            _, evaluation = runner.evaluate(case)
            (finding,) = evaluation.findings
            assert CJK.search(finding.title) and CJK.search(finding.message), case.where
            assert "template error" not in finding.message, case.where
            assert all(CJK.search(s) for s in finding.suggestions), case.where
            rendered.add(case.rule_id)
    assert rendered == set(ruleset.rules)


def test_every_builtin_collect_hint_has_a_chinese_text():
    """How to collect the data a rule lacks is shown in the report's language: each built-in
    reader gives the Chinese text of every hint it can give (a hint that is only code, such as
    `profile_memory=True`, reads the same in both)."""
    from advisor_plugins.kineto.hints import GPU_WITHOUT_COPIES, UNLABELLED_COPIES

    for _, reader in PluginHost().readers():
        texts = {*getattr(reader, "collect", {}).values()}
        if reader.name == "kineto":
            texts |= {GPU_WITHOUT_COPIES, UNLABELLED_COPIES}  # set per trace with GPU activity
        zh = getattr(reader, "collect_zh", {})
        lacking = [t for t in texts if CODE_ONLY.fullmatch(t) is None and t not in zh]
        assert lacking == [], reader.name
        assert all(zh[t] != t for t in texts if t in zh), reader.name


def test_a_chinese_report_says_in_chinese_how_to_collect_what_is_missing():
    trace = ROOT / "tests/fixtures/kineto_own/with_stack.pt.trace.json.gz"
    zh = analyze(trace, lang="zh").analyses[0].evaluation.inapplicable
    en = analyze(trace, lang="en").analyses[0].evaluation.inapplicable
    hints_zh = {h for why in zh.values() for h in why.collect}
    hints_en = {h for why in en.values() for h in why.collect}
    assert "采集分布式训练本身（torch.distributed 集合通信）" in hints_zh
    assert "profile the distributed run itself (torch.distributed collectives)" in hints_en
    assert not any(CJK.search(h) for h in hints_en)
    assert all(CJK.search(h) or CODE_ONLY.fullmatch(h) for h in hints_zh), hints_zh


def test_analyze_refuses_an_unknown_language():
    with pytest.raises(ValueError, match="unknown language 'fr'"):
        analyze(DEMO, lang="fr")


def run(tmp_path: Path, *args: str, env: dict[str, str | None] | None = None):
    out = tmp_path / "out"
    result = CliRunner().invoke(
        main,
        ["run", str(DEMO), "-o", str(out), *args],
        env={**dict.fromkeys(LOCALE_VARS), **(env or {})},
    )
    return result, out


def test_run_lang_zh_writes_chinese_json_html_and_summary(tmp_path: Path):
    result, out = run(tmp_path, "--lang", "zh")
    assert result.exit_code == 0, result.output
    report = json.loads((out / "prof_rule_0.json").read_text(encoding="utf-8"))
    validate_report(report)
    assert report["advisor"]["lang"] == "zh"
    groups = [g for groups in report["data"].values() for g in groups]
    assert groups and all(set(g) == {"Rule Type", "Rule Description", "result"} for g in groups)
    for g in groups:
        finding = g["result"][0]
        assert CJK.search(g["Rule Description"]) and g["Rule Description"] == finding["title"]
        assert CJK.search(finding["message"]) and CJK.search(finding["Rule Suggestion"])
    html = (out / "report.html").read_text(encoding="utf-8")
    assert '<html lang="zh">' in html
    assert "按严重程度和涉及时间排序的发现" in html and "调优建议" in html
    assert "Findings ranked by severity and time at stake" not in html and "What to try" not in html
    assert groups[0]["Rule Description"] in html
    assert groups[0]["Rule Description"] in result.output
    assert "条规则未执行" in result.output


def test_run_lang_en_keeps_english(tmp_path: Path):
    result, out = run(tmp_path, "--lang", "en")
    assert result.exit_code == 0, result.output
    report = json.loads((out / "prof_rule_0.json").read_text(encoding="utf-8"))
    assert report["advisor"]["lang"] == "en"
    html = (out / "report.html").read_text(encoding="utf-8")
    assert '<html lang="en">' in html and "Findings ranked by severity and time at stake" in html
    assert not CJK.search(html) and not CJK.search(result.output)


MI250 = ROOT / "tests/fixtures/real/kineto/amd_trace__mi250_minitoy_train_ROCm6_2_kineto.json.gz"
MI250_WARNINGS = {
    "en": (
        "no distributedInfo: rank and world size unknown",
        "the last step 2 (49.1 µs) ran no device task while the steps before it did",
    ),
    "zh": (
        "没有 distributedInfo：rank 和 world size 未知",
        "最后一个迭代 2（49.1 µs）没有运行任何设备任务，而之前的迭代都有",
    ),
}


@pytest.mark.parametrize("lang", LANGS)
def test_warnings_are_in_the_reports_language(tmp_path: Path, lang: str):
    """The real MI250 trace's two warnings (its reader's and the steps' check) as the CLI
    prints them, in the JSON report and on the HTML page: in the run's language."""
    out = tmp_path / "out"
    result = CliRunner().invoke(
        main, ["run", str(MI250), "-o", str(out), "--lang", lang, "--format", "json,html"]
    )
    assert result.exit_code == 0, result.output
    (written,) = out.glob("prof_rule_*.json")
    report = json.loads(written.read_text(encoding="utf-8"))
    validate_report(report)
    problems = [w["problem"] for w in report["warnings"]]
    assert len(problems) == 2
    page = (out / "report.html").read_text(encoding="utf-8")
    for expected, problem in zip(MI250_WARNINGS[lang], problems):
        assert problem.startswith(expected)
        assert f"warning: {MI250}: {expected}" in result.output
        assert expected in page
    assert all(bool(CJK.search(p)) == (lang == "zh") for p in problems)


def test_a_warning_without_chinese_text_stays_english_in_a_chinese_report(tmp_path: Path):
    profile = Profile(ProfileMeta("test", str(tmp_path)))
    profile.warn("a.csv", "3 rows without a time; skipped", line=4)
    profile.warn_whole("too short", zh="太短")
    plain, translated = profile.warnings
    assert plain.to_dict("zh")["problem"] == "3 rows without a time; skipped"
    assert (
        plain.line_in("zh") == str(plain) == f"{tmp_path}/a.csv:4: 3 rows without a time; skipped"
    )
    assert translated.line_in("zh") == f"{tmp_path}: 太短"
    assert str(translated) == f"{tmp_path}: too short"


@pytest.mark.parametrize(
    "env, lang",
    [
        ({"LANG": "zh_CN.UTF-8"}, "zh"),
        ({"LANG": "en_US.UTF-8"}, "en"),
        ({}, "en"),
        ({"LC_ALL": "zh_CN.UTF-8", "LANG": "en_US.UTF-8"}, "zh"),
        ({"LC_MESSAGES": "C", "LANG": "zh_CN.UTF-8"}, "en"),
    ],
)
def test_default_language_comes_from_the_locale(tmp_path: Path, env: dict, lang: str):
    result, out = run(tmp_path, "--format", "json", env=env)
    assert result.exit_code == 0, result.output
    report = json.loads((out / "prof_rule_0.json").read_text(encoding="utf-8"))
    assert report["advisor"]["lang"] == lang


def test_unknown_lang_is_a_one_line_usage_error(tmp_path: Path):
    result, _ = run(tmp_path, "--lang", "fr")
    assert result.exit_code == 2
    assert "Traceback" not in result.output and "'fr' is not one of" in result.output


# --- the message catalog --------------------------------------------------------------------


def _fields(text: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(text) if name} - {"s"}


def test_every_message_has_both_languages_with_the_same_blanks():
    for key, text in CATALOG.items():
        assert text._fields == LANGS, key
        assert text.en.strip() and text.zh.strip(), key
        # Chinese counts all the files where English counts the ones not named
        extra = {"total"} if key == "names_and_more" else set()
        assert _fields(text.zh) <= _fields(text.en) | extra, key
        message("zh", key, **dict.fromkeys(_fields(text.en) | extra, 1))


def test_every_message_is_used_and_every_one_used_exists():
    sources = "".join(
        p.read_text(encoding="utf-8")
        for p in [*RENDER.glob("*.py"), *(RENDER / "templates").glob("*.j2")]
    )
    # literal keys only: "severity." ~ value in a template is a family, checked below
    used = set(re.findall(r"""\b(?:tr|message)\((?:lang, )?["']([a-z_.]*[a-z_])["']""", sources))
    assert used - set(CATALOG) == set()
    ruleset, errors = load_rules([RULES], BUILTIN_FUNCTIONS)
    assert errors == []
    evidence_columns = {  # every built-in rule's evidence column has a heading in both
        f"column.{column_format(c, [1.0]).stem}"
        for r in ruleset.rules.values()
        if r.evidence is not None
        for c in r.evidence.columns
    }
    families = {  # keys the renderers build from a value: complete, not more
        "severity.": {f"severity.{s}" for s in SEVERITIES},
        "metric.": {f"metric.{m}" for m, _ in METRICS},
        "memory_kind.": {f"memory_kind.{kind}" for kind in MEMORY_KINDS},
        "workload.": {f"workload.{kind}" for kind in WORKLOAD_WORDS},
        "column.": evidence_columns | {k for k in used if k.startswith("column.")},
    }
    for prefix, expected in families.items():
        assert {k for k in CATALOG if k.startswith(prefix)} == expected, prefix
    unused = [
        k
        for k in CATALOG
        if not k.startswith(tuple(families)) and f'"{k}"' not in sources and f"'{k}'" not in sources
    ]
    assert unused == []
