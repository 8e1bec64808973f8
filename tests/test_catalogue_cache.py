"""The parsed copies of the plugins' YAML catalogues (small_files.package_yaml), shipped beside
them or in the user's cache: the same data as parsing the file, no PyYAML once cached (never
for the built-in catalogues), and nothing trusted that is damaged, stale or that JSON cannot
hold."""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from advisor import small_files
from advisor.small_files import PARSED_SUFFIX, package_yaml, parsed_copy_json

CATALOGUES = [
    ("advisor_plugins", "env_catalogue.yaml"),
    ("advisor_plugins", "fusion_patterns.yaml"),
]


@pytest.fixture
def cache(user_cache: Path) -> Path:
    return user_cache


@pytest.fixture
def no_shipped(monkeypatch: pytest.MonkeyPatch) -> None:
    """The built-in catalogues' shipped copies left aside: the user's cache is used."""
    monkeypatch.setattr(small_files, "_shipped_copy", lambda path, text: None)


def _refuse_parsing(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(text: str) -> None:
        raise AssertionError("parsed")

    monkeypatch.setattr(small_files, "_parse_shipped_yaml", refuse)


def copies(cache: Path) -> list[Path]:
    return sorted((cache / "data").glob("*.json")) if (cache / "data").exists() else []


def parsed(package: str, name: str) -> object:
    from importlib import resources

    return yaml.safe_load(resources.files(package).joinpath(name).read_text(encoding="utf-8"))


@pytest.mark.parametrize(("package", "name"), CATALOGUES)
def test_cold_and_warm_give_what_the_file_says(
    cache: Path, no_shipped: None, package: str, name: str
) -> None:
    cold = package_yaml(package, name)
    (copy,) = copies(cache)
    warm = package_yaml(package, name)
    assert cold == warm == parsed(package, name)
    assert json.loads(copy.read_bytes())["data"] == cold


@pytest.mark.parametrize(("package", "name"), CATALOGUES)
def test_the_shipped_copy_is_what_the_file_says(
    cache: Path, monkeypatch: pytest.MonkeyPatch, package: str, name: str
) -> None:
    expected = parsed(package, name)
    _refuse_parsing(monkeypatch)
    assert package_yaml(package, name) == expected
    assert copies(cache) == []  # nothing to cache


def _yaml_imported(cache: Path, package: str, names: list[str], path: str = "") -> list[str]:
    """Whether PyYAML was imported by each of two runs reading `names` of `package`."""
    code = (
        "import sys\n"
        "from advisor.small_files import package_yaml\n"
        f"for name in {names!r}:\n"
        f"    package_yaml({package!r}, name)\n"
        "print('yaml' in sys.modules)\n"
    )
    env = {**os.environ, "ADVISOR_CACHE_DIR": str(cache)}
    env.pop("ADVISOR_NO_CACHE", None)
    if path:
        env["PYTHONPATH"] = path
    runs = [
        subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
        for _ in range(2)
    ]
    assert all(r.returncode == 0 for r in runs), [r.stderr for r in runs]
    return [r.stdout.strip() for r in runs]


def test_no_run_imports_yaml_for_the_builtin_catalogues(cache: Path) -> None:
    names = [name for _, name in CATALOGUES]
    assert _yaml_imported(cache, "advisor_plugins", names) == ["False", "False"]
    assert copies(cache) == []


def test_a_warm_run_never_imports_yaml(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A package shipping no parsed copy: the first run parses, the next reads the cache."""
    package = make_package(tmp_path, "first: 1\n", monkeypatch)
    assert _yaml_imported(cache, package, ["data.yaml"], str(tmp_path)) == ["True", "False"]
    assert len(copies(cache)) == 1


def test_a_stale_damaged_or_turned_off_shipped_copy_is_not_used(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = make_package(tmp_path, "first: 1\n", monkeypatch)
    shipped = tmp_path / package / ("data.yaml" + PARSED_SUFFIX)
    good = parsed_copy_json("first: 1\n")
    assert good is not None
    shipped.write_text(parsed_copy_json("first: 2\n") or "")  # made from another text
    assert package_yaml(package, "data.yaml") == {"first": 1}
    for damage in ("", "{not json", '{"text": "x"}', "[1, 2]"):
        shipped.write_text(damage)
        assert package_yaml(package, "data.yaml") == {"first": 1}
    shipped.write_text(good.replace('"first": 1', '"first": 3'))  # the copy, not the file
    for path in copies(cache):
        path.unlink()
    _refuse_parsing(monkeypatch)
    assert package_yaml(package, "data.yaml") == {"first": 3}
    monkeypatch.setenv("ADVISOR_NO_CACHE", "1")
    with pytest.raises(AssertionError, match="parsed"):
        package_yaml(package, "data.yaml")


def test_data_json_cannot_hold_is_never_shipped() -> None:
    assert parsed_copy_json("when: 2026-11-28\n") is None
    assert parsed_copy_json("1: one\n") is None
    assert parsed_copy_json("name: one\n") is not None


@pytest.mark.parametrize(
    "damage",
    [b"", b"{not json", b'{"other": 1}', b"[1, 2]", b"\xff\xfe"],
    ids=["empty", "torn", "no-data", "a-list", "not-utf8"],
)
def test_a_damaged_copy_is_ignored_and_rewritten(
    cache: Path, no_shipped: None, damage: bytes
) -> None:
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
