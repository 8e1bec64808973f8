"""`advisor.compare`: read two runs, build the compare tables, evaluate the compare rules.

The compare tables are normalized tables like any other (documented in TABLES), held by a
synthetic "compare" profile; rules over them are ordinary YAML rules, so a team can add its
own regression checks the same way it adds single-run rules.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from advisor.compare.aggregates import allocations, collective_events, module_events, side_by_side
from advisor.compare.breakdown import breakdown, compare_breakdown, step_count
from advisor.compare.calls import api_calls, compare_apis, compare_kernels, kernel_calls
from advisor.compare.operators import (
    CompareOptions,
    canonical_names,
    compare_nodes,
    compare_operators,
    operator_statistic,
)
from advisor.compare.peak_memory import compare_kinds, compare_sites, kind_figures, site_figures
from advisor.compare.profiling import profiling_table
from advisor.compare.sides import RankChoice, pick_rank, select_step
from advisor.compare.tree import modules, operator_tree
from advisor.compat import zip_strict
from advisor.config import Config
from advisor.engine.evaluate import Evaluation, Finding
from advisor.engine.rules import Rule
from advisor.errors import AdvisorError, RuleError
from advisor.lazy import lazy_module
from advisor.metrics import profile_metrics
from advisor.model import COMPARE, Profile, ProfileMeta, conform
from advisor.plugin_manager import PluginHost
from advisor.reading import Reading
from advisor.render.json_report import build_report
from advisor.session import RUN_NEEDS, Session

if TYPE_CHECKING:
    import pandas as pd
else:
    pd = lazy_module("pandas")

SIDES = ("baseline", "comparison")
COMPARE_NEEDS = (*RUN_NEEDS, "steps.free_us", "device_ops.compute_class")


class CompareError(AdvisorError):
    """A side of a comparison that holds no readable profile."""


@dataclass
class CompareResult:
    """Both runs, the compare profile (its tables and findings) and what went wrong."""

    baseline: Profile
    comparison: Profile
    profile: Profile
    evaluation: Evaluation
    report: dict[str, Any]
    options: CompareOptions
    input_errors: list[AdvisorError] = field(default_factory=list)
    rule_errors: list[RuleError] = field(default_factory=list)
    plugin_problems: list[str] = field(default_factory=list)
    rules: list[Rule] = field(default_factory=list)

    @property
    def tables(self) -> dict[str, pd.DataFrame]:
        return self.profile.tables

    @property
    def findings(self) -> list[Finding]:
        return self.evaluation.findings

    @property
    def incomplete(self) -> bool:
        """An input, or a whole file of either side, could not be read (exit 3)."""
        return bool(self.input_errors) or any(
            w.unread for side in (self.baseline, self.comparison) for w in side.warnings
        )

    def table(self, name: str) -> pd.DataFrame:
        """Compare table `name` (compare_overall, compare_op_stats, ...; `tables` lists them);
        KeyError names the tables there are when it is not one."""
        from advisor.render.frames import profile_table

        return profile_table(self.profile, name)

    def findings_frame(self) -> pd.DataFrame:
        """The compare findings as a DataFrame, one row each, with the columns of
        AnalysisResult.findings_frame."""
        from advisor.render.frames import findings_frame

        return findings_frame([(self.profile, self.findings)])

    def _repr_html_(self) -> str:
        """Jupyter shows the compare page, as compare.html does (no script needed)."""
        from advisor.render.compare_html import render_compare_html_fragment
        from advisor.render.compare_outputs import compare_document

        document = compare_document(self.tables, self.report["profile"], self.report["advisor"])
        return render_compare_html_fragment(self.report, document)


def _read_profiles(which: str, path: Path, session: Session) -> tuple[list[Profile], Reading]:
    """Every profile under `path` (one per rank or device), and what reading reported;
    CompareError when there is none."""
    reading = session.read([path], jobs=1)
    if not reading.profiles:
        problem = str(reading.input_errors[0]) if reading.input_errors else "no profile found"
        raise CompareError(f"{which} {path}: {problem}")
    return reading.profiles, reading


def _narrow(profiles: list[Profile], step: int | None, which: str) -> list[Profile]:
    return profiles if step is None else [select_step(p, step, which) for p in profiles]


def _read_sides(
    baseline: Path, comparison: Path, options: CompareOptions, session: Session
) -> tuple[tuple[Profile, Reading, RankChoice | None], tuple[Profile, Reading, RankChoice | None]]:
    """The profile standing for each side: the one it holds, or among several ranks the
    slowest; one multi-rank folder given as both sides is its fastest rank (baseline) against
    its slowest (comparison)."""
    base_all, base_read = _read_profiles(SIDES[0], baseline, session)
    same = baseline.resolve() == comparison.resolve()
    comp_all, comp_read = (
        (base_all, Reading()) if same else _read_profiles(SIDES[1], comparison, session)
    )
    base_all = _narrow(base_all, options.base_step, SIDES[0])
    comp_all = _narrow(comp_all, options.comparison_step, SIDES[1])
    sides = []
    for profiles, reading, slowest in (
        (base_all, base_read, not (same and len(base_all) > 1)),
        (comp_all, comp_read, True),
    ):
        if len(profiles) == 1:
            sides.append((profiles[0], reading, None))
        else:
            profile, choice = pick_rank(profiles, slowest=slowest)
            sides.append((profile, reading, choice))
    return sides[0], sides[1]


def _steps_of(profile: Profile) -> pd.DataFrame:
    """The comparison's steps (the time base of compare findings); one step over its whole
    span when it has none; none when it has no timeline either (AOE results, a memory
    snapshot): a step of 0 µs would be called too short to judge."""
    steps = profile.tables.get("steps")
    columns = ["step", "start_us", "end_us", "duration_us"]
    if steps is not None and not steps.empty:
        return steps[columns]
    ends = [
        frame["start_us"] + frame["duration_us"]
        for name, frame in profile.tables.items()
        if name in ("device_ops", "host_ops") and "start_us" in frame
    ]
    timed = [e.max() for e in ends if e.notna().any()]
    if not timed:
        return pd.DataFrame({c: pd.Series(dtype="float64") for c in columns})
    end = float(max(timed))
    return pd.DataFrame({"step": [0], "start_us": [0.0], "end_us": [end], "duration_us": [end]})


def compare_tables(
    base: Profile, comp: Profile, options: CompareOptions
) -> dict[str, pd.DataFrame]:
    """The compare_* tables of two derived profiles (only those both runs give data for)."""
    trees = [operator_tree(p) for p in (base, comp)]
    nodes = [compare_nodes(t, options.max_kernel_num) for t in trees]
    steps = [step_count(p) for p in (base, comp)]
    detail = compare_operators(trees, nodes, options)
    tables: dict[str, pd.DataFrame] = {}
    overall = compare_breakdown(
        *(
            breakdown(p, float(t.ops["time_us"].to_numpy()[t.roots()].sum()))
            for p, t in zip_strict((base, comp), trees)
        )
    )
    tables["compare_overall"] = overall
    if not detail.empty:
        tables["compare_ops"] = detail
        tables["compare_op_stats"] = operator_statistic(detail, *steps)
    apis = [api_calls(p) for p in (base, comp)]
    if any(not a.empty for a in apis):
        tables["compare_apis"] = compare_apis(*apis, *steps)
    kernels = [kernel_calls(p) for p in (base, comp)]
    if any(not k.empty for k in kernels):
        tables["compare_kernels"] = compare_kernels(*kernels, *steps)
    tables["compare_profiling"] = profiling_table(base, comp)  # empty: both minimal
    events = [collective_events(p) for p in (base, comp)]
    if any(not e.empty for e in events):
        comm = side_by_side(
            *events,
            key="op",
            value="duration_us",
            base_steps=steps[0],
            comp_steps=steps[1],
            extra=("bytes", "wait_us"),
        )
        tables["compare_comm"] = comm.rename(
            columns={
                "base_duration_us": "base_us",
                "comp_duration_us": "comp_us",
                "diff": "diff_us",
            }
        )
    canonical = canonical_names(options.op_name_map)
    names = [
        [canonical.get(name, name) for name in t.ops["name"].astype(str).to_numpy()[n]]
        for t, n in zip_strict(trees, nodes)
    ]
    memory = [
        allocations(p, t, n, k) for p, t, n, k in zip_strict((base, comp), trees, nodes, names)
    ]
    if any(not m.empty for m in memory):
        tables["compare_memory"] = side_by_side(
            *memory, key="name", value="bytes", base_steps=steps[0], comp_steps=steps[1]
        ).rename(columns={"diff": "diff_bytes"})
    sites = [site_figures(p) for p in (base, comp)]
    if any(s is not None for s in sites):
        tables["compare_allocation_sites"] = compare_sites(*sites)
    kinds = [kind_figures(p) for p in (base, comp)]
    if any(k is not None for k in kinds):
        tables["compare_memory_kinds"] = compare_kinds(*kinds)
    calls = [module_events(operator_tree(p, modules)) for p in (base, comp)]
    if all(not c.empty for c in calls):
        table = side_by_side(
            *(c.drop(columns="depth") for c in calls),
            key="module",
            value="time_us",
            base_steps=steps[0],
            comp_steps=steps[1],
        )
        depth = pd.concat(calls).groupby("module")["depth"].min()
        tables["compare_modules"] = table.rename(
            columns={"base_time_us": "base_us", "comp_time_us": "comp_us", "diff": "diff_us"}
        ).assign(depth=lambda t: t["module"].map(depth))
    return {name: conform(name, frame) for name, frame in tables.items()}


def _meta(
    base: Profile,
    comp: Profile,
    options: CompareOptions,
    choices: tuple[RankChoice | None, RankChoice | None] = (None, None),
    settings: pd.DataFrame | None = None,
) -> ProfileMeta:
    def describe(p: Profile, choice: RankChoice | None, side: str) -> dict[str, Any]:
        heavy = (
            []
            if settings is None
            else settings.loc[settings["side"] == side, "option"].astype(str).tolist()
        )
        return {
            "path": p.meta.path,
            "source_format": p.meta.source_format,
            "framework": p.meta.framework,
            "device_kind": p.meta.device_kind,
            "device_name": p.meta.device_name,
            "rank": p.meta.rank,
            "steps": step_count(p),
            "step": p.meta.extra.get("compared_step"),
            "rank_choice": None if choice is None else choice.to_dict(),
            "minimal_profiling": not heavy,
            "profiling_options": heavy,
        }

    return ProfileMeta(
        source_format="compare",
        path=comp.meta.path,
        framework=" vs ".join(dict.fromkeys((base.meta.framework, comp.meta.framework))),
        device_kind=" vs ".join(dict.fromkeys((base.meta.device_kind, comp.meta.device_kind))),
        files_read=[*base.meta.files_read, *comp.meta.files_read],
        extra={
            "baseline": describe(base, choices[0], SIDES[0]),
            "comparison": describe(comp, choices[1], SIDES[1]),
            "options": {**asdict(options), "op_name_map": dict(options.op_name_map)},
        },
    )


def compare(
    baseline: str | Path,
    comparison: str | Path,
    *,
    options: CompareOptions | None = None,
    rules: Sequence[str | Path] = (),
    select: Sequence[str] = (),
    ignore: Sequence[str] = (),
    params: Mapping[str, Mapping[str, Any]] | None = None,
    host: PluginHost | None = None,
    lang: str | None = None,
    severity: Mapping[str, str] | None = None,
    config: Config | None = None,
) -> CompareResult:
    """Compare two runs: what got slower (or bigger) in `comparison` against `baseline`.

    Each path holds a profile of any format advisor reads; a side holding several ranks is
    its slowest rank (one multi-rank folder given as both sides: its fastest rank against its
    slowest). Raises CompareError when a side cannot be read, StepError when
    `options.base_step` / `comparison_step` names a step a side does not record.

    Example:
        >>> result = advisor.compare("gpu_run.pt.trace.json.gz", "npu_rank0_ascend_pt")
        >>> result.tables["compare_op_stats"].head()
        >>> [f.message for f in result.findings]
    """
    options = options or CompareOptions()
    session = Session.open(
        host=host,
        config=config,
        rules=rules,
        select=select,
        ignore=ignore,
        params=params,
        severity=severity,
        lang=lang,
    )
    (base, base_read, base_choice), (comp, comp_read, comp_choice) = _read_sides(
        Path(baseline), Path(comparison), options, session
    )
    for side in (base, comp):
        session.derive(side, COMPARE_NEEDS)
    tables = compare_tables(base, comp, options)
    tables["steps"] = _steps_of(comp)
    meta = _meta(base, comp, options, (base_choice, comp_choice), tables.get("compare_profiling"))
    warnings = [*base.warnings, *(comp.warnings if comp is not base else [])]
    profile = Profile(meta, tables, warnings=warnings)
    selected = session.rules_for(COMPARE)
    evaluation = session.evaluate(profile, selected)
    report = build_report(profile, evaluation, selected, session.run, profile_metrics(profile))
    return CompareResult(
        base,
        comp,
        profile,
        evaluation,
        report,
        options,
        input_errors=[*base_read.input_errors, *comp_read.input_errors],
        rule_errors=session.rule_errors,
        plugin_problems=[*base_read.plugin_problems, *comp_read.plugin_problems],
        rules=selected,
    )
