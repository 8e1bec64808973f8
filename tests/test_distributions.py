"""advisor.distributions finds the entry points and versions importlib.metadata finds: in this
environment, in made-up site folders (several copies of a name, egg-info, comments) and, by
handing over to importlib.metadata, in a zip archive on sys.path."""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path

import pytest

from advisor import distributions
from advisor.compat import importlib_metadata

metadata = importlib_metadata()  # the backport on Python 3.9, as advisor.distributions uses


def _importlib_points(group: str) -> list[tuple[str, str, str, str | None, str | None]]:
    return [
        (ep.name, ep.value, ep.group, ep.dist.metadata["Name"], ep.dist.metadata["Version"])
        for ep in metadata.entry_points(group=group)
        if ep.dist is not None
    ]


def _points(group: str) -> list[tuple[str, str, str, str | None, str | None]]:
    return [
        (ep.name, ep.value, ep.group, ep.dist.name, ep.dist.version)
        for ep in distributions.entry_points(group)
        if ep.dist is not None
    ]


def test_this_environment_has_the_same_entry_points_in_the_same_order() -> None:
    groups = {ep.group for dist in metadata.distributions() for ep in dist.entry_points}
    assert "advisor" in groups and "console_scripts" in groups
    for group in groups:
        assert _points(group) == _importlib_points(group), group
    assert not distributions._importlib_only()  # the comparison was of the folder reading


def test_this_environment_has_the_same_versions() -> None:
    names = {dist.metadata["Name"] for dist in metadata.distributions()}
    assert {"PyYAML", "Jinja2", "jsonschema", "dl-perf-advisor"} <= names
    for name in names:
        assert distributions.version(name) == metadata.version(name), name
    assert distributions.version("pyyaml") == metadata.version("PyYAML")
    with pytest.raises(distributions.PackageNotFoundError):
        distributions.version("no-such-distribution-anywhere")


def _site(root: Path, folder: str, metadata_text: str, entry_points: str | None) -> None:
    info = root / folder
    info.mkdir(parents=True)
    (info / ("PKG-INFO" if folder.endswith(".egg-info") else "METADATA")).write_text(metadata_text)
    if entry_points is not None:
        (info / "entry_points.txt").write_text(entry_points)


def test_made_up_sites_read_as_importlib_reads_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    _site(
        first,
        "Team.Plugins-2.0.dist-info",
        "Metadata-Version: 2.1\nName: team.plugins\nVersion: 2.0\n\nName: not this one\n",
        "before = any.header\n[advisor]\n# a comment\n\n"
        "  fast = team_plugins.fast:hooks.Reader [x]\nslow=team_plugins.slow\n"
        "[console_scripts]\nteam = team_plugins.cli:main\n",
    )
    _site(
        second,
        "team_plugins-1.0.dist-info",
        "Name: team-plugins\nVersion: 1.0\n",
        "[advisor]\nold = team_plugins.old\n",
    )
    _site(
        second,
        "legacy.egg-info",
        "Metadata-Version: 1.0\nName: legacy\nVersion: 0.3\n",
        "[advisor]\nlegacy = legacy_plugin\n",
    )
    _site(second, "bare-1.0.dist-info", "Name: bare\nVersion: 1.0\n", None)
    metadata.metadata("pytest")  # importlib.metadata imports its email parser on first use
    monkeypatch.setattr(sys, "path", [str(first), str(tmp_path / "missing"), str(second)])
    assert _points("advisor") == _importlib_points("advisor")
    assert [p[0] for p in _points("advisor")] == ["fast", "slow", "legacy"]
    assert _points("console_scripts") == _importlib_points("console_scripts")
    for name in ("team-plugins", "Team_Plugins", "legacy", "bare"):
        assert distributions.version(name) == metadata.version(name)
    assert distributions.version("team.plugins") == "2.0"


def test_a_zip_on_sys_path_is_read_by_importlib(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    archive = tmp_path / "plugins.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        zipped.writestr("zipped-1.5.dist-info/METADATA", "Name: zipped\nVersion: 1.5\n")
        zipped.writestr("zipped-1.5.dist-info/entry_points.txt", "[advisor]\nz = zipped\n")
    monkeypatch.setattr(sys, "path", [str(archive), *sys.path])
    assert distributions._importlib_only()
    assert ("z", "zipped", "advisor", "zipped", "1.5") in _points("advisor")
    assert _points("advisor") == _importlib_points("advisor")
    assert distributions.version("zipped") == "1.5"


def test_an_entry_point_loads_its_module_or_attribute() -> None:
    point = distributions.EntryPoint("x", "advisor.distributions:EntryPoint.load", "advisor")
    assert point.load() is distributions.EntryPoint.load
    assert (
        distributions.EntryPoint("x", "advisor.lazy", "advisor").load().__name__ == "advisor.lazy"
    )
    with pytest.raises(ValueError, match="not `module`"):
        distributions.EntryPoint("x", "not a module", "advisor").load()
