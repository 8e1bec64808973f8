"""Discovers plugins from the `advisor` entry-point group and calls their hooks safely.

Built-in readers, metric providers and rules are registered through the same entry points a
third party uses, so the built-ins prove the extension mechanism. A plugin that fails to import,
fails validation or raises inside a hook is recorded (name, distribution, version, error) and
skipped; the run goes on with the others.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pluggy

from advisor import hookspecs
from advisor.distributions import EntryPoint, entry_points
from advisor.model import SCOPES, TABLES, TableSpec

ENTRY_POINT_GROUP = "advisor"
BLOCK_ENV = "ADVISOR_BLOCK_PLUGINS"
"""Comma-separated plugin (entry-point) names that must not be loaded."""


@dataclass
class PluginInfo:
    """What `advisor plugins list` shows about one plugin."""

    name: str
    distribution: str
    version: str
    module: str
    status: str  # loaded | blocked | failed
    error: str = ""

    def describe(self) -> str:
        origin = f"{self.distribution} {self.version}".strip()
        text = f"{self.name} ({origin}) [{self.status}]"
        return f"{text}: {self.error}" if self.error else text


def is_builtin(ep: EntryPoint) -> bool:
    """Whether `ep` is one of advisor's own plugins (advisor_plugins.*)."""
    return ep.value.split(".")[0] == "advisor_plugins"


def _refuse_wrappers(pm: pluggy.PluginManager, plugin: object) -> None:
    """Hooks here are called one plugin at a time (so one failure stays local), which leaves
    nothing for a wrapper to wrap: refuse it rather than ignore it silently."""
    for caller in pm.get_hookcallers(plugin) or ():
        for impl in caller.get_hookimpls():
            if impl.plugin is plugin and (impl.hookwrapper or impl.wrapper):
                raise ValueError(
                    f"{caller.name} is a hook wrapper; advisor calls each "
                    "plugin's hooks on their own and supports no wrappers"
                )


def _table_problem(spec: object, tables: dict[str, TableSpec]) -> str | None:
    """Why a plugin's table cannot be registered, or None."""
    if not isinstance(spec, TableSpec):
        return f"{spec!r} is not a TableSpec"
    if spec.name in tables:
        return f"table {spec.name!r} is already defined"
    if spec.scope not in SCOPES:
        return f"table {spec.name!r}: scope {spec.scope!r} is none of {', '.join(SCOPES)}"
    return None


def blocked_names() -> set[str]:
    return {n.strip() for n in os.environ.get(BLOCK_ENV, "").split(",") if n.strip()}


class PluginHost:
    """Owns the pluggy manager and turns every hook call into a failure-tolerant list."""

    def __init__(
        self,
        *,
        entry_points_group: str | None = ENTRY_POINT_GROUP,
        extra: Iterable[tuple[str, object]] = (),
    ) -> None:
        self.pm = pluggy.PluginManager("advisor")
        self.pm.add_hookspecs(hookspecs)
        self.infos: list[PluginInfo] = []
        extra = tuple(extra)
        self.installed_only = entry_points_group == ENTRY_POINT_GROUP and not extra
        """Whether the plugins are the installed ones only, so that a worker process's own
        PluginHost() has the same (the caller's extra plugins live in this process only)."""
        blocked = blocked_names()
        if entry_points_group:
            # Built-in plugins first, so plugin-shipped rules can replace built-in ones.
            for ep in sorted(
                entry_points(group=entry_points_group), key=lambda e: (not is_builtin(e), e.name)
            ):
                self._load(ep, blocked)
        for name, plugin in extra:
            self._register(name, plugin, "", "", getattr(plugin, "__name__", name))

    @staticmethod
    def _distribution(ep: EntryPoint) -> tuple[str, str]:
        """Name and version of the package shipping `ep` (read once per package)."""
        if ep.dist is None:
            return "", ""
        return ep.dist.name or "", ep.dist.version or ""

    def _load(self, ep: EntryPoint, blocked: set[str]) -> None:
        dist, version = self._distribution(ep)
        if ep.name in blocked:
            self.pm.set_blocked(ep.name)
            self.infos.append(
                PluginInfo(ep.name, dist, version, ep.value, "blocked", f"blocked by {BLOCK_ENV}")
            )
            return
        try:
            plugin = ep.load()
        except Exception as exc:  # a third-party import may raise anything
            self.infos.append(
                PluginInfo(
                    ep.name,
                    dist,
                    version,
                    ep.value,
                    "failed",
                    f"import failed: {type(exc).__name__}: {exc}",
                )
            )
            return
        self._register(ep.name, plugin, dist, version, ep.value)

    def _register(self, name: str, plugin: object, dist: str, version: str, module: str) -> None:
        try:
            self.pm.register(plugin, name=name)
            self.pm.check_pending()
            _refuse_wrappers(self.pm, plugin)
        except Exception as exc:  # pluggy validation errors, duplicate names
            if self.pm.is_registered(plugin):
                self.pm.unregister(plugin)
            self.infos.append(
                PluginInfo(name, dist, version, module, "failed", f"invalid plugin: {exc}")
            )
            return
        self.infos.append(PluginInfo(name, dist, version, module, "loaded"))

    def _fail(self, name: str, error: str) -> None:
        for info in self.infos:
            if info.name == name and info.status == "loaded":
                info.status = "failed"
                info.error = error

    def call(self, hook_name: str, **kwargs: Any) -> list[tuple[str, Any]]:
        """Call one hook on every plugin separately, in pluggy's order; a raising plugin is
        marked failed and the others still answer.

        pluggy calls the last registered plugin first, `tryfirst` ones before and `trylast`
        ones after the rest; results come in that order, so the first result has precedence
        wherever several plugins supply the same thing (a reader claiming a path, a rule id,
        a function name). Built-in plugins register first, so a third party's come before.
        """
        results = []
        hook = getattr(self.pm.hook, hook_name)
        for impl in reversed(hook.get_hookimpls()):  # pluggy's calling order
            try:
                value = impl.function(**{k: kwargs[k] for k in impl.argnames})
            except Exception as exc:
                self._fail(impl.plugin_name, f"{hook_name} raised {type(exc).__name__}: {exc}")
                continue
            if value is not None:
                results.append((impl.plugin_name, value))
        return results

    def mark_failed(self, name: str, error: str) -> None:
        """Record that plugin `name` failed in another process's host (a worker's)."""
        self._fail(name, error)

    def failed(self) -> list[PluginInfo]:
        return [i for i in self.infos if i.status == "failed"]

    def readers(self) -> list[tuple[str, hookspecs.Reader]]:
        return [(name, r) for name, rs in self.call("advisor_readers") for r in rs]

    def metrics(self) -> list[hookspecs.MetricProvider]:
        return [m for _, ms in self.call("advisor_metrics") for m in ms]

    def rule_paths(self) -> list[tuple[str, Path]]:
        """Rule folders in loading order: the plugin called first loads last, so its rules
        replace those of the same id from plugins called after it (the built-in ones)."""
        calls = reversed(self.call("advisor_rule_paths"))
        return [(name, Path(p)) for name, ps in calls for p in ps]

    def functions(self) -> dict[str, Callable[..., Any]]:
        """Expression functions by name; the plugin called first wins a name."""
        merged: dict[str, Callable[..., Any]] = {}
        for _, funcs in reversed(self.call("advisor_functions")):
            merged.update(funcs)
        return merged

    def tables(self) -> dict[str, TableSpec]:
        """The built-in tables and those plugins register for their readers, providers and
        rules. A plugin table that reuses a built-in or earlier name is refused (the plugin
        is marked failed): two meanings of one table would make rules ambiguous."""
        merged = dict(TABLES)
        for name, specs in reversed(self.call("advisor_tables")):
            for spec in specs:
                problem = _table_problem(spec, merged)
                if problem:
                    self._fail(name, f"advisor_tables: {problem}")
                    break
                merged[spec.name] = spec
        return merged

    def report_sections(self, analysis: Any) -> list[hookspecs.ReportSection]:
        return [s for _, ss in self.call("advisor_report_sections", analysis=analysis) for s in ss]
