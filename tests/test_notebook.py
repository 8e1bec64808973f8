"""docs/notebook.md runs as written, and what its cells show is the report.

The doc's ```python cells are executed in order in one namespace from the repository root, as
a notebook kernel would: a cell's last expression is what the notebook displays (kept as the
cell's output). Then the displayed results are checked: their `_repr_html_` is the report
page's own content (same templates, no script, styles scoped), and the DataFrame accessors
have the documented columns and the rows of the findings and tables they stand for.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import ROOT
from markupsafe import escape

from advisor.render.compare_html import render_compare_html
from advisor.render.compare_outputs import compare_document
from advisor.render.fragment import SCOPE, scope_css
from advisor.render.html import render_html

DOC = ROOT / "docs" / "notebook.md"
FINDING_COLUMNS = [
    "profile",
    "rank",
    "rule_id",
    "title",
    "severity",
    "impact_us",
    "impact_ratio",
    "step_time_if_fixed_us",
    "message",
]


def cells() -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", DOC.read_text(encoding="utf-8"), flags=re.M | re.S)


def run_cell(source: str, namespace: dict[str, Any]) -> Any:
    """Execute one cell; return the value of its last expression (None when it ends in a
    statement), which is what a notebook would display."""
    tree = ast.parse(source)
    last = tree.body[-1] if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    body = tree.body[:-1] if last is not None else tree.body
    exec(compile(ast.Module(body=body, type_ignores=[]), str(DOC), "exec"), namespace)
    if last is None:
        return None
    return eval(compile(ast.Expression(last.value), str(DOC), "eval"), namespace)


@pytest.fixture(scope="module")
def notebook() -> Iterator[tuple[dict[str, Any], list[Any]]]:
    """The doc's namespace after running every cell, and each cell's displayed value."""
    namespace: dict[str, Any] = {"__name__": "notebook"}
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(ROOT)
        shown = [run_cell(cell, namespace) for cell in cells()]
        yield namespace, shown


def ids(html: str) -> set[str]:
    return set(re.findall(r'\bid="([^"]+)"', html))


def selectors(css: str) -> list[str]:
    """Every selector of the style rules in `css` (at-rule preludes left out)."""
    preludes = re.findall(r"([^{}]+)\{", re.sub(r"/\*.*?\*/", "", css, flags=re.S))
    return [s.strip() for p in preludes if not p.strip().startswith("@") for s in p.split(",")]


def fragment_parts(html: str) -> tuple[str, str]:
    """(style sheet, content) of a fragment, checking its wrapper on the way."""
    assert html.startswith(f'<div class="{SCOPE}">\n<style>') and html.endswith("</div>\n")
    css, _, content = html.removeprefix(f'<div class="{SCOPE}">\n<style>').partition("</style>\n")
    return css, content.removesuffix("</div>\n")


def unprefixed(html: str) -> str:
    """The fragment with its anchor prefix taken out, as the page writes its anchors."""
    prefix = re.search(r'\bid="(r[0-9a-f]{8}-)', html)
    assert prefix, "the fragment's anchors carry no prefix"
    return html.replace(prefix.group(1), "")


def test_every_cell_runs_and_the_results_display_as_html(notebook):
    namespace, shown = notebook
    assert len(shown) >= 10
    kinds = [(type(v).__module__.split(".")[0], type(v).__name__) for v in shown]
    assert [name for module, name in kinds if module == "advisor"] == [
        "AnalysisResult",
        "ProfileAnalysis",
        "CompareResult",
    ]
    assert all(v is not None for v in shown)  # every cell ends in what it shows
    assert namespace["result"].findings, "the doc's profile should have findings to show"


def test_the_result_shows_every_finding_without_a_script(notebook):
    namespace, _ = notebook
    result = namespace["result"]
    html = result._repr_html_()
    assert all(str(escape(f.title)) in html for f in result.findings)
    assert all(str(escape(f.message)) in html for f in result.findings)
    lowered = html.lower()
    assert "<script" not in lowered and "<html" not in lowered and "<body" not in lowered
    assert "<svg" in html  # the step chart


def test_the_fragment_is_the_report_pages_content(notebook):
    """Same templates: the page's body (before its script) is the fragment's content, anchors
    aside, so whatever report.html shows the notebook shows."""
    namespace, _ = notebook
    for result in (namespace["result"], namespace["ranks"]):
        page = render_html(result.reports)
        body = page.split("<body>\n", 1)[1].split("<script>", 1)[0]
        _, content = fragment_parts(result._repr_html_())
        assert unprefixed(content) == body
    analysis = namespace["analysis"]
    _, content = fragment_parts(analysis._repr_html_())
    assert (
        unprefixed(content)
        == render_html([analysis.report]).split("<body>\n", 1)[1].split("<script>", 1)[0]
    )


def test_the_compare_fragment_is_the_compare_pages_content(notebook):
    namespace, _ = notebook
    diff = namespace["diff"]
    html = diff._repr_html_()
    assert diff.findings and all(str(escape(f.title)) in html for f in diff.findings)
    assert "<script" not in html.lower()
    document = compare_document(diff.tables, diff.report["profile"], diff.report["advisor"])
    page = render_compare_html(diff.report, document)
    _, content = fragment_parts(html)
    assert unprefixed(content) == page.split("<body>\n", 1)[1].split("</body>", 1)[0]


def test_styles_are_scoped_to_the_fragment(notebook):
    namespace, _ = notebook
    for html in (namespace["result"]._repr_html_(), namespace["diff"]._repr_html_()):
        css, content = fragment_parts(html)
        found = selectors(css)
        assert len(found) > 50
        assert [s for s in found if not s.startswith(f".{SCOPE}")] == []
        assert "<style" not in content  # no unscoped sheet left in the content


def test_each_display_has_its_own_anchors(notebook):
    namespace, _ = notebook
    result, diff = namespace["result"], namespace["diff"]
    first, second, third = result._repr_html_(), result._repr_html_(), diff._repr_html_()
    assert ids(first) and not ids(first) & ids(second)
    assert not ids(first) & ids(third)
    links = set(re.findall(r'href="#([^"]+)"', first))
    assert links and links <= ids(first)  # the ranking links to this report's findings


def test_scope_css_rewrites_page_selectors_and_keeps_at_rules():
    css = (
        ":root { --a: 1; }\n* { box-sizing: border-box; }\nbody, h1 { margin: 0; }\n"
        "/* a comment { */ td:is(.x, .y) > b { color: red; }\n"
        "@media print { :root { color-scheme: light; } .num { x: 1; } }\n"
        "@keyframes spin { from { opacity: 0; } to { opacity: 1; } }\n"
    )
    assert scope_css(css, ".s") == (
        ".s { --a: 1; }\n.s * { box-sizing: border-box; }\n.s, .s h1 { margin: 0; }\n"
        " .s td:is(.x, .y) > b { color: red; }\n"
        "@media print { .s { color-scheme: light; } .s .num { x: 1; } }\n"
        "@keyframes spin { from { opacity: 0; } to { opacity: 1; } }\n"
    )
    with pytest.raises(ValueError, match="unbalanced"):
        scope_css("a { b: c;", ".s")


def test_findings_frame_has_one_row_per_finding(notebook):
    namespace, shown = notebook
    result, findings = namespace["result"], namespace["findings"]
    assert list(findings.columns) == FINDING_COLUMNS
    assert len(findings) == len(result.findings)
    assert findings["rank"].tolist() == list(range(1, len(result.findings) + 1))
    assert findings["rule_id"].tolist() == [f.rule.id for f in result.findings]
    assert findings["impact_us"].dtype == "float64" and findings["rank"].dtype == "int64"
    assert set(findings["severity"]) <= {"high", "medium", "low"}
    assert len(shown[cells().index(next(c for c in cells() if "findings_frame" in c))]) == len(
        findings
    )
    analysis = namespace["analysis"]
    assert analysis.findings_frame().equals(findings)  # one profile: the same rows
    loader = namespace["loader"]
    assert loader.findings_frame()["rule_id"].tolist() == [f.rule.id for f in loader.findings]
    diff_findings = namespace["diff_findings"]
    assert list(diff_findings.columns) == FINDING_COLUMNS
    assert diff_findings["rule_id"].tolist() == [f.rule.id for f in namespace["diff"].findings]


def test_tables_are_dataframes_with_a_rank_column(notebook):
    namespace, _ = notebook
    result, ops = namespace["result"], namespace["ops"]
    assert "device_ops" in result.tables and result.tables == sorted(result.tables)
    profile_ops = result.analyses[0].tables["device_ops"]
    assert len(ops) == len(profile_ops) > 0
    assert list(ops.columns) == ["rank", *(c for c in profile_ops.columns if c != "rank")]
    assert ops["rank"].isna().all()  # this profile records no rank
    assert len(namespace["busiest"]) == 5 and namespace["busiest"].is_monotonic_decreasing
    assert not namespace["op_stats"].empty
    with pytest.raises(KeyError, match="device_ops"):
        result.table("no_such_table")


def test_several_ranks_are_concatenated_with_their_rank(notebook):
    namespace, _ = notebook
    ranks, steps = namespace["ranks"], namespace["steps"]
    per_profile = {
        a.profile.meta.rank: a.tables["steps"] for a in ranks.analyses if "steps" in a.tables
    }
    assert set(per_profile) == {0, 1}
    assert len(steps) == sum(len(t) for t in per_profile.values())
    assert steps.groupby("rank").size().to_dict() == {r: len(t) for r, t in per_profile.items()}
    assert namespace["rank1_steps"].equals(per_profile[1])
    per_rank = namespace["per_rank"]
    assert per_rank["rank"].tolist() == [0, 1]  # the cluster's own rank column, not a second
    assert list(ranks.table("ranks").columns).count("rank") == 1
    with pytest.raises(KeyError, match=r"ranks: \[0, 1\]"):
        ranks.table("steps", rank=7)


def test_compare_tables_are_dataframes(notebook):
    namespace, _ = notebook
    diff, changed = namespace["diff"], namespace["changed"]
    assert not changed.empty and len(changed) == len(diff.tables["compare_op_stats"])
    assert diff.table("compare_overall") is diff.tables["compare_overall"]
    with pytest.raises(KeyError, match="compare_overall"):
        diff.table("steps_of_nothing")


def test_importing_the_api_loads_no_renderer():
    """The notebook view's modules load when a result is shown, never on import."""
    probe = (
        "import json, sys, advisor\n"
        "light = sorted(m for m in ('pandas', 'jinja2', 'advisor.api') if m in sys.modules)\n"
        "import advisor.api, advisor.compare\n"
        "late = ('advisor.render.html', 'advisor.render.compare_html', "
        "'advisor.render.fragment', 'advisor.render.frames')\n"
        "print(json.dumps([light, sorted(m for m in late if m in sys.modules)]))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == [[], []]
