"""The documentation stays in step with the code it describes."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from conftest import ROOT

from advisor import docgen
from advisor.engine.functions import BUILTIN_FUNCTIONS
from advisor.engine.rules import load_rule_file

DOCS = ROOT / "docs"
README_TEST_COMMAND = 'pip install -e ".[test]" && python -m pytest'


def read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def code_blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", text, flags=re.M | re.S)


def hook_signatures() -> dict[str, str]:
    """Hook name -> `name(args) -> Return` as written in advisor/hookspecs.py."""
    tree = ast.parse(read(ROOT / "advisor" / "hookspecs.py"))
    return {
        node.name: f"{node.name}({ast.unparse(node.args)}) -> {ast.unparse(node.returns)}"
        for node in tree.body
        if isinstance(node, ast.FunctionDef) and node.name.startswith("advisor_")
    }


def test_every_builtin_function_is_documented():
    text = read(DOCS / "rule-authoring.md")
    missing = [name for name in BUILTIN_FUNCTIONS if f"`{name}(" not in text]
    assert missing == [], f"functions missing from docs/rule-authoring.md: {missing}"


def test_every_hook_is_documented_with_its_signature():
    text = read(DOCS / "plugins.md")
    hooks = hook_signatures()
    assert hooks, "no advisor_* hooks found in advisor/hookspecs.py"
    assert [name for name in hooks if name not in text] == []
    assert [sig for sig in hooks.values() if f"`{sig}`" not in text] == []


YAML_RULE_BLOCKS = [
    block for block in code_blocks(read(DOCS / "rule-authoring.md"), "yaml") if "id:" in block
]


def test_rule_authoring_has_rule_examples():
    assert YAML_RULE_BLOCKS


@pytest.mark.parametrize(
    "block", YAML_RULE_BLOCKS, ids=[f"yaml-block-{i}" for i in range(len(YAML_RULE_BLOCKS))]
)
def test_yaml_rule_examples_load(tmp_path, block):
    path = tmp_path / "example.yaml"
    path.write_text(block, encoding="utf-8")
    rules, errors = load_rule_file(path, BUILTIN_FUNCTIONS)
    assert errors == []
    assert rules


def test_generated_docs_are_up_to_date():
    for path, text in docgen.outputs(ROOT).items():
        assert path.exists(), f"{path.relative_to(ROOT)} missing: run `python -m advisor.docgen`"
        assert read(path) == text, (
            f"{path.relative_to(ROOT)} is stale: run `python -m advisor.docgen`"
        )


def test_readme_commands():
    blocks = [b.strip() for b in code_blocks(read(ROOT / "README.md"), "bash")]
    assert len(blocks) >= 2
    install_and_run = blocks[0]
    assert "\n" not in install_and_run
    match = re.fullmatch(r"pip install \. && advisor run (\S+) -o \S+", install_and_run)
    assert match, install_and_run
    assert (ROOT / match.group(1)).is_dir(), f"{match.group(1)} does not exist"
    assert blocks[1] == README_TEST_COMMAND
    ci_lines = [line.strip() for line in read(ROOT / ".ci" / "run").splitlines()]
    assert README_TEST_COMMAND in ci_lines


def test_architecture_names_every_module_and_only_modules_that_exist():
    """docs/architecture.md is the map of the code: each path it names exists, and every
    module of advisor/ and plugins/ is on it (directly or through its package)."""
    text = read(DOCS / "architecture.md")
    named = set(re.findall(r"`((?:advisor|plugins)/[\w/.]*)`", text))
    assert [p for p in named if not (ROOT / p.rstrip("/")).exists()] == []
    folders = [n for n in named if n.endswith("/")]
    modules = [
        str(p.relative_to(ROOT))
        for folder in ("advisor", "plugins")
        for p in (ROOT / folder).rglob("*.py")
        if p.name not in ("__init__.py", "__main__.py")
    ]
    unnamed = [
        m
        for m in modules
        if m not in named
        and f"`{Path(m).name}`" not in text
        and not any(m.startswith(f) for f in folders)
    ]
    assert unnamed == []
