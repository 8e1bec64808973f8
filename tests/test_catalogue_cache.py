"""The parsed copies of the plugins' YAML catalogues in the user's cache (small_files.package_yaml):
the same data as parsing the file, no PyYAML once cached, and nothing trusted that is damaged,
stale or that JSON cannot hold."""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from advisor.small_files import package_yaml

CATALOGUES = [
    ("advisor_plugins", "env_catalogue.yaml"),
    ("advisor_plugins", "fusion_patterns.yaml"),
]


@pytest.fixture
def cache(user_cache: Path) -> Path:
    return user_cache


def copies(cache: Path) -> list[Path]:
    return sorted((cache / "data").glob("*.json")) if (cache / "data").exists() else []


def parsed(package: str, name: str) -> object:
    from importlib import resources

    return yaml.safe_load(resources.files(package).joinpath(name).read_text(encoding="utf-8"))


@pytest.mark.parametrize(("package", "name"), CATALOGUES)
def test_cold_and_warm_give_what_the_file_says(cache: Path, package: str, name: str) -> None:
    cold = package_yaml(package, name)
    (copy,) = copies(cache)
    warm = package_yaml(package, name)
    assert cold == warm == parsed(package, name)
    assert json.loads(copy.read_bytes())["data"] == cold


def test_a_warm_run_never_imports_yaml(cache: Path) -> None:
    code = (
        "import sys\n"
        "from advisor.small_files import package_yaml\n"
        "for name in ('env_catalogue.yaml', 'fusion_patterns.yaml'):\n"
        "    package_yaml('advisor_plugins', name)\n"
        "print('yaml' in sys.modules)\n"
    )
    env = {**os.environ, "ADVISOR_CACHE_DIR": str(cache)}
    env.pop("ADVISOR_NO_CACHE", None)
    runs = [
        subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
        for _ in range(2)
    ]
    assert [r.stdout.strip() for r in runs] == ["True", "False"], [r.stderr for r in runs]
    assert len(copies(cache)) == 2


@pytest.mark.parametrize(
    "damage",
    [b"", b"{not json", b'{"other": 1}', b"[1, 2]", b"\xff\xfe"],
    ids=["empty", "torn", "no-data", "a-list", "not-utf8"],
)
def test_a_damaged_copy_is_ignored_and_rewritten(cache: Path, damage: bytes) -> None:
    package, name = CATALOGUES[0]
    package_yaml(package, name)
    (copy,) = copies(cache)
    good = copy.read_bytes()
    copy.write_bytes(damage)
    assert package_yaml(package, name) == parsed(package, name)
    assert copy.read_bytes() == good


def test_another_text_is_another_copy(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = make_package(tmp_path, "first: 1\n", monkeypatch)
    assert package_yaml(package, "data.yaml") == {"first": 1}
    (tmp_path / package / "data.yaml").write_text("first: 2\n")
    assert package_yaml(package, "data.yaml") == {"first": 2}
    assert len(copies(cache)) == 2


def test_data_json_cannot_hold_is_parsed_every_time(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = make_package(tmp_path, "when: 2026-11-28\n1: one\n", monkeypatch)
    for _ in range(2):
        data = package_yaml(package, "data.yaml")
        assert data == {"when": datetime.date(2026, 11, 28), 1: "one"}
    assert copies(cache) == []


def test_no_cache_writes_nothing(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ADVISOR_NO_CACHE", "1")
    package, name = CATALOGUES[1]
    assert package_yaml(package, name) == parsed(package, name)
    assert not cache.exists()


def test_an_unwritable_cache_only_costs_time(blocked_cache: Path) -> None:
    package, name = CATALOGUES[0]
    assert package_yaml(package, name) == parsed(package, name)
    assert blocked_cache.read_text() == "not a folder"


_PACKAGES = iter(range(1000))


def make_package(folder: Path, text: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """A package of one data file, importable from `folder` (each call a new name: the
    package is imported once per test session)."""
    name = f"catalogue_cache_case_{next(_PACKAGES)}"
    (folder / name).mkdir()
    (folder / name / "__init__.py").write_text("")
    (folder / name / "data.yaml").write_text(text)
    monkeypatch.syspath_prepend(str(folder))
    return name
