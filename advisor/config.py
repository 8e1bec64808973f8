"""A team's project config (`advisor.yaml` or `[tool.advisor]` in pyproject.toml) and ADVISOR_RULES.

A team keeps its rules, thresholds and severities beside its code, so everyone running advisor
in that project gets the same advice without repeating options. Config files are data only:
YAML is read with the safe loader, TOML with tomllib, and every key and type is checked.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from advisor.compat import tomllib
from advisor.engine.outcome import SEVERITIES
from advisor.engine.rules import LANGUAGES
from advisor.errors import AdvisorError
from advisor.lazy import lazy_module
from advisor.small_files import read_small_text

if TYPE_CHECKING:
    import yaml
else:  # imported when an advisor.yaml is read
    yaml = lazy_module("yaml")

CONFIG_FILE = "advisor.yaml"
PYPROJECT = "pyproject.toml"
MAX_CONFIG_BYTES = 1_000_000
"""advisor.yaml / pyproject.toml larger than this are refused: a config is a few lines."""
RULES_ENV = "ADVISOR_RULES"
"""os.pathsep-separated rule files or folders, loaded before the config's rules."""
KEYS = ("rules", "select", "ignore", "params", "severity", "lang", "fail_on")


class ConfigError(AdvisorError):
    """A config file cannot be used: one line naming the file and the problem."""

    def __init__(self, path: str | Path, problem: str) -> None:
        self.path = str(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")


@dataclass(frozen=True)
class Config:
    """What a project config says; empty when there is none. Rule paths are absolute."""

    path: Path | None = None
    rules: tuple[Path, ...] = ()
    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    params: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    severity: Mapping[str, str] = field(default_factory=dict)
    lang: str | None = None
    fail_on: str | None = None

    @property
    def label(self) -> str:
        """How errors about this config's values name it."""
        return str(self.path) if self.path else "config"


def _has_tool_table(path: Path) -> bool:
    text = _text(path)
    if "advisor" not in text:  # most projects' pyproject.toml: no TOML parser loaded
        return False
    return "advisor" in _read_toml(path, text).get("tool", {})


def find_config(start: Path) -> Path | None:
    """The first `advisor.yaml`, or pyproject.toml with `[tool.advisor]`, from `start` upward.

    In one folder `advisor.yaml` wins over pyproject.toml.
    """
    for folder in (start.resolve(), *start.resolve().parents):
        if (folder / CONFIG_FILE).is_file():
            return folder / CONFIG_FILE
        if (folder / PYPROJECT).is_file() and _has_tool_table(folder / PYPROJECT):
            return folder / PYPROJECT
    return None


def _text(path: Path) -> str:
    """A config file's text: a regular file of at most MAX_CONFIG_BYTES (it may sit in any
    parent folder, put there by someone else)."""
    try:
        return read_small_text(path, MAX_CONFIG_BYTES)
    except UnicodeDecodeError as exc:
        raise ConfigError(path, f"cannot read: not UTF-8: {exc}") from None
    except ValueError as exc:
        raise ConfigError(path, str(exc)) from None
    except OSError as exc:
        raise ConfigError(path, f"cannot read: {exc.strerror or exc}") from None


def _read_toml(path: Path, text: str | None = None) -> dict[str, Any]:
    """`path` parsed as TOML; `text`: its text when the caller has read it already."""
    toml = tomllib()
    try:
        return toml.loads(_text(path) if text is None else text)
    except toml.TOMLDecodeError as exc:
        raise ConfigError(path, f"invalid TOML: {exc}") from None


def _read(path: Path) -> Any:
    """The raw config mapping of a file (None for an empty advisor.yaml)."""
    if path.name == PYPROJECT:
        return _read_toml(path).get("tool", {}).get("advisor", {})
    try:
        return yaml.safe_load(_text(path))
    except yaml.YAMLError as exc:
        raise ConfigError(path, f"invalid YAML: {' '.join(str(exc).split())}") from None


def _strings(path: Path, key: str, value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ConfigError(path, f"{key}: expected a list of strings, got {value!r}")
    return tuple(value)


def _mapping(path: Path, key: str, value: Any) -> dict[str, Any]:
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise ConfigError(path, f"{key}: expected a mapping of rule ids to values, got {value!r}")
    return value


def _choice(path: Path, key: str, value: Any, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise ConfigError(path, f"{key}: expected one of {', '.join(choices)}, got {value!r}")
    return str(value)


def _params(path: Path, value: Any) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for rule_id, params in _mapping(path, "params", value).items():
        for name, param in _mapping(path, f"params.{rule_id}", params).items():
            if not isinstance(param, (int, float, str, bool)):
                raise ConfigError(
                    path,
                    f"params.{rule_id}.{name}: value must be a number, "
                    f"string or boolean, got {param!r}",
                )
        out[rule_id] = dict(params)
    return out


def load_config(path: Path) -> Config:
    """Read and check one config file; relative rule paths are relative to its folder."""
    raw = _read(path)
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(path, "expected a mapping of keys (" + ", ".join(KEYS) + ")")
    unknown = sorted(str(k) for k in raw if k not in KEYS)
    if unknown:
        raise ConfigError(path, f"unknown key {unknown[0]!r} (known: {', '.join(KEYS)})")
    return Config(
        path=path,
        rules=tuple(path.parent / p for p in _strings(path, "rules", raw.get("rules", []))),
        select=_strings(path, "select", raw.get("select", [])),
        ignore=_strings(path, "ignore", raw.get("ignore", [])),
        params=_params(path, raw.get("params", {})),
        severity={
            rule_id: _choice(path, f"severity.{rule_id}", value, SEVERITIES)
            for rule_id, value in _mapping(path, "severity", raw.get("severity", {})).items()
        },
        lang=_choice(path, "lang", raw["lang"], LANGUAGES) if "lang" in raw else None,
        fail_on=_choice(path, "fail_on", raw["fail_on"], SEVERITIES) if "fail_on" in raw else None,
    )


def env_rule_paths(environ: Mapping[str, str] = os.environ) -> tuple[Path, ...]:
    """The rule files and folders ADVISOR_RULES names, in order."""
    return tuple(Path(p) for p in environ.get(RULES_ENV, "").split(os.pathsep) if p)


def discover(start: Path | None = None, environ: Mapping[str, str] = os.environ) -> Config:
    """What the CLI uses: the project config found from `start` (the working directory) upward,
    with ADVISOR_RULES's paths loaded before the config's own rules."""
    found = find_config(start or Path.cwd())
    config = load_config(found) if found else Config()
    return replace(config, rules=(*env_rule_paths(environ), *config.rules))
